"""How a turn ended when it was neither delivered nor failed: a hand-off to a person, or the user's goodbye.

Adapters read what the log shows (the last message was a tool result, the user's message got no reply); only
the knowledge pack knows that `transfer_to_human_agents` hands the user to a person and that "Thanks! ###STOP###"
closes the session. Ingest applies `classify` to every turn before provenance records it, so the stored
delivery state, `stats`, coverage and every component agree. Pure: no I/O, same input, same output.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from agent_factory.adapters.model import FAILED_STATES, Span, Turn
from agent_factory.adapters.otel.toolcalls import tool_name_of
from agent_factory.evaluators.provenance import normalize as _norm
from agent_factory.knowledge_packs import KnowledgePack, compile_pattern

VERSION = f"1+norm{_norm.VERSION}"
"""Version of the ending rules, including the normalization the closing lexicon matches on."""


def _matches(name: str | None, globs: Iterable[str]) -> bool:
    low = (name or "").strip().lower()
    return bool(low) and any(fnmatch.fnmatchcase(low, g.lower()) for g in globs)


def _tool_names(span: Span) -> list[str]:
    name = tool_name_of(span)
    return [span.name] if name is None else [span.name, name]


def handoff_span(turn: Turn, pack: KnowledgePack) -> Span | None:
    """The span that handed the turn to a person under the pack's `handoff` policy, or None.

    A failed hand-off call hands nothing over. A hand-off span (not a tool) counts only when no answer was
    delivered after it, since agent-to-agent hand-offs end in the next agent's answer.
    """
    policy = pack.handoff
    for span in turn.spans:
        if span.status == "error":
            continue
        if span.kind == "tool" and any(policy.hands_off(n) for n in _tool_names(span)):
            return span
        if span.kind != "tool" and _matches(span.name, policy.span_names) and turn.delivery != "delivered":
            return span
    return None


def is_closing(text: str | None, pack: KnowledgePack) -> str | None:
    """Id of the first closing-lexicon pattern (any language) that `text` matches, or None."""
    if not text or not text.strip():
        return None
    norm = _norm.normalize(text).text
    for language in sorted(pack.lexicons):
        for entry in pack.lexicons[language].closing:
            if compile_pattern(entry.pattern).search(norm):
                return entry.id
    return None


def classify(turn: Turn, pack: KnowledgePack, *, last: bool | None) -> Turn:
    """`turn` with delivery `handed_off` or `closing` where the pack says so; unchanged otherwise.

    `last` tells whether the turn is its conversation's last one (None when the source does not say: a turn
    that arrives as its own trace). A closing message is only recognised on a turn that got no answer
    (delivery `unknown`), and never on one known not to be last.
    """
    if turn.delivery in FAILED_STATES - {"failed_empty", "cut_off"}:
        return turn  # an error or a cut-off answer stays a failure, hand-off or not (a run that stopped on a
        # tool result may have stopped on the hand-off tool: that is a hand-off, read below)
    span = handoff_span(turn, pack)
    if span is not None:
        attrs = {**turn.attributes, "handoff_span_id": span.id, "handoff_name": span.name}
        return turn.model_copy(update={"delivery": "handed_off", "attributes": attrs})
    if turn.delivery == "unknown" and last is not False and turn.answer is None:
        pattern = is_closing(turn.request, pack)
        if pattern is not None:
            attrs = {**turn.attributes, "closing_pattern": pattern}
            return turn.model_copy(update={"delivery": "closing", "attributes": attrs})
    return turn
