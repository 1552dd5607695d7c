"""The metrics Trajectory's analyses emit, declared once: the analyses name them through these objects
(`Metric.of`, `.name`), and the views read their kind, direction and label from them (`present`)."""

from __future__ import annotations

from agent_factory.evaluators.core.present import UNCOLLECTED as UNCOLLECTED  # one declaration for every component
from agent_factory.evaluators.core.present import Metric

OUTCOME = Metric(name="outcome", kind="label", worse=None, label="the session's outcome", per_unit=True)
FRICTION = Metric(name="friction", kind="score", worse="higher", label="recovery events in the session",
                  per_unit=True)
BLOCKED = Metric(name="outcome_share.blocked", kind="rate", worse="higher", label="sessions blocked")
STRUGGLED = Metric(name="outcome_share.struggled", kind="rate", worse="higher", label="sessions that struggled")
SMOOTH = Metric(name="outcome_share.smooth", kind="rate", worse="lower", label="smooth sessions")
CENSORED = Metric(name="outcome_share.censored", kind="rate", worse=None, label="sessions still open (censored)")
UNDETERMINED = Metric(name="outcome_share.undetermined", kind="rate", worse=None,
                      label="sessions whose outcome data were not collected")
OUTCOME_COUNT = Metric(name="outcome_count.{outcome}", kind="count", worse=None, label="sessions by outcome")
MEAN_FRICTION = Metric(name="mean_friction", kind="score", worse="higher", label="mean recovery events per session")
EVENT_SHARE = Metric(name="event_share.{event}", kind="rate", worse="higher", label="sessions with the event")
EVENT_COUNT = Metric(name="event_count.{event}", kind="count", worse="higher", label="occurrences of the event")
REPLAY_FAILURE = Metric(name="replay_after_failure", kind="rate", worse="higher",
                        label="next message replays the request after a failed turn")
REPLAY_SUCCESS = Metric(name="replay_after_success", kind="rate", worse="higher",
                        label="next message replays the request after a delivered turn")
REPLAY_SHARE = Metric(name="replay_per_next_message", kind="rate", worse="higher",
                      label="next messages that resend the previous request")

SHARES = (BLOCKED, STRUGGLED, SMOOTH, CENSORED, UNDETERMINED)
OUTCOME_SHARE = {"blocked": BLOCKED, "struggled": STRUGGLED, "smooth": SMOOTH, "censored": CENSORED,
                 "undetermined": UNDETERMINED}
"""The share metric of each session outcome (`analysis.OUTCOMES`): each its own metric, for its own direction."""
METRICS = (OUTCOME, FRICTION, *SHARES, OUTCOME_COUNT, MEAN_FRICTION, EVENT_SHARE, EVENT_COUNT, REPLAY_FAILURE,
           REPLAY_SUCCESS, REPLAY_SHARE, UNCOLLECTED)
