"""Ground truth: one record per turn, and the figures actually realised (`Tally`), kept in constant memory.

Realised figures are computed from what the logs show (delivery after planted defects, request texts as
written), so they are what a correct estimator reading `traces.otlp.jsonl` should find. Medians come from
fine log-scale histograms rather than stored lists, so memory does not grow with the number of users.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from agent_factory.evaluators.stats.text import bigram_jaccard
from agent_factory.factory.simulate.config import SimConfig
from agent_factory.factory.simulate.plan import NS, TurnPlan
from agent_factory.factory.simulate.sessions import EVENTS, OUTCOMES, session_record

MODES = ("normal", "simple", "deep")
SEGMENTS = ("real", "internal", "test", "suggestion", "synthetic")
_BANDS = (("under_5s", 0.0, 5.0), ("5_10s", 5.0, 10.0), ("10_120s", 10.0, 120.0), ("over_120s", 120.0, math.inf))


def rate(k: int, n: int) -> dict[str, Any]:
    """A realised proportion with its counts (rate None when nothing was observed)."""
    return {"k": k, "n": n, "rate": round(k / n, 6) if n else None}


class LogHistogram:
    """Median of positive values from a histogram with bins of 0.005 in log10 (about 1.2% wide)."""

    WIDTH = 0.005

    def __init__(self) -> None:
        self.bins: Counter[int] = Counter()
        self.n = 0

    def add(self, x: float) -> None:
        """Count one value."""
        self.bins[math.floor(math.log10(max(x, 1e-6)) / self.WIDTH)] += 1
        self.n += 1

    def median(self) -> float | None:
        """The median of the values counted (within a bin's width), or None when there are none."""
        if not self.n:
            return None
        half, seen = self.n / 2.0, 0
        for b in sorted(self.bins):
            seen += self.bins[b]
            if seen >= half:
                return round(10 ** ((b + 0.5) * self.WIDTH), 3)
        return None  # unreachable: the bins hold n values


def chain_complete(tp: TurnPlan) -> bool:
    """Whether the steps the mode needs are present (normal, deep: thinking and retrieval)."""
    return tp.mode == "simple" or (tp.ex.has_thinking and tp.ex.has_retrieval)


def truth_record(tp: TurnPlan, *, n_spans: int, session_len: int, redo_jaccard: float | None) -> dict[str, Any]:
    """The truth line of one turn."""
    failed = tp.delivery != "delivered"
    return {
        "trace_id": tp.trace_id, "user_id": tp.user_id, "session_id": tp.session_id, "turn_index": tp.turn_index,
        "segment": tp.segment, "account_type": tp.account_type, "request_source": tp.request_source,
        "synthetic": tp.synthetic, "mode": tp.mode, "language": tp.request.lang,
        "request_chars": len(tp.request.text), "short_prompt": 1 <= len(tp.request.text.strip()) <= 5,
        "delivery": tp.delivery, "failure_kind": tp.delivery if failed else None,
        "natural_delivery": tp.natural_delivery, "error_message": tp.error_message,
        "has_thinking": tp.ex.has_thinking, "has_retrieval": tp.ex.has_retrieval,
        "chain_complete": chain_complete(tp), "n_tools": tp.ex.n_tools or tp.ex.done_steps,
        "n_spans": n_spans, "n_steps": n_spans - 1, "latency_ms": round(tp.latency_ns / 1e6, 3),
        "start_unix_nano": tp.start_ns, "end_unix_nano": tp.end_ns, "progress": tp.ex.progress,
        "session_first": tp.turn_index == 0, "session_last": tp.turn_index == session_len - 1,
        "is_replay": tp.is_replay, "is_verbatim_replay": tp.is_verbatim_replay, "replay_of": tp.replay_of,
        "is_redo_of": tp.redo_of, "redo_jaccard": None if redo_jaccard is None else round(redo_jaccard, 4),
        "disclosure": tp.disclosure, "template": tp.template, "planted": list(tp.planted),
        "injection": tp.injection, "secrets": list(tp.secrets), "defect_user": tp.defect_user,
        # Trajectory: what the message does, and what the answer asks (see `behaviour` and `sessions`).
        "act": tp.request.act, "frustration": tp.request.act == "frustration",
        "abandonment": tp.request.act == "abandonment",
        "context_repair": tp.request.act == "context_repair" and tp.turn_index > 0,
        "asks_clarification": tp.asks_clarification,
    }


class Tally:
    """Streaming counters over the turns written, in the order they are written (user by user)."""

    def __init__(self, c: SimConfig) -> None:
        self.c = c
        self.cnt: Counter[str] = Counter()
        self.hist = {k: LogHistogram() for k in ("return_after_failure", "return_after_success", "deep_stop")}
        self.log_latency: dict[str, float] = {m: 0.0 for m in MODES}
        self._prev: TurnPlan | None = None  # last turn of the user's previous real session
        self._prev_len = 0
        self._user_failed = self._defect_user = False

    def begin_user(self) -> None:
        """Start counting a new user."""
        self._prev, self._prev_len = None, 0
        self._user_failed = self._defect_user = False

    def end_user(self, *, real: bool) -> None:
        """Close the user's counts (as a real user, or as synthetic traffic)."""
        if real:
            self.cnt["users"] += 1
            self.cnt["users_with_failure"] += self._user_failed
            self.cnt["defect_users"] += self._defect_user
        else:
            self.cnt["accounts"] += 1

    def add_session(self, turns: list[TurnPlan], spans: list[int]
                    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """Count one session; returns the truth records of its turns and, for a real session, its session truth
        (`sessions.session_record`)."""
        seg = turns[0].segment
        self.cnt[f"sessions.{seg}"] += 1
        redo_j: float | None = None
        if seg == "real":
            redo_j = self._session_links(turns)
        records = []
        for i, (tp, n) in enumerate(zip(turns, spans, strict=True)):
            self.cnt[f"turns.{seg}"] += 1
            self.cnt["spans"] += n
            if seg == "real":
                self._real_turn(tp, n, turns[i - 1] if i else None)
            records.append(truth_record(tp, n_spans=n, session_len=len(turns),
                                        redo_jaccard=redo_j if i == 0 else None))
        session = None
        if seg == "real":
            session = session_record(turns)
            self.cnt[f"outcome.{session['outcome']}"] += 1
            self.cnt["friction"] += session["friction"]
            for e, k in session["events"].items():
                self.cnt[f"event.{e}"] += k > 0
            failed = [t.delivery != "delivered" for t in turns]
            self.cnt["sessions_single_turn"] += len(turns) == 1
            self.cnt["sessions_with_failure"] += any(failed)
            bucket = str(min(len(turns), 5))
            self.cnt[f"len{bucket}.sessions"] += 1
            self.cnt[f"len{bucket}.with_failure"] += any(failed)
            self._user_failed |= any(failed)
            self._defect_user = turns[0].defect_user
            self._prev, self._prev_len = turns[-1], len(turns)
        return records, session

    def _session_links(self, turns: list[TurnPlan]) -> float | None:
        """Redo and return, measured between this session and the user's previous real session."""
        prev = self._prev
        if prev is None:
            return None
        failed = prev.delivery != "delivered"
        tag = "after_failure" if failed else "after_success"
        j = bigram_jaccard(prev.request.text, turns[0].request.text)
        self.cnt[f"redo.{tag}.n"] += 1
        self.cnt[f"redo.{tag}.k"] += j >= self.c.redo_jaccard
        gap = max((turns[0].start_ns - prev.end_ns) / NS, 0.0)
        self.hist[f"return_{tag}"].add(gap)
        within = gap <= self.c.return_window_days * 86400.0
        self.cnt["return.all.k"] += within
        self.cnt["return.single.k"] += within and self._prev_len == 1
        return j

    def _real_turn(self, tp: TurnPlan, n_spans: int, before: TurnPlan | None) -> None:
        cnt = self.cnt
        failed = tp.delivery != "delivered"
        mode = tp.mode
        cnt["real_spans"] += n_spans
        cnt[f"mode.{mode}.n"] += 1
        cnt[f"mode.{mode}.fail"] += failed
        cnt["natural_fail"] += tp.natural_delivery != "delivered"
        cnt["lang.zh"] += tp.request.lang == "zh"
        if not failed:
            self.log_latency[mode] += math.log(tp.latency_ns / NS)
        if mode == "normal":
            for step, present in (("thinking", tp.ex.has_thinking), ("retrieval", tp.ex.has_retrieval)):
                key = f"chain.{step}.{'with' if present else 'without'}"
                cnt[f"{key}.n"] += 1
                cnt[f"{key}.fail"] += failed
            seconds = tp.latency_ns / NS
            for name, lo, hi in _BANDS:
                if lo <= seconds < hi:
                    cnt[f"band.{name}.n"] += 1
                    cnt[f"band.{name}.fail"] += failed
        if 1 <= len(tp.request.text.strip()) <= 5:
            cnt["short.n"] += 1
            cnt["short.fail"] += failed
        if mode == "deep" and tp.ex.progress is not None:
            cnt["deep_stop.n"] += 1
            cnt["deep_stop.early"] += tp.ex.progress <= self.c.deep_early_stop_progress
            self.hist["deep_stop"].add(tp.latency_ns / NS)
        if before is not None:
            tag = "after_failure" if before.delivery != "delivered" else "after_success"
            cnt[f"replay.{tag}.n"] += 1
            cnt[f"replay.{tag}.k"] += tp.is_replay
        cnt["replays"] += tp.is_replay
        cnt["verbatim_replays"] += tp.is_verbatim_replay
        cnt["disclosure.natural"] += tp.disclosure
        cnt["template.natural"] += tp.template
        for p in tp.planted:
            cnt[f"planted.{p}"] += 1

    # --- the realised figures ----------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """truth_summary.json: population figures and every rate actually realised, with counts."""
        cnt, c = self.cnt, self.c
        real = cnt["turns.real"]
        raw = sum(cnt[f"turns.{s}"] for s in SEGMENTS)
        sessions = cnt["sessions.real"]

        def pair(prefix: str) -> dict[str, Any]:
            return rate(cnt[f"{prefix}.k"], cnt[f"{prefix}.n"])

        def fail(prefix: str) -> dict[str, Any]:
            return rate(cnt[f"{prefix}.fail"], cnt[f"{prefix}.n"])

        delivered = {m: cnt[f"mode.{m}.n"] - cnt[f"mode.{m}.fail"] for m in MODES}
        return {
            "population": {
                "users": cnt["users"], "accounts": cnt["accounts"], "raw_turns": raw, "real_turns": real,
                "sessions": sessions, "raw_sessions": sum(cnt[f"sessions.{s}"] for s in SEGMENTS),
                "spans": cnt["spans"], "real_spans": cnt["real_spans"], "real_step_spans": cnt["real_spans"] - real,
                "steps_per_real_turn": round((cnt["real_spans"] - real) / real, 4) if real else None,
                "turns_per_session": round(real / sessions, 4) if sessions else None,
                "sessions_per_user": round(sessions / cnt["users"], 4) if cnt["users"] else None,
                "segment_turns": {s: cnt[f"turns.{s}"] for s in SEGMENTS},
                "segment_sessions": {s: cnt[f"sessions.{s}"] for s in SEGMENTS},
                "non_real_share": rate(raw - real, raw),
                "chinese_share": rate(cnt["lang.zh"], real),
            },
            "execution": {
                "failure_rate": rate(sum(cnt[f"mode.{m}.fail"] for m in MODES), real),
                "natural_failure_rate": rate(cnt["natural_fail"], real),
                "failure_rate_by_mode": {m: fail(f"mode.{m}") for m in MODES},
                "mode_share": {m: rate(cnt[f"mode.{m}.n"], real) for m in MODES},
                "normal_fail_without_thinking": fail("chain.thinking.without"),
                "normal_fail_with_thinking": fail("chain.thinking.with"),
                "normal_fail_without_retrieval": fail("chain.retrieval.without"),
                "normal_fail_with_retrieval": fail("chain.retrieval.with"),
                "normal_fail_by_latency_band": {name: fail(f"band.{name}") for name, _, _ in _BANDS},
                "short_prompt_failure_rate": fail("short"),
                "deep_abnormal_stops": cnt["deep_stop.n"],
                "deep_early_stop_share": rate(cnt["deep_stop.early"], cnt["deep_stop.n"]),
                "deep_stop_median_latency_s": self.hist["deep_stop"].median(),
                "latency_gm_delivered_s": {
                    m: round(math.exp(self.log_latency[m] / delivered[m]), 3) if delivered[m] else None
                    for m in MODES},
            },
            "conversation": {
                "single_turn_session_share": rate(cnt["sessions_single_turn"], sessions),
                "session_failure_share": rate(cnt["sessions_with_failure"], sessions),
                "session_failure_by_length": {
                    ("5+" if b == "5" else b): rate(cnt[f"len{b}.with_failure"], cnt[f"len{b}.sessions"])
                    for b in ("1", "2", "3", "4", "5")},
                "replay_after_failure": pair("replay.after_failure"),
                "replay_after_success": pair("replay.after_success"),
                "verbatim_replay_share": rate(cnt["verbatim_replays"], cnt["replays"]),
            },
            "engagement": {
                "window_days": c.return_window_days,
                "users_with_failure_share": rate(cnt["users_with_failure"], cnt["users"]),
                "redo_after_failed_session": pair("redo.after_failure"),
                "redo_after_delivered_session": pair("redo.after_success"),
                "single_turn_sessions_returned": rate(cnt["return.single.k"], cnt["sessions_single_turn"]),
                "sessions_returned": rate(cnt["return.all.k"], sessions),
                "median_return_after_failure_s": self.hist["return_after_failure"].median(),
                "median_return_after_success_s": self.hist["return_after_success"].median(),
            },
            "trajectory": {
                "outcome_share": {o: rate(cnt[f"outcome.{o}"], sessions) for o in OUTCOMES},
                "event_share": {e: rate(cnt[f"event.{e}"], sessions) for e in EVENTS},
                "mean_friction": round(cnt["friction"] / sessions, 6) if sessions else None,
            },
            "conduct": {
                "natural_disclosures": cnt["disclosure.natural"],
                "natural_template_triggers": cnt["template.natural"],
            },
            "planted": {k.split(".", 1)[1]: v for k, v in sorted(cnt.items()) if k.startswith("planted.")},
            "defect_users": cnt["defect_users"],
        }
