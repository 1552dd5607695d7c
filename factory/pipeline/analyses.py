"""A run's analyses over one group's observations, as `results` rows: in this process, or in forked workers.

Analyses are pure, CPU-bound Python, and each reads the whole group's observations (at 10x the default
simulation, 500k unit rows and some 20 s of work while the collection's workers sit idle). A worker forked after
this process loaded the observations inherits them, so nothing is sent but the analysis's index. What comes back
is that analysis's results as `results` rows in Arrow, made in the worker: results are many small models, and
pickling the 89k results of `trajectory.outcome` at 10x took 2.4 s, as long as computing them. The tables come
back in the analyses' order, so what is merged does not depend on which worker was faster.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence

import pyarrow as pa

from agent_factory.evaluators import kernel
from agent_factory.evaluators.core import Analysis, Observations, Result
from agent_factory.factory.executors.process import ProcessExecutor
from agent_factory.knowledge_packs import KnowledgePack

MIN_ROWS_FOR_WORKERS = 100_000
"""Below this many unit rows in a group, its analyses run in this process: forking costs more than they take
(at the default simulation, whose largest group holds 50k rows, both ways took 2.6-3.1 s;
at 10x, 21 s against 28)."""


def analyse_group(
    obs: Observations, analyses: Sequence[Analysis], pack: KnowledgePack, *,
    to_table: Callable[[list[Result]], pa.Table], workers: int, min_rows: int = MIN_ROWS_FOR_WORKERS,
) -> list[pa.Table]:
    """Each analysis's results over `obs` as one table (`to_table`: `store.results.result_table`), in the order
    of `analyses`: in `workers` forked processes when there are at least two analyses and `min_rows` unit rows,
    else here."""
    def one(k: int) -> pa.Table:
        return to_table(kernel.analyse(obs, analyses[k:k + 1], pack))

    rows = sum(len(layer) for layer in obs.rows.values())
    if workers < 2 or len(analyses) < 2 or rows < min_rows:
        return [one(k) for k in range(len(analyses))]
    tables: list[pa.Table] = []
    # Frozen, the observations are never walked by the workers' collector passes, which would write to every
    # object's header and so copy every page of them into each worker.
    gc.freeze()
    try:
        ProcessExecutor[int, pa.Table](workers=min(workers, len(analyses))).run(
            ((k, 0) for k in range(len(analyses))), work=one, sink=tables.append)
    finally:
        gc.unfreeze()
    return tables


__all__ = ["MIN_ROWS_FOR_WORKERS", "analyse_group"]
