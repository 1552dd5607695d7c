"""Final quality of a task trial (issue 35): a model's checklist on the final answer, through the collectors' own
model call, or not collected when no model is configured.

Seed 000 sets final quality apart from completion: not "was it done" but "was it done well" (does the report have
depth), and leaves it to a model as judge, since rules cannot read quality. Here the judge is the project's small
model (`ModelConfig.small`, the cascade's first model tier), called as every collector calls it: `backend_for`
(litellm for a model string, pydantic-ai for a `Model` object) under `call_model`'s retries and the run's budget,
its answer kept in the project's answer cache under the collectors' `call_key` (a rerun of the same answer calls
no model). No new client. The prompt (`factory/tasks/templates/task_quality.j2`) is a checklist of `ITEMS` over the
task's description, the user's messages and the agent's answers, each quoted as one JSON value inside an
`<evidence>` block (`<`, `>` and `&` escaped, secrets redacted), so an answer cannot instruct its judge.

A trial's final quality is the share of the applicable items answered "yes" (in [0, 1]). It is None, with the
reason kept, when no model is configured ("no model configured"), when the trial gave no answer, when every item
was "not_applicable", or when the call failed (the error); never 0 and never a pass for want of a judge.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal

import jinja2
from pydantic import Field

from agent_factory.errors import CollectionError
from agent_factory.evaluators.collect.backends import CallCounters, backend_for, call_model
from agent_factory.evaluators.collect.budget import Budget
from agent_factory.evaluators.collect.cache import DatumCache, call_key
from agent_factory.evaluators.collect.config import ModelConfig, ModelSpec, RetryPolicy
from agent_factory.evaluators.collect.prompt import (
    _json_data,  # the evaluator prompts' inert quoting: no text closes a tag
)
from agent_factory.evaluators.collect.redact import DefaultRedactor, Redactor, redact_text
from agent_factory.evaluators.collect.schema import json_schema
from agent_factory.evaluators.tasks.suite import Task
from agent_factory.frozen import Frozen

TEMPLATES = Path(__file__).resolve().parent / "templates"
"""The task runner's templates (beside the agent's system prompt); not the collectors', which `build` copies into
every suite."""
TEMPLATE = "task_quality.j2"
NO_MODEL = "no model configured"
"""The reason final quality is not collected when the project has no small model."""
NO_ANSWER = "no final answer to judge"
ITEMS: tuple[tuple[str, str], ...] = (
    ("addresses", "Does the final answer respond to what the user asked (a clear refusal counts when the request "
                  "should be declined)?"),
    ("complete", "Does it cover every part of the request, leaving nothing the user asked for unanswered?"),
    ("specific", "Does it give the concrete figures, names or locations the request calls for, rather than vague "
                 "statements?"),
    ("clear", "Is it clear and to the point, without filler or contradictions?"),
)
"""The checklist: item id -> its question."""
Verdict = Literal["yes", "no", "not_applicable"]


class QualityAnswer(Frozen):
    """The model's answer (its output type): one verdict per checklist item and the reason."""

    addresses: Verdict
    complete: Verdict
    specific: Verdict
    clear: Verdict
    reason: str


class Quality(Frozen):
    """One trial's final quality, or why there is none."""

    value: float | None
    """The share of applicable items answered "yes"; None when not collected."""
    reason: str
    """The judge's reason, or why the value is None."""
    items: dict[str, Verdict] = Field(default_factory=dict)
    """Item id -> the model's verdict (empty when no call was made)."""
    tokens: int = 0
    """Tokens the judge's call cost (0 for an answer from the cache)."""


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False,  # noqa: S701 - not HTML
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template(TEMPLATE)


def quality_prompt(task: Task, answers: Sequence[str], redactor: Redactor) -> str:
    """The judge's prompt for a trial of `task` whose answers were `answers`: the checklist, then the evidence
    (redacted, each a JSON value)."""
    def quoted(value: str | Sequence[str]) -> str:
        return _json_data(redact_text(value, redactor) if isinstance(value, str)
                     else [redact_text(v, redactor) for v in value])
    return _template().render(items=ITEMS, description=quoted(task.description), messages=quoted(task.input),
                              answers=quoted(answers))


def score(answer: QualityAnswer) -> float | None:
    """The share of applicable items answered "yes"; None when none applies."""
    verdicts = [getattr(answer, item) for item, _ in ITEMS]
    applicable = [v for v in verdicts if v != "not_applicable"]
    return sum(v == "yes" for v in applicable) / len(applicable) if applicable else None


class QualityJudge:
    """Judges trials' final answers with one model for one run (its budget is the run's)."""

    def __init__(self, spec: ModelSpec | None, *, config: ModelConfig | None = None,
                 redactor: Redactor | None = None, cache: Callable[[], DatumCache] | None = None,
                 why_none: str = NO_MODEL) -> None:
        """`cache`: gives the answer cache when first needed (so a run without a model opens none); None: no
        cache. `why_none`: the reason final quality is not collected when `spec` is None."""
        self.spec = spec
        self.why_none = why_none
        self._cache = cache
        config = config or ModelConfig()
        self.retry: RetryPolicy = config.retry
        self.budget = Budget(config.budget)
        self.counters = CallCounters()
        self._redactor = redactor

    @classmethod
    def from_config(cls, config: ModelConfig, *, agent_family: str | None = None, redactor: Redactor | None = None,
                    cache: Callable[[], DatumCache] | None = None) -> QualityJudge:
        """The judge of a project's model config: its small model, else the first jury member, that is not of the
        judged agent's family (`agent_family`; None for a scripted agent). A model prefers its own family's
        answers, which is why a jury must be cross-family; a judge of the agent's family is none, with the
        reason. No model: none ("no model configured")."""
        models = [m for m in (config.small, *config.jury) if m is not None]
        if not models:
            return cls(None, config=config, redactor=redactor, cache=cache)
        judge = next((m for m in models if m.family != agent_family), None)
        why = (f"every configured model is of the agent's family ({agent_family}); a judge would prefer its own "
               "family's answers: configure a small model or a juror of another family")
        return cls(judge, config=config, redactor=redactor, cache=cache, why_none=why)

    def __call__(self, task: Task, answers: Sequence[str]) -> Quality:
        """The final quality of a trial of `task` that gave `answers` (the last is the final answer)."""
        if self.spec is None:
            return Quality(value=None, reason=self.why_none)
        if not answers:
            return Quality(value=None, reason=NO_ANSWER)
        if self._redactor is None:  # made on first use: a judge without a model never needs one
            self._redactor = DefaultRedactor()
        prompt = quality_prompt(task, answers, self._redactor)
        spec, cache = self.spec, self._cache() if self._cache is not None else None
        key = call_key(spec.name, spec.family, prompt, json_schema(QualityAnswer))
        entry = cache.get_answer(key) if cache is not None else None
        spent = 0
        if entry is None:
            before = self.counters.tokens
            try:
                reply = asyncio.run(call_model(backend_for(spec), prompt, QualityAnswer, budget=self.budget,
                                               retry=self.retry, counters=self.counters))
            except CollectionError as e:
                return Quality(value=None, reason=f"{spec.name}: {e}", tokens=self.counters.tokens - before)
            # The collectors' entry shape, so the cache stays one kind of thing.
            entry = {"model": spec.name, "data": reply.data, "tokens": reply.tokens, "cost_usd": reply.cost_usd}
            spent = reply.tokens
            if cache is not None:
                cache.put_answer(key, entry)
        answer = QualityAnswer.model_validate(entry["data"])
        value = score(answer)
        items: dict[str, Verdict] = {item: getattr(answer, item) for item, _ in ITEMS}
        return Quality(value=value, reason=answer.reason if value is not None else "no checklist item applied",
                       items=items, tokens=spent)


__all__ = ["ITEMS", "NO_ANSWER", "NO_MODEL", "Quality", "QualityAnswer", "QualityJudge", "Verdict",
           "quality_prompt", "score"]
