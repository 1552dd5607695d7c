"""The simulator's knobs (`SimConfig`) and the internal parameters derived from them (`Derived`).

Knobs are stated as the figures the study reports (docs/method.md sections 3, 4 and 7): a failure rate, a
conditional failure rate given a missing step, a replay rate after failure. The generator needs the
inverse quantities (how often a step is missing given that the turn failed, how much fast-answer mass the
delivered turns carry), so `derive` solves for them by Bayes' rule once, and a config whose targets cannot
hold together is rejected with the names of the fields involved.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from agent_factory.errors import SpecError
from agent_factory.frozen import Frozen
from agent_factory.validation import describe_error

FAST_OK_TOP_S = 10.0
"""Quick delivered normal answers (greetings, cached figures) take from 1 s up to this."""
SLOW_FAILURE_SHORT = 0.1
"""Share of the normal failures outside the fast and mid bands that end before 10 s (the rest time out)."""

Rate = Annotated[float, Field(ge=0.0, le=1.0)]
"""A probability or share in [0, 1]."""
Positive = Annotated[float, Field(gt=0.0)]
"""A strictly positive quantity (seconds, a mean, a spread)."""


class SimConfig(Frozen):
    """Every knob of the traffic simulator. Defaults reproduce the shape of the reference study."""

    # --- population -------------------------------------------------------------------------------------
    users: int = Field(default=1136, ge=1)
    """Number of real (external) users. Non-real accounts come on top of these."""
    seed: int = Field(default=0, ge=0)
    """Random seed: the same config gives byte-identical output files."""
    start: datetime = datetime(2025, 3, 3, tzinfo=UTC)
    """Start of the simulated period (UTC); users' first sessions fall in [start, start + period_days)."""
    period_days: Positive = 28.0
    """Length of the window in which users' first sessions start."""
    sessions_per_user_mean: float = Field(default=3.867, ge=1.0)
    """Mean sessions per real user (study: 4,393 sessions / 1,136 users)."""
    sessions_per_user_sigma: float = Field(default=1.0, ge=0.0)
    """Log-scale spread of users' activity (Poisson-lognormal sessions per user); larger is more heavy-tailed."""
    single_turn_session_share: Rate = 0.634
    """Share of sessions with exactly one turn."""
    turns_per_session_mean: float = Field(default=1.943, ge=1.0)
    """Mean turns per session (study: 8,537 / 4,393)."""
    chinese_share: Rate = 0.85
    """Share of users who write in Chinese; the others write in English."""
    language_switch_rate: Rate = 0.03
    """Chance that a new request is written in the user's other language."""
    mode_share_simple: Rate = 0.14
    """Share of turns in `simple` mode."""
    mode_share_deep: Rate = 0.06
    """Share of turns in `deep` (asynchronous report) mode; `normal` takes the rest."""
    session_mode_stickiness: Rate = 0.85
    """Chance that a turn keeps its session's mode instead of drawing a new one."""
    short_prompt_rate: Rate = 0.04
    """Share of new requests that are 1-5 characters long."""
    followup_share: Rate = 0.7
    """Share of later turns of a session that follow up on the previous request, of those that neither resend
    it nor carry one of the session-level behaviours below (frustration, abandonment, repair, clarification)."""
    think_time_median_s: Positive = 45.0
    """Median pause between an answer and the next message in a session."""
    replay_think_time_median_s: Positive = 15.0
    """Median pause before the next message after a failed turn (users resend quickly)."""
    think_time_sigma: float = Field(default=0.8, ge=0.0)
    """Log-scale spread of in-session pauses."""

    # --- non-real traffic (provenance segments) -----------------------------------------------------------
    internal_turn_share: Rate = 0.065
    """Share of raw turns from internal accounts (`user.account_type = internal`)."""
    test_turn_share: Rate = 0.025
    """Share of raw turns from test accounts (`user.account_type = test`)."""
    suggestion_turn_share: Rate = 0.060
    """Share of raw turns that are clicks on cached suggestion prompts (`request.source = suggestion_cache`)."""
    synthetic_turn_share: Rate = 0.011
    """Share of raw turns that are synthetic monitoring probes (`traffic.synthetic = true`)."""
    internal_accounts: int = Field(default=1, ge=1)
    """Number of internal accounts sharing the internal turns."""
    test_accounts: int = Field(default=1, ge=1)
    """Number of test accounts sharing the test turns."""
    probe_accounts: int = Field(default=1, ge=1)
    """Number of synthetic probe identities."""
    suggestion_failure_rate: Rate = 0.002
    """Delivery failure rate of suggestion clicks (their deep reports come from a cache)."""

    # --- execution: delivery failure -----------------------------------------------------------------------
    failure_rate: Rate = 0.036
    """Delivery failure rate over all real turns; the normal-mode rate is solved from it."""
    failure_rate_deep: Rate = 0.080
    """Delivery failure (abnormal stop) rate of deep tasks."""
    failure_rate_simple: Rate = 0.020
    """Delivery failure rate of simple answers."""
    failure_user_shape: float = Field(default=0.12, ge=0.0)
    """Gamma shape of each real user's failure propensity (mean 1): smaller concentrates failures in fewer
    users (study: 3.6% of turns but only 10.3% of users failed); 0 makes every user alike."""
    short_prompt_failure_rate: Rate = 0.073
    """Failure rate of 1-5 character requests, any mode."""
    failure_share_empty: Rate = 0.5
    """Share of failures that deliver an empty answer."""
    failure_share_error: Rate = 0.3
    """Share of failures that end in an error (no answer); truncated answers take the rest."""
    fail_rate_no_thinking: Rate = 0.157
    """Failure rate of normal turns without a thinking step."""
    fail_rate_with_thinking: Rate = 0.0
    """Failure rate of normal turns with a thinking step."""
    fail_rate_no_retrieval: Rate = 0.216
    """Failure rate of normal turns without a retrieval step."""
    fail_rate_with_retrieval: Rate = 0.010
    """Failure rate of normal turns with a retrieval step."""

    # --- execution: latency and steps ---------------------------------------------------------------------
    latency_gm_normal_s: Positive = 50.0
    """Geometric mean latency of delivered normal turns (the per-mode baseline)."""
    latency_gm_simple_s: Positive = 8.0
    """Geometric mean latency of delivered simple turns."""
    latency_gm_deep_s: Positive = 900.0
    """Geometric mean duration of completed deep tasks."""
    latency_sigma_normal: float = Field(default=0.55, ge=0.0)
    """Log-scale spread of the main delivered normal latency component."""
    latency_sigma_simple: float = Field(default=0.6, ge=0.0)
    """Log-scale spread of simple latencies."""
    latency_sigma_deep: float = Field(default=0.45, ge=0.0)
    """Log-scale spread of completed deep-task durations."""
    fast_band_s: Positive = 5.0
    """Upper edge of the fast-answer band (seconds)."""
    fast_band_failure_rate: Rate = 0.387
    """Failure rate of normal turns answered within `fast_band_s`."""
    fast_failure_share: Rate = 0.6
    """Share of normal-mode failures that come back within `fast_band_s`."""
    mid_band_failure_rate: Rate = 0.001
    """Failure rate of normal turns answered in 10-120 s."""
    deep_early_stop_share: Rate = 0.85
    """Share of abnormal deep stops at progress <= `deep_early_stop_progress`."""
    deep_early_stop_progress: Rate = 0.2
    """Progress bound of an early deep stop."""
    deep_stop_latency_median_s: Positive = 60.0
    """Median time until an abnormal deep stop."""
    normal_extra_llm_rate: Rate = 0.25
    """Chance that a normal turn makes a second LLM call (query rewrite)."""
    normal_tool_call_rate: Rate = 0.22
    """Chance that a normal turn calls tools (1 + Poisson(0.3) calls)."""
    deep_steps_mean: float = Field(default=3.5, ge=1.0)
    """Mean analysis steps (each a tool call with an LLM reading its result) of a deep task."""

    # --- conversation and engagement -----------------------------------------------------------------------
    replay_after_failure_rate: Rate = 0.515
    """Chance that the next message after a failed turn resends the previous request."""
    replay_after_success_rate: Rate = 0.126
    """Chance that the next message after a delivered turn resends the previous request."""
    verbatim_replay_share: Rate = 0.6
    """Share of replays that are verbatim (the rest are near-verbatim, still Jaccard >= `redo_jaccard`)."""
    redo_after_failure_rate: Rate = 0.386
    """Chance that the session after one that ended in failure starts by redoing its last request."""
    redo_after_success_rate: Rate = 0.064
    """Chance of such a redo after a session that ended in a delivered answer."""
    redo_jaccard: Rate = 0.6
    """Character-bigram Jaccard from which two requests count as the same (redo)."""
    return_median_after_failure_s: Positive = 540.0
    """Median gap to the next session after a session that ended in failure (study: 9 min)."""
    return_median_after_success_s: Positive = 65520.0
    """Median gap to the next session otherwise (study: 18.2 h)."""
    return_gap_sigma: float = Field(default=1.2, ge=0.0)
    """Log-scale spread of gaps between a user's sessions; with the sessions per user it sets the share of
    single-turn sessions followed by a return within T (study: 71.5%)."""
    return_window_days: Positive = 7.0
    """The engagement window T: a session with a next one within T counts as returned."""

    # --- trajectory: session-level behaviour (docs/method.md section 4) ----------------------------------------
    # A later message that does not resend the previous request is, in this order: a give-up (last message
    # only), a frustrated message, the answer to a clarifying question, a context repair, else an ordinary
    # follow-up or new request. Each is labelled in truth.jsonl; truth_sessions.jsonl applies the outcome rule.
    frustration_after_failure_rate: Rate = 0.35
    """Chance that the next message after a failed turn, when it does not resend the request, vents frustration
    ("怎么又报错了", "It failed again"); the agent retries the topic."""
    frustration_after_repeat_failure_rate: Rate = 0.6
    """The same after the session's second or later failed turn ("我说了多少遍了", "How many times do I have to
    ask?")."""
    frustration_after_success_rate: Rate = 0.06
    """Chance that a message after a delivered answer (not a resend) is exasperated with it ("这也太离谱了")."""
    abandonment_after_failure_rate: Rate = 0.4
    """Chance that the last message of a multi-turn session, after a failed turn and not a resend, gives up
    ("算了，我自己用Excel算吧", "Forget it, I'll pull the numbers myself")."""
    abandonment_after_success_rate: Rate = 0.1
    """Chance that the last message of a multi-turn session after a delivered answer gives up on it."""
    context_repair_rate: Rate = 0.3
    """Chance that a later message after a delivered answer corrects the context the agent lost or misread
    ("我说的是2024年第三季度，不是上个月", "I meant Q3 2024, not last month"); the agent answers the corrected topic."""
    clarification_rate: Rate = 0.1
    """Chance that the agent answers a delivered normal-mode request with a clarifying question instead (greetings
    and 1-5 character prompts always get one); the user's next message, unless a resend or a vent, answers it."""
    clarification_repeat_rate: Rate = 0.4
    """The same for a request that answers a clarifying question: the agent asks again, a clarification loop."""

    # --- conduct: natural behaviour -----------------------------------------------------------------------
    natural_disclosure_rate: Rate = 0.0157
    """Share of delivered answers that name the operating company unprompted (study: 134 of 8,537)."""
    natural_template_rate: Rate = 0.0109
    """Share of delivered answers that open with the file-summary template without a file (study: 93)."""
    company_name_zh: str = Field(default="锐思数据科技", min_length=1)
    """The operating company, as named in Chinese answers."""
    company_name_en: str = Field(default="RuiSi Data Technology", min_length=1)
    """The operating company, as named in English answers."""

    # --- planted defects (all off by default) ---------------------------------------------------------------
    defect_user_share: Rate = 1.0
    """Share of real users whose turns are eligible for the planted defects below (study: half)."""
    plant_blank_rate: Rate = 0.0
    """Chance that a delivered answer is blanked (logged as an empty answer)."""
    plant_replay_rate: Rate = 0.0
    """Chance that a later turn's request is rewritten to resend the previous request verbatim."""
    plant_disclosure_rate: Rate = 0.0
    """Chance that a delivered answer gets a sentence naming the operating company."""
    plant_template_rate: Rate = 0.0
    """Chance that a delivered answer gets the file-summary template inserted."""
    plant_latency_scale: Positive = 1.0
    """Factor applied to the latency of every turn of defect users."""
    plant_injection_rate: Rate = 0.0
    """Chance that a request carries prompt-injection text."""
    plant_secret_rate: Rate = 0.0
    """Chance that a request carries a secret (email, phone number, API key or card number)."""

    @field_validator("start")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        # A naive time would be read in the machine's zone, and the same seed would give other bytes elsewhere.
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)

    @model_validator(mode="after")
    def _coherent(self) -> SimConfig:
        derive(self)  # raises ValueError naming the fields whose targets cannot hold together
        return self


def _check(ok: bool, fields: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{fields}: {message}")


@dataclass(frozen=True)
class Derived:
    """Generator parameters solved from a `SimConfig`'s targets."""

    fail_normal: float
    """Marginal failure rate of normal turns."""
    fail_long: dict[str, float]
    """Failure rate per mode of requests longer than 5 characters; key `short` for 1-5 character requests."""
    fail_scaled: dict[str, float]
    """The same rates as base probabilities for real users, whose propensity multiplies them (capped at 1)."""
    p_no_thinking: tuple[float, float]
    """P(no thinking | delivered), P(no thinking | failed) for normal turns."""
    p_no_retrieval: tuple[float, float]
    """P(no retrieval | delivered), P(no retrieval | failed) for normal turns."""
    fast_ok_share: float
    """Share of delivered normal turns in the quick component (1 s to `FAST_OK_TOP_S`)."""
    mid_fail_share: float
    """Share of failed normal turns answered in 10-120 s."""
    mu_normal_ok: float
    """Log-scale centre of the main delivered normal latency component."""
    extra_turn_p: float
    """Geometric parameter of turns beyond two in multi-turn sessions."""
    sessions_mu: float
    """Log-scale centre of the Poisson rate of extra sessions per user."""
    suggestion_per_turn: float
    """Expected suggestion clicks per real turn."""
    other_nonreal_per_real: float
    """Internal, test and probe turns per real turn."""


def _log_uniform_mean(a: float, b: float) -> float:
    return (math.log(a) + math.log(b)) / 2.0


def _lognormal_between(mu: float, sigma: float, lo: float, hi: float) -> float:
    """P(lo < X < hi) for log X ~ Normal(mu, sigma)."""
    if sigma == 0:
        return 1.0 if lo < math.exp(mu) < hi else 0.0

    def cdf(x: float) -> float:
        return 0.5 * (1.0 + math.erf((math.log(x) - mu) / (sigma * math.sqrt(2.0))))

    return cdf(hi) - cdf(lo)


def _uncapped(p: float, shape: float) -> float:
    """The base rate a with E[min(1, a * m)] = p for m ~ Gamma(shape, 1 / shape): undoes the cap's bias."""
    if shape <= 0 or p <= 0 or p >= 1:
        return p
    from scipy.special import gammainc

    def capped_mean(a: float) -> float:
        # E[a m; m < 1/a] + P(m >= 1/a), using E[m 1{m < x}] = F_{shape+1}(x) when E[m] = 1.
        x = shape / a
        return a * float(gammainc(shape + 1.0, x)) + 1.0 - float(gammainc(shape, x))

    lo, hi = p, 1.0
    while capped_mean(hi) < p:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if capped_mean(mid) < p else (lo, mid)
    return (lo + hi) / 2.0


def _conditional_missing(p_fail: float, rate_missing: float, rate_present: float,
                         fields: str) -> tuple[float, float]:
    """P(step missing | delivered), P(step missing | failed) so that the failure rates given the step hold."""
    _check(rate_missing > rate_present, fields, "the failure rate without the step must exceed the rate with it")
    _check(rate_present <= p_fail <= rate_missing, fields,
           f"the normal-mode failure rate {p_fail:.4f} must lie between the two conditional rates")
    missing = (p_fail - rate_present) / (rate_missing - rate_present)
    given_fail = rate_missing * missing / p_fail if p_fail > 0 else 0.0
    given_ok = (1.0 - rate_missing) * missing / (1.0 - p_fail) if p_fail < 1 else 0.0
    return given_ok, given_fail


def derive(c: SimConfig) -> Derived:
    """Solve the generator's parameters from the config's targets; ValueError names the conflicting fields."""
    share_normal = 1.0 - c.mode_share_simple - c.mode_share_deep
    _check(share_normal > 0, "mode_share_simple, mode_share_deep", "must leave a positive share for normal mode")
    fail_normal = (c.failure_rate - c.mode_share_simple * c.failure_rate_simple
                   - c.mode_share_deep * c.failure_rate_deep) / share_normal
    _check(0.0 <= fail_normal < 1.0, "failure_rate, failure_rate_simple, failure_rate_deep, mode_share_*",
           f"imply a normal-mode failure rate of {fail_normal:.4f}, outside [0, 1)")
    s = c.short_prompt_rate
    fail_long: dict[str, float] = {}
    for mode, p in (("normal", fail_normal), ("simple", c.failure_rate_simple), ("deep", c.failure_rate_deep)):
        q = (p - s * c.short_prompt_failure_rate) / (1.0 - s) if s < 1 else p
        _check(0.0 <= q <= 1.0, f"short_prompt_rate, short_prompt_failure_rate, failure_rate ({mode})",
               f"leave a failure rate of {q:.4f} for longer {mode} requests, outside [0, 1]")
        fail_long[mode] = q
    fail_long["short"] = c.short_prompt_failure_rate
    fail_scaled = {k: _uncapped(p, c.failure_user_shape) for k, p in fail_long.items()}
    no_thinking = _conditional_missing(fail_normal, c.fail_rate_no_thinking, c.fail_rate_with_thinking,
                                       "fail_rate_no_thinking, fail_rate_with_thinking, failure_rate")
    no_retrieval = _conditional_missing(fail_normal, c.fail_rate_no_retrieval, c.fail_rate_with_retrieval,
                                        "fail_rate_no_retrieval, fail_rate_with_retrieval, failure_rate")
    _check(c.failure_share_empty + c.failure_share_error <= 1.0, "failure_share_empty, failure_share_error",
           "must sum to at most 1 (truncation takes the rest)")
    _check(1.0 < c.fast_band_s < 10.0, "fast_band_s", "must lie between 1 s and the 10 s edge of the mid band")
    # Fast band: P(fail | fast) = r fixes how much delivered mass sits in the band.
    r, q, pf = c.fast_band_failure_rate, c.fast_failure_share, fail_normal
    if q == 0 or pf == 0:
        fast_ok = 0.0
    else:
        _check(r > 0, "fast_band_failure_rate", "must be positive when normal failures come back fast")
        fast_ok = pf * q * (1.0 - r) / (r * (1.0 - pf))
        # The quick delivered component spans [1 s, FAST_OK_TOP_S); only part of it falls in the band.
        fast_ok /= math.log(c.fast_band_s) / math.log(FAST_OK_TOP_S)
    _check(fast_ok < 0.5, "fast_band_failure_rate, fast_failure_share",
           f"imply {fast_ok:.1%} of delivered normal turns in the fast band; raise the band's failure rate")
    # Centre of the main component so that delivered normal turns have the configured geometric mean.
    fast_log = _log_uniform_mean(1.0, FAST_OK_TOP_S)
    mu = (math.log(c.latency_gm_normal_s) - fast_ok * fast_log) / (1.0 - fast_ok)
    # Failed mass in 10-120 s so that P(fail | 10-120 s) equals the configured mid-band rate.
    ok_mid = (1.0 - fast_ok) * _lognormal_between(mu, c.latency_sigma_normal, 10.0, 120.0)
    rm = c.mid_band_failure_rate
    mid = rm * (1.0 - pf) * ok_mid / ((1.0 - rm) * pf) if pf > 0 and rm < 1 else 0.0
    _check(q + mid <= 1.0, "fast_failure_share, mid_band_failure_rate", "leave no room for slow failures")
    single, mean = c.single_turn_session_share, c.turns_per_session_mean
    _check(single < 1.0 or mean == 1.0, "single_turn_session_share, turns_per_session_mean",
           "all sessions single-turn needs a mean of exactly 1")
    extra = (mean - single) / (1.0 - single) - 2.0 if single < 1 else 0.0
    _check(extra >= 0.0, "single_turn_session_share, turns_per_session_mean",
           f"multi-turn sessions would average {extra + 2:.2f} turns, fewer than 2")
    sessions_extra = c.sessions_per_user_mean - 1.0
    sessions_mu = (math.log(sessions_extra) - c.sessions_per_user_sigma ** 2 / 2.0) if sessions_extra > 0 \
        else -math.inf
    nonreal = c.internal_turn_share + c.test_turn_share + c.suggestion_turn_share + c.synthetic_turn_share
    _check(nonreal < 0.9, "internal_turn_share, test_turn_share, suggestion_turn_share, synthetic_turn_share",
           f"sum to {nonreal:.3f}; non-real traffic must stay below 0.9 of raw turns")
    return Derived(
        fail_normal=fail_normal, fail_long=fail_long, fail_scaled=fail_scaled, p_no_thinking=no_thinking,
        p_no_retrieval=no_retrieval,
        fast_ok_share=fast_ok, mid_fail_share=mid, mu_normal_ok=mu, extra_turn_p=1.0 / (1.0 + extra),
        sessions_mu=sessions_mu, suggestion_per_turn=c.suggestion_turn_share / (1.0 - nonreal),
        other_nonreal_per_real=(nonreal - c.suggestion_turn_share) / (1.0 - nonreal),
    )


def load_config(path: Path, **overrides: Any) -> SimConfig:
    """A `SimConfig` from a YAML or JSON file (keys are field names), with `overrides` on top.

    Raises `SpecError` naming the file and every offending field.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{path}: cannot read simulator config: {e}") from e
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            from agent_factory import yamlio

            data = yamlio.safe_load(text)
    except ValueError as e:  # json.JSONDecodeError and yaml.YAMLError's parse errors
        raise SpecError(f"{path}: not valid {path.suffix.lstrip('.') or 'YAML'}: {e}") from e
    except Exception as e:  # yaml raises its own error tree, not ValueError
        raise SpecError(f"{path}: not valid YAML: {e}") from e
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"{path}: simulator config must be a mapping of knob names, got {type(data).__name__}")
    try:
        return SimConfig.model_validate({**data, **overrides})
    except ValidationError as e:
        raise SpecError(f"{path}: {describe_error(e, {**data, **overrides})}") from None
