"""Flags read off stored rows, rolled up to sessions and users, and joined to outcomes."""

from __future__ import annotations

import pytest

from agent_factory.adapters.model import OutcomeEvent
from agent_factory.evaluators.components.conduct import flags_for
from agent_factory.evaluators.components.execution import FLAGS as EXECUTION_FLAGS
from agent_factory.evaluators.components.substance import FLAGS as SUBSTANCE_FLAGS
from agent_factory.evaluators.components.trajectory import FLAGS as TRAJECTORY_FLAGS
from agent_factory.evaluators.core import FlagSpec, get_component
from agent_factory.evaluators.findings import (
    DatumRow,
    ResultRow,
    UnitKey,
    all_flags,
    associations,
    bad_flags,
    flag_counts,
    flag_table,
    roll_up,
    unit_outcomes,
)
from agent_factory.knowledge_packs import load_pack

PACK = load_pack("airline")
FAILED = next(f for f in EXECUTION_FLAGS if f.id == "execution.delivery_failed")
HANDED = next(f for f in EXECUTION_FLAGS if f.id == "execution.handed_off")
SPAN_ERR = next(f for f in EXECUTION_FLAGS if f.id == "execution.span_error")
STRUGGLED = next(f for f in TRAJECTORY_FLAGS if f.id == "trajectory.struggled_or_blocked")
CONFIRM = next(f for f in flags_for(PACK) if f.id == "conduct.confirm_before_write.violated")

UNITS = [
    UnitKey("c1", "conversation", "c1", "u1"),
    UnitKey("c1/t0", "trace", "c1", "u1", 0),
    UnitKey("c1/t1", "trace", "c1", "u1", 1),
    UnitKey("c1/s1", "span", "c1", "u1", 1),
    UnitKey("c2", "conversation", "c2", "u1"),
    UnitKey("c2/t0", "trace", "c2", "u1", 0),
    UnitKey("c3", "conversation", "c3", "u2"),
    UnitKey("c3/t0", "trace", "c3", "u2", 0),
]
DATA = [
    DatumRow("c1/t0", "execution.delivered", "yes"),
    DatumRow("c1/t1", "execution.delivered", "no", "failed_empty"),
    DatumRow("c2/t0", "execution.delivered", "not_applicable", "handed_off"),
    DatumRow("c3/t0", "execution.delivered", "uncollected"),
    DatumRow("c1/s1", "execution.span_error", "yes"),
    DatumRow("c1", "conduct.confirm_before_write.trigger", "yes"),
    DatumRow("c1", "conduct.confirm_before_write.obligation", "no"),
    DatumRow("c2", "conduct.confirm_before_write.trigger", "no"),
    DatumRow("c2", "conduct.confirm_before_write.obligation", "not_applicable"),
    DatumRow("c3", "conduct.confirm_before_write.trigger", "yes"),
    DatumRow("c3", "conduct.confirm_before_write.obligation", "uncollected"),
]
RESULTS = [ResultRow("c1", "trajectory", "outcome", "struggled"), ResultRow("c2", "trajectory", "outcome", "smooth"),
           ResultRow("c3", "trajectory", "outcome", "undetermined")]
SPECS = (FAILED, HANDED, SPAN_ERR, STRUGGLED, CONFIRM)


def values(rows, flag):  # type: ignore[no-untyped-def]
    return {r.unit_id: r.value for r in rows if r.flag == flag}


def test_every_component_declares_its_flags_and_conduct_one_per_clause() -> None:
    specs = all_flags(PACK)
    ids = [s.id for s in specs]
    assert len(ids) == len(set(ids))
    assert {s.component for s in specs} >= {"execution", "substance", "trajectory", "results", "conduct",
                                           "provenance"}
    assert [s.id for s in specs if s.component == "conduct"] == [f"conduct.{c.id}.violated" for c in PACK.clauses]
    assert HANDED.meaning == "descriptive" and HANDED.id not in bad_flags(specs)
    assert get_component("adjudication").flags_for(PACK) == ()
    # Every datum flag reads an item its component defines, on the layer it says.
    for comp in ("execution", "substance", "trajectory", "results", "provenance"):
        spec = get_component(comp)
        layer_of = {d.id: d.layer for d in spec.definitions}
        for f in spec.flags:
            if f.source == "datum":
                assert layer_of[f.item] == f.layer, f.id


def test_flag_values_uncollected_is_never_a_pass() -> None:
    rows = flag_table(SPECS, UNITS, DATA, RESULTS)
    assert values(rows, FAILED.id) == {"c1/t0": 0, "c1/t1": 1, "c2/t0": 0, "c3/t0": None}
    assert values(rows, HANDED.id) == {"c1/t0": 0, "c1/t1": 0, "c2/t0": 1, "c3/t0": None}
    assert values(rows, SPAN_ERR.id) == {"c1/s1": 1}
    assert values(rows, STRUGGLED.id) == {"c1": 1, "c2": 0, "c3": None}
    assert values(rows, CONFIRM.id) == {"c1": 1, "c2": 0, "c3": None}
    # A unit of the flag's layer with no row at all is undecided, not clear.
    lone = flag_table((FAILED,), [UnitKey("x/t0", "trace", "x", "u9")], [], [])
    assert [r.value for r in lone] == [None]


def test_roll_up_to_conversations_turns_and_users() -> None:
    rows = flag_table(SPECS, UNITS, DATA, RESULTS)
    conv = roll_up(rows, UNITS, level="conversation")
    assert values(conv, FAILED.id) == {"c1": 1, "c2": 0, "c3": None}
    assert values(conv, SPAN_ERR.id) == {"c1": 1}
    assert values(conv, CONFIRM.id) == {"c1": 1, "c2": 0, "c3": None}
    turn = roll_up(rows, UNITS, level="turn")
    assert values(turn, SPAN_ERR.id) == {"c1/t1": 1}  # the span sits in turn 1
    assert not any(r.flag == CONFIRM.id for r in turn)  # a conversation flag does not go down
    user = roll_up(rows, UNITS, level="user")
    assert values(user, FAILED.id) == {"u1": 1, "u2": None}
    assert values(user, HANDED.id) == {"u1": 1, "u2": None}
    counts = flag_counts(conv, counted=bad_flags(SPECS))
    # The session outcome (struggled) is raised on c1 but is descriptive: it sums the events, each of which is
    # its own bad flag, so counting it too would count one event twice (issue 32).
    assert values(conv, STRUGGLED.id)["c1"] == 1 and STRUGGLED.meaning == "descriptive"
    assert counts == {"c1": {"execution": 2, "conduct": 1}}


def test_outcomes_join_conversations_turns_and_users() -> None:
    events = [
        OutcomeEvent(id="e1", kind="task_reward", user_id="u1", conversation_id="c1", value=0.0),
        OutcomeEvent(id="e2", kind="task_reward", user_id="u1", conversation_id="c2", value="1.0"),
        OutcomeEvent(id="e3", kind="task_reward", user_id="u2", conversation_id="c3", value=True),
        OutcomeEvent(id="e4", kind="feedback", user_id="u2", value="great"),  # text: not an outcome number
        OutcomeEvent(id="e5", kind="task_reward", user_id="u1", conversation_id="c2", value=0.5),  # latest wins
    ]
    assert unit_outcomes(events, UNITS, level="conversation") == {"task_reward": {"c1": 0.0, "c2": 0.5, "c3": 1.0}}
    turns = unit_outcomes(events, UNITS, level="turn")["task_reward"]
    assert turns == {"c1/t0": 0.0, "c1/t1": 0.0, "c2/t0": 0.5, "c3/t0": 1.0}
    assert unit_outcomes(events, UNITS, level="user") == {"task_reward": {"u1": 0.25, "u2": 1.0}}


def test_associations_compare_flagged_and_clear_units() -> None:
    units = [UnitKey(f"c{i}", "conversation", f"c{i}", f"u{i % 4}") for i in range(12)]
    data = [DatumRow(f"c{i}", "conduct.confirm_before_write.trigger", "yes") for i in range(12)]
    data += [DatumRow(f"c{i}", "conduct.confirm_before_write.obligation",
                      "no" if i < 4 else ("uncollected" if i == 11 else "yes")) for i in range(12)]
    reward = {f"c{i}": (0.0 if i < 4 else (1.0 if i % 2 else 0.0)) for i in range(12)}
    rows = flag_table((CONFIRM,), units, data, [])
    (a,) = associations((CONFIRM,), rows, {"task_reward": reward}, level="conversation")
    assert (a.n_with, a.n_without, a.undecided, a.n_clusters) == (4, 7, 1, 4)
    assert a.mean_with == 0.0
    assert a.mean_without == pytest.approx(3 / 7)  # c5 c7 c9 of c4..c10
    assert a.diff == pytest.approx(-3 / 7)
    assert a.overall == pytest.approx(4 / 12)  # c11 (undecided) counts here
    assert a.low is not None and a.high is not None and a.low < a.diff < a.high
    # A flag that never fires, or never clears, has nothing to compare.
    assert associations((CONFIRM,), rows[:4], {"task_reward": reward}, level="conversation") == []


def test_a_flag_spec_refuses_contradictions() -> None:
    with pytest.raises(ValueError, match="both raise and clear"):
        FlagSpec(id="x.y", component="x", layer="trace", label="y", item="x.y", raised=("no",), clear=("no",))
    with pytest.raises(ValueError, match="gate"):
        FlagSpec(id="x.y", component="x", layer="trace", label="y", item="m", source="result", raised=("a",),
                 gate="x.t")


def test_a_component_with_nothing_collected_on_a_unit_is_undecided_never_0() -> None:
    # Rules only: the substance checklist is model-tier (uncollected) and the items that do not apply are
    # `not_applicable`. A zero read from a `not_applicable` item is no judgment, so a unit where none of the
    # component's flags was raised or judged reads None for every one of them (counts and tables say undecided).
    by_item = {f.item: f for f in SUBSTANCE_FLAGS}
    units = [UnitKey("c/t0", "trace", "c", "u"), UnitKey("c/t1", "trace", "c", "u"), UnitKey("c/t2", "trace", "c", "u"),
             UnitKey("c", "conversation", "c", "u")]
    data = [DatumRow("c/t0", item, "not_applicable" if item.endswith("covers_parts") else "uncollected")
            for item in by_item]  # delivered, nothing scored
    data += [DatumRow("c/t1", item, "not_applicable") for item in by_item]  # never delivered: nothing applies
    data += [DatumRow("c/t2", item, "yes" if item.endswith("answers_task") else "not_applicable")
             for item in by_item]  # one item judged: the component is decided on this turn
    rows = flag_table(SUBSTANCE_FLAGS, units, data, [])
    assert {r.value for r in rows if r.unit_id in ("c/t0", "c/t1")} == {None}
    assert {r.value for r in rows if r.unit_id == "c/t2"} == {0}
    conv = roll_up(rows, units, level="conversation")
    assert {r.value for r in conv} == {None}
    assert flag_counts(conv, counted=bad_flags(SUBSTANCE_FLAGS)) == {}
    # A raised flag decides the component even when every other item is undecided or does not apply.
    raised = flag_table(SUBSTANCE_FLAGS, units[:1], [DatumRow("c/t0", f.item, "no" if f.item.endswith("closes_properly")
                                                              else "not_applicable") for f in SUBSTANCE_FLAGS], [])
    assert sorted(r.value for r in raised) == [0] * (len(SUBSTANCE_FLAGS) - 1) + [1]
    # Other components keep their zeros: a gate that cleared (the clause's trigger did not arise) is a judgment.
    assert values(flag_table(SPECS, UNITS, DATA, RESULTS), CONFIRM.id)["c2"] == 0
