"""Attribute values: OTLP `AnyValue` decoding and encoding, flattening nested dicts, and making any value
JSON-compatible.

Pure functions. Decoding raises `AttributeValueError` naming the offending key, so an adapter can quarantine
the span with the exact field.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

_SCALAR_KEYS = ("stringValue", "boolValue", "intValue", "doubleValue", "bytesValue", "arrayValue", "kvlistValue")


class AttributeValueError(ValueError):
    """An attribute that cannot be decoded; `key` is the dotted path inside the attribute container."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def encode_any_value(v: Any) -> dict[str, Any]:
    """A Python value as an OTLP/JSON `AnyValue` (ints as strings, as protobuf JSON mapping requires); what the
    simulator and the task runner write, and `decode_any_value` reads back."""
    if type(v) is str:  # the common case first
        return {"stringValue": v}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list | tuple):
        return {"arrayValue": {"values": [encode_any_value(x) for x in v]}}
    return {"stringValue": str(v)}


def encode_attributes(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An OTLP/JSON attribute list (`[{"key", "value"}]`) of `attrs`, leaving out the keys whose value is None."""
    return [{"key": k, "value": encode_any_value(v)} for k, v in attrs.items() if v is not None]


def jsonable(value: Any) -> Any:
    """The value with every part JSON-compatible: NaN / infinities become strings, bytes base64, dates ISO."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value).replace("inf", "Infinity").replace("nan", "NaN")
    if isinstance(value, Decimal):
        return jsonable(float(value)) if not value.is_finite() or value != value.to_integral_value() \
            else int(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def flatten(attrs: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys (`{"session": {"id": 1}}` -> `{"session.id": 1}`); lists are kept as values.

    Nested objects appear where an exporter wrote attributes as a tree instead of OTel's flat keys; flattening
    them lets one key set (`session.id`, `llm.token_count.prompt`) serve every source.
    """
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if type(v) is str and type(k) is str and not prefix:  # the common case, as the general one would do it
            out[k] = v
            continue
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{key}."))
        else:
            out[key] = jsonable(v)
    return out


def decode_any_value(value: Any, key: str) -> Any:
    """An OTLP/JSON `AnyValue` object as a plain Python value (kvlists as dicts, arrays as lists)."""
    if not isinstance(value, dict):
        raise AttributeValueError(key, f"AnyValue must be an object, got {type(value).__name__}")
    present = [k for k in _SCALAR_KEYS if k in value]
    if not present:
        if value:
            raise AttributeValueError(key, f"unknown AnyValue type {sorted(value)!r}")
        return None  # an empty AnyValue is OTLP's "no value"
    kind = present[0]
    raw = value[kind]
    if kind == "stringValue":
        if not isinstance(raw, str):
            raise AttributeValueError(key, f"stringValue must be a string, got {type(raw).__name__}")
        return raw
    if kind == "boolValue":
        if not isinstance(raw, bool):
            raise AttributeValueError(key, f"boolValue must be true or false, got {raw!r}")
        return raw
    if kind == "intValue":
        return _int_value(raw, key)
    if kind == "doubleValue":
        return _double_value(raw, key)
    if kind == "bytesValue":
        if not isinstance(raw, str):
            raise AttributeValueError(key, f"bytesValue must be a base64 string, got {type(raw).__name__}")
        return raw
    if kind == "arrayValue":
        items = raw.get("values", []) if isinstance(raw, dict) else None
        if not isinstance(items, list):
            raise AttributeValueError(key, "arrayValue must be an object with a `values` list")
        return [decode_any_value(v, f"{key}[{i}]") for i, v in enumerate(items)]
    items = raw.get("values", []) if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise AttributeValueError(key, "kvlistValue must be an object with a `values` list")
    return decode_key_values(items, key)


def _int_value(raw: Any, key: str) -> int:
    # proto3 JSON writes int64 as a decimal string; some exporters write a number.
    if isinstance(raw, bool):
        raise AttributeValueError(key, f"intValue must be an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:
            pass
    raise AttributeValueError(key, f"intValue must be an integer, got {raw!r}")


def _double_value(raw: Any, key: str) -> Any:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return jsonable(float(raw))
    if isinstance(raw, str):
        try:
            return jsonable(float(raw))  # proto3 JSON allows "NaN", "Infinity" and numeric strings
        except ValueError:
            pass
    raise AttributeValueError(key, f"doubleValue must be a number, got {raw!r}")


def decode_key_values(items: Any, prefix: str = "") -> dict[str, Any]:
    """An OTLP `KeyValue` list (`[{"key": ..., "value": AnyValue}]`) as a dict; later duplicates win."""
    if not isinstance(items, list):
        raise AttributeValueError(prefix, f"attributes must be a list of key/value objects, got {type(items).__name__}")
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        # The common case first (a string attribute), with the result the general path below gives it.
        if type(item) is dict and type(key := item.get("key")) is str and type(value := item.get("value")) is dict \
                and len(value) == 1 and type(text := value.get("stringValue")) is str:
            out[key] = text
            continue
        where = f"{prefix}[{i}]" if prefix else f"[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise AttributeValueError(where, "attribute must be an object with a string `key`")
        key = item["key"]
        out[key] = decode_any_value(item.get("value", {}), f"{prefix}.{key}" if prefix else key)
    return out


def attribute_dict(raw: Any, container: str) -> dict[str, Any]:
    """Span attributes in either form (flat or nested dict, or an OTLP KeyValue list) as one flat dict.

    `container` is the source's field name (e.g. `attributes`, `span_attributes`), used in error keys.
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return flatten(raw)
    if isinstance(raw, list):
        try:
            return flatten(decode_key_values(raw))
        except AttributeValueError as e:
            raise AttributeValueError(f"{container}.{e.key}" if e.key else container, e.message) from None
    raise AttributeValueError(container, f"attributes must be an object or a key/value list, got {type(raw).__name__}")
