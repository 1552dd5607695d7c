"""The seeds' two composite scores over a task report, on request only and labelled as views (issue 35).

A composite is a weighted sum the seeds propose for a headline; it is a view of the measures, not a measure, and
its weights are the seeds' examples, not calibrated. A part that was not collected for some task (no model
configured for final quality, an imported file that records only its reward, a task without a labelled trial)
makes the composite None with the reason, never a 0. A part that does not apply to a task (a dimension None with
no reason: no expected steps, no state criterion, no failed call to recover from) is left out for that task.

- `gated-total` (seed 000, section 3.2): per task, 0.4 completion + 0.3 final quality + 0.2 state consistency +
  0.1 error recovery, multiplied by 0.3 when the task fails (the seed's "failure penalty"; its stricter variant is
  0). A task of n trials with c successes is scored as the expected gated total of one of its trials: c/n of them
  succeed (completion 1, factor 1) and the rest fail (completion 0, factor 0.3), each with the task's mean of the
  other three dimensions, so a task whose trials agree gets the seed's figure exactly. Error recovery of a task
  whose runs counted their calls and none failed is the seed's full score, 1 ("no error at all also scores full",
  its scorer's `1.0 if error_count == 0`); the dimension itself stays None there (nothing to recover). The value
  is the mean over tasks, in [0, 1] as the seed's example (0.9).
- `intelligence-index` (seed 003, section 3.1): 0.4 success + 0.3 process + 0.2 stability + 0.1 efficiency, each
  0-100. Success is completion (pass^1); process is the seed's action score, the share of expected steps the run
  took in any order (the `overlap` dimension); stability is 100 minus the share of runs that ended by an exception
  (the runner's `agent_error` and `sandbox_error`: `TaskSummary.faults`). The seed leaves efficiency a placeholder
  (a fixed 80, "a real scenario must record tokens and time"), so it is this project's definition, labelled:
  100 x the share of tool calls that were not redundant (not identical to an earlier call of the run), from seed
  000's account of what an efficiency score is for ("repeated searches of the same keyword, repeated writes of the
  same file ... the efficiency score exists to suppress such invalid calls"); a task whose runs made no call
  wasted none (100). An import records neither faults nor redundant calls, so its index is None with the reason.

Pure: a report in, a `Composite` out.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import fmean

from agent_factory.evaluators.tasks.model import TaskReport, TaskSummary
from agent_factory.frozen import Frozen

GATED_PENALTY = 0.3
"""Seed 000's factor on a failed task's total."""


class CompositePart(Frozen):
    """One weighted input of a composite."""

    name: str
    weight: float
    value: float | None
    """The part over the tasks (the mean over tasks, on the composite's scale); None when not collected."""
    measure: str
    """What the part is computed from."""


class Composite(Frozen):
    """A composite score: a view over the task report, on request."""

    name: str
    label: str
    """`view: ...`: what it is and where it comes from."""
    value: float | None
    """The composite; None when an input is missing (`missing` says which and why)."""
    parts: list[CompositePart]
    missing: list[str]
    """One line per input not collected: the input, how many tasks lack it, why."""


class CompositeReport(TaskReport):
    """The task report with the composite asked for (`tasks report --composite NAME`)."""

    composite: Composite


def _completion(t: TaskSummary) -> float | None:
    return t.successes / t.labelled if t.labelled else None


def _collected(t: TaskSummary, name: str, value: float | None, *, recorded: bool) -> bool:
    """Whether the task's part `name` was collected: it has a value, or it does not apply to the task (None with
    no reason: no expected steps, no state criterion). A None with a reason in `not_collected` (no model
    configured, an imported file) or from data the runs do not record (`recorded` False) was not collected."""
    return value is not None or (recorded and name not in t.not_collected)


def _lacking(report: TaskReport, name: str, value: Callable[[TaskSummary], float | None], *,
             because: str | None = None, need_one: bool = False) -> str | None:
    """`name: not collected for 3 of 7 task(s) (why)` when some task lacks it, or (`need_one`: the composite
    cannot do without the part) `name: applies to no task`; else None. `because`: the part is not a dimension,
    and a task without its value lacks the data (why)."""
    if not report.tasks:
        return f"{name}: no task"
    values = [value(t) for t in report.tasks]
    lacking = [t for t, v in zip(report.tasks, values, strict=True)
               if not _collected(t, name, v, recorded=because is None)]
    if not lacking:
        return None if any(v is not None for v in values) or not need_one else f"{name}: applies to no task"
    reasons = sorted({t.not_collected[name] for t in lacking if name in t.not_collected})
    reasons = reasons or ([because] if because else [])
    why = f" ({'; '.join(reasons)})" if reasons else ""
    return f"{name}: not collected for {len(lacking)} of {len(report.tasks)} task(s){why}"


def _recovery(t: TaskSummary) -> float | None:
    """Error recovery as seed 000 scores it: the dimension where a call failed; 1 where the runs counted their
    calls and none failed."""
    value = t.dimensions.get("error_recovery")
    return 1.0 if value is None and t.failed_calls == 0 else value


def _dimension(name: str) -> Callable[[TaskSummary], float | None]:
    if name == "error_recovery":
        return _recovery
    return lambda t: _completion(t) if name == "completion" else t.dimensions.get(name)


def _stability(t: TaskSummary) -> float | None:
    """The share of the task's runs not ended by a fault; None when they do not say."""
    return None if t.faults is None or not t.trials else 1 - t.faults / t.trials


def _efficiency(t: TaskSummary) -> float | None:
    """The share of the task's tool calls (per trial) that were not redundant; 1 with no call."""
    if t.redundant_calls is None or t.steps is None:
        return None
    return 1.0 if t.steps == 0 else 1 - t.redundant_calls / t.steps




_NO_LABEL = "no trial of the task has a success label"


def _part(report: TaskReport, value: Callable[[TaskSummary], float | None], scale: float, *,
          missing: str | None) -> float | None:
    """The part's mean over the tasks it applies to (seed 003 averages each score over its cases); None when
    it was not collected for some task (`missing`) or applies to none."""
    known = [v for v in (value(t) for t in report.tasks) if v is not None]
    return scale * fmean(known) if known and missing is None else None
GATED_WEIGHTS = {"completion": 0.4, "final_quality": 0.3, "state_consistency": 0.2, "error_recovery": 0.1}


def gated_task_total(completion: float, quality: float | None, state: float | None,
                     recovery: float | None) -> float:
    """Seed 000's gated total of a task whose trials succeed with share `completion`: the expected total of one
    trial, a success scoring 0.4 + rest, a failure 0.3 x rest. Rest is the other three weighted; one that does
    not apply to the task (None: no state criterion) is left out, and the weights of those that do are scaled to
    keep their sum (0.6), so a task is not marked down for a check it has no use for."""
    parts = [(GATED_WEIGHTS[d], v) for d, v in (("final_quality", quality), ("state_consistency", state),
                                                 ("error_recovery", recovery)) if v is not None]
    share = sum(w for d, w in GATED_WEIGHTS.items() if d != "completion")
    weight = sum(w for w, _ in parts)
    rest = share * sum(w * v for w, v in parts) / weight if weight else 0.0
    return completion * (GATED_WEIGHTS["completion"] + rest) + (1 - completion) * GATED_PENALTY * rest


def gated_total(report: TaskReport) -> Composite:
    """Seed 000's failure-gated total (see the module), the mean over tasks in [0, 1]."""
    lacks = [_lacking(report, d, _dimension(d), because=_NO_LABEL if d == "completion" else None,
                      need_one=d == "completion") for d in GATED_WEIGHTS]
    missing = [m for m in lacks if m]
    # Each task's inputs in GATED_WEIGHTS' order (completion, quality, state, recovery); all known when none is
    # missing.
    rows = [[_dimension(d)(t) for d in GATED_WEIGHTS] for t in report.tasks]
    value = None if missing else fmean(gated_task_total(*row) for row in rows)  # type: ignore[arg-type]
    return Composite(
        name="gated-total",
        label=f"view: seed 000's failure-gated total (0.4 completion + 0.3 final quality + 0.2 state consistency "
              f"+ 0.1 error recovery, x{GATED_PENALTY} when the task fails), 0-1; not a measurement",
        value=value, missing=missing,
        parts=[CompositePart(name=d, weight=w, value=_part(report, _dimension(d), 1.0, missing=lack),
                             measure=f"mean over the tasks it applies to of {d}")
               for (d, w), lack in zip(GATED_WEIGHTS.items(), lacks, strict=True)])




INDEX_WEIGHTS = {"success": 0.4, "process": 0.3, "stability": 0.2, "efficiency": 0.1}
_INDEX_PARTS: dict[str, tuple[Callable[[TaskSummary], float | None], str | None, str]] = {
    # part -> (its value per task in [0, 1], the dimension it is or None, what it measures)
    "success": (_dimension("completion"), "completion", "100 x completion (pass^1)"),
    "process": (_dimension("overlap"), "overlap", "100 x mean over tasks of overlap (steps taken, any order)"),
    "stability": (_stability, None, "100 - 100 x share of runs ended by a fault (the agent or sandbox raised)"),
    "efficiency": (_efficiency, None,
                   "100 x share of tool calls not redundant (this project's definition; the seed's is a placeholder)"),
}
_UNRECORDED = {"success": _NO_LABEL, "stability": "the runs do not say whether a fault ended them (an import)",
               "efficiency": "the runs do not count their redundant calls (an import)"}


def intelligence_index(report: TaskReport) -> Composite:
    """Seed 003's 0-100 index (see the module), the mean over tasks of each part."""
    lacks = {name: _lacking(report, dim or name, fn, because=_UNRECORDED.get(name), need_one=True)
             for name, (fn, dim, _) in _INDEX_PARTS.items()}
    parts = [CompositePart(name=name, weight=INDEX_WEIGHTS[name], value=_part(report, fn, 100.0, missing=lacks[name]),
                           measure=measure) for name, (fn, _, measure) in _INDEX_PARTS.items()]
    missing = [m for m in lacks.values() if m]
    value = None if missing else sum(p.weight * p.value for p in parts if p.value is not None)
    return Composite(
        name="intelligence-index",
        label="view: seed 003's index (0.4 success + 0.3 process + 0.2 stability + 0.1 efficiency), 0-100; "
              "not a measurement",
        value=value, missing=missing, parts=parts)


COMPOSITES: dict[str, Callable[[TaskReport], Composite]] = {
    "gated-total": gated_total,
    "intelligence-index": intelligence_index,
}
"""Composite name -> its function over a task report."""


def composite(report: TaskReport, name: str) -> CompositeReport:
    """The report with the composite `name`; a ValueError listing the valid names for an unknown one."""
    if name not in COMPOSITES:
        raise ValueError(f"--composite {name!r}: unknown; the composites are {', '.join(COMPOSITES)}")
    fields = {k: getattr(report, k) for k in TaskReport.model_fields}  # a subclass's own fields stay out
    return CompositeReport(**fields, composite=COMPOSITES[name](report))


__all__ = ["COMPOSITES", "GATED_PENALTY", "GATED_WEIGHTS", "Composite", "CompositePart", "CompositeReport",
           "INDEX_WEIGHTS", "composite", "gated_task_total", "gated_total", "intelligence_index"]
