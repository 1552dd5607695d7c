"""One structured model call over some items of one unit, as every model tier makes it: render the prompt,
look the answer up by its call key, else call under the run's budget, retries and concurrency bound, and
store the answer the moment it arrives (so a killed run repeats no answered call).

One `ModelCaller` belongs to one collector: its tiers share its backends, semaphore, budget and counters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent_factory.adapters.model import EvidencePointer
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
from agent_factory.evaluators.collect.cache import DatumCache, call_key
from agent_factory.evaluators.collect.config import ModelSpec, RetryPolicy
from agent_factory.evaluators.collect.project import ProjectedEvidence
from agent_factory.evaluators.collect.prompt import BatchUnit, PromptKind, batch_key, render_batch_prompt, render_prompt
from agent_factory.evaluators.collect.reasons import FATAL_MODEL_ERROR, MODEL_ERROR, SCHEMA_INVALID
from agent_factory.evaluators.collect.redact import Redactor
from agent_factory.evaluators.collect.schema import (
    QUOTE_NOT_FOUND,
    ItemAnswer,
    build_keyed_sigma,
    build_sigma,
    json_schema,
    locate_quote,
)
from agent_factory.evaluators.collect.tiers import Pending, UnitJob


@dataclass(frozen=True)
class Outcome:
    """One model call over a unit's items: the answers by definition id, or why there are none."""

    answers: dict[str, ItemAnswer] | None
    tokens: int = 0
    cost_usd: float = 0.0
    failure: str | None = None

    def shares(self, n: int) -> list[tuple[int, float]]:
        """The call's (tokens, cost) split over its n items; token shares keep their sum exactly."""
        if n <= 0:
            return []
        base, extra = divmod(int(self.tokens), n)
        return [(base + (1 if i < extra else 0), self.cost_usd / n) for i in range(n)]


def pointer(answer: ItemAnswer, evidence: ProjectedEvidence) -> tuple[tuple[EvidencePointer, ...], str | None]:
    """The answer's quote located in the evidence: (pointer,), or no pointer and a note when it is not there."""
    if not answer.evidence_quote.strip():
        return (), None
    found = locate_quote(answer.evidence_quote, evidence)
    return ((found,), None) if found else ((), QUOTE_NOT_FOUND)


def shown(p: Pending) -> ProjectedEvidence:
    """The evidence a model tier shows for `p` (the model family projects it before its first tier)."""
    if p.evidence is None:
        raise AssertionError(f"{p.definition.id}: a model tier got an item without projected evidence")
    return p.evidence


class ModelCaller:
    """Backends, the concurrency bound, the budget, the answer cache and the counters of one collector."""

    def __init__(
        self, *, cache: DatumCache, budget: Budget, retry: RetryPolicy, concurrency: int, redactor: Redactor,
        templates: Path | None, backend_factory: BackendFactory | None = None,
    ) -> None:
        self.cache, self.budget, self.retry, self.redactor = cache, budget, retry, redactor
        self.templates = templates
        self.concurrency = concurrency
        self.counters = CallCounters()
        self._factory = backend_factory or backend_for
        self._backends: dict[int, tuple[ModelSpec, Backend]] = {}
        self._sem: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    def _semaphore(self) -> asyncio.Semaphore:
        # One per event loop: a collector may serve several asyncio.run calls (a semaphore is loop-bound).
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem[0] is not loop:
            self._sem = (loop, asyncio.Semaphore(self.concurrency))
        return self._sem[1]

    def _backend(self, spec: ModelSpec) -> Backend:
        hit = self._backends.get(id(spec))
        if hit is None or hit[0] is not spec:  # the spec is kept alive with its backend, so its id is not reused
            hit = (spec, self._factory(spec))
            self._backends[id(spec)] = hit
        return hit[1]

    async def ask(self, kind: PromptKind, spec: ModelSpec, job: UnitJob, items: Sequence[Pending]) -> Outcome:
        """One structured call for these items (or its cached answer)."""
        definitions = [p.definition for p in items]
        prompt = render_prompt(kind, unit_id=job.unit_id, layer=job.layer, definitions=definitions,
                               evidence=[shown(p) for p in items],
                               injection_ranges=job.injection_ranges, redactor=self.redactor,
                               templates=self.templates)
        cached = await self._call(spec, prompt, build_sigma(definitions))
        if isinstance(cached, Outcome):
            return cached
        answers = {d.id: ItemAnswer.model_validate(cached["data"][d.id]) for d in definitions}
        return Outcome(answers, tokens=int(cached["tokens"]), cost_usd=float(cached["cost_usd"]))

    async def ask_many(
        self, kind: PromptKind, spec: ModelSpec, batch_id: str, batch: Sequence[tuple[UnitJob, Sequence[Pending]]],
    ) -> list[Outcome]:
        """One structured call for the items of several units of one layer (or its cached answer): each unit's
        outcome, its answers by definition id, the call's tokens and cost shared by item."""
        if len(batch) == 1:  # a batch of one is a unit: the unit's own prompt
            return [await self.ask(kind, spec, *batch[0])]
        layer = batch[0][0].layer
        units = [BatchUnit(job.unit_id, [p.definition for p in items], [shown(p) for p in items])
                 for job, items in batch]
        prompt = render_batch_prompt(kind, batch_id=batch_id, layer=layer, units=units,
                                     injection_ranges=[r for job, _ in batch for r in job.injection_ranges],
                                     redactor=self.redactor, templates=self.templates)
        keys = [[batch_key(layer, n, p.definition.id) for p in items] for n, (_, items) in enumerate(batch, 1)]
        sigma = build_keyed_sigma([(k, p.definition.question) for ks, (_, items) in zip(keys, batch, strict=True)
                                   for k, p in zip(ks, items, strict=True)])
        cached = await self._call(spec, prompt, sigma)
        if isinstance(cached, Outcome):
            return [cached] * len(batch)
        whole = Outcome({}, tokens=int(cached["tokens"]), cost_usd=float(cached["cost_usd"]))
        shares = iter(whole.shares(sum(len(ks) for ks in keys)))
        out: list[Outcome] = []
        for ks, (_, items) in zip(keys, batch, strict=True):
            mine = [next(shares) for _ in ks]
            out.append(Outcome({p.definition.id: ItemAnswer.model_validate(cached["data"][k])
                                for k, p in zip(ks, items, strict=True)},
                               tokens=sum(t for t, _ in mine), cost_usd=sum(c for _, c in mine)))
        return out

    async def _call(self, spec: ModelSpec, prompt: str, sigma: type[BaseModel]) -> dict[str, Any] | Outcome:
        """The answer to `prompt` (cached, or asked now and cached at once), or the failed outcome."""
        ck = call_key(spec.name, spec.family, prompt, json_schema(sigma))
        cached = self.cache.get_answer(ck)
        if cached is None:
            try:
                async with self._semaphore():
                    reply = await call_model(self._backend(spec), prompt, sigma, budget=self.budget,
                                             retry=self.retry, counters=self.counters)
            except BudgetExhausted:
                return Outcome(None, failure=BUDGET_EXHAUSTED)
            except TransientModelError as e:
                if e.kind in ("malformed_json", "schema_invalid"):
                    return Outcome(None, failure=f"{SCHEMA_INVALID}: {e}")
                return Outcome(None, failure=f"{MODEL_ERROR}: {e}")
            except FatalModelError as e:
                return Outcome(None, failure=f"{FATAL_MODEL_ERROR}: {e}")
            cached = {"model": spec.name, "data": reply.data, "tokens": reply.tokens, "cost_usd": reply.cost_usd}
            self.cache.put_answer(ck, cached)  # before anything else: a kill from here on repeats no call
        return cached
