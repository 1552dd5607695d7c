"""Criterion validity on real trajectories: does each per-conversation flag go with task failure?

Usage:  .venv/bin/python bench/validity_tau.py [--workdir bench/out/validity] [--json] [--boot N]

Needs ../shared/data (tau-bench-policies/airline-policy.md and tau-bench-airline-gpt4o/gpt-4o-airline.json);
exits with a message when they are absent. It builds the airline suite from the real policy (pack `airline`),
approves it, ingests the 128 gpt-4o trajectories and runs the pipeline rules only, exactly as a user would,
then reads every per-conversation flag from the store:

- trajectory events (replays, context repair, clarification loop, session termination, abandonment,
  frustration) and the session outcome (struggled or blocked, blocked alone);
- conduct: a violation of each clause (the conversation was triggered and the obligation did not hold);
- execution: a failed delivery in any turn; a hand-off to a person in any turn;
- provenance: incomplete evidence in any turn, an injection flag in any turn.

For each flag it prints the rank AUC against task failure (tau-bench reward < 1) with a 95% interval from a
bootstrap over tasks (the trials of one task share its customer and its difficulty), beside two baselines that
know nothing of the method: the number of messages and the number of database-changing calls (the airline
pack's write tools). A flag the components mean as "bad" should have an AUC above 0.5; one whose whole interval
lies under 0.5 points the other way and is reported as such (exit code 1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT.parent / "shared" / "data"
POLICY = DATA / "tau-bench-policies" / "airline-policy.md"
TRACES = DATA / "tau-bench-airline-gpt4o" / "gpt-4o-airline.json"

TRAJECTORY_EVENTS = ("request_replay", "verbatim_replay", "context_repair", "clarification_loop",
                     "session_termination", "abandonment", "frustration")


def _cli(*args: str) -> None:
    cmd = [sys.executable, "-m", "agent_factory", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0,):
        raise SystemExit(f"{' '.join(args[:1])} failed (rc {done.returncode}): {done.stderr.strip()[-2000:]}")


def prepare(work: Path, *, config: Path | None) -> Path:
    """Build, approve, ingest and run into `work` (with the model config, if any); the store's path."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    store, suite = work / "store.duckdb", work / "suite"
    _cli("build", "--spec", str(POLICY), "--pack", "airline", "--out", str(suite), "--no-model")
    _cli("approve", str(suite))
    _cli("ingest", str(TRACES), "--pack", "airline", "--store", str(store))
    model = ["--config", str(config)] if config is not None else []
    _cli("run", "--suite", str(suite), "--store", str(store), "--cache", str(work / "cache"), *model)
    return store


def collect_flags(  # noqa: C901 - one query and one flag definition after another, read top to bottom
    store: Path,
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, dict[str, int | None]]]]:
    """(conversation id -> {task, failed, messages, writes}, flag -> (meaning, conversation id -> 0/1/None))."""
    import duckdb

    from agent_factory.knowledge_packs import load_pack

    con = duckdb.connect(str(store), read_only=True)
    convs: dict[str, dict[str, Any]] = {}
    for cid, attrs in con.execute("SELECT id, attributes FROM conversations").fetchall():
        a = json.loads(attrs) if isinstance(attrs, str) else (attrs or {})
        convs[cid] = {"task": a.get("task_id"), "messages": a.get("message_count"), "failed": None, "writes": 0}
    for cid, value in con.execute("SELECT conversation_id, value FROM events WHERE kind = 'task_reward'").fetchall():
        if cid in convs:
            convs[cid]["failed"] = float(json.loads(value)) < 1.0
    pack = load_pack("airline")
    writes = {t for c in pack.clauses if c.id == "confirm_before_write" for t in c.trigger.tool_names}
    for cid, name, n in con.execute(
        "SELECT t.conversation_id, s.name, count(*) FROM spans s JOIN turns t ON s.trace_id = t.id "
        "WHERE s.kind = 'tool' GROUP BY 1, 2"
    ).fetchall():
        if cid in convs and name in writes:
            convs[cid]["writes"] += n

    flags: dict[str, tuple[str, dict[str, int | None]]] = {}

    def put(name: str, meaning: str, cid: str, value: int | None) -> None:
        flags.setdefault(name, (meaning, {}))[1][cid] = value

    for cid, item, value in con.execute(
        "SELECT unit_id, item, value FROM atomic_data WHERE layer = 'conversation' AND item LIKE 'trajectory.%'"
    ).fetchall():
        event = item.removeprefix("trajectory.")
        if event in TRAJECTORY_EVENTS:
            put(f"trajectory.{event}", "bad", cid, {"yes": 1, "no": 0}.get(value))
    # Friction from the events rules decide (context repair needs a model): any of them in the session.
    rule_events = ("request_replay", "verbatim_replay", "clarification_loop", "session_termination")
    for cid in convs:
        vals = [flags.get(f"trajectory.{e}", ("", {}))[1].get(cid) for e in rule_events]
        put("trajectory.any rule-decided recovery event", "bad", cid,
            1 if any(v == 1 for v in vals) else (0 if all(v == 0 for v in vals) else None))
    blocking = {cid: v for cid, v in flags.get("trajectory.abandonment", ("", {}))[1].items()}
    for cid, v in flags.get("trajectory.frustration", ("", {}))[1].items():
        blocking[cid] = None if v is None or blocking.get(cid) is None else max(v, blocking[cid] or 0)
    for cid, outcome in con.execute(
        "SELECT unit_id, value FROM results WHERE component = 'trajectory' AND metric = 'outcome'"
    ).fetchall():
        o = json.loads(outcome)
        decided = o in ("smooth", "struggled", "blocked", "censored")
        put("trajectory.outcome struggled|blocked", "bad", cid, int(o in ("struggled", "blocked")) if decided else None)
        # Blocked needs only the blocking events (rules): an undetermined friction leaves it decided.
        put("trajectory.outcome blocked", "bad", cid, 1 if o == "blocked" else (0 if blocking.get(cid) == 0 else None))
    # Conduct: per clause, the triggered conversations; a violation is a triggered one whose obligation is "no".
    for cid, item, value in con.execute(
        "SELECT unit_id, item, value FROM atomic_data WHERE layer = 'conversation' AND item LIKE 'conduct.%'"
    ).fetchall():
        _, clause, part = item.split(".", 2)
        if part == "obligation":
            put(f"conduct.{clause} violated", "bad", cid, {"no": 1, "yes": 0}.get(value))
    turn_flags: dict[str, dict[str, list[int | None]]] = defaultdict(lambda: defaultdict(list))
    for cid, _item, value, fact in con.execute(
        "SELECT t.conversation_id, d.item, d.value, d.fact FROM atomic_data d JOIN turns t ON d.unit_id = t.id "
        "WHERE d.layer = 'trace' AND d.item = 'execution.delivered'"
    ).fetchall():
        turn_flags[cid]["failed"].append({"no": 1, "yes": 0}.get(value, 0 if value == "not_applicable" else None))
        turn_flags[cid]["handed_off"].append(int(value == "not_applicable" and json.loads(fact or "null")
                                                 == "handed_off"))
    for cid, complete, injections in con.execute(
        "SELECT t.conversation_id, p.complete, p.injections FROM provenance p JOIN turns t ON p.turn_id = t.id "
        "WHERE t.segment = 'real'"
    ).fetchall():
        turn_flags[cid]["incomplete"].append(int(not complete))
        turn_flags[cid]["injection"].append(int(injections > 0))
    meaning = {"failed": "bad", "handed_off": "neutral", "incomplete": "instrument", "injection": "instrument"}
    label = {"failed": "execution.delivery failed in a turn", "handed_off": "execution.handed off in a turn",
             "incomplete": "provenance.incomplete evidence in a turn",
             "injection": "provenance.injection flagged in a turn"}
    for cid, per in turn_flags.items():
        for key, values in per.items():
            decided = [v for v in values if v is not None]
            put(label[key], meaning[key], cid, (1 if any(decided) else 0) if decided or not values else None)
    con.close()
    return convs, flags


def evaluate(convs: dict[str, dict[str, Any]], flags: dict[str, tuple[str, dict[str, int | None]]], *,
             boot: int) -> list[dict[str, Any]]:
    from agent_factory.evaluators.stats import cluster_auc

    rows: list[dict[str, Any]] = []

    def one(name: str, meaning: str, scores: dict[str, float | None]) -> None:
        keep = [c for c, v in scores.items() if v is not None and c in convs and convs[c]["failed"] is not None]
        auc = cluster_auc([float(scores[c]) for c in keep], [bool(convs[c]["failed"]) for c in keep],  # type: ignore[arg-type]
                          [convs[c]["task"] for c in keep], n_boot=boot, seed=7)
        flagged = sum(1 for c in keep if scores[c])
        other_way = meaning == "bad" and auc.high is not None and auc.high < 0.5
        rows.append({"flag": name, "meaning": meaning, "n": len(keep), "flagged": flagged,
                     "failed_when_flagged": (sum(convs[c]["failed"] for c in keep if scores[c]) / flagged
                                             if flagged else None),
                     "auc": auc.value, "low": auc.low, "high": auc.high, "tasks": auc.clusters,
                     "points_other_way": other_way, "note": auc.note})

    one("baseline: number of messages", "baseline", {c: v["messages"] for c, v in convs.items()})
    one("baseline: database-changing calls", "baseline", {c: float(v["writes"]) for c, v in convs.items()})
    for name in sorted(flags):
        meaning, scores = flags[name]
        if not any(v for v in scores.values()):
            continue  # a flag that never fires says nothing; listed by count below
        one(name, meaning, scores)  # type: ignore[arg-type]
    return rows


def _fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, default=HERE / "out" / "validity")
    ap.add_argument("--boot", type=int, default=2000, help="bootstrap resamples over tasks")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--config", type=Path, default=None,
                    help="agent-factory.toml with models: model-tier items are collected too (rules only without)")
    args = ap.parse_args()
    if not (POLICY.exists() and TRACES.exists()):
        print(f"needs {POLICY} and {TRACES} (../shared/data); not found, nothing measured")
        return 0
    store = prepare(args.workdir, config=args.config)
    convs, flags = collect_flags(store)
    rows = evaluate(convs, flags, boot=args.boot)
    silent = sorted(n for n, (_, s) in flags.items() if not any(v for v in s.values()) and
                    any(v is not None for v in s.values()))
    uncollected = sorted(n for n, (_, s) in flags.items() if all(v is None for v in s.values()))
    if args.json:
        print(json.dumps({"conversations": len(convs), "failed": sum(bool(c["failed"]) for c in convs.values()),
                          "rows": rows, "never_fired": silent, "not_collected": uncollected}, indent=2))
    else:
        failed = sum(bool(c["failed"]) for c in convs.values())
        print(f"{len(convs)} conversations, {failed} failed (reward < 1), "
              f"{len({c['task'] for c in convs.values()})} tasks; AUC against failure, 95% task-clustered bootstrap")
        print(f"{'flag':58} {'meaning':10} {'n':>4} {'flagged':>7} {'P(fail|flag)':>12} {'AUC':>6} {'interval':>15}")
        for r in rows:
            mark = "  <- points the other way" if r["points_other_way"] else ""
            print(f"{r['flag'][:58]:58} {r['meaning']:10} {r['n']:>4} {r['flagged']:>7} "
                  f"{_fmt(r['failed_when_flagged']):>12} {_fmt(r['auc']):>6} "
                  f"{_fmt(r['low'])}-{_fmt(r['high'])}{mark}")
        if silent:
            print(f"collected, never flagged ({len(silent)}): {', '.join(silent)}")
        if uncollected:
            print(f"not collected on any conversation (model-judged; configure a model with --config) "
                  f"({len(uncollected)}): {', '.join(uncollected)}")
    return 1 if any(r["points_other_way"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
