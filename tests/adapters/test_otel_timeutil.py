from datetime import UTC, datetime

import pytest

from agent_factory.adapters.otel.timeutil import (
    from_epoch_number,
    from_hrtime,
    from_unix_nanos,
    parse_instant,
    parse_iso_datetime,
    parse_iso_duration,
)


def test_unix_nanos_string_int_and_unset():
    assert from_unix_nanos("1700000000000000000") == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert from_unix_nanos(1700000000123456789) == datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)
    assert from_unix_nanos("0") is None  # OTLP writes 0 for "not set"


@pytest.mark.parametrize("bad", ["yesterday", "-5", -5, True, 1.5, None, "1e18"])
def test_unix_nanos_rejects(bad):
    with pytest.raises(ValueError):
        from_unix_nanos(bad)


def test_hrtime_pair():
    assert from_hrtime([1770131992, 242000000]) == datetime(2026, 2, 3, 15, 19, 52, 242000, tzinfo=UTC)
    for bad in ([1, 2, 3], [1, 2_000_000_000], "x", [-1, 0]):
        with pytest.raises(ValueError):
            from_hrtime(bad)


def test_iso_datetime_forms():
    want = datetime(2025, 3, 19, 16, 33, 38, 435385, tzinfo=UTC)
    assert parse_iso_datetime("2025-03-19T16:33:38.435385Z") == want
    assert parse_iso_datetime("2025-03-19T16:33:38.435385") == want  # naive means UTC
    assert parse_iso_datetime("2025-03-19T16:33:38.435385123Z") == want  # nanoseconds truncated
    assert parse_iso_datetime("2025-03-19T17:33:38.435385+01:00") == want
    with pytest.raises(ValueError):
        parse_iso_datetime("2025-03-19 soon")


def test_iso_durations():
    assert parse_iso_duration("PT1M48.75533S") == pytest.approx(108755.33)
    assert parse_iso_duration("PT0.000047S") == pytest.approx(0.047)
    assert parse_iso_duration("P1DT2H") == 93_600_000.0
    assert parse_iso_duration("-PT1S") == -1000.0
    for bad in ("P", "PT", "1.5", "PT1.5", 1.5):
        with pytest.raises(ValueError):
            parse_iso_duration(bad)


def test_epoch_number_by_magnitude():
    want = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert from_epoch_number(1_700_000_000) == want
    assert from_epoch_number(1_700_000_000_000) == want
    assert from_epoch_number(1_700_000_000_000_000) == want
    assert from_epoch_number(1_700_000_000_000_000_000) == want
    assert parse_instant("") is None
    assert parse_instant([1_700_000_000, 0]) == want


@pytest.mark.parametrize(("value", "unit"), [
    (1_700_000_000, "seconds"), ("1700000000", "seconds"), (1_700_000_000_000, "milliseconds"),
    ("1700000000000", "milliseconds"), (1_700_000_000_000_000, "microseconds"), (5, "seconds"),
])
def test_unix_nanos_of_another_unit_are_refused_naming_the_unit(value: object, unit: str) -> None:
    with pytest.raises(ValueError, match=unit):
        from_unix_nanos(value)


def test_a_span_with_seconds_in_a_unix_nano_field_is_quarantined(tmp_path) -> None:
    import json

    from agent_factory.adapters.base import Quarantine
    from agent_factory.adapters.otel import FlatSpanLinesAdapter, OtlpJsonAdapter

    span = {"traceId": "a" * 32, "spanId": "b" * 16, "name": "s", "startTimeUnixNano": 1700000000,
            "endTimeUnixNano": 1700000001}
    doc = tmp_path / "o.json"
    doc.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    lines = tmp_path / "f.jsonl"
    lines.write_text(json.dumps({**span, "startTimeUnixNano": "1700000000000"}) + "\n")
    for adapter, path, unit in ((OtlpJsonAdapter(), doc, "seconds"), (FlatSpanLinesAdapter(), lines, "milliseconds")):
        (q,) = list(adapter.read(path))
        assert isinstance(q, Quarantine) and q.field == "startTimeUnixNano" and unit in q.message
        assert "unparsable" not in q.message and "2023-11-14" in q.message
