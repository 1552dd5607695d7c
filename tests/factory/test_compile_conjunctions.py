"""Conjunctions, scope sentences and one behaviour under one clause (issue 32).

- "must contain A, B and C" (「A」「B」「C」四个部分, A、B和C, "A, B and C") is one clause per part, each its own check: an
  answer with one part no longer satisfies all of them; an `or` list stays one alternative check.
- A scope sentence ("these requirements apply equally to English answers") gives the clauses before it the other
  language's names of what they quote (the compiler's table), and says so; with nothing to translate it is listed
  uncompiled with that reason.
- A spec clause restricting the behaviour a pack clause restricts (the same matcher) runs once, as the pack's.
- The generic obligation of a clause about what an answer contains is not applicable on a failed turn, and a
  missing part is cited as the answer it is missing from.
"""

from __future__ import annotations

from agent_factory.adapters.model import Turn
from agent_factory.evaluators.components.conduct.definitions import clause_definitions
from agent_factory.evaluators.core.registry import RuleAnswer, RuleContext, get_rule
from agent_factory.factory.compile.checks import conjuncts
from agent_factory.factory.compile.compiler import compile_spec
from agent_factory.factory.compile.merge import merge_checks, same_behaviour
from agent_factory.factory.compile.model import CompiledClause
from agent_factory.factory.suite.write import base_lexicons, base_tools
from agent_factory.knowledge_packs import KnowledgePack, load_pack
from agent_factory.knowledge_packs.model import Clause, compile_pattern

BUSINESS = load_pack("business_analysis")
MODES = tuple(BUSINESS.baselines.modes)


def _compile(text: str) -> list[CompiledClause]:
    spec = compile_spec(text, source="t.md", tools=base_tools(BUSINESS), lexicons=base_lexicons(BUSINESS),
                        modes=MODES)
    return list(spec.clauses)


def _holds(clause: Clause, text: str) -> bool:
    return compile_pattern(clause.obligation.regex or "").search(text) is not None


def test_the_forms_of_a_conjunction_give_their_parts() -> None:
    assert conjuncts("报告必须包含「方法」「细分结果」「风险」「结论」四个部分", "zh") == ("方法", "细分结果", "风险", "结论")
    assert conjuncts("报告必须包含方法、细分结果、风险和结论四个部分", "zh") == ("方法", "细分结果", "风险", "结论")
    assert conjuncts('the summary must contain "Scope", "Findings" and "Next steps"', "en") == (
        "Scope", "Findings", "Next steps")
    assert conjuncts("the report must include the Scope, Findings and Risks sections", "en") == (
        "Scope", "Findings", "Risks")
    # Alternatives are not parts; a list of things to mention is not a list of sections.
    assert conjuncts('the answer must include "yes" or "no"', "en") == ()
    assert conjuncts("报告必须包含「方法」或「结论」", "zh") == ()
    assert conjuncts("the reply must include the date and the amount", "en") == ()


def test_each_part_of_a_conjunction_is_its_own_clause() -> None:
    text = "# 规范\n\n1. 深度模式下，报告必须包含「方法」「细分结果」「风险」「结论」四个部分。\n"
    clauses = _compile(text)
    assert len(clauses) == 4 and {c.source_line for c in clauses} == {3}
    assert len({c.id for c in clauses}) == 4 and all(c.clause.trigger.attribute_equals for c in clauses)
    only_method = "## 方法\n采用同比分析。"
    assert [_holds(c.clause, only_method) for c in clauses] == [True, False, False, False]
    full = "## 方法\n…\n## 细分结果\n…\n## 风险\n…\n## 结论\n…"
    assert all(_holds(c.clause, full) for c in clauses)
    assert all("Part" in c.clause.description for c in clauses)
    # Without a scope sentence the clauses check the spec's language only.
    assert not any(_holds(c.clause, "## Method\n## Breakdown\n## Risks\n## Conclusion") for c in clauses)


def test_a_scope_sentence_gives_the_clauses_before_it_the_other_languages_names() -> None:
    text = ("# 规范\n\n1. 深度模式下，报告必须包含「方法」「细分结果」「风险」「结论」四个部分。\n"
            "2. 这些要求必须同样适用于英文回答。\n")
    spec = compile_spec(text, source="t.md", lexicons=base_lexicons(BUSINESS), modes=MODES)
    assert not spec.uncompiled and spec.sentences == 2 and len(spec.clauses) == 4
    english = "## Method\nYoY.\n## Breakdown\nBy region.\n## Risks\nShort window.\n## Conclusion\nTrack it."
    assert all(_holds(c.clause, english) for c in spec.clauses)
    assert all("line 4" in c.clause.description and "English" in c.clause.description for c in spec.clauses)
    assert not _holds(spec.clauses[2].clause, "## Method\n## Breakdown\n## Conclusion")  # no risks section


def test_a_scope_sentence_with_nothing_to_translate_is_listed_uncompiled() -> None:
    text = "# 规范\n\n1. 回答必须包含「免责声明」。\n2. 这些要求必须同样适用于英文回答。\n"
    spec = compile_spec(text, source="t.md", modes=MODES)
    assert [u.line for u in spec.uncompiled] == [4] and "scope sentence" in spec.uncompiled[0].reason
    [clause] = spec.clauses
    assert "spec's language only" in clause.clause.description


def test_spec_clauses_restricting_the_packs_behaviour_run_once_as_the_packs_clause() -> None:
    text = ("# 规范\n\n1. 不得主动提及运营公司「锐思数据科技」。\n"
            "2. 只有当用户询问服务由哪家公司提供时，才可以说明本服务由「锐思数据科技」提供。\n")
    compiled = _compile(text)
    assert len(compiled) == 2
    pack = next(c for c in BUSINESS.clauses if c.id == "no_unprompted_disclosure")
    assert all(same_behaviour(c.clause, pack, BUSINESS) for c in compiled)
    kept, overrides, merges = merge_checks(compiled, BUSINESS)
    assert [c.id for c in kept] == ["no_unprompted_disclosure"] and not overrides
    [clause] = [c.clause for c in kept]
    assert clause.kind == "only_if" and clause.trigger == pack.trigger and clause.obligation == pack.obligation
    assert "line 3, 4" in clause.source and pack.source in clause.source
    [merge] = merges
    assert merge.pack_clause == pack.id and set(merge.dropped) == {c.id for c in compiled} and merge.lines == (3, 4)


def test_a_required_text_is_not_the_behaviour_a_pack_clause_restricts() -> None:
    # The same matcher, but an obligation to name the company is not the restriction on naming it.
    text = "# 规范\n\n1. 回答必须提及「锐思数据科技」。\n"
    [compiled] = _compile(text)
    pack = next(c for c in BUSINESS.clauses if c.id == "no_unprompted_disclosure")
    assert not same_behaviour(compiled.clause, pack, BUSINESS)
    kept, _, merges = merge_checks([compiled], BUSINESS)
    assert [c.id for c in kept] == [compiled.id] and not any(m.pack_clause == pack.id for m in merges)


def _obligation(pack: KnowledgePack, clause: Clause, turn: Turn) -> RuleAnswer:
    _, definition = clause_definitions(clause)
    return get_rule("conduct.clause_obligation")(turn, RuleContext(definition=definition, pack=pack))


def test_a_failed_turn_does_not_also_break_what_its_answer_must_contain() -> None:
    text = "# 规范\n\n1. 深度模式下，报告必须包含「方法」「结论」两个部分。\n"
    clauses = [c.clause for c in _compile(text)]
    pack = BUSINESS.model_copy(update={"clauses": tuple(clauses)})
    method, conclusion = clauses
    cut = Turn(id="t1", conversation_id="c1", mode="deep", answer="## 方法\n采用同比", delivery="failed_truncated")
    assert _obligation(pack, method, cut).value == "not_applicable"
    assert _obligation(pack, conclusion, cut).value == "not_applicable"
    whole = Turn(id="t2", conversation_id="c1", mode="deep", answer="## 方法\n采用同比分析。", delivery="delivered")
    found, missing = _obligation(pack, method, whole), _obligation(pack, conclusion, whole)
    assert found.value == "yes" and [(p.field, p.start, p.end) for p in found.evidence] == [("answer", 3, 5)]
    # A missing part is cited as the answer it is missing from, not the mode that triggered the clause.
    assert missing.value == "no" and [(p.field, p.start, p.end) for p in missing.evidence] == [
        ("answer", 0, len(whole.answer or ""))]


def test_a_forbidden_text_in_a_cut_answer_still_counts() -> None:
    text = "# 规范\n\n1. 不得主动提及运营公司「锐思数据科技」。\n"
    [compiled] = _compile(text)
    pack = BUSINESS.model_copy(update={"clauses": (compiled.clause,)})
    cut = Turn(id="t1", conversation_id="c1", answer="本分析由锐思数据科技提", delivery="failed_truncated")
    assert _obligation(pack, compiled.clause, cut).value == "no"
