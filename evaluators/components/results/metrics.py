"""The metrics Results' analyses emit, declared once: the analyses name them through these objects
(`Metric.of`, `.name`), and the views read their kind, direction and label from them (`present`)."""

from __future__ import annotations

from agent_factory.evaluators.core.present import UNCOLLECTED as UNCOLLECTED  # one declaration for every component
from agent_factory.evaluators.core.present import Metric

STATES = ("returned", "not_returned", "censored")
"""What followed a session (`rules`): a return within T, none, or not knowable yet."""

RETURN_RATE = Metric(name="return_rate_within_t", kind="rate", worse="lower",
                     label="sessions followed by a return within T")
SESSIONS = Metric(name="sessions.{state}", kind="count", worse=None, label="sessions by what followed",
                  choices={"state": (*STATES, "not_observable")})
MEDIAN_RETURN = Metric(name="median_return_interval_s", kind="seconds", worse=None,
                       label="median time to the next session")
REDO_RATE = Metric(name="redo_rate", kind="rate", worse="higher",
                   label="next session opens by redoing the last request")
SINGLE_SHARE = Metric(name="single_turn_session_share", kind="rate", worse=None, label="single-turn sessions")
SINGLE_RETURNED = Metric(name="single_turn.returned_share", kind="rate", worse="lower",
                         label="single-turn sessions followed by a return")
SINGLE_RETURN_RATE = Metric(name="single_turn.return_rate_within_t", kind="rate", worse="lower",
                            label="single-turn sessions followed by a return within T, censored excluded")
SINGLE_COUNT = Metric(name="single_turn.{state}", kind="count", worse=None,
                      label="single-turn sessions by what followed", choices={"state": STATES})
FEEDBACK_COUNT = Metric(name="sessions_with_feedback", kind="count", worse=None,
                        label="sessions with explicit feedback")
FEEDBACK_MEAN = Metric(name="feedback_mean", kind="score", worse="lower", label="mean numeric feedback")
REDO_ROLLUP = Metric(name="redo_share", kind="rate", worse="higher", label="units followed by a redo")

METRICS = (RETURN_RATE, SESSIONS, MEDIAN_RETURN, REDO_RATE, SINGLE_SHARE, SINGLE_RETURNED, SINGLE_RETURN_RATE,
           SINGLE_COUNT, FEEDBACK_COUNT, FEEDBACK_MEAN, REDO_ROLLUP, UNCOLLECTED)
