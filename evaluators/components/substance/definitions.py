"""rho of Substance (docs/method.md section 4): the eight checklist items of a delivered answer.

Each item is one yes/no question about one turn (trace layer), judged on the full request and answer text (no
truncation: on head+tail text "no contradiction" read 90% where the full text gave 5%). They are model items
(small model, then jury); a rule decides only what needs no judgment (an answer ending in a truncation marker
does not close properly) and abstains otherwise. Applicability is decided by registered rules: every item
applies only to delivered turns; I2 when the request states a constraint, I3 when the turn retrieved or was
given context, C1 when the request asks for several things. Ids are constants for the analyses.
"""

from __future__ import annotations

from agent_factory.evaluators.core.model import DataDefinition, Projection

I1 = "substance.i1_answers_task"
I2 = "substance.i2_respects_constraints"
I3 = "substance.i3_uses_context"
C1 = "substance.c1_covers_parts"
C2 = "substance.c2_closes_properly"
S1 = "substance.s1_specific"
S2 = "substance.s2_actionable"
E1 = "substance.e1_no_contradiction"
ITEMS: tuple[str, ...] = (I1, I2, I3, C1, C2, S1, S2, E1)
"""The checklist, in the design's order."""

APPLIES_DELIVERED = "substance.applies_delivered"
APPLIES_CONSTRAINTS = "substance.applies_constraints"
APPLIES_CONTEXT = "substance.applies_context"
APPLIES_MULTIPART = "substance.applies_multipart"
"""Registered applicability rules (yes: the item applies; anything else: not applicable)."""

_TEXT = Projection(fields=("request", "answer"))
_WITH_CONTEXT = Projection(fields=("request", "answer", "spans.output"))


def _d(id: str, question: str, *, applies_when: str, description: str, rule: str | None = None,
       projection: Projection = _TEXT, rule_version: str = "") -> DataDefinition:
    tiers = ("rule", "small_model", "jury") if rule else ("small_model", "jury")
    note = f" Applicability rules {rule_version}." if rule_version else ""
    return DataDefinition(
        id=id, question=question, component="substance", layer="trace", applies_when=applies_when, rule=rule,
        tiers=tiers, projection=projection, description=description + note,
    )


def build(rule_version: str) -> tuple[DataDefinition, ...]:
    """The eight definitions; `rule_version` (a digest of the applicability patterns) enters each description
    so a pattern edit changes every definition's digest and the cache keys that depend on it."""
    v = rule_version
    return (
        _d(I1, "Does the answer address the task the user asked for, rather than a different or merely related "
               "one?", applies_when=APPLIES_DELIVERED, rule_version=v,
           description="Applies to every delivered answer."),
        _d(I2, "Does the answer respect every constraint the user stated (length, format, scope, period, "
               "language, what to include or leave out)?", applies_when=APPLIES_CONSTRAINTS, rule_version=v,
           description="Applies to delivered answers whose request states a constraint (a limit, a format, "
                       "'only ...', a length)."),
        _d(I3, "Does the answer use the retrieved or supplied context (documents, tool results) where it is "
               "relevant, without ignoring or contradicting it?", applies_when=APPLIES_CONTEXT,
           projection=_WITH_CONTEXT, rule_version=v,
           description="Applies to delivered answers of turns with a retrieval step or a tool result; the "
                       "collector sees the span outputs as well."),
        _d(C1, "Does the answer cover every part of a request that asks for several things?",
           applies_when=APPLIES_MULTIPART, rule_version=v,
           description="Applies to delivered answers whose request has several parts (two questions, a list, "
                       "'... and explain ...')."),
        _d(C2, "Does the answer close properly: it ends with a complete sentence and a conclusion or next step, "
               "not cut off mid-way?", applies_when=APPLIES_DELIVERED, rule=C2, rule_version=v,
           description="Rule: an answer ending in one of the pack's truncation markers -> no. Otherwise the rule "
                       "abstains for the model tiers."),
        _d(S1, "Is the answer specific to this request (concrete figures, names, periods), rather than generic "
               "text that would fit any request?", applies_when=APPLIES_DELIVERED, rule_version=v,
           description="Applies to every delivered answer."),
        _d(S2, "Does the answer give the user something to act on (a clear result, a recommendation or a next "
               "step)?", applies_when=APPLIES_DELIVERED, rule_version=v,
           description="Applies to every delivered answer."),
        _d(E1, "Is the answer free of internal contradiction (no two statements in it that cannot both be "
               "true)?", applies_when=APPLIES_DELIVERED, rule_version=v,
           description="Applies to every delivered answer; needs the full text (contradictions appear only when "
                       "all of it is read)."),
    )
