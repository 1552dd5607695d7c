"""The airline pack's rules: a plugin of the `airline` knowledge pack, registered through the `agent_factory.rules`
entry point `airline` (pyproject.toml), the path a third-party pack follows.

- `conduct.confirmed_before_action` (conversation layer): every call of the trigger's tools follows an explicit
  user yes (English defaults; a clause may give its own regexes), right after an assistant message that asked.
- `conduct.booking_limits` (turn or conversation): passengers and payment methods of a booking call (tau-bench's
  airline tools: `passengers`, `payment_methods[].payment_id`) within the clause's limits.

They keep the `conduct.` prefix: the names are what the airline pack, the compiled suites and the compiler's
clause checks already write, and the data they collect are Conduct's (`conduct.<clause>.obligation`).

A pack plugin sits above the evaluators (it builds on their rule helpers), so the import contract lets
`agent_factory.knowledge_packs.airline` import them (pyproject `[tool.importlinter]`).
"""

from __future__ import annotations

import json

from agent_factory.adapters.model import Conversation, EvidencePointer
from agent_factory.evaluators.components.conduct.rules import (
    clause_of,
    clause_param,
    first_match,
    is_tool_call,
    missing_clause,
    spans_of,
    verdict,
    whole,
)
from agent_factory.evaluators.components.conduct.tooluse.followthrough import ASK_REGEX, CONFIRM_REGEX, DENY_REGEX
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, rule

# The confirmation regexes are the tool-use checks' defaults too (`conduct.agreed_action`): one definition.


@rule("conduct.confirmed_before_action", layers=("conversation",), needs_trigger_tools=True,
      params={"confirm_regex": "an explicit yes in the user's message", "deny_regex": "a refusal opening it",
              "ask_regex": "the assistant asking for the go-ahead"}, reads=("request", "answer", "spans"))
def confirmed_before_action(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Each call of the clause trigger's tools follows an explicit user confirmation.

    The user message the call answers (its turn's request) must match `confirm_regex` (an explicit yes) and
    not open with `deny_regex`, and
    the assistant's last reply before that message (the previous turn's answer) must match `ask_regex` (it
    laid out the action and asked to confirm). Several calls after one yes all rest on it. Needs the
    conversation layer: a turn alone does not show the previous reply. A violation cites the call's
    arguments and the user message it followed.
    """
    if not isinstance(unit, Conversation):
        return RuleAnswer("uncollected", reason="conduct.confirmed_before_action needs a conversation unit")
    clause = clause_of(ctx)
    names = clause.trigger.tool_names if clause is not None else ()
    if not names:
        return RuleAnswer("uncollected", reason="the clause's trigger lists no tool names (the actions to confirm)")
    confirm, ask = clause_param(clause, "confirm_regex", CONFIRM_REGEX), clause_param(clause, "ask_regex", ASK_REGEX)
    deny = clause_param(clause, "deny_regex", DENY_REGEX)
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    n = violating = 0
    for k, turn in enumerate(unit.turns):
        calls = [s for s in turn.spans if is_tool_call(s, names)]
        if not calls:
            continue
        n += len(calls)
        refused = first_match(deny, turn.request, unit_id=turn.id, field="request") is not None
        yes = None if refused else first_match(confirm, turn.request, unit_id=turn.id, field="request")
        prev = unit.turns[k - 1] if k > 0 else None
        asked = first_match(ask, prev.answer, unit_id=prev.id, field="answer") if prev is not None else None
        if yes is not None and asked is not None:
            good += [asked, yes, *(whole(s.id, "input", s.input) for s in calls)]
            continue
        violating += len(calls)
        for s in calls:
            bad.append(whole(s.id, "input", s.input))
            if turn.request is not None:
                bad.append(whole(turn.id, "request", turn.request))
    return verdict(n, violating, bad, good, "database-changing call(s)")


@rule("conduct.booking_limits", layers=("trace", "conversation"), needs_trigger_tools=True,
      params={"max_passengers": "passengers per booking call",
              "max_<kind>": "payment methods whose payment_id starts with <kind>_"}, reads=("spans.input",))
def booking_limits(unit: object, ctx: RuleContext) -> RuleAnswer:
    """Each call of the trigger's tools stays within the clause's limits on its JSON arguments.

    Params: `max_passengers` (length of `passengers`), and `max_<kind>` for payment methods whose
    `payment_id` starts with `<kind>_` (e.g. `max_gift_card: 3`). A call with unreadable arguments cannot be
    checked; if no call violates and one is unreadable, the datum is uncollected.
    """
    clause = clause_of(ctx)
    if clause is None:
        return missing_clause(ctx)
    params = clause.obligation.params
    limits = {k.removeprefix("max_"): v for k, v in params.items() if k.startswith("max_") and isinstance(v, int)}
    bad: list[EvidencePointer] = []
    good: list[EvidencePointer] = []
    unreadable = n = 0
    for span in spans_of(unit):
        if not is_tool_call(span, clause.trigger.tool_names):
            continue
        n += 1
        try:
            args = json.loads(span.input or "")
        except ValueError:
            args = None
        if not isinstance(args, dict):
            unreadable += 1
            continue
        counts = {"passengers": len(args.get("passengers") or [])}
        for pm in args.get("payment_methods") or []:
            pid = pm.get("payment_id") if isinstance(pm, dict) else None
            for kind in limits:
                if isinstance(pid, str) and pid.startswith(f"{kind}_"):
                    counts[kind] = counts.get(kind, 0) + 1
        over = any(counts.get(kind, 0) > limit for kind, limit in limits.items())
        (bad if over else good).append(whole(span.id, "input", span.input))
    if not bad and unreadable:
        return RuleAnswer("uncollected", reason=f"{unreadable} call(s) with unreadable JSON arguments")
    return verdict(n, len(bad), bad, good, "booking call(s)")
