"""Model calls and characters per conversation, counted at a local OpenAI-compatible server.

The real path: `agent-factory ingest` then `agent-factory run` as child processes, the small model (and the
jury) served over HTTP by the counting fake server of the tests (`tests/fakes/openai_server.py`) on
127.0.0.1; no provider is ever reached. Four runs, each on a fresh copy of the ingested store with an empty
cache: the small model alone and with a two-family jury, each with `[collect] batch = "unit"` and
`"conversation"`. Data: the first N tau-bench airline conversations (`../shared/data/tau-bench-airline-gpt4o`)
when present, else (said so) a small simulation.

The fake model (`item_answers` of the collection tests) answers every item from the item's question and its
own evidence only (a hash of them picks value and confidence, about a third of the answers unsure, so the jury
has work), and quotes the first characters of the item's first evidence block: so both batch modes get the
same answers, and the table can tell whether every answer and evidence pointer landed on the turn it is about.

Usage:  .venv/bin/python bench/judge_calls.py [--conversations 10] [--modes unit,conversation] [--label after]
        PYTHONPATH=<a checkout's import root> .venv/bin/python bench/judge_calls.py --modes unit --label before
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TAU = ROOT / ".." / "shared" / "data" / "tau-bench-airline-gpt4o" / "gpt-4o-airline.json"
SMALL = "openai/bench-gpt-small"
JURY = ("openai/bench-qwen-judge", "openai/bench-llama-judge")  # families qwen and meta, from the names

_ITEM = re.compile(r"^- (\S+): (.*)\n  evidence: (.*)$", re.M)
_LAYER = re.compile(r"^Evidence for (\w+(?:, turn by turn)?)", re.M)


def _name(model: str) -> str:
    return model.rpartition("/")[2]


def _cli(*args: str, env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "agent_factory", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"agent-factory {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def _data(n: int, work: Path) -> tuple[Path, str, str]:
    """(input file, pack, what it is)."""
    if TAU.exists():
        records = json.loads(TAU.read_text())[:n]
        path = work / "tau_slice.json"
        path.write_text(json.dumps(records))
        return path, "airline", f"tau-bench airline gpt-4o, first {len(records)} conversations"
    sys.path.insert(0, str(ROOT))
    from agent_factory.factory.simulate import SimConfig, simulate

    simulate(SimConfig(users=max(2, n // 3), seed=1), work / "sim")
    return (work / "sim" / "traces.otlp.jsonl", "business_analysis",
            f"tau-bench data not present at {TAU.resolve()}: the default simulation, {max(2, n // 3)} users")


def _figures(store: Path) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(str(store), read_only=True)
    try:
        convs = con.execute("SELECT count(*) FROM units WHERE layer = 'conversation'").fetchone()[0]
        answered = con.execute(
            "SELECT u.conversation_id, count(DISTINCT d.unit_id) FROM atomic_data d JOIN units u "
            "ON u.unit_id = d.unit_id AND u.layer = d.layer WHERE d.layer = 'trace' AND d.rater = 'primary' "
            "AND d.tier IN ('small_model', 'jury') GROUP BY 1").fetchall()
        data = con.execute(
            "SELECT d.unit_id, d.layer, d.item, d.value, d.tier, d.evidence FROM atomic_data d "
            "WHERE d.rater = 'primary' AND d.tier IN ('small_model', 'jury') ORDER BY 1, 2, 3").fetchall()
        spans = dict(con.execute("SELECT id, trace_id FROM spans").fetchall())
    finally:
        con.close()
    return {"conversations": convs, "answered": dict(answered), "data": data, "spans": spans}


def _pointer_errors(data: list[tuple[Any, ...]], spans: dict[str, str]) -> tuple[int, int]:
    """(pointers of turn data, those citing another turn than the datum's)."""
    total = wrong = 0
    for unit_id, layer, _item, _value, _tier, evidence in data:
        if layer != "trace" or not evidence:
            continue
        for p in json.loads(evidence):
            total += 1
            if p["unit_id"] != unit_id and spans.get(p["unit_id"]) != unit_id:
                wrong += 1
    return total, wrong


def run_case(base: Path, work: Path, server: Any, *, batch: str | None, jury: bool, label: str) -> dict[str, Any]:
    case = work / f"{label}-{batch or 'default'}-{'jury' if jury else 'small'}"
    shutil.rmtree(case, ignore_errors=True)
    case.mkdir(parents=True)
    store = case / "store.duckdb"
    shutil.copy(base, store)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "bench-not-a-key",
           "AGENT_FACTORY_SMALL_MODEL": SMALL, "AGENT_FACTORY_API_BASE": server.base_url,
           "AGENT_FACTORY_JURY": ",".join(JURY) if jury else ""}
    env.pop("AGENT_FACTORY_CONFIG", None)
    if batch is not None:  # None: the code's default, and no config file (a checkout without the option)
        (case / "agent-factory.toml").write_text(f'[collect]\nbatch = "{batch}"\n')
        env["AGENT_FACTORY_CONFIG"] = str(case / "agent-factory.toml")
    server.reset()
    out = json.loads(_cli("run", "--store", str(store), "--cache", str(case / "cache"), "--json", env=env, cwd=case))
    bodies = server.requests
    sent = sum(len(str(m.get("content", ""))) for b in bodies for m in b["messages"])
    received = sum(len(json.dumps(server.responder(b))) for b in bodies)
    by_model = Counter(b["model"].rpartition("/")[2] for b in bodies)
    layers = Counter(m.group(1) for b in bodies
                     if (m := _LAYER.search(str(b["messages"][-1].get("content", "")))) is not None)
    f = _figures(store)
    n = f["conversations"]
    answered = [f["answered"].get(c, 0) for c in sorted(f["answered"])]
    total, wrong = _pointer_errors(f["data"], f["spans"])
    return {
        "label": label, "batch": batch or "default", "jury": jury, "conversations": n, "calls": len(bodies),
        "calls_per_conversation": len(bodies) / n, "small_calls": by_model[_name(SMALL)],
        "jury_calls": sum(by_model[_name(m)] for m in JURY), "calls_by_unit": dict(layers),
        "answered_turns_mean": statistics.mean(answered or [0]),
        "chars_sent_per_conversation": sent / n, "chars_received_per_conversation": received / n,
        "model_data": len(f["data"]), "pointers": total, "pointers_on_another_turn": wrong,
        "values": {(u, layer, i): v for u, layer, i, v, _t, _e in f["data"]},
        "run_model_calls": out.get("model_calls"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=10)
    ap.add_argument("--modes", default="unit,conversation",
                    help="batch modes to run (comma-separated); `default`: the code's default, no config file")
    ap.add_argument("--label", default="after")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="judge-calls-"))
    work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from tests.evaluators.test_collect_support import item_answers
    from tests.fakes.openai_server import FakeOpenAIServer

    src, pack, what = _data(args.conversations, work)
    print(f"data: {what}", flush=True)
    base = work / "ingested.duckdb"
    base.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_FACTORY_")}
    _cli("ingest", str(src), "--pack", pack, "--store", str(base), env=env, cwd=work)
    rows = []
    with FakeOpenAIServer(responder=item_answers) as server:
        for jury in (False, True):
            for mode in args.modes.split(","):
                r = run_case(base, work, server, batch=None if mode == "default" else mode, jury=jury,
                             label=args.label)
                rows.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != "values"}), flush=True)
    print()
    print(f"{'code':>7} {'batch':>12} {'models':>12} {'convs':>5} {'A mean':>6} {'calls/conv':>10} {'small':>6} "
          f"{'jury':>5} {'sent chars/conv':>15} {'recv chars/conv':>15} {'data':>5} {'pointers':>8} {'off-turn':>8}")
    for r in rows:
        print(f"{r['label']:>7} {r['batch']:>12} {'small+jury' if r['jury'] else 'small':>12} {r['conversations']:>5} "
              f"{r['answered_turns_mean']:>6.1f} {r['calls_per_conversation']:>10.1f} {r['small_calls']:>6} "
              f"{r['jury_calls']:>5} {r['chars_sent_per_conversation']:>15,.0f} "
              f"{r['chars_received_per_conversation']:>15,.0f} {r['model_data']:>5} {r['pointers']:>8} "
              f"{r['pointers_on_another_turn']:>8}")
    for jury in (False, True):
        same = [r for r in rows if r["jury"] == jury]
        for a, b in zip(same, same[1:], strict=False):
            keys = set(a["values"]) | set(b["values"])
            differ = sum(a["values"].get(k) != b["values"].get(k) for k in keys)
            print(f"{'small+jury' if jury else 'small'}: {a['batch']} vs {b['batch']}: {len(keys)} model data, "
                  f"{differ} with another value")


if __name__ == "__main__":
    main()
