"""Injection-scan benchmark: recall and false alarms on corpora, scan time and flags on real and simulated traffic.

Usage:  .venv/bin/python bench/injection_bench.py [--corpus PATH ...] [--traffic PATH ...] [--simulate 200]
                                                  [--pack default] [--workdir bench/out]

- Corpora: the project's (tests/evaluators/data/injection_corpus.yaml) and any `--corpus` YAML of the same form
  (held-out sets kept outside the repository): recall on `attacks`, false-alarm rate on `benign`, per language
  and role and per family (with what the rules left to a model), and every miss and false alarm.
- Traffic: each `--traffic` file or directory (e.g. ../shared/data/tau-bench-airline-gpt4o, ../shared/data/trail/
  traces), and `--simulate N` users of simulated business-analysis traffic, is ingested into a scratch store in a
  fresh child process; the child reports the ingest time, then scans every turn again (`scan_turn`, then
  `scan_turn_suspects`) and reports the scan time (cold: the scan's per-text memo emptied first), the texts and
  characters scanned, the flagged turns (with what flagged them: on real traffic these are false alarms, unless
  the source holds attacks) and the turns the rules would leave to a model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from common import child_json  # noqa: E402

CHILD = r"""
import json, sys, time
from pathlib import Path
from agent_factory.evaluators.provenance import scan_turn, scan_turn_suspects
from agent_factory.factory.ingest.files import ingest_paths
from agent_factory.factory.store import Store
from agent_factory.factory.pipeline.units import iter_user_units
from agent_factory.knowledge_packs import load_pack
src, store, pack = Path(sys.argv[1]), Path(sys.argv[2]), load_pack(sys.argv[3])
t0 = time.perf_counter()
with Store(store) as st:
    rep = ingest_paths(st, [src], pack=pack)
    ingest = time.perf_counter() - t0
    turns = []
    for u in iter_user_units(st, window_days=pack.thresholds.window_days, horizon=st.horizon()):
        turns += list(u.excluded) + [t for c in (u.view.conversations if u.view else ()) for t in c.turns]
texts = [x for t in turns for x in (t.request, t.answer, *(y for s in t.spans for y in (s.input, s.output))) if x]
from agent_factory.evaluators.core.memo import run_memos
from agent_factory.evaluators.provenance import normalize
normalize.normalize.cache_clear()
with run_memos():  # cold: fresh memo tables (ingest scanned these texts already, and its memo would answer)
    t1 = time.perf_counter()
    flagged = [(t.id, [(f.pattern_id, f.matched_text[:80]) for f in fl]) for t in turns if (fl := scan_turn(t, pack))]
    scan = time.perf_counter() - t1
    suspects = [(t.id, [(f.pattern_id, f.matched_text[:80]) for f in fl]) for t in turns
                if (fl := scan_turn_suspects(t, pack))]
print(json.dumps({"records": rep.read, "turns": len(turns), "texts": len(texts), "chars": sum(map(len, texts)),
                  "ingest_seconds": round(ingest, 3), "scan_seconds": round(scan, 3),
                  "flagged_turns": len(flagged), "flags": flagged[:20], "suspect_turns": len(suspects),
                  "suspects": suspects[:20]}))
"""


def corpus_report(path: Path, pack_name: str) -> None:
    sys.path.insert(0, str(ROOT))
    from agent_factory.knowledge_packs import load_pack
    from tests.evaluators.injection_corpus import describe, load, score

    s = score(load(path), load_pack(pack_name))
    print(s.summary(str(path)))
    print(s.table())
    for e, suspects in s.missed:
        print("  missed:", describe(e), "(left to a model)" if suspects else "")
    for e, flags in s.false_alarms:
        print("  false alarm:", describe(e, flags))


def traffic_report(src: Path, workdir: Path, pack_name: str) -> None:
    store = workdir / f"injection-bench-{src.name}.duckdb"
    if store.exists():
        store.unlink()
    r = child_json(CHILD, str(src), str(store), pack_name)
    store.unlink()
    print(f"{src}: {r['turns']} turns, {r['texts']} texts, {r['chars']:,} chars; ingest {r['ingest_seconds']} s, "
          f"scan {r['scan_seconds']} s; flagged turns {r['flagged_turns']}; left to a model {r['suspect_turns']}")
    for turn_id, flags in r["flags"]:
        print(f"  {turn_id}: {flags}")
    for turn_id, flags in r["suspects"]:
        print(f"  {turn_id} (suspect): {flags}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, action="append", default=[], help="more corpora (YAML) to score")
    ap.add_argument("--traffic", type=Path, action="append", default=[], help="files or directories to ingest")
    ap.add_argument("--simulate", type=int, default=0, help="also simulate this many users and ingest them")
    ap.add_argument("--pack", default="default", help="knowledge pack for corpora and real traffic")
    ap.add_argument("--workdir", type=Path, default=HERE / "out")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from tests.evaluators.injection_corpus import CORPUS

    for path in (CORPUS, *args.corpus):
        corpus_report(path, args.pack)
    for src in args.traffic:
        traffic_report(src, args.workdir, args.pack)
    if args.simulate:
        from agent_factory.factory.simulate import SimConfig, simulate

        out = args.workdir / f"sim-{args.simulate}"
        simulate(SimConfig(users=args.simulate, seed=1), out)
        traffic_report(out, args.workdir, "business_analysis")


if __name__ == "__main__":
    main()
