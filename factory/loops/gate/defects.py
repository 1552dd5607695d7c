"""Seeded defects for the gate's power (docs/method.md section 7): every eligible unit of a side rewritten the
way a broken agent version would log it, and the gated measures recollected over them, in memory.

The five defects are the study's (and the simulator's planted ones, `factory.simulate.defects`):

- `blank`: a delivered answer emptied (answer "", delivery `failed_empty`: what ingest settles an empty answer
  to, so the delivery rule reads a failed, empty answer);
- `replay`: a later turn's request replaced by the previous turn's request in its conversation. Only turns at
  odd positions (1, 3, ...) are rewritten, so that the turn a rewritten one resends is never rewritten itself:
  each defected row is exactly "this message resends the one before", whichever other rows a draw defects;
- `disclosure`: a sentence naming the operator appended to a delivered answer: an example of the pack's
  disclosure lexicon (so it is what the pack itself calls a disclosure, for any agent), in the answer's script
  where the pack has one; the simulator's sentence when the pack has no disclosure lexicon;
- `template`: a delivered answer opened with the file-summary template's heading (the simulator's text);
- `latency`: every timed turn's latency multiplied by `factor`.

`defected_sides` (`defected_columns` for one defect) runs ONE rules pass per defect over every unit of the side
with the defect applied to every eligible unit: the kernel's `collect` with a rules-only cascade, only the
definitions of the items the measures read, on their layers only, in forked workers (`ProcessExecutor`, each
chunk of users' units built once for every defect). A unit the defect left as it was keeps its stored data (a
rule reads its own unit, a turn's rules no other turn), so only changed units are collected (`changed_units`).
Each measure row so has a clean (y0, x0), the stored run's, and a defected (y1, x1); the power's draws
(`evaluators.gate.power`) mix the two per row: never a pipeline run per draw. Nothing is written. On the default
simulation (1,136 users, 22 measures) the five passes take ~31 CPU-seconds together (alone, each with ~2 s of
reading and building units: blank 7, replay 4.4, disclosure 9.2, template 9.4, latency 9.4), most of it Conduct's
clause rules over ~8,000 changed turns; `gate calibrate` as a whole took 29 s on two cores.

Latency's strengths are factors, and the rules pass runs once, at `LATENCY_REFERENCE`. A latency measure is a
mean of log latencies, and log(latency * f) = log(latency) + log f, so a row at factor f is the clean row plus
log(f) / log(reference) of its defected change: exact for the log measures. A measure that reads latency
through a threshold (a fast-answer band) gets the same linear-in-log-factor share of each row's change, an
approximation of its cross-talk (`evaluators.gate.power.power`, `scale_from`).

Model-collected items are recollected by rules only: on a changed unit where the stored run had a model
decide, the defected datum is uncollected and the row leaves the measure (a rules-only suite, as the default
simulation's, is exact).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from agent_factory.adapters.model import Conversation, EvidencePointer, Turn
from agent_factory.evaluators import kernel
from agent_factory.evaluators.collect import Cascade
from agent_factory.evaluators.collect.tiers import RuleTier
from agent_factory.evaluators.core import AtomicDatum, ComponentSpec, DataDefinition, EngagementView, Layer, UnitRow
from agent_factory.evaluators.core.columns import DataColumns, UnitInput
from agent_factory.evaluators.core.gate import GateMeasure
from agent_factory.evaluators.core.memo import run_memos
from agent_factory.evaluators.core.registry import Unit, cluster_of
from agent_factory.evaluators.gate.columns import GateColumns, MeasureRows
from agent_factory.evaluators.gate.model import DefectPower
from agent_factory.evaluators.gate.power import align, power
from agent_factory.evaluators.kernel import CollectPlan, DatumBatch, UserUnits
from agent_factory.factory.executors.process import ProcessExecutor, can_fork, default_workers
from agent_factory.factory.loops.gate.data import Side, load_side
from agent_factory.factory.pipeline.engine import definitions_by_layer
from agent_factory.factory.pipeline.parallel import CHUNK_TURNS, MIN_USERS_FOR_WORKERS
from agent_factory.factory.pipeline.units import UnitContext, unit_context
from agent_factory.factory.simulate import texts
from agent_factory.factory.simulate.config import SimConfig
from agent_factory.factory.store import Store
from agent_factory.factory.store.inputs import injection_pointers
from agent_factory.factory.store.rows import turns_from_rows
from agent_factory.factory.store.selectors import select_conversations
from agent_factory.factory.store.turn_tables import TurnChunk, chunk_rows, iter_turn_chunks
from agent_factory.knowledge_packs import KnowledgePack

DefectKind = Literal["blank", "replay", "disclosure", "template", "latency"]
DEFECTS: tuple[DefectKind, ...] = ("blank", "replay", "disclosure", "template", "latency")
"""The seeded defects, in the order the power reports them."""

LATENCY_REFERENCE = 2.0
"""The latency factor the rules pass runs at; other factors are interpolated in log factor (module docstring)."""

STRENGTHS: dict[DefectKind, tuple[float, ...]] = {
    "blank": (0.01, 0.02, 0.05, 0.1), "replay": (0.02, 0.05, 0.1, 0.2), "disclosure": (0.005, 0.01, 0.02, 0.05),
    "template": (0.005, 0.01, 0.02, 0.05), "latency": (1.05, 1.1, 1.25, 1.5),
}
"""The strengths tried first (shares of a candidate's rows defected; latency: factors); `power` extends them
until the target is caught 95% of the time and refines where it crosses 80%."""

_CJK = re.compile(r"[\u3400-\u9fff]")


def _script(text: str | None) -> str:
    """`zh` when the text has CJK characters, else `en`: which language's sentence or heading to write."""
    return "zh" if text and _CJK.search(text) else "en"


def disclosure_sentences(pack: KnowledgePack) -> dict[str, str]:
    """Language -> the sentence naming the operator that the disclosure defect appends: the first example of
    the pack's disclosure lexicon in that language (what the pack itself flags as a disclosure); the
    simulator's sentence where the pack gives none."""
    out = {lang: next(e for p in lex.disclosure for e in p.examples)
           for lang, lex in sorted(pack.lexicons.items()) if any(p.examples for p in lex.disclosure)}
    if not out:
        sim = SimConfig()
        out = {lang: texts.disclosure(lang, sim.company_name_zh, sim.company_name_en) for lang in ("zh", "en")}
    return out


def _sentence(sentences: dict[str, str], answer: str | None) -> str:
    lang = _script(answer)
    return sentences.get(lang) or sentences.get("en") or next(iter(sentences.values()))


def defect_turn(turn: Turn, kind: DefectKind, *, previous: Turn | None, position: int, sentences: dict[str, str],
                factor: float) -> Turn:
    """`turn` with the defect applied, or `turn` itself when it is not eligible (`position`: its place in its
    conversation, from 0; `previous`: the turn before it there)."""
    if kind == "latency":
        return turn if turn.latency_ms is None else turn.model_copy(update={"latency_ms": turn.latency_ms * factor})
    if kind == "replay":
        if previous is None or position % 2 == 0 or previous.request is None or previous.request == turn.request:
            return turn
        return turn.model_copy(update={"request": previous.request})
    if turn.delivery != "delivered":
        return turn
    if kind == "blank":
        return turn.model_copy(update={"answer": "", "delivery": "failed_empty"})
    answer = turn.answer or ""
    if kind == "disclosure":
        return turn.model_copy(update={"answer": f"{answer}\n{_sentence(sentences, answer)}"})
    return turn.model_copy(update={"answer": texts.TEMPLATE_TEXT[_script(answer or turn.request)] + answer})


def defect_units(u: UserUnits, kind: DefectKind, *, sentences: dict[str, str], factor: float) -> UserUnits:
    """One user's units with every eligible turn of its real traffic defected (excluded turns are not read by
    any gated measure and are dropped)."""
    if u.view is None:
        return UserUnits(user_key=u.user_key, view=None, excluded=(), piece=u.piece)
    convs: list[Conversation] = []
    for conv in u.view.conversations:
        turns = [defect_turn(t, kind, previous=conv.turns[i - 1] if i else None, position=i, sentences=sentences,
                             factor=factor) for i, t in enumerate(conv.turns)]
        convs.append(conv.model_copy(update={"turns": tuple(turns)}))
    view = EngagementView(engagement=u.view.engagement, conversations=tuple(convs), horizon=u.view.horizon)
    return UserUnits(user_key=u.user_key, view=view, excluded=(), piece=u.piece)


def measure_definitions(components: Sequence[ComponentSpec], pack: KnowledgePack,
                        measures: Sequence[GateMeasure]) -> dict[Layer, dict[str, list[DataDefinition]]]:
    """The definitions of the items `measures` read, on their layers only (every other layer empty)."""
    items = {i for m in measures for i in m.items}
    layers = {m.layer for m in measures}
    return {layer: ({c: [d for d in ds if d.id in items] for c, ds in comps.items() if any(d.id in items for d in ds)}
                    if layer in layers else {})
            for layer, comps in definitions_by_layer(components, pack).items()}


def changed_units(clean: UserUnits, defected: UserUnits) -> set[tuple[Layer, str]]:
    """The (layer, id) of the units whose content the defect changed: a turn rewritten, its spans, its
    conversation and its user's engagement. Every other unit's data are its
    clean data (a rule reads its own unit only, a turn's rules no other turn), so they are not recollected."""
    out: set[tuple[Layer, str]] = set()
    if clean.view is None or defected.view is None:
        return out
    for c0, c1 in zip(clean.view.conversations, defected.view.conversations, strict=True):
        turns = [t1 for t0, t1 in zip(c0.turns, c1.turns, strict=True) if t1 is not t0]
        out.update(("trace", t.id) for t in turns)
        out.update(("span", s.id) for t in turns for s in t.spans)
        if turns:
            out.add(("conversation", c1.id))
    if out:
        out.add(("engagement", defected.view.engagement.id))
    return out


class _Changed:
    """A collector over the changed units only (`changed_units`): the others' data are the clean ones. The kernel
    hands it a layer's units at once (`collect_units`); `collect`, one unit, is the protocol's and unfiltered."""

    def __init__(self, inner: Cascade) -> None:
        self.inner = inner
        self.changed: set[tuple[Layer, str]] = set()

    def collect(self, *, unit_id: str, layer: Layer, unit: Unit, definitions: Sequence[DataDefinition],
                pack: KnowledgePack, injection_ranges: Sequence[EvidencePointer] = (),
                context: EngagementView | None = None) -> Awaitable[list[AtomicDatum]]:
        return self.inner.collect(unit_id=unit_id, layer=layer, unit=unit, definitions=definitions, pack=pack,
                                  injection_ranges=injection_ranges, context=context)

    async def collect_units(self, *, layer: Layer, units: Sequence[UnitInput], definitions: Sequence[DataDefinition],
                            pack: KnowledgePack, context: EngagementView | None = None) -> DataColumns:
        wanted = [u for u in units if (layer, u.unit_id) in self.changed]
        if not wanted:
            return DataColumns()
        return await self.inner.collect_units(layer=layer, units=wanted, definitions=definitions, pack=pack,
                                              context=context)


Contributions = tuple[list[str], list[str], list[float], list[float]]
"""One measure's rows of changed units: unit ids, cluster keys (users), y, x."""


@dataclass(frozen=True)
class KindRows:
    """One defect's pass over some users: the units it changed and the measures' rows of those units."""

    changed: frozenset[tuple[Layer, str]]
    rows: tuple[Contributions, ...]
    """Per measure, in `measures` order."""


class _Pass:
    """The defects' passes over chunks of whole users' stored turns: each user's units built once, each defect
    applied to them and the changed units collected by rules; in a forked worker or here."""

    def __init__(self, *, measures: Sequence[GateMeasure], pack: KnowledgePack, plan: CollectPlan,
                 kinds: Sequence[DefectKind], context: UnitContext, factor: float,
                 picked: frozenset[str] | None) -> None:
        self.measures, self.pack, self.plan, self.kinds = tuple(measures), pack, plan, tuple(kinds)
        self.context, self.factor, self.picked = context, factor, picked
        self.items = frozenset(i for m in measures for i in m.items)
        self.sentences = disclosure_sentences(pack)
        self.collector = _Changed(Cascade(tiers=[RuleTier()]))

    def work(self, chunk: TurnChunk) -> dict[DefectKind, KindRows]:
        """One chunk: every defect's changed units and their measure rows."""
        users = list(self.context.user_units(turns_from_rows(chunk_rows(chunk))))
        return {kind: self._kind(users, kind) for kind in self.kinds}

    def _kind(self, users: Sequence[UserUnits], kind: DefectKind) -> KindRows:
        defected: list[UserUnits] = []
        changed: set[tuple[Layer, str]] = set()
        for u in users:
            d = defect_units(u, kind, sentences=self.sentences, factor=self.factor)
            defected.append(d)
            changed |= changed_units(u, d)
        self.collector.changed = changed
        rows: dict[Layer, list[UnitRow]] = {}
        for batch in kernel.collect([d for d in defected if d.view is not None], self.plan, self.collector):
            for layer, got in unit_rows(batch, items=self.items).items():
                rows.setdefault(layer, []).extend(r for r in got if (layer, r.unit_id) in changed)
        if self.picked is not None:
            rows = {layer: _pick(layer_rows, self.picked) for layer, layer_rows in rows.items()}
        return KindRows(changed=frozenset(changed), rows=tuple(_contributions(m, rows.get(m.layer, ()))
                                                                for m in self.measures))


def _contributions(measure: GateMeasure, rows: Sequence[UnitRow]) -> Contributions:
    out: Contributions = ([], [], [], [])
    for row in rows:
        got = measure.contribution(row)
        if got is not None:
            out[0].append(row.unit_id)
            out[1].append(cluster_of(row))
            out[2].append(got[0])
            out[3].append(got[1])
    return out


def unit_rows(batch: DatumBatch, *, items: frozenset[str]) -> dict[Layer, list[UnitRow]]:
    """The analysed units of one user's batch with their values and facts of `items`, as `kernel.observations`
    makes them, read straight from the columns (no `AtomicDatum` is built: a pass makes ~10^5 data)."""
    rows: dict[tuple[str, str], UnitRow] = {}
    for u in batch.units:
        if u.analysed:
            rows[(u.layer, u.unit_id)] = UnitRow(
                u.unit_id, u.layer, u.user_id, u.conversation_id, u.index,
                u.start.timestamp() if u.start is not None else None,
                u.end.timestamp() if u.end is not None else None, u.mode, {}, {})
    c = batch.columns
    for unit_id, layer, item, value, fact in zip(c.unit_id, c.layer, c.item, c.value, c.fact, strict=True):
        row = rows.get((layer, unit_id)) if item in items else None
        if row is None:
            continue
        row.values[item] = value  # type: ignore[index]
        if fact is not None:
            row.facts[item] = fact  # type: ignore[index]
    out: dict[Layer, list[UnitRow]] = {}
    for row in rows.values():
        out.setdefault(row.layer, []).append(row)
    return out


def _pick(rows: Sequence[UnitRow], conversations: frozenset[str]) -> list[UnitRow]:
    # As `data.side_rows` picks a selector's rows: an engagement row goes with its user's picked conversations.
    users = {cluster_of(r) for r in rows if r.conversation_id in conversations}
    return [r for r in rows if (r.conversation_id in conversations
                                if r.conversation_id is not None else cluster_of(r) in users)]


def _merge(clean: GateColumns, found: Sequence[KindRows]) -> GateColumns:
    """The defected columns: each measure's clean rows of unchanged units, and the pass's rows of changed ones
    (users as in `clean`; a row of a user `clean` lacks is dropped, as `gate_columns` drops it)."""
    changed: frozenset[tuple[Layer, str]] = frozenset().union(*(k.changed for k in found))
    index = {u: i for i, u in enumerate(clean.users)}
    out: list[MeasureRows] = []
    for m, r0 in enumerate(clean.rows):
        layer = clean.measures[m].layer
        keep = np.fromiter(((layer, i) not in changed for i in r0.unit_ids), dtype=bool, count=len(r0.unit_ids))
        ids = [i for i, k in zip(r0.unit_ids, keep, strict=True) if k]
        user, ys, xs = list(r0.user[keep]), list(r0.y[keep]), list(r0.x[keep])
        for k in found:
            for unit_id, cluster, y, x in zip(*k.rows[m], strict=True):
                u = index.get(cluster)
                if u is not None:
                    ids.append(unit_id)
                    user.append(u)
                    ys.append(y)
                    xs.append(x)
        out.append(MeasureRows(unit_ids=tuple(ids), user=np.asarray(user, dtype=np.int64),
                               y=np.asarray(ys, dtype=np.float64), x=np.asarray(xs, dtype=np.float64)))
    return GateColumns(users=clean.users, measures=clean.measures, rows=tuple(out))


def defected_sides(store: Store, side: Side, measures: Sequence[GateMeasure], pack: KnowledgePack,
                   components: Sequence[ComponentSpec], kinds: Sequence[DefectKind] = DEFECTS, *,
                   factor: float = LATENCY_REFERENCE, clean: GateColumns | None = None,
                   workers: int | None = None) -> dict[DefectKind, GateColumns]:
    """`defected_columns` of several defects, each user's units read and built once for all of them (each
    defect still one rules pass over every unit). `workers`: forked worker processes (None: one per core where
    workers fork and the side has enough users, `default_workers`; 1: in this process)."""
    bad = [k for k in kinds if k not in DEFECTS]
    if bad:
        raise ValueError(f"defect(s) {', '.join(bad)}: not one of {', '.join(DEFECTS)}")
    base = clean if clean is not None else load_side(store, side, measures)
    picked = frozenset(select_conversations(store, side.key, side.values)) if side.key is not None else None
    job = _Pass(measures=measures, pack=pack, kinds=kinds, factor=factor, picked=picked,
                plan=CollectPlan(definitions=measure_definitions(components, pack, measures), pack=pack,
                                 injections=injection_pointers(store)),
                context=unit_context(store, window_days=pack.thresholds.window_days, horizon=store.horizon()))
    found: list[dict[DefectKind, KindRows]] = []
    chunks = iter_turn_chunks(store, users=None if side.key is None else base.users, turns=CHUNK_TURNS)
    # Forking pays only over enough users (as a run decides: `MIN_USERS_FOR_WORKERS`).
    n = workers if workers is not None else (
        default_workers() if can_fork() and len(base.users) >= MIN_USERS_FOR_WORKERS else 1)
    with run_memos():
        if n > 1:
            ProcessExecutor[TurnChunk, dict[DefectKind, KindRows]](workers=n).run(chunks, work=job.work,
                                                                                 sink=found.append)
        else:
            found.extend(job.work(chunk) for chunk, _users in chunks)
    return {kind: _merge(base, [f[kind] for f in found]) for kind in kinds}


def defect_power(clean: GateColumns, defected: GateColumns, thresholds: Mapping[str, float], *, kind: DefectKind,
                 draws: int = 300, seed: int = 0) -> DefectPower:
    """`evaluators.gate.power.power` of one defect's columns (`defected_sides`): its strengths (`STRENGTHS`),
    latency's as factors from the pass at `LATENCY_REFERENCE`, each measure's direction its metric's."""
    sign = np.array([m.sign for m in clean.measures], dtype=np.float64)
    return power(clean, defected, sign, thresholds, strengths=STRENGTHS[kind], draws=draws, seed=seed,
                 scale_from=LATENCY_REFERENCE if kind == "latency" else None)


def defected_columns(store: Store, side: Side, measures: Sequence[GateMeasure], pack: KnowledgePack,
                     components: Sequence[ComponentSpec], kind: DefectKind, *, factor: float = LATENCY_REFERENCE,
                     clean: GateColumns | None = None, workers: int | None = None) -> GateColumns:
    """The side's measure rows with `kind` applied to every eligible unit, in memory: the users and measures of
    the clean columns (`clean`, default `load_side`), each measure's rows in the clean order, then the rows only
    the defect made (a clause it triggered), a row absent on one side being (0, 0) there (`power.align`)."""
    base = clean if clean is not None else load_side(store, side, measures)
    got = defected_sides(store, side, measures, pack, components, (kind,), factor=factor, clean=base,
                         workers=workers)[kind]
    return align(base, got)[1]


__all__ = ["DEFECTS", "LATENCY_REFERENCE", "STRENGTHS", "DefectKind", "KindRows", "changed_units", "defect_power",
           "defect_turn",
           "defect_units", "defected_columns", "defected_sides", "disclosure_sentences", "measure_definitions",
           "unit_rows"]
