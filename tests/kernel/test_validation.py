"""The one validation-message formatter every loader uses (agent_factory.validation)."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ValidationError

from agent_factory.validation import describe_error


class _Inner(BaseModel):
    kind: Literal["a", "b"]
    n: int


class _Outer(BaseModel):
    name: str
    items: list[_Inner] = []
    values: dict[str, int | list[int]] = {}


def _err(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        _Outer.model_validate(data)
    return e.value


def test_names_the_dotted_field_and_the_offending_value() -> None:
    data = {"name": "x", "items": [{"kind": "a", "n": 1}, {"kind": "c", "n": 2}]}
    assert describe_error(_err(data), data) == "items.1.kind: Input should be 'a' or 'b' (got 'c')"


def test_counts_the_other_problems() -> None:
    data = {"items": [{"kind": "z", "n": "q"}]}
    msg = describe_error(_err(data), data)
    assert msg.startswith("name: Field required")
    assert msg.endswith("(and 2 more)")


def test_union_member_tags_are_dropped_when_the_input_is_known() -> None:
    data = {"name": "x", "values": {"k": "nope"}}
    err = _err(data)
    # pydantic locates each union member's failure under a tag (`int`, `list[int]`) the input does not have.
    assert any("list[int]" in map(str, e["loc"]) for e in err.errors())
    assert describe_error(err, data) == (
        "values.k: Input should be a valid integer, unable to parse string as an integer or a valid list (got 'nope')"
    )


def test_without_the_input_the_location_is_pydantics_and_the_root_is_named() -> None:
    with pytest.raises(ValidationError) as e:
        _Outer.model_validate([1])
    assert describe_error(e.value).startswith("(top level): Input should be a valid dictionary")
