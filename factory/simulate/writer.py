"""`simulate`: draw the population account by account and stream traces and truth to disk.

Real users come first (each with its suggestion clicks), then internal, test and probe accounts, whose turn
counts are set from the real turns actually drawn so the non-real share lands on its target. Every file is
written to a temporary name and renamed at the end, so a crash never leaves a half-written set behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

import numpy as np

from agent_factory.factory.ingest.files import IGNORE_FILE
from agent_factory.factory.simulate.config import SimConfig, derive
from agent_factory.factory.simulate.plan import Segment, TurnPlan
from agent_factory.factory.simulate.population import Population
from agent_factory.factory.simulate.traces import otlp_line
from agent_factory.factory.simulate.truth import Tally
from agent_factory.frozen import Frozen

TRACES = "traces.otlp.jsonl"
TRUTH = "truth.jsonl"
TRUTH_SUMMARY = "truth_summary.json"
TRUTH_SESSIONS = "truth_sessions.jsonl"
CONFIG = "config.json"

ProgressFn = Callable[[int, int], None]


class SimSummary(Frozen):
    """What a simulation wrote: its files and the counts of what they hold."""

    files: dict[str, str]
    """Output files by role (`traces`, `truth`, `truth_sessions`, `truth_summary`, `config`), as paths."""
    users: int
    """Real users."""
    accounts: int
    """Non-real accounts (internal, test, probe identities)."""
    raw_turns: int
    """Every turn written, real or not."""
    real_turns: int
    """Turns of real traffic."""
    sessions: int
    """Sessions of real traffic."""
    raw_sessions: int
    """Every session written."""
    spans: int
    """Every span written (roots included)."""
    real_spans: int
    """Spans of real turns, roots included."""
    real_step_spans: int
    """Step spans of real turns (roots excluded): the study's span count (22,884 for 8,537 turns)."""
    steps_per_real_turn: float
    """`real_step_spans / real_turns` (study: 3.31)."""
    segment_turns: dict[str, int]
    """Turns per traffic segment: real, internal, test, suggestion, synthetic."""
    planted: dict[str, int]
    """Planted defect items by kind (empty when none were planted)."""


def _split(total: int, weights: list[float]) -> list[int]:
    """`total` split in proportion to `weights`, largest remainders first (sums exactly to `total`)."""
    s = sum(weights)
    if total <= 0 or s <= 0:
        return [0] * len(weights)
    raw = [total * w / s for w in weights]
    out = [int(x) for x in raw]
    for i in sorted(range(len(raw)), key=lambda i: (out[i] - raw[i], i))[: total - sum(out)]:
        out[i] += 1
    return out


def _json_line(out: IO[str], record: dict[str, Any]) -> None:
    out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    out.write("\n")


def _write_account(sessions: Iterable[list[TurnPlan]], rng: np.random.Generator, tally: Tally,
                   traces: IO[str], truth: IO[str], truth_sessions: IO[str]) -> None:
    for turns in sessions:
        counts = []
        for tp in turns:
            line, n = otlp_line(tp, rng)
            traces.write(line)
            traces.write("\n")
            counts.append(n)
        records, session = tally.add_session(turns, counts)
        for rec in records:
            _json_line(truth, rec)
        if session is not None:
            _json_line(truth_sessions, session)


def _other_accounts(c: SimConfig, n_real: int, per_real: float) -> Iterator[tuple[Segment, int, int]]:
    """(segment, account index, turns) for internal, test and probe accounts."""
    total = round(n_real * per_real)
    by_segment = _split(total, [c.internal_turn_share, c.test_turn_share, c.synthetic_turn_share])
    for segment, turns, accounts in zip(("internal", "test", "synthetic"), by_segment,
                                        (c.internal_accounts, c.test_accounts, c.probe_accounts), strict=True):
        for i, n in enumerate(_split(turns, [1.0] * accounts)):
            if n:
                yield segment, i, n  # type: ignore[misc]


def simulate(config: SimConfig, out_dir: Path, *, progress: ProgressFn | None = None) -> SimSummary:
    """Simulate `config.users` real users plus non-real traffic; write traces, truth and config to `out_dir`.

    `progress(done, total)` is called after each real user (total = `config.users`).
    """
    d = derive(config)
    pop = Population(config, d)
    tally = Tally(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = {"traces": TRACES, "truth": TRUTH, "truth_sessions": TRUTH_SESSIONS, "truth_summary": TRUTH_SUMMARY,
             "config": CONFIG}
    tmp = {k: out_dir / f".{v}.tmp" for k, v in names.items()}
    with ExitStack() as stack:
        traces = stack.enter_context(tmp["traces"].open("w", encoding="utf-8", newline="\n"))
        truth = stack.enter_context(tmp["truth"].open("w", encoding="utf-8", newline="\n"))
        sessions = stack.enter_context(tmp["truth_sessions"].open("w", encoding="utf-8", newline="\n"))
        for i in range(config.users):
            tally.begin_user()
            rng = np.random.default_rng([config.seed, 2, 0, i])
            _write_account(pop.real_user(i), rng, tally, traces, truth, sessions)
            tally.end_user(real=True)
            if progress is not None:
                progress(i + 1, config.users)
        codes = {"internal": 1, "test": 2, "synthetic": 4}
        for segment, i, n in _other_accounts(config, tally.cnt["turns.real"], d.other_nonreal_per_real):
            tally.begin_user()
            rng = np.random.default_rng([config.seed, 2, codes[segment], i])
            _write_account(pop.other_account(segment, i, n), rng, tally, traces, truth, sessions)
            tally.end_user(real=False)
    summary = tally.summary()
    tmp["truth_summary"].write_text(json.dumps(summary, ensure_ascii=False, indent=2, sort_keys=True) + "\n",
                                    encoding="utf-8")
    tmp["config"].write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    for k, v in names.items():
        os.replace(tmp[k], out_dir / v)
    # Ingesting the directory reads the traces only: the other files are the simulation's truth and settings.
    (out_dir / IGNORE_FILE).write_text(
        "# Written by agent-factory simulate: ground truth and settings, not traces.\n"
        + "".join(f"{v}\n" for k, v in names.items() if k != "traces"), encoding="utf-8")
    p: dict[str, Any] = summary["population"]
    return SimSummary(
        files={k: str(out_dir / v) for k, v in names.items()}, users=p["users"], accounts=p["accounts"],
        raw_turns=p["raw_turns"], real_turns=p["real_turns"], sessions=p["sessions"],
        raw_sessions=p["raw_sessions"], spans=p["spans"], real_spans=p["real_spans"],
        real_step_spans=p["real_step_spans"], steps_per_real_turn=p["steps_per_real_turn"] or 0.0,
        segment_turns=p["segment_turns"], planted=summary["planted"],
    )
