"""Traffic segmentation: is a turn real user traffic, or a test account, a cached suggestion, synthetic?

Segments with different links between performance and observations must not be pooled (docs/method.md section
2), so every turn is placed in exactly one segment by the pack's ordered rules, first match wins, `real` when
none matches. Only `real` is analysed; the result records which rule matched and on what evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, Literal

from agent_factory.adapters.model import EvidencePointer, Turn
from agent_factory.frozen import Frozen
from agent_factory.knowledge_packs import REAL_SEGMENT, KnowledgePack, SegmentRule, compile_pattern

VERSION = "1"
"""Version of the segmentation logic (the rules themselves are versioned with the pack)."""

Condition = Literal["user_id_regex", "attribute_equals", "attribute_present", "request_regex"]
"""The kinds of condition a segment rule can state."""

_MISSING = object()


class SegmentEvidence(Frozen):
    """One satisfied condition of the matching rule."""

    condition: Condition
    """Which kind of condition held."""
    key: str | None = None
    """The attribute key, for attribute conditions."""
    value: str
    """What was observed: the attribute value (as text), the user id or the request excerpt that matched."""
    pointer: EvidencePointer
    """Where: the turn or span, the field (`user_id`, `request`, `attributes.<key>`) and the character range
    of the match (the whole value for attributes)."""


class SegmentResult(Frozen):
    """The segment of one turn."""

    turn_id: str
    """The turn segmented."""
    segment: str
    """Segment name: `real`, or the name of the first rule that matched."""
    excluded: bool
    """True for every segment but `real`: the turn is left out of analysis."""
    rule: str | None = None
    """The matching rule (same as `segment`), None for `real`."""
    evidence: tuple[SegmentEvidence, ...] = ()
    """The rule's satisfied conditions, in rule order (user id, attribute_equals, attribute_present, request)."""
    version: str = VERSION
    """Version of the segmentation logic."""


@lru_cache(maxsize=4096)
def _splits(key: str) -> tuple[tuple[str, str], ...]:
    """(head, rest) of each split of a dotted key, longest head first (keys are few: the pack's and the adapters')."""
    parts = key.split(".")
    return tuple((".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1))


def lookup(attributes: Mapping[str, Any], key: str) -> Any:
    """The value of a dotted `key` in attributes stored flat (`{"user.id": ..}`), nested, or mixed; or _MISSING."""
    if key in attributes:
        return attributes[key]
    for head, rest in _splits(key):
        sub = attributes.get(head)
        if isinstance(sub, Mapping):
            found = lookup(sub, rest)
            if found is not _MISSING:
                return found
    return _MISSING


_PLAIN = frozenset({str, int, float, bool, list, type(None)})


def lookup_in(attributes: Mapping[str, Any]) -> Callable[[str], Any]:
    """`lookup` bound to `attributes`, for many keys of one map: a flat map (no nested mapping, the common case)
    is read with `get`, which is what `lookup` finds there."""
    if all(type(v) in _PLAIN or not isinstance(v, Mapping) for v in attributes.values()):
        get = attributes.get
        return lambda key: get(key, _MISSING)
    return lambda key: lookup(attributes, key)


def _find_attribute(turn: Turn, key: str) -> tuple[str, Any]:
    # Turn attributes first (the root span's), then each span in source order: first non-null value wins.
    for unit_id, attrs in ((turn.id, turn.attributes), *((s.id, s.attributes) for s in turn.spans)):
        value = lookup(attrs, key)
        if value is not _MISSING and value is not None:
            return unit_id, value
    return turn.id, _MISSING


def _canon(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip().casefold()


def _equals(observed: Any, wanted: Any) -> bool:
    options = wanted if isinstance(wanted, tuple) else (wanted,)
    if isinstance(observed, list | tuple):  # a multi-valued attribute matches if any of its values does
        return any(_equals(o, wanted) for o in observed)
    return _canon(observed) in {_canon(w) for w in options}


def _attr_evidence(condition: Condition, key: str, unit_id: str, value: Any) -> SegmentEvidence:
    text = _canon(value) if isinstance(value, bool) else str(value)
    pointer = EvidencePointer(unit_id=unit_id, field=f"attributes.{key}", start=0, end=len(text))
    return SegmentEvidence(condition=condition, key=key, value=text, pointer=pointer)


def rule_evidence(turn: Turn, rule: SegmentRule) -> list[SegmentEvidence] | None:
    """The evidence of each condition of `rule` that `turn` satisfies, or None if the rule does not match."""
    held: list[SegmentEvidence] = []
    if rule.user_id_regex is not None and turn.user_id is not None:
        m = compile_pattern(rule.user_id_regex).search(turn.user_id)
        if m is not None:
            pointer = EvidencePointer(unit_id=turn.id, field="user_id", start=m.start(), end=m.end())
            held.append(SegmentEvidence(condition="user_id_regex", value=turn.user_id, pointer=pointer))
    for key, wanted in rule.attribute_equals.items():
        unit_id, value = _find_attribute(turn, key)
        if value is not _MISSING and _equals(value, wanted):
            held.append(_attr_evidence("attribute_equals", key, unit_id, value))
    for key in rule.attribute_present:
        unit_id, value = _find_attribute(turn, key)
        if value is not _MISSING:
            held.append(_attr_evidence("attribute_present", key, unit_id, value))
    if rule.request_regex is not None and turn.request is not None:
        m = compile_pattern(rule.request_regex).search(turn.request)
        if m is not None:
            pointer = EvidencePointer(unit_id=turn.id, field="request", start=m.start(), end=m.end())
            held.append(SegmentEvidence(condition="request_regex", value=m.group(0), pointer=pointer))
    enough = len(held) == rule.conditions() if rule.match == "all" else bool(held)
    return held if enough else None


def segment_turn(turn: Turn, pack: KnowledgePack) -> SegmentResult:
    """The turn's segment under `pack`: the first rule that matches, else `real`."""
    for rule in pack.segments:
        held = rule_evidence(turn, rule)
        if held is not None:
            return SegmentResult(
                turn_id=turn.id, segment=rule.name, excluded=True, rule=rule.name, evidence=tuple(held)
            )
    return SegmentResult(turn_id=turn.id, segment=REAL_SEGMENT, excluded=False)
