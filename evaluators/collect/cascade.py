"""phi: the collection cascade. Rules first, a small model when rules abstain, a cross-family jury when unsure.

For one unit and its definitions (DESIGN.md section 5):
(a) each definition's cached datum is reused when its key is unchanged;
(b) its `applies_when` rule may make it not_applicable;
(c) its rule collects it, or abstains;
(d) every remaining model-tier item of the unit goes to the small model in ONE structured call;
(e) items answered with confidence under `escalate_below`, or demanding a jury, go to each juror in one call
    per juror; the majority of the whole jury decides, a tie is uncollected ("jury split");
(f) anything still without a value is uncollected with the reason, never guessed.

Every datum is cached, except uncollected ones a rerun could fix (no model configured, budget, model errors);
a unit's data are written together when the unit is done, and every model answer the moment it arrives, so a
killed run repeats no answered call and ends with the same data.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_factory.adapters.model import EvidencePointer
from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.backends import (
    Backend,
    BackendFactory,
    CallCounters,
    FatalModelError,
    TransientModelError,
    backend_for,
    call_model,
)
from agent_factory.evaluators.collect.budget import BUDGET_EXHAUSTED, Budget, BudgetExhausted
from agent_factory.evaluators.collect.cache import DatumCache, call_key, context_digest, unit_digest
from agent_factory.evaluators.collect.config import ModelConfig, ModelSpec, check_jury
from agent_factory.evaluators.collect.keys import CollectorKeys
from agent_factory.evaluators.collect.project import ProjectedEvidence, project
from agent_factory.evaluators.collect.prompt import PromptKind, render_prompt
from agent_factory.evaluators.collect.reasons import (
    FATAL_MODEL_ERROR,
    JURY_SPLIT,
    MODEL_ERROR,
    NO_JURY,
    NO_MODEL,
    RULE_ABSTAINED,
    RULE_ERROR,
    SCHEMA_INVALID,
    CascadeCounters,
    is_transient,
    reason_category,
)
from agent_factory.evaluators.collect.redact import Redactor, load_redactor
from agent_factory.evaluators.collect.schema import QUOTE_NOT_FOUND, ItemAnswer, build_sigma, json_schema, locate_quote
from agent_factory.evaluators.core.model import AtomicDatum, DataDefinition, Layer, Tier, Value
from agent_factory.evaluators.core.registry import EngagementView, RuleAnswer, RuleContext, get_rule
from agent_factory.knowledge_packs import KnowledgePack


@dataclass(frozen=True)
class Job:
    """One unit and the definitions to collect about it."""

    unit_id: str
    layer: Layer
    unit: Any
    definitions: Sequence[DataDefinition]
    pack: KnowledgePack
    injection_ranges: Sequence[EvidencePointer] = ()


@dataclass
class _Item:
    """A model-tier item of one unit, waiting for a model."""

    index: int
    definition: DataDefinition
    evidence: ProjectedEvidence
    key: str
    small_first: bool


@dataclass(frozen=True)
class _Outcome:
    """One model call over a unit's items: the answers, or why there are none."""

    answers: dict[str, ItemAnswer] | None
    tokens: int = 0
    cost_usd: float = 0.0
    failure: str | None = None


def _shares(total: float, n: int, *, integer: bool) -> list[float]:
    """Split a call's usage over its n items (integers keep their sum exactly)."""
    if n <= 0:
        return []
    if integer:
        base, extra = divmod(int(total), n)
        return [base + (1 if i < extra else 0) for i in range(n)]
    return [total / n] * n


class Cascade:
    """The collector phi for one run: models, cache, budget and redactor."""

    def __init__(
        self,
        config: ModelConfig,
        *,
        cache: DatumCache | None = None,
        budget: Budget | None = None,
        redactor: Redactor | None = None,
        backend_factory: BackendFactory | None = None,
        templates: Path | None = None,
    ) -> None:
        check_jury(config.jury)
        self.templates = templates
        """The prompt templates: a suite's approved copy (what a person reviewed); None: the package's."""
        self.config = config
        self.cache = cache if cache is not None else DatumCache(None)
        self.budget = budget if budget is not None else Budget(config.budget)
        self.redactor = redactor if redactor is not None else load_redactor(config.redactor)
        self._factory = backend_factory or backend_for
        self._backends: dict[int, Backend] = {}
        self._calls = CallCounters()
        self._counts = CascadeCounters()
        self._sem: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self.keys = CollectorKeys(config, self.redactor, templates=self.templates)

    # ---- counters -------------------------------------------------------------------------------

    @property
    def model_calls(self) -> int:
        """Requests sent to model providers (every attempt, retries included)."""
        return self._calls.model_calls

    @property
    def tokens(self) -> int:
        """Tokens the model calls reported."""
        return self._calls.tokens

    @property
    def cost_usd(self) -> float:
        """What the model calls cost, as litellm prices them."""
        return self._calls.cost_usd

    @property
    def reused(self) -> int:
        """Data found in the cache (whatever their value)."""
        return self._counts.reused

    @property
    def reused_uncollected(self) -> Counter[str]:
        """Of the reused data, those cached as uncollected, by reason category."""
        return self._counts.reused_uncollected

    def definition_version(self, d: DataDefinition, pack: KnowledgePack) -> str:
        """v of a definition in this cascade (every key of its data changes exactly when this does)."""
        return self.keys.definition_version(d, pack)

    @property
    def collected(self) -> Counter[str]:
        """Newly collected data by tier (rule / small_model / jury)."""
        return self._counts.collected

    @property
    def uncollected(self) -> Counter[str]:
        """Newly uncollected data by reason category."""
        return self._counts.uncollected

    def _record(self, datum: AtomicDatum, *, reused: bool = False) -> AtomicDatum:
        """Count a datum returned by this run."""
        if reused:
            self._counts.reused += 1
            if datum.value == "uncollected":
                self._counts.reused_uncollected[reason_category(datum.reason or "")] += 1
        elif datum.value == "uncollected":
            self._counts.uncollected[reason_category(datum.reason or "")] += 1
        else:
            self._counts.collected[datum.collector.tier] += 1
        return datum

    def _store(self, fresh: Sequence[AtomicDatum]) -> None:
        """Cache a unit's new data at once, except uncollected data a rerun could collect."""
        keep = [d for d in fresh if d.key and not (d.value == "uncollected" and is_transient(d.reason))]
        if keep:
            self.cache.put_data(keep)

    # ---- the cascade ----------------------------------------------------------------------------

    async def collect(
        self,
        *,
        unit_id: str,
        layer: Layer,
        unit: Any,
        definitions: Sequence[DataDefinition],
        pack: KnowledgePack,
        injection_ranges: Sequence[EvidencePointer] = (),
        context: EngagementView | None = None,
    ) -> list[AtomicDatum]:
        """One datum per definition, in order. `context` is the user's window, for rules (Results) that judge a
        session by what followed it; it enters the rule items' cache keys."""
        out: dict[int, AtomicDatum] = {}
        pending: list[_Item] = []
        reused: set[int] = set()
        digest: str | None = None
        for i, d in enumerate(definitions):
            if d.layer != layer:
                raise SpecError(f"{d.id} is a {d.layer}-layer definition; it cannot be collected on {layer} {unit_id}")
            base = {"unit_id": unit_id, "layer": layer, "item": d.id, "item_version": d.version}
            model_tiers = [t for t in d.tiers if t != "rule"]
            if d.applies_when or (d.rule and "rule" in d.tiers):
                digest = digest or unit_digest(unit) + (context_digest(context) if context is not None else "")
                rk = self.keys.rule_key(d, pack, digest)
                hit = self.cache.get_datum(rk)
                if hit is not None:
                    out[i] = self._record(hit, reused=True)
                    reused.add(i)
                    continue
                datum = self._rule_stage(d, unit, pack, rk, base, has_model_tier=bool(model_tiers), context=context)
                if datum is not None:
                    out[i] = self._record(datum)
                    continue
            small, jury = self.keys.small_for(d), self.keys.jury_for(d)
            if small is None and not jury:
                tier: Tier = model_tiers[0] if model_tiers else "small_model"
                out[i] = self._record(AtomicDatum(**base, value="uncollected", reason=NO_MODEL,
                                                  collector=self.keys.model_identity(tier)))
                continue
            if d.demands_jury and not jury:
                out[i] = self._record(AtomicDatum(**base, value="uncollected", reason=NO_JURY,
                                                  collector=self.keys.model_identity("jury")))
                continue
            evidence = project(unit, layer, d.projection)
            mk = self.keys.model_key(d, evidence, injection_ranges)
            hit = self.cache.get_datum(mk)
            if hit is not None:
                out[i] = self._record(hit, reused=True)
                reused.add(i)
                continue
            pending.append(_Item(i, d, evidence, mk, small_first=small is not None))
        if pending:
            await self._model_stage(unit_id, layer, pending, injection_ranges, out)
        self._store([d for i, d in out.items() if i not in reused])
        return [out[i] for i in range(len(definitions))]

    def _rule_stage(
        self, d: DataDefinition, unit: Any, pack: KnowledgePack, key: str, base: dict[str, Any], *,
        has_model_tier: bool, context: EngagementView | None = None,
    ) -> AtomicDatum | None:
        """The datum rules decide (not_applicable, a value, or an uncollected abstention), or None to go on."""
        ctx = RuleContext(pack=pack, definition=d, engagement=context)
        for name, gate in ((d.applies_when, True), (d.rule if "rule" in d.tiers else None, False)):
            if name is None:
                continue
            ident = self.keys.rule_identity(name)
            try:
                # A plain tuple is taken too: a third-party rule may return one.
                raw: RuleAnswer | tuple[Any, ...] = get_rule(name)(unit, ctx)
            except SpecError:
                raise
            except Exception as e:  # noqa: BLE001 - one unit's crash must not end the run; it is recorded
                msg = " ".join(str(e).split())[:200]
                return AtomicDatum(**base, value="uncollected", collector=ident,
                                   reason=f"{RULE_ERROR}: {name}: {type(e).__name__}: {msg}")
            answer = raw if isinstance(raw, RuleAnswer) else RuleAnswer(*raw)
            if gate:
                if answer.value in ("no", "not_applicable"):
                    return AtomicDatum(**base, value="not_applicable", collector=ident, key=key,
                                       evidence=tuple(answer.evidence), reason=answer.reason or f"{name}: no")
                continue
            if answer.value is not None:
                reason = answer.reason or (f"{name}: uncollected" if answer.value == "uncollected" else None)
                return AtomicDatum(**base, value=answer.value, fact=answer.fact, evidence=tuple(answer.evidence),
                                   reason=reason, collector=ident, key=key)
            if not has_model_tier:
                return AtomicDatum(**base, value="uncollected", collector=ident, key=key,
                                   reason=RULE_ABSTAINED + (f" ({answer.reason})" if answer.reason else ""))
        return None

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem[0] is not loop:
            self._sem = (loop, asyncio.Semaphore(self.config.concurrency))
        return self._sem[1]

    def _backend(self, spec: ModelSpec) -> Backend:
        if id(spec) not in self._backends:
            self._backends[id(spec)] = self._factory(spec)
        return self._backends[id(spec)]

    async def _ask(
        self, kind: PromptKind, spec: ModelSpec, unit_id: str, layer: Layer, items: Sequence[_Item],
        ranges: Sequence[EvidencePointer],
    ) -> _Outcome:
        """One structured call for these items (or its cached answer)."""
        definitions = [it.definition for it in items]
        prompt = render_prompt(kind, unit_id=unit_id, layer=layer, definitions=definitions,
                               evidence=[it.evidence for it in items], injection_ranges=ranges,
                               redactor=self.redactor, templates=self.templates)
        sigma = build_sigma(definitions)
        ck = call_key(spec.name, spec.family, prompt, json_schema(sigma))
        cached = self.cache.get_answer(ck)
        if cached is None:
            try:
                async with self._semaphore():
                    reply = await call_model(self._backend(spec), prompt, sigma, budget=self.budget,
                                             retry=self.config.retry, counters=self._calls)
            except BudgetExhausted:
                return _Outcome(None, failure=BUDGET_EXHAUSTED)
            except TransientModelError as e:
                if e.kind in ("malformed_json", "schema_invalid"):
                    return _Outcome(None, failure=f"{SCHEMA_INVALID}: {e}")
                return _Outcome(None, failure=f"{MODEL_ERROR}: {e}")
            except FatalModelError as e:
                return _Outcome(None, failure=f"{FATAL_MODEL_ERROR}: {e}")
            cached = {"model": spec.name, "data": reply.data, "tokens": reply.tokens, "cost_usd": reply.cost_usd}
            self.cache.put_answer(ck, cached)  # before anything else: a kill from here on repeats no call
        answers = {d.id: ItemAnswer.model_validate(cached["data"][d.id]) for d in definitions}
        return _Outcome(answers, tokens=int(cached["tokens"]), cost_usd=float(cached["cost_usd"]))

    def _pointer(self, answer: ItemAnswer, it: _Item) -> tuple[tuple[EvidencePointer, ...], str | None]:
        if not answer.evidence_quote.strip():
            return (), None
        pointer = locate_quote(answer.evidence_quote, it.evidence)
        return ((pointer,), None) if pointer else ((), QUOTE_NOT_FOUND)

    def _model_datum(
        self, it: _Item, unit_id: str, layer: Layer, *, value: Value, tier: Tier, reason: str | None,
        evidence: tuple[EvidencePointer, ...] = (), tokens: int = 0, cost: float = 0.0,
    ) -> AtomicDatum:
        d = it.definition
        return AtomicDatum(unit_id=unit_id, layer=layer, item=d.id, item_version=d.version, value=value,
                           reason=reason or None, evidence=evidence, collector=self.keys.model_identity(tier),
                           tokens=tokens, cost_usd=cost, coverage=it.evidence.coverage, key=it.key)

    async def _model_stage(
        self, unit_id: str, layer: Layer, items: list[_Item], ranges: Sequence[EvidencePointer],
        out: dict[int, AtomicDatum],
    ) -> None:
        first = [it for it in items if it.small_first]
        to_jury = [it for it in items if not it.small_first]
        spent: dict[int, tuple[int, float]] = {}
        small_answers: dict[int, ItemAnswer] = {}
        if first:
            assert self.config.small is not None
            outcome = await self._ask("checklist", self.config.small, unit_id, layer, first, ranges)
            if outcome.answers is None:
                for it in first:
                    out[it.index] = self._record(self._model_datum(
                        it, unit_id, layer, value="uncollected", tier="small_model", reason=outcome.failure))
            else:
                toks = _shares(outcome.tokens, len(first), integer=True)
                costs = _shares(outcome.cost_usd, len(first), integer=False)
                for it, tok, cost in zip(first, toks, costs, strict=True):
                    answer = outcome.answers[it.definition.id]
                    jury = self.keys.jury_for(it.definition)
                    unsure = answer.confidence < self.config.escalate_below
                    if jury and (unsure or it.definition.demands_jury):
                        small_answers[it.index] = answer
                        spent[it.index] = (int(tok), cost)
                        to_jury.append(it)
                        continue
                    evidence, note = self._pointer(answer, it)
                    notes = [answer.reason.strip(), note]
                    if unsure:
                        notes.append(f"low confidence {answer.confidence:.2f} < {self.config.escalate_below:.2f}, "
                                     "no jury for this item")
                    out[it.index] = self._record(self._model_datum(
                        it, unit_id, layer, value=answer.value, tier="small_model",
                        reason="; ".join(n for n in notes if n), evidence=evidence, tokens=int(tok), cost=cost))
        if to_jury:
            await self._jury_stage(unit_id, layer, to_jury, ranges, spent, small_answers, out)

    async def _jury_stage(
        self, unit_id: str, layer: Layer, items: list[_Item], ranges: Sequence[EvidencePointer],
        spent: dict[int, tuple[int, float]], small_answers: dict[int, ItemAnswer], out: dict[int, AtomicDatum],
    ) -> None:
        jury = self.config.jury
        outcomes = await asyncio.gather(*(self._ask("jury", m, unit_id, layer, items, ranges) for m in jury))
        shares = [
            (_shares(o.tokens, len(items), integer=True), _shares(o.cost_usd, len(items), integer=False))
            for o in outcomes
        ]
        for k, it in enumerate(items):
            tokens, cost = spent.get(it.index, (0, 0.0))
            votes: list[tuple[ModelSpec, ItemAnswer]] = []
            for m, o, (toks, costs) in zip(jury, outcomes, shares, strict=True):
                if o.answers is not None:
                    votes.append((m, o.answers[it.definition.id]))
                    tokens += int(toks[k])
                    cost += costs[k]
            tally = Counter(a.value for _, a in votes)
            first = small_answers.get(it.index)
            small = [f"small {self.config.small.name}: {first.value} @ {first.confidence:.2f}"] if (
                first is not None and self.config.small is not None) else []
            top = tally.most_common(1)
            if top and top[0][1] * 2 > len(jury):
                value = top[0][0]
                agreeing = [(m, a) for m, a in votes if a.value == value]
                pointers: list[EvidencePointer] = []
                notes = []
                for _, a in agreeing:
                    found, note = self._pointer(a, it)
                    pointers += [p for p in found if p not in pointers]
                    if note and note not in notes:
                        notes.append(note)
                detail = ", ".join([*small, *(f"{m.name}: {a.value}" for m, a in votes)])
                reason = "; ".join([f"jury {top[0][1]}/{len(jury)} ({detail})",
                                    *(a.reason.strip() for _, a in agreeing[:1] if a.reason.strip()), *notes])
                datum = self._model_datum(it, unit_id, layer, value=value, tier="jury", reason=reason,
                                          evidence=tuple(pointers), tokens=tokens, cost=cost)
            elif len(votes) == len(jury):
                detail = ", ".join([*small, *(f"{m.name}: {a.value}" for m, a in votes)])
                datum = self._model_datum(it, unit_id, layer, value="uncollected", tier="jury",
                                          reason=f"{JURY_SPLIT}: {detail}", tokens=tokens, cost=cost)
            else:
                failure = next(o.failure for o in outcomes if o.answers is None)
                datum = self._model_datum(it, unit_id, layer, value="uncollected", tier="jury",
                                          reason=failure, tokens=tokens, cost=cost)
            out[it.index] = self._record(datum)

    # ---- many units -----------------------------------------------------------------------------

    def collect_sync(self, **kwargs: Any) -> list[AtomicDatum]:
        """`collect` from synchronous code (not from inside a running event loop)."""
        return asyncio.run(self.collect(**kwargs))

    async def _run_job(self, job: Job) -> tuple[Job, list[AtomicDatum]]:
        data = await self.collect(unit_id=job.unit_id, layer=job.layer, unit=job.unit,
                                  definitions=job.definitions, pack=job.pack, injection_ranges=job.injection_ranges)
        return job, data

    async def run_all(
        self, jobs: Iterable[Job], *, concurrency: int | None = None
    ) -> AsyncIterator[tuple[Job, list[AtomicDatum]]]:
        """(job, data) for every job, in completion order, with at most `concurrency` units in flight
        (default `config.concurrency`; model calls in flight are bounded by `config.concurrency` through a
        semaphore). Jobs are drawn lazily, so memory stays constant in the number of jobs."""
        limit = concurrency or self.config.concurrency
        source = iter(jobs)
        running: set[asyncio.Task[tuple[Job, list[AtomicDatum]]]] = set()

        def spawn() -> None:
            job = next(source, None)
            if job is not None:
                running.add(asyncio.ensure_future(self._run_job(job)))

        for _ in range(limit):
            spawn()
        try:
            while running:
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    running.discard(task)
                    spawn()
                    yield task.result()
        finally:
            for task in running:
                task.cancel()

    def collect_all_sync(self, jobs: Iterable[Job], *, concurrency: int | None = None) -> list[list[AtomicDatum]]:
        """The data of every job, in job order (holds all results in memory: for tests and small runs)."""
        indexed = list(jobs)
        position = {id(job): i for i, job in enumerate(indexed)}

        async def run() -> list[list[AtomicDatum]]:
            results: list[list[AtomicDatum]] = [[] for _ in indexed]
            async for job, data in self.run_all(indexed, concurrency=concurrency):
                results[position[id(job)]] = data
            return results

        return asyncio.run(run())
