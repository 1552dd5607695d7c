"""Outcomes used: outcome events joined to units, and each flag's association with each outcome.

An outcome event (a task reward, explicit feedback, a task success) is tied to a conversation, or only to a
user. A conversation takes the latest numeric value of each kind tied to it; its turns and spans inherit it; a
user takes the mean over its conversations' values and the events tied to it alone. Non-numeric values
(free text) are left out; booleans count as 1 / 0.

For each flag and outcome: the outcome's mean on the units with the flag raised and on those checked without
it, their difference, and a user-clustered 95% interval (`stats.cluster_mean_difference`; the cluster is the
unit's user: tau-bench's trials of one task share their customer). Undecided units (None) are left out. The
interval holds for small groups and groups without variation (Newcombe's score interval for an outcome in
[0, 1]); below `MIN_GROUP_N` units on a side none is given, with the note "n too small".
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from agent_factory.adapters.model import OutcomeEvent
from agent_factory.evaluators.core.flags import FlagSpec, Meaning
from agent_factory.evaluators.findings.flags import FlagRow, Level, UnitKey, level_units
from agent_factory.evaluators.stats.association import cluster_mean_difference
from agent_factory.frozen import Frozen

VERSION = "2"
MIN_SIDE = 1
"""Units each side needs for an association to be computed at all (the interval says how little 1 is)."""
MIN_GROUP_N = 4
"""Units each side needs for an interval: the smallest n at which a side's own rate can be told from a coin
flip. Below it the 95% Wilson interval of even 0 of n or n of n still holds 0.5 (its far end is
z^2 / (n + z^2): 0.56 at n = 3, 0.49 at n = 4), so the side says nothing of its rate and a difference built on
it nothing the reader can use."""
TOO_SMALL = f"n too small: fewer than {MIN_GROUP_N} units on a side, no interval"
"""The note of an association whose interval is withheld for `MIN_GROUP_N`."""


def numeric(value: float | str | bool | None) -> float | None:
    """An outcome value as a number: booleans 1 / 0, numbers as they are, numeric text parsed; else None."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return 1.0 if text == "true" else 0.0
        try:
            x = float(text)
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    return None


def unit_outcomes(events: Iterable[OutcomeEvent], units: Sequence[UnitKey], *,
                  level: Level) -> dict[str, dict[str, float]]:
    """Outcome kind -> unit id (of `level`) -> value (module docstring). Events come in time order."""
    per_conv: dict[str, dict[str, float]] = defaultdict(dict)
    user_only: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    conv_user: dict[str, str | None] = {}
    for e in events:
        x = numeric(e.value)
        if x is None:
            continue
        if e.conversation_id is not None:
            per_conv[e.kind][e.conversation_id] = x  # the latest wins
            conv_user[e.conversation_id] = e.user_id
        elif e.user_id is not None:
            user_only[e.kind][e.user_id].append(x)
    out: dict[str, dict[str, float]] = {}
    for kind in sorted({*per_conv, *user_only}):
        convs = per_conv.get(kind, {})
        if level == "user":
            users_of = {u.conversation_id: u.user_id for u in units if u.layer == "conversation"}
            pooled: dict[str, list[float]] = defaultdict(list)
            for cid, x in convs.items():
                uid = users_of.get(cid) or conv_user.get(cid)
                if uid is not None:
                    pooled[uid].append(x)
            for uid, xs in user_only.get(kind, {}).items():
                pooled[uid].extend(xs)
            values = {uid: sum(xs) / len(xs) for uid, xs in pooled.items()}
        else:
            values = {u.unit_id: convs[u.conversation_id] for u in level_units(units, level)
                      if u.conversation_id is not None and u.conversation_id in convs}
        if values:
            out[kind] = values
    return out


class Association(Frozen):
    """One flag against one outcome at one level: the outcome with and without the flag."""

    flag: str
    """The flag id."""
    component: str
    """The component that raises it."""
    label: str
    """The flag's label."""
    meaning: Meaning
    """What the flag says (`bad`, `descriptive`, `instrument`)."""
    outcome: str
    """The outcome event kind (`task_reward`)."""
    level: Level
    """The units compared."""
    mean_with: float | None
    """Mean outcome of the units with the flag raised."""
    mean_without: float | None
    """Mean outcome of the units checked without it."""
    overall: float | None
    """Mean outcome of every unit with the outcome (flag decided or not)."""
    diff: float | None
    """mean_with - mean_without."""
    low: float | None
    """Lower end of the 95% interval of `diff` (user-clustered; None below `MIN_GROUP_N` units on a side)."""
    high: float | None
    """Upper end of that interval."""
    n_with: int
    """Units with the flag and the outcome."""
    n_without: int
    """Units checked without the flag, with the outcome."""
    n_clusters: int
    """Users holding those units."""
    undecided: int
    """Units with the outcome whose flag is undecided (left out)."""
    note: str | None = None
    """Why the interval is missing, when it is."""


def associations(specs: Sequence[FlagSpec], rows: Sequence[FlagRow], outcomes: Mapping[str, Mapping[str, float]],
                 *, level: Level, confidence: float = 0.95) -> list[Association]:
    """Every flag raised on at least `MIN_SIDE` units with an outcome (and checked clear on as many) against
    every outcome kind, in spec order then outcome kind. `rows` are the flag rows of `level`'s units."""
    spec_of = {s.id: s for s in specs}
    per_flag: dict[str, list[FlagRow]] = defaultdict(list)
    for r in rows:
        per_flag[r.flag].append(r)
    out: list[Association] = []
    for s in specs:
        flag_rows = per_flag.get(s.id, [])
        for kind, values in outcomes.items():
            decided = [r for r in flag_rows if r.value is not None and r.unit_id in values]
            with_flag = sum(1 for r in decided if r.value == 1)
            if with_flag < MIN_SIDE or len(decided) - with_flag < MIN_SIDE:
                continue
            undecided = sum(1 for r in flag_rows if r.value is None and r.unit_id in values)
            md = cluster_mean_difference(
                [values[r.unit_id] for r in decided], [r.value == 1 for r in decided],
                [r.user_id if r.user_id is not None else r.unit_id for r in decided], confidence=confidence)
            overall = [values[u] for u in {r.unit_id for r in flag_rows} if u in values]
            low, high, note = md.low, md.high, md.note
            if min(md.n_with, md.n_without) < MIN_GROUP_N:
                low, high, note = None, None, TOO_SMALL
            spec = spec_of[s.id]
            out.append(Association(
                flag=spec.id, component=spec.component, label=spec.label, meaning=spec.meaning, outcome=kind,
                level=level, mean_with=md.mean_with, mean_without=md.mean_without,
                overall=sum(overall) / len(overall) if overall else None, diff=md.diff, low=low, high=high,
                n_with=md.n_with, n_without=md.n_without, n_clusters=md.n_clusters, undecided=undecided,
                note=note))
    return out
