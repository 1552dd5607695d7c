"""Planted defects: rewrite a logged turn the way the study's seeded-defect experiment did (docs/method.md section 7).

Only the log changes (blanked answer, resent request, disclosure sentence, file-summary template, scaled
latency), plus the request contents the privacy and attack-isolation tests need (prompt injection,
secrets). Text added to a request keeps what the message does (its `act`: a frustrated message with a
secret pasted in is still frustrated). Users' behaviour is left as drawn, so a run with defects is paired
turn by turn with the same seed's run without them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from agent_factory.factory.simulate import texts
from agent_factory.factory.simulate.config import SimConfig
from agent_factory.factory.simulate.plan import TurnPlan

PLANT_KINDS = ("blank", "replay", "disclosure", "template", "injection", "secret")
"""The `plant_<kind>_rate` knobs."""


def plants_active(c: SimConfig) -> bool:
    """Whether the config plants anything at all (otherwise no user is drawn into the defect group)."""
    return c.plant_latency_scale != 1.0 or any(getattr(c, f"plant_{k}_rate") > 0 for k in PLANT_KINDS)


def plant(c: SimConfig, drng: np.random.Generator, tp: TurnPlan, prev: TurnPlan | None) -> None:
    """Rewrite `tp` (a defect user's turn) with the defects its draws select; `prev` is the turn before it."""
    u = drng.random(8)  # fixed number of draws per turn: planted turns stay put as rates change
    if c.plant_latency_scale != 1.0:
        tp.latency_ns = int(tp.latency_ns * c.plant_latency_scale)
        tp.planted.append("latency_scaled")
    copied = tp.is_replay or tp.redo_of is not None
    if prev is not None and not copied and u[1] < c.plant_replay_rate:
        tp.request = prev.request  # with its act: a resent "怎么又报错了" still vents frustration
        tp.is_replay = tp.is_verbatim_replay = True
        tp.replay_of = prev.trace_id
        tp.injection, tp.secrets = prev.injection, list(prev.secrets)
        tp.planted.append("extra_replay")
        copied = True
    # A copied request already carries what its original carried; plant only into fresh ones.
    if not copied and u[4] < c.plant_injection_rate:
        tp.request = replace(tp.request, text=texts.with_injection(tp.request.text, tp.request.lang,
                                                                   bool(u[6] < 0.5)))
        tp.injection = tp.request.lang
        tp.planted.append("prompt_injection")
    if not copied and u[5] < c.plant_secret_rate:
        # Own generator per turn: the secret's length must not shift the draws of later turns.
        srng = np.random.default_rng([c.seed, 9, *(int(tp.trace_id[i:i + 8], 16) for i in range(0, 32, 8))])
        kind, value = texts.secret(srng)
        tp.request = replace(tp.request, text=texts.with_secret(tp.request.text, tp.request.lang, kind, value))
        tp.secrets.append({"kind": kind, "value": value})
        tp.planted.append("secret")
    if tp.delivery != "delivered":
        return
    if u[0] < c.plant_blank_rate:
        tp.answer = ""
        tp.delivery = "failed_empty"
        tp.planted.append("answer_blanked")
        return
    lang = tp.request.lang
    if u[2] < c.plant_disclosure_rate:
        tp.answer = f"{tp.answer}\n{texts.disclosure(lang, c.company_name_zh, c.company_name_en)}"
        tp.planted.append("disclosure")
    if u[3] < c.plant_template_rate:
        tp.answer = texts.TEMPLATE_TEXT[lang] + (tp.answer or "")
        tp.planted.append("template")
