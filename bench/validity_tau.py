"""Criterion validity on real trajectories: does each per-conversation flag go with task failure?

Usage:  .venv/bin/python bench/validity_tau.py [--traces PATH --policy PATH --pack NAME] [--workdir DIR]
                                               [--reuse] [--json] [--boot N] [--folds K] [--config TOML]

Default set: the shared tau-bench airline trajectories (../shared/data/tau-bench-airline-gpt4o, 128 gpt-4o runs with
their rewards) under the airline policy and pack `airline`; another tau-bench set is measured the same way with
`--traces`, `--policy` and `--pack` (e.g. a retail set with `--pack retail`). Exits with a message when the files
are absent. It builds the suite from the policy, approves it, ingests the trajectories and runs the pipeline rules
only (a model only with `--config`), exactly as a user would, then reads everything through the project's API:

- each flag the suite's components declare (`Project.flags`), per conversation as `summary`, `show` and `export`
  read it (`views.findings`, rolled up to the conversation): a flag added to a component or a clause added to the
  pack is measured with no change here;
- `flags_total`, the conversation's count of "bad" flags raised, from `Project.export` at the conversation level
  (the very column `agent-factory export --level conversation` writes), and the outcome `task_reward` beside it;
- from the conversation's attributes, its task (`task_id`) and number of messages; from its tool spans, the number
  of database-changing calls (the pack's `tools.write` when it declares them, else the tool names that trigger its
  `confirm_before_write` clause).

Failure is a task reward below 1. For every score it prints the rank AUC against failure with a 95% interval from
a bootstrap over tasks (the trials of one task share its customer and its difficulty, so they are not independent
draws), and for a 0/1 flag its precision P(fail | flagged) and recall P(flagged | fail), over the conversations on
which it was decided (an undecided flag is never read as "not raised"). Rows, in order:

- the two baselines that know nothing of the method: the number of messages, the number of database-changing calls;
- `flags_total` (its AUC as a score) and "any bad flag" (`flags_total` > 0: its recall is the share of failed
  conversations flagged);
- combined scores, each a logistic regression (scikit-learn, standardised inputs, default regularisation, nothing
  tuned) scored out of fold with `GroupKFold` by task, so no task is in both a model's training and its test rows:
  on the flags, on the two baselines, and on both;
- each flag, with its meaning (`bad`, `descriptive`, `instrument`).

A flag the components mean as "bad" (or `flags_total`, or "any bad flag") should have an AUC above 0.5; one whose
whole interval lies under 0.5 points the other way and makes the exit code 1.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT.parent / "shared" / "data"
POLICY = DATA / "tau-bench-policies" / "airline-policy.md"
TRACES = DATA / "tau-bench-airline-gpt4o" / "gpt-4o-airline.json"
PACK = "airline"
OUTCOME = "task_reward"
"""The outcome kind tau-bench's adapter records; a conversation failed when it is below 1."""
CONFIRM_CLAUSE = "confirm_before_write"
"""The clause whose trigger names the database-changing tools when the pack declares no `tools.write`."""
BAD_MEANINGS = ("bad", "total")
"""Row meanings whose AUC must not point the other way (the exit rule)."""


class Conversation(NamedTuple):
    """What the bench knows of one conversation besides its flags."""

    task: Hashable
    """The cluster: its tau-bench task (trials of one task share a customer and a difficulty)."""
    failed: bool
    """Task reward below 1."""
    messages: float | None
    """Number of messages (None: the format records none)."""
    writes: float | None
    """Number of database-changing tool calls (None: the pack names no such tool)."""
    flags_total: float | None
    """The export's `flags_total`: "bad" flags raised (None: no bad flag decided on it)."""


class Flag(NamedTuple):
    """One flag the suite declares and its value on each conversation (1 raised, 0 not, None undecided)."""

    meaning: str
    label: str
    values: dict[str, int | None]


class Estimator(Protocol):
    """What the cross-validation needs of a model: fit on rows, then a score per row (higher: likelier to fail)."""

    def fit(self, x: Any, y: Any) -> Any:
        """Learn from rows `x` and outcomes `y`."""

    def predict_proba(self, x: Any) -> Any:
        """Per row of `x`: the probability of each class, failure second."""


# --- preparing a store: the user's commands ----------------------------------------------------------------

def _cli(*args: str) -> None:
    cmd = [sys.executable, "-m", "agent_factory", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"agent-factory {args[0]} failed (rc {done.returncode}): {done.stderr.strip()[-2000:]}")


def prepare(work: Path, *, traces: Path, policy: Path, pack: str, config: Path | None) -> tuple[Path, Path]:
    """Build, approve, ingest and run into `work` (with the model config, if any): (store, suite)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    store, suite = work / "store.duckdb", work / "suite"
    _cli("build", "--spec", str(policy), "--pack", pack, "--out", str(suite), "--no-model")
    _cli("approve", str(suite))
    _cli("ingest", str(traces), "--pack", pack, "--store", str(store))
    model = ["--config", str(config)] if config is not None else []
    _cli("run", "--suite", str(suite), "--store", str(store), "--cache", str(work / "cache"), *model)
    return store, suite


# --- reading a store through the project's API -------------------------------------------------------------

def write_tools(pack: Any) -> tuple[frozenset[str], str]:
    """The database-changing tools and where they were read: the pack's `tools.write`, else the tool names of
    its confirmation clause (empty when it has neither)."""
    declared = frozenset(pack.tools.write)
    if declared:
        return declared, "pack tools.write"
    named = frozenset(t for c in pack.clauses if c.id == CONFIRM_CLAUSE for t in c.trigger.tool_names if t != "*")
    return named, f"{CONFIRM_CLAUSE} trigger" if named else "none declared"


def read_set(store: Path, suite: Path, work: Path) -> tuple[dict[str, Conversation], dict[str, Flag], dict[str, str]]:
    """(conversation id -> Conversation, flag id -> Flag, notes on where values came from) of the last run."""
    import pyarrow.parquet as pq

    from agent_factory import open_project
    from agent_factory.factory.views.findings import read_findings

    with open_project(store=store, suite=suite) as project:
        specs = project.flags
        exported = project.export("conversation", out=work / "export-conversation.parquet")
        table = pq.read_table(exported.out).to_pylist()
        st = project.store()
        attrs = st.conversation_attributes()
        writes, source = write_tools(project.pack)
        calls: dict[str, int] = {}
        for turn in st.iter_turns():
            n = sum(1 for s in turn.spans if s.kind == "tool" and s.name in writes)
            calls[turn.conversation_id] = calls.get(turn.conversation_id, 0) + n
        rows = read_findings(st, specs, with_associations=False).at("conversation")
    convs: dict[str, Conversation] = {}
    for r in table:
        reward = r.get(f"outcome.{OUTCOME}")
        if reward is None:
            continue  # no outcome: nothing to validate against
        cid = str(r["unit_id"])
        a = attrs.get(cid, {})
        task = a.get("task_id", r.get("user_id") or cid)
        messages = a.get("message_count")
        convs[cid] = Conversation(
            task=task, failed=float(reward) < 1.0,
            messages=float(messages) if isinstance(messages, int | float) else None,
            writes=float(calls.get(cid, 0)) if writes else None,
            flags_total=None if r.get("flags_total") is None else float(r["flags_total"]))
    flags = {s.id: Flag(s.meaning, s.label, {}) for s in specs}
    for fr in rows:
        if fr.flag in flags and fr.unit_id in convs:
            flags[fr.flag].values[fr.unit_id] = fr.value
    notes = {"writes": source, "clusters": "task_id" if any("task_id" in a for a in attrs.values()) else "user_id"}
    return convs, flags, notes


# --- pure: the measurements --------------------------------------------------------------------------------

def score_row(name: str, meaning: str, scores: Mapping[str, float | None], convs: Mapping[str, Conversation], *,
              boot: int, binary: bool, label: str = "") -> dict[str, Any]:
    """One row: the rank AUC of `scores` against failure over the conversations where the score is decided, its
    task-clustered 95% interval, and for a 0/1 score how many were flagged, P(fail | flagged) and P(flagged | fail)."""
    from agent_factory.evaluators.stats import cluster_auc

    decided = {c: float(v) for c, v in scores.items() if v is not None and c in convs}
    keep = list(decided)
    s = [decided[c] for c in keep]
    y = [convs[c].failed for c in keep]
    auc = cluster_auc(s, y, [convs[c].task for c in keep], n_boot=boot, seed=7)
    failed = sum(y)
    flagged = hits = None
    precision = recall = None
    if binary:
        flagged = sum(1 for v in s if v > 0)
        hits = sum(1 for v, f in zip(s, y, strict=True) if v > 0 and f)
        precision = hits / flagged if flagged else None
        recall = hits / failed if failed else None
    points_other_way = meaning in BAD_MEANINGS and auc.high is not None and auc.high < 0.5
    return {"name": name, "label": label, "meaning": meaning, "n": len(keep), "failed": failed,
            "flagged": flagged, "p_fail_given_flag": precision, "recall": recall, "auc": auc.value, "low": auc.low,
            "high": auc.high, "tasks": auc.clusters, "note": auc.note, "points_other_way": points_other_way}


def grouped_folds(groups: Sequence[Hashable], k: int) -> list[tuple[list[int], list[int]]]:
    """(train rows, test rows) of `GroupKFold` by `groups` with min(k, groups) folds: no group on both sides."""
    from sklearn.model_selection import GroupKFold

    keys = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    codes = [keys[g] for g in groups]
    folds = GroupKFold(n_splits=min(k, len(keys)))
    return [(list(map(int, tr)), list(map(int, te))) for tr, te in folds.split(codes, codes, codes)]


def logistic() -> Estimator:
    """The combined score's model: standardised inputs into a logistic regression, scikit-learn's defaults."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model: Estimator = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    return model


def out_of_fold(x: Sequence[Sequence[float]], y: Sequence[bool], groups: Sequence[Hashable], *, k: int,
                make: Callable[[], Estimator] = logistic) -> list[float | None]:
    """Each row's score from a model fitted on the other folds only (task-grouped); None where a training fold
    held one outcome class (nothing to fit)."""
    import numpy as np

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=bool)
    out: list[float | None] = [None] * len(ys)
    for train, test in grouped_folds(groups, k):
        if len(set(ys[train].tolist())) < 2:
            continue
        model = make()
        model.fit(xs[train], ys[train])
        proba = model.predict_proba(xs[test])[:, 1]
        for i, p in zip(test, proba, strict=True):
            out[i] = float(p)
    return out


def combined_rows(convs: Mapping[str, Conversation], flags: Mapping[str, Flag], *, boot: int,
                  k: int) -> list[dict[str, Any]]:
    """Logistic regressions scored out of fold (`out_of_fold`): on every flag (undecided read as 0, since a model
    needs a number; the flag rows measure each on decided conversations only), on the two baselines, and on both.
    A model is left out when a baseline is missing for some conversation, or no flag was ever raised."""
    ids = sorted(convs)
    raised = [f for f in sorted(flags) if any(flags[f].values.get(c) for c in ids)]
    flag_x = [[float(flags[f].values.get(c) or 0) for f in raised] for c in ids]
    base_ok = all(convs[c].messages is not None and convs[c].writes is not None for c in ids)
    base_x = [[convs[c].messages or 0.0, convs[c].writes or 0.0] for c in ids]
    models: list[tuple[str, list[list[float]]]] = []
    if raised:
        models.append((f"combined: logistic on {len(raised)} flags", flag_x))
    if base_ok:
        models.append(("combined: logistic on messages + writes", base_x))
    if raised and base_ok:
        models.append(("combined: logistic on flags + messages + writes",
                       [a + b for a, b in zip(flag_x, base_x, strict=True)]))
    y = [convs[c].failed for c in ids]
    groups = [convs[c].task for c in ids]
    rows = []
    for name, x in models:
        scores = dict(zip(ids, out_of_fold(x, y, groups, k=k), strict=True))
        row = score_row(name, "combined", scores, convs, boot=boot, binary=False)
        row["note"] = f"out of fold, GroupKFold by task ({min(k, len(set(groups)))} folds); {row['note']}"
        rows.append(row)
    return rows


def measure(convs: Mapping[str, Conversation], flags: Mapping[str, Flag], *, boot: int = 2000,
            k: int = 5) -> dict[str, Any]:
    """Every row of the table (module docstring) and the flags that never fired or were never decided."""
    baselines = [score_row("baseline: number of messages", "baseline", {c: v.messages for c, v in convs.items()},
                           convs, boot=boot, binary=False),
                 score_row("baseline: database-changing calls", "baseline", {c: v.writes for c, v in convs.items()},
                           convs, boot=boot, binary=False)]
    baselines = [r for r in baselines if r["n"]]
    totals = {c: v.flags_total for c, v in convs.items()}
    aggregate = [score_row("flags_total", "total", totals, convs, boot=boot, binary=False),
                 score_row("any bad flag (flags_total > 0)", "total", totals, convs, boot=boot, binary=True)]
    per_flag, never, undecided = [], [], []
    for fid in sorted(flags):
        f = flags[fid]
        decided = [v for c, v in f.values.items() if v is not None and c in convs]
        if not decided:
            undecided.append(fid)
        elif not any(decided):
            never.append(fid)
        else:
            per_flag.append(score_row(fid, f.meaning, f.values, convs, boot=boot, binary=True, label=f.label))
    combined = combined_rows(convs, flags, boot=boot, k=k)
    rows = baselines + aggregate + combined + per_flag
    return {"conversations": len(convs), "failed": sum(c.failed for c in convs.values()),
            "tasks": len({c.task for c in convs.values()}), "baselines": baselines, "aggregate": aggregate,
            "combined": combined, "flags": per_flag,
            "never_fired": never, "not_collected": undecided,
            "points_other_way": [r["name"] for r in rows if r["points_other_way"]]}


# --- output ------------------------------------------------------------------------------------------------

def _f(x: float | None, width: int = 5) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:{width}.3f}"


def _name(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[:width - 1] + "~"


def table(result: Mapping[str, Any]) -> list[str]:
    """The result as lines that fit a screen (at most 120 columns; the JSON has every name in full)."""
    import textwrap

    lines = [f"{result['conversations']} conversations, {result['failed']} failed (reward < 1), {result['tasks']} "
             f"tasks. AUC against failure with a 95% interval from a bootstrap over tasks;",
             "P(f|fl) = P(fail | flagged), recall = P(flagged | fail), over the conversations where it was decided.",
             f"{'score or flag':48} {'meaning':11} {'n':>4} {'flagged':>7} {'P(f|fl)':>7} {'recall':>6} "
             f"{'AUC':>5} {'interval':>11}"]
    for group in ("baselines", "aggregate", "combined", "flags"):
        for r in result[group]:
            mark = "  <- other way" if r["points_other_way"] else ""
            flagged = "" if r["flagged"] is None else str(r["flagged"])
            interval = f"{_f(r['low'], 4)}-{_f(r['high'], 4)}" if r["low"] is not None else f"{'-':>11}"
            lines.append(f"{_name(r['name']):48} {r['meaning']:11} {r['n']:>4} {flagged:>7} "
                         f"{_f(r['p_fail_given_flag'], 7)} {_f(r['recall'], 6)} {_f(r['auc'])} {interval}{mark}")
    for key, what in (("never_fired", "decided, never raised"),
                      ("not_collected", "never decided (model-judged: configure a model with --config)")):
        names: list[str] = result[key]
        if names:
            per = Counter(n.split(".", 1)[0] for n in names)
            listed = ", ".join(names) if len(names) <= 6 else (
                ", ".join(f"{c} {k}" for c, k in sorted(per.items())) + "; --json lists them")
            lines += textwrap.wrap(f"{what}: {len(names)} ({listed})", width=118, subsequent_indent="  ",
                                   break_on_hyphens=False)
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=TRACES, help="tau-bench trajectories (default: shared airline)")
    ap.add_argument("--policy", type=Path, default=POLICY, help="the policy the agent ran under (the role spec)")
    ap.add_argument("--pack", default=PACK, help="the knowledge pack (default: airline)")
    ap.add_argument("--workdir", type=Path, default=None, help="default: bench/out/validity[-<pack>]")
    ap.add_argument("--boot", type=int, default=2000, help="bootstrap resamples over tasks")
    ap.add_argument("--folds", type=int, default=5, help="folds of the task-grouped cross-validation")
    ap.add_argument("--json", action="store_true", help="print the result as JSON (stable keys)")
    ap.add_argument("--reuse", action="store_true",
                    help="measure the store and suite already in the workdir (no build, ingest or run)")
    ap.add_argument("--config", type=Path, default=None,
                    help="agent-factory.toml with models: model-tier items are collected too (rules only without)")
    args = ap.parse_args()
    if not (args.policy.exists() and args.traces.exists()):
        print(f"needs {args.policy} and {args.traces}; not found, nothing measured")
        return 0
    work = args.workdir or HERE / "out" / ("validity" if args.pack == PACK else f"validity-{args.pack}")
    if args.reuse:
        store, suite = work / "store.duckdb", work / "suite"
    else:
        store, suite = prepare(work, traces=args.traces, policy=args.policy, pack=args.pack, config=args.config)
    convs, flags, notes = read_set(store, suite, work)
    result = measure(convs, flags, boot=args.boot, k=args.folds)
    result = {"set": {"traces": str(args.traces), "policy": str(args.policy), "pack": args.pack,
                      "rules_only": args.config is None, **notes}, **result}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.traces.name} under {args.policy.name}, pack {args.pack}; clusters: {notes['clusters']}; "
              f"database-changing tools from the {notes['writes']}")
        print("\n".join(table(result)))
    return 1 if result["points_other_way"] else 0


if __name__ == "__main__":
    sys.exit(main())
