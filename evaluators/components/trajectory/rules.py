"""Trajectory's rule collectors: pure functions of one conversation and the knowledge pack.

Replays are decided by text similarity alone. Lexicon events (context repair, clarification, abandonment,
frustration) match the pack's patterns of every language on normalized text (`evaluators.provenance.normalize`:
NFKC, zero-width characters dropped, spaces between CJK characters dropped) and cite the original characters.
Where a phrase list cannot decide (a context repair in the user's own words) the rule abstains for a model,
unless the pack lists the item in `rules_decide` (its lexicon is trusted complete for that agent): then
finding nothing is a "no".

A turn is failed when its delivery state is one of the failures (as `execution.delivered` decides it), not failed
when it is `delivered` or `handed_off` (the agent handed the user to a person), and undecided when the source
cannot tell. The user's closing message is no turn of the session (see `factory.pipeline.units`): the session
ends on the turn before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Literal, NamedTuple

from agent_factory.adapters.model import (
    FAILED_STATES,
    TASK_END_KINDS,
    TASK_FINISHED,
    Conversation,
    EvidencePointer,
    Turn,
)
from agent_factory.evaluators.components.trajectory.definitions import (
    ABANDONMENT,
    CLARIFICATION_LOOP,
    CONTEXT_REPAIR,
    FRUSTRATION,
    REPLAY_TURNS,
    REQUEST_REPLAY,
    SESSION_ENDED,
    SESSION_TERMINATION,
    TURNS,
    VERBATIM_REPLAY,
)
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, rule
from agent_factory.evaluators.provenance import normalize as _norm
from agent_factory.evaluators.stats import bigram_jaccard, normalize_text
from agent_factory.knowledge_packs import KnowledgePack, compile_pattern

VERSION = f"4+norm{_norm.VERSION}"
"""Version of these rules, including the text normalization the lexicons match on."""

LexiconKind = Literal["frustration", "abandonment", "clarification", "context_repair", "reply"]
"""The pack lexicons Trajectory reads."""
ReplayKind = Literal["verbatim", "near"]


class Hit(NamedTuple):
    """One lexicon match: which pattern, and where in the original text."""

    pattern_id: str
    pointer: EvidencePointer


def find_lexicon(
    text: str | None, *, kind: LexiconKind, pack: KnowledgePack, unit_id: str, field: str,
) -> Hit | None:
    """The earliest match of any `kind` pattern of any language in `text` (ties: language, then pack order)."""
    if not text:
        return None
    norm = _norm.normalize(text)
    best: tuple[int, int, Hit] | None = None
    order = 0
    for language in sorted(pack.lexicons):
        for entry in getattr(pack.lexicons[language], kind):
            order += 1
            m = compile_pattern(entry.pattern).search(norm.text)
            if m is None or m.end() <= m.start():
                continue
            if best is None or (m.start(), order) < best[:2]:
                start, end = norm.original_range(m.start(), m.end())
                best = (m.start(), order, Hit(entry.id, EvidencePointer(unit_id=unit_id, field=field, start=start,
                                                                        end=end)))
    return best[2] if best else None


def replay_kind(previous: str | None, current: str | None, threshold: float) -> ReplayKind | None:
    """How `current` resends `previous`: `verbatim` (equal once normalized), `near` (bigram Jaccard at or above
    `threshold`), or None. Blank requests resend nothing."""
    a = normalize_text(previous or "")
    b = normalize_text(current or "")
    if not a or not b:
        return None
    if a == b:
        return "verbatim"
    return "near" if bigram_jaccard(a, b) >= threshold else None


def answers_the_agent(prev: Turn, cur: Turn, pack: KnowledgePack) -> bool:
    """Whether `cur`'s message is the user's answer to what the agent just said (`prev`'s answer): it opens with
    a yes, a no or a pick among options (the pack's `reply` lexicon) and repairs no context.

    No question mark is required: agents ask for the go-ahead in the imperative ("Please confirm if you'd like
    me to proceed."), and a message opening with a yes answers whatever form the question took. A correction
    ("No, I meant Q3") opens like a no but restates the user's request, so it stays a request."""
    if not (prev.answer or "").strip():
        return False
    reply, repair = (find_lexicon(cur.request, kind=kind, pack=pack, unit_id=cur.id, field="request")
                     for kind in ("reply", "context_repair"))
    return reply is not None and repair is None


def replays(conv: Conversation, pack: KnowledgePack) -> list[tuple[Turn, Turn, ReplayKind]]:
    """(previous turn, turn, kind) for every turn that resends the request just before it.

    A replay resends the user's request. A message that answers the question the agent just asked ("yes,
    please proceed" after "shall I proceed?", asked again and confirmed again) is a reply, not a resend, however
    much it resembles the previous reply."""
    threshold = pack.thresholds.redo_jaccard
    out = []
    for prev, cur in pairwise(conv.turns):
        if answers_the_agent(prev, cur, pack):
            continue
        kind = replay_kind(prev.request, cur.request, threshold)
        if kind is not None:
            out.append((prev, cur, kind))
    return out


def failed(turn: Turn) -> bool | None:
    """True for a failed delivery, False for a delivered answer or a hand-off to a person, None when the source
    cannot tell."""
    if turn.delivery in ("delivered", "handed_off"):
        return False
    return True if turn.delivery in FAILED_STATES else None


def whole(turn: Turn, field: Literal["request", "answer"]) -> EvidencePointer:
    """A pointer to the whole of a turn's request or answer (an empty range when absent)."""
    return EvidencePointer(unit_id=turn.id, field=field, start=0, end=len(getattr(turn, field) or ""))


def _listed(turns: Sequence[Turn]) -> str:
    return ", ".join(str(t.index) for t in turns)


def _replay_answer(conv: Conversation, ctx: RuleContext, kind: ReplayKind) -> RuleAnswer:
    found = [(p, c) for p, c, k in replays(conv, ctx.pack) if k == kind]
    what = ("resend the previous request verbatim" if kind == "verbatim" else
            f"re-ask the previous request with edits (bigram Jaccard >= {ctx.pack.thresholds.redo_jaccard})")
    if not found:
        return RuleAnswer("no", fact=0.0, reason=f"none of {len(conv.turns)} turns {what}")
    return RuleAnswer("yes", fact=float(len(found)),
                      evidence=tuple(ptr for p, c in found for ptr in (whole(c, "request"), whole(p, "request"))),
                      reason=f"{len(found)} of {len(conv.turns)} turns {what} (turn {_listed([c for _, c in found])})")


@rule(REQUEST_REPLAY)
def request_replay(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    return _replay_answer(conv, ctx, "near")


@rule(VERBATIM_REPLAY)
def verbatim_replay(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    return _replay_answer(conv, ctx, "verbatim")


@rule(REPLAY_TURNS)
def replay_turns(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    found = replays(conv, ctx.pack)
    return RuleAnswer("yes", fact=",".join(str(c.index) for _, c, _ in found),
                      evidence=tuple(whole(c, "request") for _, c, _ in found),
                      reason=f"{len(found)} of {len(conv.turns)} turns resend the previous request")


@rule(TURNS)
def turns(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    return RuleAnswer("yes", fact=float(len(conv.turns)), reason=f"{len(conv.turns)} turns")


FINAL_ANSWER_TOOLS = frozenset({"final_answer"})
"""Tool names an agent calls to hand in its task's answer (smolagents' `final_answer`): the run ends there."""


def _field(unit_id: str, field: str) -> EvidencePointer:
    # A non-text field (a value, an attribute, a span's name): named, with an empty range.
    return EvidencePointer(unit_id=unit_id, field=field, start=0, end=0)


def _final_answer_span(conv: Conversation) -> tuple[Turn, str] | None:
    for t in reversed(conv.turns):
        for s in reversed(t.spans):
            name = s.attributes.get("tool.name", s.name if s.kind == "tool" else None)
            if isinstance(name, str) and name.strip().lower() in FINAL_ANSWER_TOOLS:
                return t, s.id
    return None


@rule(SESSION_ENDED)
def session_ended(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    # Censored means the session may still continue: only an end the source records says it cannot.
    graded = [e for e in conv.events if e.kind in TASK_END_KINDS and e.value is not None]
    if graded:
        return RuleAnswer("yes", evidence=tuple(_field(e.id, "value") for e in graded),
                          reason=f"the task was graded: {', '.join(sorted({e.kind for e in graded}))}")
    if conv.attributes.get(TASK_FINISHED) is True:
        return RuleAnswer("yes", evidence=(_field(conv.id, f"attributes.{TASK_FINISHED}"),),
                          reason="the source marks the task as finished (a graded benchmark record)")
    final = _final_answer_span(conv)
    if final is not None:
        return RuleAnswer("yes", evidence=(_field(final[1], "name"),),
                          reason=f"the agent handed in its final answer (turn {final[0].index})")
    return RuleAnswer("no", reason="no task outcome, grading or final answer recorded: the session may continue")


def _request_hits(conv: Conversation, ctx: RuleContext, kind: LexiconKind, *, skip_first: bool = False
                  ) -> list[tuple[Turn, Hit]]:
    found = []
    for t in conv.turns[1:] if skip_first else conv.turns:
        hit = find_lexicon(t.request, kind=kind, pack=ctx.pack, unit_id=t.id, field="request")
        if hit is not None:
            found.append((t, hit))
    return found


def _lexicon_reason(found: Sequence[tuple[Turn, Hit]]) -> str:
    ids = sorted({h.pattern_id for _, h in found})
    return f"{len(found)} requests match {', '.join(ids)} (turn {_listed([t for t, _ in found])})"


@rule(CONTEXT_REPAIR)
def context_repair(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    found = _request_hits(conv, ctx, "context_repair", skip_first=True)
    if found:
        return RuleAnswer("yes", fact=float(len(found)), evidence=tuple(h.pointer for _, h in found),
                          reason=_lexicon_reason(found))
    if len(conv.turns) < 2:
        return RuleAnswer("no", fact=0.0, reason="a single request has no earlier context to repair")
    if CONTEXT_REPAIR in ctx.pack.rules_decide:
        return RuleAnswer("no", fact=0.0, reason=f"no repair phrase in {len(conv.turns) - 1} later requests; the "
                                                 f"pack {ctx.pack.name!r} trusts its lexicon (rules_decide)")
    return RuleAnswer(None, reason="no repair phrase; a restatement in the user's own words needs a model")


@rule(CLARIFICATION_LOOP)
def clarification_loop(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    exchanges: list[tuple[Turn, Hit, Turn]] = []
    for t, reply in pairwise(conv.turns):
        hit = find_lexicon(t.answer, kind="clarification", pack=ctx.pack, unit_id=t.id, field="answer")
        if hit is not None:
            exchanges.append((t, hit, reply))
    repeats = max(0, len(exchanges) - 1)
    if not repeats:
        what = "one clarification exchange" if exchanges else "no clarification exchange"
        return RuleAnswer("no", fact=0.0, reason=f"{what} in {len(conv.turns)} turns")
    evidence = tuple(p for _, h, reply in exchanges for p in (h.pointer, whole(reply, "request")))
    ids = sorted({h.pattern_id for _, h, _ in exchanges})
    return RuleAnswer("yes", fact=float(repeats), evidence=evidence,
                      reason=f"{len(exchanges)} clarification exchanges ({', '.join(ids)}; "
                             f"turn {_listed([t for t, _, _ in exchanges])})")


@rule(SESSION_TERMINATION)
def session_termination(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    if not conv.turns:
        return RuleAnswer("uncollected", reason="the session has no turns")
    last = conv.turns[-1]
    state = failed(last)
    if state is None:
        return RuleAnswer("uncollected", reason="the source cannot tell whether the last answer was delivered")
    if not state:
        why = ("the session ends on a hand-off to a person" if last.delivery == "handed_off"
               else "the last answer was delivered")
        closed = conv.attributes.get("closed_by_user")
        if isinstance(closed, dict):
            why += "; the user closed the session"
        return RuleAnswer("no", fact=0.0, evidence=(whole(last, "answer"),), reason=why)
    return RuleAnswer("yes", fact=1.0, evidence=(whole(last, "answer"),),
                      reason=f"the session ends on turn {last.index}, {last.delivery}")


@rule(ABANDONMENT)
def abandonment(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    found = _request_hits(conv, ctx, "abandonment")
    if found:
        return RuleAnswer("yes", fact=float(len(found)), evidence=tuple(h.pointer for _, h in found),
                          reason=_lexicon_reason(found))
    if len(conv.turns) >= 2:
        prev, last = conv.turns[-2], conv.turns[-1]
        if failed(last) and failed(prev) and replay_kind(prev.request, last.request,
                                                         ctx.pack.thresholds.redo_jaccard):
            return RuleAnswer("yes", fact=1.0,
                              evidence=(whole(prev, "request"), whole(prev, "answer"), whole(last, "request"),
                                        whole(last, "answer")),
                              reason=f"turn {last.index} resent failed turn {prev.index}, failed again, and the "
                                     "session ended")
    return RuleAnswer("no", fact=0.0, reason="no give-up phrase and no retried failure at the end")


@rule(FRUSTRATION)
def frustration(conv: Conversation, ctx: RuleContext) -> RuleAnswer:
    # Frustration *with the agent* needs something the agent did: the session's opening request, before any
    # answer, is about the user's situation ("my flight is delayed and I'm really frustrated").
    found = _request_hits(conv, ctx, "frustration", skip_first=True)
    if not found:
        return RuleAnswer("no", fact=0.0, reason=f"no frustration phrase in {max(len(conv.turns) - 1, 0)} requests "
                                                 "after the first")
    return RuleAnswer("yes", fact=float(len(found)), evidence=tuple(h.pointer for _, h in found),
                      reason=_lexicon_reason(found))
