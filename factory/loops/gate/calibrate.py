"""`gate calibrate`: the gate checked on the baseline alone, before anyone trusts it (docs/method.md section 7).

1. A/A: the baseline's users split at random into halves (4,000 times by default); each metric's threshold is
   calibrated on half of the splits so that the family false-alarm rate (any metric of any component) is 5%, and
   measured on the other half; the per-turn test's family rate is reported beside it
   (`evaluators.gate.calibrate`).
2. Power: seeded defects in half the users (blank the answer, resend the previous request, insert a disclosure
   sentence, insert the template, scale latency). The rules run once per defect kind over every unit
   (`defects.defected_columns`), and the draws are vectorized mixtures over users (`evaluators.gate.power`):
   never one pipeline run per draw.
3. The calibration is stored in the baseline's store under a key of the baseline's data, the suite's measures and
   the gate's version (`calibration_key`); `gate` reuses it until one of them changes.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np

from agent_factory.evaluators.core.registry import ComponentSpec
from agent_factory.evaluators.gate.columns import GateColumns
from agent_factory.evaluators.gate.model import VERSION, CalibrationReport, DefectPower, PowerReport
from agent_factory.factory.loops.gate.data import Side, gate_measures, load_side
from agent_factory.factory.store import Store
from agent_factory.knowledge_packs import KnowledgePack


def calibration_key(columns: GateColumns, *, suite: str | None) -> str:
    """A digest of what a calibration depends on: the gate's version, the measures (their keys and directions),
    the suite, and the baseline's per-user statistics (so new baseline traffic, or a changed rule, recalibrates)."""
    h = hashlib.sha256()
    h.update(f"{VERSION}|{suite or ''}|".encode())
    for m in columns.measures:
        h.update(f"{m.key}:{m.metric.worse}:{m.scale};".encode())
    h.update("|".join(columns.users).encode())
    stats = np.ascontiguousarray(np.round(columns.user_stats(), 9))
    h.update(stats.tobytes())
    return h.hexdigest()[:16]


def run_calibration(store: Store, *, side: Side, pack: KnowledgePack, components: Sequence[ComponentSpec],
                    suite: str | None, splits: int = 4000, draws: int = 300, seed: int = 0, power: bool = True,
                    on_progress: Callable[[str], None] | None = None) -> CalibrationReport:
    """Calibrate the gate on `side` of `store` (already run with the suite) and record it there."""
    from agent_factory.evaluators.gate.calibrate import calibrate
    from agent_factory.factory.store.gate import record_calibration

    started = time.monotonic()
    say = on_progress or (lambda _msg: None)
    measures = gate_measures(pack, components)
    cols = load_side(store, side, measures)
    user_stats = cols.user_stats()
    sign = np.array([m.sign for m in measures], dtype=np.float64)
    say(f"A/A: {splits:,} splits of {len(cols.users):,} users over {len(measures)} metrics")
    thresholds, aa = calibrate(user_stats, sign, splits=splits, seed=seed, keys=cols.keys)
    power_report = None
    if power:
        power_report = _power(store, side, cols, pack, components, thresholds, draws=draws, seed=seed, say=say)
    report = CalibrationReport(
        key=calibration_key(cols, suite=suite), baseline=side.label, suite=suite, users=len(cols.users),
        measures=cols.keys, thresholds=thresholds, aa=aa, power=power_report,
        seconds=round(time.monotonic() - started, 2), at=datetime.now(UTC).isoformat(timespec="seconds"))
    record_calibration(store, report)
    return report


def _power(store: Store, side: Side, clean: GateColumns, pack: KnowledgePack, components: Sequence[ComponentSpec],
           thresholds: dict[str, float], *, draws: int, seed: int, say: Callable[[str], None]) -> PowerReport:
    from agent_factory.factory.loops.gate.defects import DEFECTS, defect_power, defected_sides

    out: dict[str, DefectPower] = {}
    say(f"power: one rules pass per defect ({', '.join(DEFECTS)})")
    for kind, defected in defected_sides(store, side, clean.measures, pack, components, DEFECTS,
                                         clean=clean).items():
        say(f"power: {kind} ({draws} draws per strength)")
        out[kind] = defect_power(clean, defected, thresholds, kind=kind, draws=draws, seed=seed)
    return PowerReport(defects=out)


__all__ = ["calibration_key", "run_calibration"]
