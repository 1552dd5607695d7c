"""The audit's stratified sample (docs/method.md section 6), pure: same candidates and seed, same sample.

A candidate is a (unit, component) pair: the audit re-collects every item of that component on that unit. Strata
are (component, layer, stratum), the stratum being the unit's traffic segment; the *hard* units of a component and
layer (an item the cascade sent to a model, a rule that abstained, an uncollected datum) form a stratum of their
own, `hard`, which is oversampled: it gets `hard_share` of the draws its component and layer receive (each
component and layer an equal share of the sample), where the rest is spread over the other strata in proportion to
their size. Each drawn unit carries its weight
`w_h = N_h / n_h`, so a weighted mean over the sample estimates the population's without the oversampling's bias.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from agent_factory.evaluators.audit.model import SampleSummary, Stratum

VERSION = "1"

HARD = "hard"
"""The stratum of a component's and layer's hard units."""
MIN_PER_STRATUM = 2
"""Draws every non-empty stratum gets at least (when it has that many units): an estimate needs two per stratum
for a variance, and a small stratum must not vanish from the audit by rounding."""


class Candidate(NamedTuple):
    """A (unit, component) pair the audit may re-collect."""

    unit_id: str
    """The unit."""
    user: str
    """Its user (cluster)."""
    layer: str
    """Its layer."""
    component: str
    """The component whose items would be re-collected."""
    stratum: str
    """Its traffic segment (`real`, `synthetic`, ...; `all` when unknown)."""
    hard: bool
    """Whether the cascade found it hard (a model answered, a rule abstained, a datum uncollected)."""


class Drawn(NamedTuple):
    """A drawn candidate and its sampling weight."""

    unit_id: str
    """The unit."""
    user: str
    """Its user."""
    layer: str
    """Its layer."""
    component: str
    """The component."""
    stratum: str
    """The stratum it was drawn from (`hard` for an oversampled hard unit)."""
    weight: float
    """w_h = N_h / n_h."""


def _rng(seed: int, key: tuple[str, str, str]) -> np.random.Generator:
    """A generator for one stratum from the seed and the stratum's name, so adding a stratum moves no other's draws."""
    h = hashlib.sha256(repr((seed, key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


def _allocate(sizes: dict[str, int], budget: int, *, floor: int = MIN_PER_STRATUM,
              proportional: bool = True) -> dict[str, int]:
    """Draws per stratum for `budget` draws: `floor` each (capped by its size), the rest in proportion to size
    (or in equal shares, without `proportional`) by largest remainders, never more than a stratum holds: what a
    stratum cannot take goes to the others."""
    out = {k: min(n, floor) for k, n in sizes.items()}
    left = budget - sum(out.values())
    while left > 0:
        room = {k: sizes[k] - out[k] for k in sizes if sizes[k] > out[k]}
        if not room:
            break
        total = sum(room.values()) if proportional else len(room)
        shares = {k: left * (r if proportional else 1) / total for k, r in room.items()}
        floors = {k: min(room[k], math.floor(s)) for k, s in shares.items()}
        given = sum(floors.values())
        if given == 0:  # fewer draws left than strata with room: the largest remainders get one each
            for k in sorted(room, key=lambda k: (-shares[k], k))[:left]:
                floors[k] = 1
            given = sum(floors.values())
        for k, f in floors.items():
            out[k] += f
        left -= given
    return out


def draw_sample(candidates: Sequence[Candidate], *, size: int, seed: int,
                hard_share: float = 0.5) -> tuple[list[Drawn], SampleSummary]:
    """About `size` candidates in all (at least MIN_PER_STRATUM per stratum when it holds them), split in equal
    shares over the components and layers (agreement is measured per item, so a component of few units needs as
    many as one of many; what a small one cannot take goes to the others), the hard units of each oversampled to
    `hard_share` of its draws. Deterministic in (candidates, size, seed); the order of `candidates` does not matter."""
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    if not 0.0 <= hard_share <= 1.0:
        raise ValueError(f"hard_share must be within [0, 1], got {hard_share}")
    groups: dict[tuple[str, str], dict[str, list[Candidate]]] = defaultdict(lambda: defaultdict(list))
    for c in candidates:
        groups[(c.component, c.layer)][HARD if c.hard else c.stratum].append(c)
    budgets = _allocate({f"{c}\x1f{layer}": sum(len(v) for v in m.values()) for (c, layer), m in groups.items()},
                        size, floor=0, proportional=False)
    drawn: list[Drawn] = []
    strata: list[Stratum] = []
    for (component, layer) in sorted(groups):
        members = groups[(component, layer)]
        budget = budgets[f"{component}\x1f{layer}"]
        hard = len(members.get(HARD, ()))
        hard_budget = min(hard, max(min(hard, MIN_PER_STRATUM), round(budget * hard_share))) if hard else 0
        rest = {k: len(v) for k, v in members.items() if k != HARD}
        counts = _allocate(rest, max(budget - hard_budget, 0)) if rest else {}
        if hard:
            counts[HARD] = hard_budget
        for stratum in sorted(members):
            pool = sorted(members[stratum], key=lambda c: c.unit_id)
            n = counts.get(stratum, 0)
            picks: list[int] = (_rng(seed, (component, layer, stratum)).choice(len(pool), size=n, replace=False)
                                .tolist() if n else [])
            weight = len(pool) / n if n else None
            strata.append(Stratum(component=component, layer=layer, stratum=stratum, population=len(pool),
                                  sampled=n, weight=weight))
            for i in sorted(picks):
                c = pool[i]
                drawn.append(Drawn(c.unit_id, c.user, c.layer, c.component, stratum, float(weight or 0.0)))
    return drawn, SampleSummary(seed=seed, size=len(drawn), strata=tuple(strata))


__all__ = ["HARD", "MIN_PER_STRATUM", "Candidate", "Drawn", "draw_sample"]
