"""Time values as OTel sources write them: unix nanoseconds, JS hrtime pairs, ISO-8601 instants and durations.

Every parser returns timezone-aware UTC datetimes (or milliseconds) and raises `ValueError` with a short
reason on anything it cannot read, so the caller can quarantine the record and name the field.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FRACTION = re.compile(r"(\.\d{6})\d+")
_DURATION = re.compile(
    r"^(?P<sign>[-+])?P(?:(?P<w>\d+(?:[.,]\d+)?)W)?(?:(?P<d>\d+(?:[.,]\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:[.,]\d+)?)H)?(?:(?P<m>\d+(?:[.,]\d+)?)M)?(?:(?P<s>\d+(?:[.,]\d+)?)S)?)?$"
)
_UNIT_MS = {"w": 604_800_000.0, "d": 86_400_000.0, "h": 3_600_000.0, "m": 60_000.0, "s": 1000.0}


MIN_UNIX_NANOS = 10**17
"""The smallest `*UnixNano` value read as nanoseconds: 1973-03-03. A smaller one is a time in 1970-73 (no trace's),
or, by its magnitude, seconds, milliseconds or microseconds written in a nanosecond field: such a span is
quarantined naming the unit, never read as 1970 with no duration."""


def from_unix_nanos(value: Any) -> datetime | None:
    """A `*TimeUnixNano` value (int or decimal string); None for 0, the OTLP "not set". A value under
    `MIN_UNIX_NANOS` raises `WrongUnit` (a `ValueError`) naming the unit its magnitude suggests."""
    if isinstance(value, bool):
        raise ValueError(f"expected nanoseconds since the epoch, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit():
            raise ValueError(f"expected nanoseconds since the epoch, got {value!r}")
        nanos = int(text)
    elif isinstance(value, int):
        nanos = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        nanos = int(value)
    else:
        raise ValueError(f"expected nanoseconds since the epoch, got {value!r}")
    if nanos < 0:
        raise ValueError(f"negative timestamp {value!r}")
    if nanos == 0:
        return None
    if nanos < MIN_UNIX_NANOS:
        raise WrongUnit(_unit_message(nanos))
    return _from_micros(nanos // 1000, value)


class WrongUnit(ValueError):
    """A time whose magnitude says it is in another unit than its field's: the message names both readings."""


def _unit_message(nanos: int) -> str:
    unit = "seconds" if nanos < 10**11 else "milliseconds" if nanos < 10**14 else "microseconds"
    as_nanos = _from_micros(nanos // 1000, nanos).isoformat().replace("+00:00", "Z")
    try:
        as_unit = f"; as {unit} it is {from_epoch_number(nanos).isoformat().replace('+00:00', 'Z')}"
    except ValueError:
        as_unit = ""
    return (f"{nanos} is too small for nanoseconds since the epoch (it would be {as_nanos}): its magnitude says "
            f"{unit}{as_unit}; write nanoseconds since the epoch")


def from_hrtime(value: Any) -> datetime:
    """A JS `HrTime` pair `[seconds, nanoseconds]` as written by OTel JS `ReadableSpan`."""
    if (
        not isinstance(value, list | tuple) or len(value) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    ):
        raise ValueError(f"expected [seconds, nanoseconds], got {value!r}")
    sec, nanos = value
    if sec < 0 or not 0 <= nanos < 1_000_000_000:
        raise ValueError(f"out-of-range [seconds, nanoseconds] {value!r}")
    return _from_micros(int(sec) * 1_000_000 + int(nanos) // 1000, value)


def from_epoch_number(value: float) -> datetime:
    """An epoch number of unknown unit, read by magnitude (seconds, ms, us or ns since 1970)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a non-negative epoch number, got {value!r}")
    # Thresholds sit between plausible dates in each unit (year ~5000 in the smaller unit).
    if value >= 1e17:
        micros = value / 1000
    elif value >= 1e14:
        micros = value
    elif value >= 1e11:
        micros = value * 1000
    else:
        micros = value * 1_000_000
    return _from_micros(int(micros), value)


def parse_instant(value: Any) -> datetime | None:
    """Any of the instant forms above (ISO string, hrtime pair, epoch number); None for null or empty."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return parse_iso_datetime(value)
    if isinstance(value, list | tuple):
        return from_hrtime(value)
    return from_epoch_number(value)


def parse_iso_datetime(value: Any) -> datetime:
    """An ISO-8601 instant; a naive one is taken as UTC. Fractions beyond microseconds are truncated."""
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 timestamp string, got {value!r}")
    text = _FRACTION.sub(r"\1", value.strip())
    if text.endswith(("z", "Z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an ISO-8601 timestamp: {value!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def parse_iso_duration(value: Any) -> float:
    """An ISO-8601 duration (`PT1M48.75S`, `P1DT2H`) in milliseconds; negative ones are returned negative."""
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 duration string such as 'PT1.5S', got {value!r}")
    m = _DURATION.match(value.strip())
    if not m or value.strip() in ("P", "PT", "-P", "+P") or value.strip().endswith("T"):
        raise ValueError(f"not an ISO-8601 duration: {value!r}")
    total = sum(float(m.group(u).replace(",", ".")) * ms for u, ms in _UNIT_MS.items() if m.group(u))
    return -total if m.group("sign") == "-" else total


def millis_between(start: datetime, end: datetime) -> float:
    """`end - start` in milliseconds."""
    return (end - start) / timedelta(milliseconds=1)


def _from_micros(micros: int, original: Any) -> datetime:
    try:
        return _EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        raise ValueError(f"timestamp out of range: {original!r}") from None
