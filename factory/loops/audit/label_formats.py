"""Human labels of benchmarks as ratings (`Rating`, rater `human:<name>`): the readers of `agent-factory labels
import` for MAST, TRAIL and Who&When, pure (they take what was read from a file, never a path).

Each reader says what every source label became: the items it maps to, or none and why (`LabelMapping`). A
label maps to a suite item only when the item's question is answered by the label's definition; a label that
answers no suite item is kept as the benchmark's own item (`mast.*`, `trail.*`, `who_and_when.*`), so a model
asked the same question can be compared with the people later, and the report names it unmapped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from agent_factory.adapters.chat_io import RecordProblem
from agent_factory.adapters.who_when import who_when_conversation
from agent_factory.errors import AgentFactoryError
from agent_factory.evaluators.audit.model import HUMAN_PREFIX, Rating
from agent_factory.evaluators.components.execution.definitions import SPAN_ERROR
from agent_factory.frozen import Frozen

FORMATS = ("mast", "trail", "who-and-when", "csv")
"""The formats `labels import` reads."""


class LabelError(AgentFactoryError):
    """A label file that cannot be imported: one line naming the file, the record (or line) and the field."""


class LabelMapping(Frozen):
    """What one kind of source label became."""

    label: str
    """The source's label (a TRAIL category, a MAST failure mode, a Who&When field, a CSV item)."""
    items: tuple[str, ...] = ()
    """The items it was stored as: suite items first, then the benchmark's own item."""
    suite_items: tuple[str, ...] = ()
    """The suite items among them (empty: it speaks to no item of the suite)."""
    count: int = Field(ge=0)
    """Source labels of this kind read."""
    why: str = ""
    """Why it maps to those suite items, or to none."""


@dataclass
class ParsedLabels:
    """What a reader made of a file: the ratings and the mapping of each source label."""

    ratings: list[Rating] = field(default_factory=list)
    mappings: list[LabelMapping] = field(default_factory=list)
    skipped: int = 0
    """Source rows that hold no label (a blank CSV value, a MAST annotator's NaN)."""
    notes: list[str] = field(default_factory=list)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


def dedupe(ratings: Iterable[Rating], where: str) -> list[Rating]:
    """One rating per (unit, item, rater); two different values for one of them is a contradiction."""
    seen: dict[tuple[str, str, str], Rating] = {}
    for r in ratings:
        key = (r.unit_id, r.item, r.rater)
        old = seen.setdefault(key, r)
        if old.value != r.value:
            raise LabelError(f"{where}: unit {r.unit_id!r} item {r.item!r} rater {r.rater!r} is labelled both "
                             f"{old.value!r} and {r.value!r}")
    return list(seen.values())


# ---- MAST (MAD human-labelled) ----------------------------------------------------------------------------

MAST_RATER = HUMAN_PREFIX + "mast-annotator-{}"
"""A MAST annotator's rater label (`annotator_1` -> `human:mast-annotator-1`)."""
_MAST_MODE = re.compile(r"^\s*(?P<code>\d+(?:\.\d+)*)\s+(?P<name>[^\n]+)")


def mast_item(mode: str) -> str:
    """The item of a MAST failure mode (`1.3 Step Repetition` and its definition -> `mast.step_repetition`): keyed on
    the mode's name, not its code, since the code means another mode in another labelling round (1.3 is "Step
    Repetition" in the final taxonomy and "Unaware of stopping conditions" in rounds 2 and 3); names equal but
    for case and spacing are one mode."""
    m = _MAST_MODE.match(mode)
    if m is None:
        raise ValueError(f"failure mode {mode[:60]!r} does not start with a code and a name")
    return "mast." + _slug(m.group("name"))


def mast_labels(records: Any, *, where: str) -> ParsedLabels:
    """MAST's human-labelled traces (a JSON array of `{trace_id, round, annotations: [{"failure mode",
    "annotator_1".."annotator_3"}]}`): each trace a unit `mast/<trace_id>` (its own user), each failure mode an
    item, each annotator a rater; true is `yes`, false `no`, NaN (unlabelled) no rating."""
    if not isinstance(records, list):
        raise LabelError(f"{where}: expected a JSON array of traces, got {type(records).__name__}")
    out = ParsedLabels()
    modes: dict[str, tuple[str, set[str], set[str]]] = {}
    for n, rec in enumerate(records):
        at = f"{where}: record {n}"
        if not isinstance(rec, dict):
            raise LabelError(f"{at}: expected an object, got {type(rec).__name__}")
        tid, notes = rec.get("trace_id"), rec.get("annotations")
        if isinstance(tid, bool) or not isinstance(tid, int | str):
            raise LabelError(f"{at}: trace_id: expected an integer or a string, got {type(tid).__name__}")
        if not isinstance(notes, list):
            raise LabelError(f"{at}: annotations: expected an array, got {type(notes).__name__}")
        unit = f"mast/{tid}"
        for j, a in enumerate(notes):
            mode = a.get("failure mode") if isinstance(a, dict) else None
            if not isinstance(mode, str):
                raise LabelError(f"{at}: annotations[{j}].failure mode: expected a string")
            try:
                item = mast_item(mode)
            except ValueError as e:
                raise LabelError(f"{at}: annotations[{j}].failure mode: {e}") from None
            name = mode.split("\n", 1)[0].strip()
            entry = modes.setdefault(item, (name, set(), set()))
            entry[1].add(name)
            entry[2].add(str(rec.get("round", "")))
            for key in sorted(k for k in a if k.startswith("annotator_")):
                v = a[key]
                if isinstance(v, float) and math.isnan(v):
                    out.skipped += 1
                    continue
                if not isinstance(v, bool):
                    raise LabelError(f"{at}: annotations[{j}].{key}: expected true, false or NaN, got {v!r}")
                rater = MAST_RATER.format(key.removeprefix("annotator_"))
                out.ratings.append(Rating(unit, unit, item, rater, "yes" if v else "no"))
    out.ratings = dedupe(out.ratings, where)
    counts: dict[str, int] = {}
    for r in out.ratings:
        counts[r.item] = counts.get(r.item, 0) + 1
    for item, (_, names, rounds) in sorted(modes.items()):
        out.mappings.append(LabelMapping(
            label=" / ".join(sorted(names)), items=(item,), count=counts.get(item, 0),
            why=f"MAST failure mode (rounds: {', '.join(sorted(rounds))}); no suite item asks about it"))
    return out


# ---- TRAIL ---------------------------------------------------------------------------------------------------

TRAIL_RATER = HUMAN_PREFIX + "trail"
"""The rater of TRAIL's annotations (the benchmark's annotators, not told apart in its files)."""

TRAIL_TAXONOMY: dict[str, str] = {
    "Language-only": "reasoning", "Tool-related": "reasoning",
    "Poor Information Retrieval": "reasoning", "Tool Output Misinterpretation": "reasoning",
    "Incorrect Problem Identification": "reasoning", "Tool Selection Errors": "reasoning",
    "Formatting Errors": "reasoning", "Instruction Non-compliance": "reasoning",
    "Tool Definition Issues": "configuration", "Environment Setup Errors": "configuration",
    "Rate Limiting": "failed_call", "Authentication Errors": "failed_call", "Service Errors": "failed_call",
    "Resource Not Found": "failed_call", "Resource Exhaustion": "failed_call", "Timeout Issues": "failed_call",
    "Context Handling Failures": "planning", "Resource Abuse": "planning",
    "Goal Deviation": "planning", "Task Orchestration Errors": "planning",
}
"""TRAIL's leaf categories (Deshpande et al. 2025, arXiv 2505.08638, figure 2) and what they are about:
reasoning errors (hallucination, information processing, decision making, output generation), system execution
errors of configuration, failed calls (the API issues and resource management: rate limits, authentication,
service errors, missing resources, exhausted resources, timeouts), and planning and coordination errors."""

CALL_SPAN_KINDS = frozenset({"tool", "retrieval"})
"""Span kinds that are a call themselves: a failed call annotated on one of them is that span failing."""

TRAIL_SUITE_ITEMS: dict[str, tuple[tuple[str, ...], str]] = {
    "failed_call": ((SPAN_ERROR,), "a call refused (HTTP 429, 401/403, 5xx, 404), out of resources or timed out, "
                                   "annotated on the call's own (tool) span, is that span ending in an error: "
                                   "execution.span_error = yes there"),
    "failed_call_elsewhere": ((), "annotated on a model or agent step, which is where the annotators place a call's "
                                  "failure the step read back (its input holds the error), not the call itself: "
                                  "the failing span is not named, so execution.span_error of neither is stated"),
    "failed_call_unknown": ((), "the span is not in the store, so its kind cannot tell the call's own span from a "
                                "step that read its error: ingest the traces, then import the labels"),
    "configuration": ((), "a tool defined wrongly or an environment set up wrongly need not end the call in an "
                          "error; no suite item asks about configuration"),
    "reasoning": ((), "no suite item judges a step's reasoning, tool choice or output format (substance judges "
                      "the turn's final answer, not a step)"),
    "planning": ((), "no suite item judges planning or context handling inside a run (trajectory reads what the "
                     "user did next)"),
    "unknown": ((), "not among TRAIL's published leaf categories (arXiv 2505.08638, figure 2); no suite item"),
}
"""Per kind of TRAIL annotation, the suite items it answers (value `yes` at the annotated span) and why."""

_SUFFIX = re.compile(r"\s+(?:errors?|failures?|issues?)$")


def _category_key(category: str) -> str:
    """A category's spelling-insensitive key: case, spacing and the generic last word ("Errors", "Failure")
    do not matter ("Tool Selection" and "Tool Selection Errors" are one leaf)."""
    text = " ".join(category.lower().split())
    return _SUFFIX.sub("", text)


_TRAIL_BY_KEY = {_category_key(c): c for c in TRAIL_TAXONOMY}


def _trail_kind(category: str, span_kind: str | None) -> tuple[str, str]:
    """(the key of `TRAIL_SUITE_ITEMS`, the mapping's label) of a category annotated on a span of `span_kind`."""
    kind = TRAIL_TAXONOMY.get(category, "unknown")
    if kind != "failed_call":
        return kind, category
    if span_kind is None:
        return "failed_call_unknown", f"{category} (span not in the store)"
    return ("failed_call" if span_kind in CALL_SPAN_KINDS else "failed_call_elsewhere",
            f"{category} (span kind {span_kind})")


def trail_labels(annotations: Mapping[str, Any], *, where: Mapping[str, str],
                 span_kinds: Mapping[str, str] | None = None) -> ParsedLabels:
    """TRAIL's annotation files (trace id -> `{"errors": [{category, location, impact, ...}]}`): each error is a
    label `yes` of its category's item `trail.<category>` on the span it locates (the store's span unit id is
    the span id; `span_kinds`: the store's kind of each span), and of the suite items it answers
    (`TRAIL_SUITE_ITEMS`); the user is the trace. Only positive labels: TRAIL marks errors, and an unmarked
    span is not one the annotators judged free of every error a suite item asks about. `impact` grades
    severity and changes no yes/no value."""
    kinds = span_kinds or {}
    out = ParsedLabels()
    found: dict[tuple[str, str, str], int] = {}
    for trace_id in sorted(annotations):
        doc, at = annotations[trace_id], where[trace_id]
        errors = doc.get("errors") if isinstance(doc, dict) else None
        if not isinstance(errors, list):
            raise LabelError(f"{at}: errors: expected an array of annotated errors")
        for j, e in enumerate(errors):
            if not isinstance(e, dict):
                raise LabelError(f"{at}: errors[{j}]: expected an object, got {type(e).__name__}")
            cat, loc = e.get("category"), e.get("location")
            if not isinstance(cat, str) or not cat.strip():
                raise LabelError(f"{at}: errors[{j}].category: expected a non-empty string")
            if not isinstance(loc, str) or not loc.strip():
                raise LabelError(f"{at}: errors[{j}].location: expected a span id")
            canonical = _TRAIL_BY_KEY.get(_category_key(cat), cat.strip())
            kind, label = _trail_kind(canonical, kinds.get(loc.strip()))
            key = (label, kind, "trail." + _slug(canonical))
            found[key] = found.get(key, 0) + 1
            for item in (*TRAIL_SUITE_ITEMS[kind][0], key[2]):
                out.ratings.append(Rating(loc.strip(), trace_id, item, TRAIL_RATER, "yes"))
    out.ratings = dedupe(out.ratings, "TRAIL annotations")
    for (label, kind, own), n in sorted(found.items()):
        suite, why = TRAIL_SUITE_ITEMS[kind]
        out.mappings.append(LabelMapping(label=label, items=(*suite, own), suite_items=suite, count=n, why=why))
    return out


# ---- Who&When ------------------------------------------------------------------------------------------------

WHO_WHEN_RATER = HUMAN_PREFIX + "who-and-when"
"""The rater of Who&When's failure attributions."""
DECISIVE_MISTAKE = "who_and_when.decisive_mistake"
"""The benchmark's item on each step (span) of a failed run: is this the step of the decisive mistake?"""
_WHO_WHEN_WHY = {
    "mistake_step": (f"the labelled step's span is `yes` and every other step of the run `no` for "
                     f"{DECISIVE_MISTAKE} (the benchmark names exactly one decisive step per failed run); no suite "
                     "item asks whether a step caused a run's failure (execution.span_error asks whether a "
                     "span's call failed, and a decisive mistake is mostly a reasoning or fact error in a message "
                     "that ran)"),
    "mistake_agent": ("names who erred; the labelled step's span already names its agent, and no suite item "
                      "asks about an agent"),
    "mistake_reason": "free text; no item",
}


def who_when_labels(records: Sequence[tuple[str, Any]]) -> ParsedLabels:
    """Who&When records ((where, record) pairs): the store's ids come from the adapter that ingests them
    (`who_when_conversation`), so each step is the span unit `<run>/turn-0/step-<k>` and the user is the run."""
    out = ParsedLabels()
    counts = dict.fromkeys(_WHO_WHEN_WHY, 0)
    matches = 0
    for at, rec in records:
        try:
            conv = who_when_conversation(rec)
        except RecordProblem as e:
            raise LabelError(f"{at}: {e.field + ': ' if e.field else ''}{e.message}") from None
        events = {ev.kind: ev for ev in conv.events}
        for kind in counts:
            counts[kind] += kind in events
        step = events.get("mistake_step")
        if step is None:
            out.notes.append(f"{at}: no mistake_step: its run has no label")
            continue
        target = step.attributes.get("span_id")
        if target is None:
            raise LabelError(f"{at}: mistake_step: step {step.value} is the person's own message, not an "
                             "agent's step")
        agent = events.get("mistake_agent")
        matches += bool(agent and agent.attributes.get("matches_step"))
        for span in conv.turns[0].spans:
            out.ratings.append(Rating(span.id, conv.id, DECISIVE_MISTAKE, WHO_WHEN_RATER,
                                      "yes" if span.id == target else "no"))
    out.ratings = dedupe(out.ratings, "Who&When records")
    for kind, why in _WHO_WHEN_WHY.items():
        items = (DECISIVE_MISTAKE,) if kind == "mistake_step" else ()
        out.mappings.append(LabelMapping(label=kind, items=items, count=counts[kind], why=why))
    if counts["mistake_agent"]:
        out.notes.append(f"mistake_agent is the agent speaking at mistake_step in {matches} of "
                         f"{counts['mistake_agent']} runs")
    return out


__all__ = [
    "CALL_SPAN_KINDS", "DECISIVE_MISTAKE", "FORMATS", "MAST_RATER", "TRAIL_RATER", "TRAIL_SUITE_ITEMS",
    "TRAIL_TAXONOMY", "WHO_WHEN_RATER", "LabelError", "dedupe", "LabelMapping", "ParsedLabels", "mast_item",
    "mast_labels", "trail_labels", "who_when_labels",
]
