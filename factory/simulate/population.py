"""Users, sessions and turns: the accounts of each segment, drawn one session at a time as `TurnPlan`s.

Three random streams per account keep experiments paired: `base` draws the traffic itself, `defect` draws
the planted defects (a fixed number of draws per turn, so which turns are planted does not move when a rate
changes), and the span stream (used by `traces`) draws timings and token counts. Planted defects only
rewrite what is logged, as the study's seeded-defect experiment did: users behave as they did without them,
so the same seed with and without defects yields the same underlying traffic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np

from agent_factory.digest import stable_id
from agent_factory.factory.simulate import behaviour, texts
from agent_factory.factory.simulate.config import FAST_OK_TOP_S, SLOW_FAILURE_SHORT, Derived, SimConfig
from agent_factory.factory.simulate.defects import plant, plants_active
from agent_factory.factory.simulate.plan import NS, SEEN_ANSWER, Exec, Segment, TurnPlan, trace_id
from agent_factory.factory.simulate.texts import Request

_ERRORS = ("upstream model timeout", "generation failed: internal error", "rate limited by model provider",
           "context length exceeded")
_DEEP_ERRORS = ("task aborted: data source unavailable", "task aborted: planner returned no steps",
                "task aborted: worker lost")


def _lognormal(rng: np.random.Generator, median: float, sigma: float) -> float:
    return median * math.exp(sigma * float(rng.standard_normal()))


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return math.exp(float(rng.uniform(math.log(lo), math.log(hi))))


def _failure_kind(rng: np.random.Generator, c: SimConfig) -> str:
    u = float(rng.random())
    if u < c.failure_share_empty:
        return "failed_empty"
    return "failed_error" if u < c.failure_share_empty + c.failure_share_error else "failed_truncated"


def execute(rng: np.random.Generator, c: SimConfig, d: Derived, mode: str, *, short: bool,
            propensity: float | None = None) -> Exec:
    """Draw whether the turn fails, which chain steps it ran and how long it took.

    `propensity` is the real user's failure multiplier (None for accounts without one).
    """
    key = "short" if short else mode
    if propensity is None:
        p_fail = d.fail_long[key]
    else:
        p_fail = min(1.0, d.fail_scaled[key] * propensity)
    failed = float(rng.random()) < p_fail
    kind = _failure_kind(rng, c) if failed else "delivered"
    if mode == "simple":
        return Exec(failed, kind, _lognormal(rng, c.latency_gm_simple_s, c.latency_sigma_simple), False, False)
    if mode == "deep":
        planned = 1 + int(rng.poisson(c.deep_steps_mean - 1.0))
        if not failed:
            lat = _lognormal(rng, c.latency_gm_deep_s, c.latency_sigma_deep)
            return Exec(False, kind, lat, True, True, planned_steps=planned, done_steps=planned)
        bound = c.deep_early_stop_progress
        early = float(rng.random()) < c.deep_early_stop_share
        progress = float(rng.uniform(0.0, bound) if early else rng.uniform(bound, 0.95))
        progress = round(max(progress, 0.01), 3)
        lat = _lognormal(rng, c.deep_stop_latency_median_s, 1.0)
        return Exec(True, kind, lat, True, progress >= 0.1, planned_steps=planned,
                    done_steps=int(progress * planned), progress=progress)
    # normal mode: steps conditional on the outcome, so P(fail | step missing) hits its target
    has_thinking = float(rng.random()) >= d.p_no_thinking[failed]
    has_retrieval = float(rng.random()) >= d.p_no_retrieval[failed]
    u = float(rng.random())
    band = c.fast_band_s
    if failed:
        slow = (1.0 - c.fast_failure_share - d.mid_fail_share) * SLOW_FAILURE_SHORT
        if u < c.fast_failure_share:
            lat = _log_uniform(rng, 0.5, band)
        elif u < c.fast_failure_share + d.mid_fail_share:
            lat = _log_uniform(rng, 10.0, 120.0)
        elif u < c.fast_failure_share + d.mid_fail_share + slow:
            lat = _log_uniform(rng, band, 10.0)
        else:
            lat = _log_uniform(rng, 120.0, 600.0)  # timeouts
    elif u < d.fast_ok_share:
        lat = _log_uniform(rng, 1.0, FAST_OK_TOP_S)
    else:
        lat = math.exp(d.mu_normal_ok + c.latency_sigma_normal * float(rng.standard_normal()))
    extra_llm = float(rng.random()) < c.normal_extra_llm_rate
    tools = 1 + int(rng.poisson(0.3)) if float(rng.random()) < c.normal_tool_call_rate else 0
    return Exec(failed, kind, lat, has_thinking, has_retrieval, extra_llm, 0 if failed else tools)


@dataclass(slots=True)
class _Account:
    """Per-account state while its sessions are drawn."""

    key: tuple[object, ...]
    user_id: str
    segment: Segment
    account_type: str
    lang: str
    rng: np.random.Generator
    drng: np.random.Generator | None  # planted-defect stream; None when the account gets no defects
    short_rate: float
    propensity: float | None = None


class Population:
    """Draws accounts' sessions as lists of `TurnPlan`, one session at a time (constant memory)."""

    def __init__(self, c: SimConfig, d: Derived) -> None:
        self.c = c
        self.d = d
        self.planting = plants_active(c)

    # --- accounts -----------------------------------------------------------------------------------------
    def _account(self, segment: Segment, index: int, account_type: str) -> _Account:
        c = self.c
        key = (segment, index)
        rng = np.random.default_rng([c.seed, 0, _SEGMENT_CODE[segment], index])
        lang = "zh" if float(rng.random()) < c.chinese_share else "en"
        drng = None
        if segment == "real" and self.planting:
            drng = np.random.default_rng([c.seed, 1, index])
            if float(drng.random()) >= c.defect_user_share:
                drng = None
        short = c.short_prompt_rate if segment != "test" else max(c.short_prompt_rate, 0.3)
        shape = c.failure_user_shape
        propensity = float(rng.gamma(shape, 1.0 / shape)) if segment == "real" and shape > 0 else None
        return _Account(key, stable_id(c.seed, *key, prefix="u_"), segment, account_type, lang, rng, drng, short,
                        propensity)

    def real_user(self, index: int) -> Iterator[list[TurnPlan]]:
        """A real user's sessions in time order, with their suggestion-click sessions interleaved."""
        c, d = self.c, self.d
        acc = self._account("real", index, "external")
        rng = acc.rng
        lam = math.exp(d.sessions_mu + c.sessions_per_user_sigma * float(rng.standard_normal()))
        n_sessions = 1 + (int(rng.poisson(lam)) if math.isfinite(d.sessions_mu) else 0)
        t = c.start.timestamp() + float(rng.uniform(0.0, c.period_days * 86400.0))
        prev: TurnPlan | None = None
        for j in range(n_sessions):
            turns = self._session(acc, j, int(t * NS), self._turn_count(rng), prev)
            yield turns
            last = turns[-1]
            median = c.return_median_after_failure_s if last.ex.failed else c.return_median_after_success_s
            gap = _lognormal(rng, median, c.return_gap_sigma)
            end = last.end_ns / NS
            clicks = int(rng.poisson(d.suggestion_per_turn * len(turns)))
            for m in range(clicks):
                at = end + float(rng.uniform(0.0, 0.5)) * min(gap, 86400.0)
                yield [self._suggestion(acc, j, m, int(at * NS))]
            t = end + gap
            prev = last

    def other_account(self, segment: Segment, index: int, n_turns: int) -> Iterator[list[TurnPlan]]:
        """`n_turns` turns of an internal, test or probe account, spread over the period."""
        c = self.c
        if segment == "synthetic":
            acc = self._account(segment, index, "external")
            step = c.period_days * 86400.0 / max(n_turns, 1)
            t0 = c.start.timestamp() + float(acc.rng.uniform(0.0, step))
            for j in range(n_turns):
                yield [self._probe(acc, j, int((t0 + j * step) * NS))]
            return
        acc = self._account(segment, index, segment)
        rng = acc.rng
        sessions = max(1.0, n_turns / c.turns_per_session_mean)
        median_gap = c.period_days * 86400.0 / sessions
        t = c.start.timestamp() + float(rng.uniform(0.0, median_gap))
        left, j, prev = n_turns, 0, None
        while left > 0:
            turns = self._session(acc, j, int(t * NS), min(left, self._turn_count(rng)), prev)
            yield turns
            left -= len(turns)
            prev = turns[-1]
            t = prev.end_ns / NS + _lognormal(rng, median_gap * 0.5, 1.0)
            j += 1

    # --- sessions -----------------------------------------------------------------------------------------
    def _turn_count(self, rng: np.random.Generator) -> int:
        if float(rng.random()) < self.c.single_turn_session_share:
            return 1
        return 1 + int(rng.geometric(self.d.extra_turn_p))

    def _mode(self, rng: np.random.Generator) -> str:
        u = float(rng.random())
        return "simple" if u < self.c.mode_share_simple else \
            "deep" if u < self.c.mode_share_simple + self.c.mode_share_deep else "normal"

    def _session(self, acc: _Account, j: int, t_ns: int, n: int, prev_last: TurnPlan | None) -> list[TurnPlan]:
        c = self.c
        rng = acc.rng
        session_id = stable_id(c.seed, *acc.key, j, prefix="s_")
        session_mode = self._mode(rng)
        turns: list[TurnPlan] = []
        failures = 0  # failed turns so far, as the user experienced them (before planted defects)
        for k in range(n):
            prev = turns[-1] if turns else None
            req, replay_of, redo_of, verbatim, short = self._request(acc, prev, prev_last if k == 0 else None,
                                                                     failures=failures, last=k == n - 1)
            if replay_of is not None:
                mode = prev.mode if prev is not None else session_mode
            else:
                mode = session_mode if float(rng.random()) < c.session_mode_stickiness else self._mode(rng)
            ex = execute(rng, c, self.d, mode, short=short, propensity=acc.propensity)
            tp = self._turn(acc, session_id, j, k, t_ns, mode, req, ex)
            tp.is_replay = replay_of is not None
            tp.is_verbatim_replay = tp.is_replay and verbatim
            tp.replay_of = replay_of
            tp.redo_of = redo_of
            source = prev if replay_of is not None else prev_last if redo_of is not None else None
            if source is not None:  # a resend carries whatever the original request carried
                tp.injection, tp.secrets = source.injection, list(source.secrets)
            if acc.drng is not None:
                plant(c, acc.drng, tp, prev)
            self._label_resend(tp, prev)
            turns.append(tp)
            failures += ex.failed
            pause = c.replay_think_time_median_s if ex.failed else c.think_time_median_s
            t_ns = tp.end_ns + int(_lognormal(rng, pause, c.think_time_sigma) * NS)
        return turns

    def _request(self, acc: _Account, prev: TurnPlan | None, prev_session_last: TurnPlan | None, *,
                 failures: int, last: bool) -> tuple[Request, str | None, str | None, bool, bool]:
        """(request, replay_of, redo_of, verbatim copy?, short?) for the next turn.

        `failures` counts the session's failed turns so far; `last` says the turn ends the session. What the
        user does is drawn from what they experienced (natural delivery and requests), never from planted
        defects, so runs with and without defects stay paired.
        """
        c, rng = self.c, acc.rng
        if prev is not None:
            rate = c.replay_after_failure_rate if prev.ex.failed else c.replay_after_success_rate
            if float(rng.random()) < rate:
                req, verbatim = self._copy(rng, prev.request)
                return req, prev.trace_id, None, verbatim, _is_short(req.text)
        # A new session redoes a request, never a vent, a give-up or a reply to a question.
        if prev_session_last is not None and prev_session_last.natural_request.act is None:
            end = prev_session_last
            rate = c.redo_after_failure_rate if end.ex.failed else c.redo_after_success_rate
            if float(rng.random()) < rate:
                req, verbatim = self._copy(rng, end.request)
                return req, None, end.trace_id, verbatim, _is_short(req.text)
        lang = acc.lang
        if float(rng.random()) < c.language_switch_rate:
            lang = "en" if lang == "zh" else "zh"
        before = prev.natural_request if prev is not None else None
        if prev is not None and before is not None:
            act = behaviour.draw_act(
                rng, c, after_failure=prev.ex.failed, failures=failures, last=last,
                clarified=prev.clarifying and prev.natural_delivery in SEEN_ANSWER,
                can_repair=not prev.ex.failed and before.topic is not None and not prev.clarifying)
            if act is not None:
                req = self._unlike(before, partial(behaviour.act_request, rng, act, before, lang,
                                                   after_failure=prev.ex.failed, failures=failures))
                return req, None, None, False, False
        if before is not None and float(rng.random()) < c.followup_share:
            req = self._unlike(before, partial(texts.followup_request, rng, before, lang))
            return req, None, None, False, False
        short = float(rng.random()) < acc.short_rate
        req = self._unlike(before, partial(texts.new_request, rng, lang, short=short))
        return req, None, None, False, short

    def _unlike(self, before: Request | None, draw: Callable[[], Request]) -> Request:
        """`draw()`, re-drawn a bounded number of times while it would resend `before` by the replay definition.

        Not meant as a resend, so it must not look like one: a follow-up template without a slot, or with the
        slot drawn again, repeats the previous follow-up word for word. `before` is the user's own previous
        request (before planted defects), so how many draws this takes does not depend on what was planted.
        """
        req = draw()
        for _ in range(_REDRAWS):
            if before is None or texts.resend_kind(before.text, req.text, threshold=self.c.redo_jaccard) is None:
                break
            req = draw()
        return req

    def _label_resend(self, tp: TurnPlan, prev: TurnPlan | None) -> None:
        """Set the replay labels from the logged texts by the replay definition (Jaccard >= `redo_jaccard` with the
        session's previous request, or equal once normalised): what truth promises an estimator must find.

        Intended resends meet the definition by construction; this also labels the rare fresh request that
        still comes out like the previous one (bounded re-draws, a short prompt typed twice).
        """
        kind = None if prev is None else texts.resend_kind(prev.request.text, tp.request.text,
                                                           threshold=self.c.redo_jaccard)
        tp.is_replay = kind is not None
        tp.is_verbatim_replay = kind == "verbatim"
        tp.replay_of = prev.trace_id if prev is not None and kind is not None else None

    def _copy(self, rng: np.random.Generator, src: Request) -> tuple[Request, bool]:
        if float(rng.random()) < self.c.verbatim_replay_share:
            return src, True
        req = texts.near_copy(rng, src, threshold=self.c.redo_jaccard)
        return req, texts.resend_kind(src.text, req.text, threshold=self.c.redo_jaccard) == "verbatim"

    # --- turns --------------------------------------------------------------------------------------------
    def _answer(self, rng: np.random.Generator, req: Request, mode: str, ex: Exec) -> tuple[str, bool]:
        """(the answer the agent means to give, whether it asks the user to clarify), before any failure."""
        c = self.c
        if req.act == "abandonment":
            return behaviour.acknowledgement(rng, req.lang), False
        if req.topic is None:  # a greeting or a one-word prompt: the agent asks what it is about
            return texts.answer_text(rng, req, mode), True
        if mode == "normal" and ex.kind == "delivered" and req.act in _CLARIFIABLE:
            rate = c.clarification_repeat_rate if req.act == "clarification_reply" else c.clarification_rate
            if float(rng.random()) < rate:
                return behaviour.clarifying_question(rng, req), True
        return texts.answer_text(rng, req, mode), False

    def _turn(self, acc: _Account, session_id: str, j: int, k: int, t_ns: int, mode: str, req: Request,
              ex: Exec) -> TurnPlan:
        c, rng = self.c, acc.rng
        planned, clarifying = self._answer(rng, req, mode, ex)
        answer: str | None = planned
        error = None
        if ex.kind == "failed_empty":
            answer = ""
        elif ex.kind == "failed_error":
            errors = _DEEP_ERRORS if mode == "deep" else _ERRORS
            error, answer = errors[int(rng.integers(len(errors)))], None
        elif ex.kind == "failed_truncated":
            answer = texts.truncate(rng, planned)
        disclosure = float(rng.random()) < c.natural_disclosure_rate
        template = float(rng.random()) < c.natural_template_rate
        tp = TurnPlan(
            trace_id=trace_id(c.seed, *acc.key, j, k), user_id=acc.user_id, session_id=session_id, turn_index=k,
            segment=acc.segment, account_type=acc.account_type, request_source="typed", synthetic=False,
            mode=mode, request=req, natural_request=req, answer=answer, delivery=ex.kind, natural_delivery=ex.kind,
            ex=ex, start_ns=t_ns, latency_ns=int(ex.latency_s * NS), error_message=error,
            defect_user=acc.drng is not None, clarifying=clarifying,
        )
        if ex.kind == "delivered" and disclosure:
            tp.answer = f"{answer}\n{texts.disclosure(req.lang, c.company_name_zh, c.company_name_en)}"
            tp.disclosure = True
        if ex.kind == "delivered" and template:
            tp.answer = texts.TEMPLATE_TEXT[req.lang] + (tp.answer or "")
            tp.template = True
        return tp

    def _suggestion(self, acc: _Account, j: int, m: int, t_ns: int) -> TurnPlan:
        """A click on a cached suggestion prompt: a deep report served from the cache in seconds."""
        c, rng = self.c, acc.rng
        req = texts.new_request(rng, acc.lang, short=False)
        failed = float(rng.random()) < c.suggestion_failure_rate
        ex = Exec(failed, _failure_kind(rng, c) if failed else "delivered", _lognormal(rng, 3.0, 0.4), False, False)
        key = ("suggestion", *acc.key, j, m)
        tp = self._turn(acc, stable_id(c.seed, *key, prefix="s_"), j, 0, t_ns, "deep", req, ex)
        tp.trace_id = trace_id(c.seed, *key)
        tp.segment = "suggestion"
        tp.request_source = "suggestion_cache"
        return tp

    def _probe(self, acc: _Account, j: int, t_ns: int) -> TurnPlan:
        c = self.c
        text = texts.PROBE_PROMPTS[j % len(texts.PROBE_PROMPTS)]
        ex = Exec(False, "delivered", _lognormal(acc.rng, 2.0, 0.3), False, False)
        key = (*acc.key, j)
        req = Request(text, "zh" if "健康" in text else "en", None)
        return TurnPlan(
            trace_id=trace_id(c.seed, *key), user_id=acc.user_id, session_id=stable_id(c.seed, *key, prefix="s_"),
            turn_index=0, segment="synthetic", account_type="external", request_source="typed", synthetic=True,
            mode="simple", request=req, natural_request=req, answer="OK",
            delivery="delivered", natural_delivery="delivered", ex=ex, start_ns=t_ns,
            latency_ns=int(ex.latency_s * NS),
        )


_CLARIFIABLE = (None, "context_repair", "clarification_reply")
"""Acts of a request the agent may answer with a clarifying question (not a vent or a give-up)."""
_REDRAWS = 8
"""Re-draws of a fresh request that came out as a resend of the previous one (then it is labelled one)."""
_SEGMENT_CODE = {"real": 0, "internal": 1, "test": 2, "suggestion": 3, "synthetic": 4}


def _is_short(text: str) -> bool:
    return 1 <= len(text.strip()) <= 5
