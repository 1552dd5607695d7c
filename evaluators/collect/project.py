"""pi: the evidence a datum's model collector sees, and how much of it (docs/method.md section 5).

Full text by default. When a definition sets `max_chars`, each field is cut (`head`, or `head_tail` with the
omitted middle declared in the prompt) and the share of characters shown is the datum's `coverage`: the study's
"no internal contradiction" item fell from 90% to 5% once evaluators saw whole reports instead of ~6% of them,
so a cut is never silent.

Fields by layer (names as in `Projection.fields`):
- span: `input`, `output`, `error` of the span; `request`, `answer` of its turn;
- trace: `request`, `answer`, and the spans' `spans.input`, `spans.output`, `spans.error` (`spans` = input+output);
- conversation: per turn in order `request`, `answer` (`turns` = both), and the spans' fields as above;
- engagement: the same per session, sessions in time order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from agent_factory.adapters.model import Conversation, Turn
from agent_factory.errors import SpecError
from agent_factory.evaluators.core.model import Layer, Projection
from agent_factory.evaluators.core.registry import EngagementView, SpanView
from agent_factory.frozen import Frozen

VERSION = "1"
"""Version of the projection code: it enters every model datum's cache key through the evidence digest."""

_SPAN_FIELDS = ("input", "output", "error")
_VALID: dict[str, tuple[str, ...]] = {
    "span": ("input", "output", "error", "request", "answer"),
    "trace": ("request", "answer", "spans", "spans.input", "spans.output", "spans.error"),
    "conversation": ("request", "answer", "turns", "spans", "spans.input", "spans.output", "spans.error"),
    "engagement": ("request", "answer", "turns", "spans", "spans.input", "spans.output", "spans.error"),
}
_ALIASES = {"turns": ("request", "answer"), "spans": ("spans.input", "spans.output")}


class ShownField(Frozen):
    """One text field of the unit as projected: its full text and the ranges of it that are shown."""

    id: str
    """Evidence id in the prompt: `request`, `spans[2].output`, `turns[1].answer`, `sessions[0].turns[3].request`."""
    unit_id: str
    """The turn or span the field belongs to (what an evidence pointer cites)."""
    field: str
    """The field name on that unit: request / answer / input / output / error."""
    text: str
    """The field's whole original text (kept so quotes map back to original character ranges)."""
    shown: tuple[tuple[int, int], ...]
    """Original character ranges shown, in order; more than one means the middle was omitted."""

    @property
    def original_chars(self) -> int:
        """Length of the field's original text."""
        return len(self.text)

    @property
    def shown_chars(self) -> int:
        """Characters shown of the original text."""
        return sum(b - a for a, b in self.shown)


class ProjectedEvidence(Frozen):
    """pi(x): the unit's evidence for one definition."""

    unit_id: str
    """The unit projected."""
    layer: Layer
    """Its layer."""
    fields: tuple[ShownField, ...]
    """Fields with text, in evidence order."""

    @property
    def original_chars(self) -> int:
        """Characters of the original fields."""
        return sum(f.original_chars for f in self.fields)

    @property
    def shown_chars(self) -> int:
        """Characters shown of the original fields."""
        return sum(f.shown_chars for f in self.fields)

    @property
    def coverage(self) -> float:
        """Shown / original characters (1.0 when there is no text)."""
        total = self.original_chars
        return 1.0 if total == 0 else self.shown_chars / total

    def digest(self) -> str:
        """sha256 of what is shown (ids, cited fields, shown text, original lengths): the `hash(pi(x))` of keys."""
        h = hashlib.sha256(f"pi{VERSION}\x1f{self.unit_id}\x1f{self.layer}".encode())
        for f in self.fields:
            shown = [f.text[a:b] for a, b in f.shown]
            h.update(b"\x1e")
            h.update(json.dumps([f.id, f.unit_id, f.field, f.original_chars, f.shown, shown],
                                ensure_ascii=False).encode("utf-8", "surrogatepass"))
        return h.hexdigest()


def cut(length: int, projection: Projection) -> tuple[tuple[int, int], ...]:
    """Ranges of a field of `length` characters that the projection shows."""
    limit = projection.max_chars
    if projection.strategy == "full" or limit is None or length <= limit:
        return ((0, length),)
    if projection.strategy == "head":
        return ((0, limit),)
    head = (limit + 1) // 2
    return ((0, head), (length - (limit - head), length))


def _expand(names: Iterable[str], layer: Layer) -> set[str]:
    valid = _VALID[layer]
    out: set[str] = set()
    for name in names:
        if name not in valid:
            raise SpecError(f"projection field {name!r} is not valid at layer {layer!r}; valid: {', '.join(valid)}")
        out.update(_ALIASES.get(name, (name,)))
    return out


def _turn_fields(turn: Turn, wanted: set[str], prefix: str) -> Iterable[tuple[str, str, str, str | None]]:
    for name in ("request", "answer"):
        if name in wanted:
            yield f"{prefix}{name}", turn.id, name, getattr(turn, name)
    for i, span in enumerate(turn.spans):
        for name in _SPAN_FIELDS:
            if f"spans.{name}" in wanted:
                yield f"{prefix}spans[{i}].{name}", span.id, name, getattr(span, name)


def _raw_fields(unit: object, layer: Layer, wanted: set[str]) -> Iterable[tuple[str, str, str, str | None]]:
    if layer == "span":
        if not isinstance(unit, SpanView):
            raise SpecError(f"layer 'span' expects a SpanView, got {type(unit).__name__}")
        for name in _SPAN_FIELDS:
            if name in wanted:
                yield name, unit.span.id, name, getattr(unit.span, name)
        for name in ("request", "answer"):
            if name in wanted:
                yield name, unit.turn.id, name, getattr(unit.turn, name)
    elif layer == "trace":
        if not isinstance(unit, Turn):
            raise SpecError(f"layer 'trace' expects a Turn, got {type(unit).__name__}")
        yield from _turn_fields(unit, wanted, "")
    elif layer == "conversation":
        if not isinstance(unit, Conversation):
            raise SpecError(f"layer 'conversation' expects a Conversation, got {type(unit).__name__}")
        for i, turn in enumerate(unit.turns):
            yield from _turn_fields(turn, wanted, f"turns[{i}].")
    else:
        if not isinstance(unit, EngagementView):
            raise SpecError(f"layer 'engagement' expects an EngagementView, got {type(unit).__name__}")
        for c, conv in enumerate(unit.conversations):
            for i, turn in enumerate(conv.turns):
                yield from _turn_fields(turn, wanted, f"sessions[{c}].turns[{i}].")


def unit_id_of(unit: object) -> str:
    """The id of a unit of any layer."""
    if isinstance(unit, SpanView):
        return unit.span.id
    if isinstance(unit, EngagementView):
        return unit.engagement.id
    if isinstance(unit, Turn | Conversation):
        return unit.id
    raise SpecError(f"expected a span view, turn, conversation or engagement view, got {type(unit).__name__}")


def project(unit: object, layer: Layer, projection: Projection) -> ProjectedEvidence:
    """pi(x): the fields of `unit` named by `projection` that have text, each cut as the projection says."""
    wanted = _expand(projection.fields, layer)
    fields = tuple(
        ShownField(id=fid, unit_id=uid, field=name, text=text, shown=cut(len(text), projection))
        for fid, uid, name, text in _raw_fields(unit, layer, wanted)
        if text
    )
    return ProjectedEvidence(unit_id=unit_id_of(unit), layer=layer, fields=fields)
