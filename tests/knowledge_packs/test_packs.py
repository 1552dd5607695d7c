"""Knowledge packs: built-in packs, `extends` merging, entry-point discovery and load-time validation."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pydantic
import pytest

from agent_factory import plugins
from agent_factory.errors import SpecError, UnknownNameError
from agent_factory.knowledge_packs import GROUP, KnowledgePack, default_pack_path, list_packs, load_pack, loader
from agent_factory.knowledge_packs.loader import merge_pack_data, resolve_pack


def write(path: Path, body: str) -> Path:
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


# ---- built-in packs -----------------------------------------------------------------------------------


def test_default_pack_loads_with_generic_rules() -> None:
    pack = load_pack("default")
    assert pack.name == "default" and pack.extends is None
    assert [s.name for s in pack.segments] == ["internal_test", "suggestion_cache", "synthetic"]
    internal = pack.segments[0]
    assert internal.user_id_regex is not None
    assert internal.attribute_equals == {"user.account_type": ("internal", "test")}
    assert pack.segments[1].attribute_equals == {"request.source": "suggestion_cache"}
    assert pack.segments[2].attribute_equals == {"traffic.synthetic": True}
    assert pack.baselines.modes == {}
    assert pack.baselines.fast_failure_seconds == 5.0
    assert pack.thresholds.redo_jaccard == 0.6 and pack.thresholds.window_days == 7
    assert set(pack.lexicons) == {"en", "zh"}
    assert len(pack.lexicons["en"].injection) >= 5 and len(pack.lexicons["zh"].injection) >= 5
    assert "[truncated]" in pack.lexicons["en"].truncation_markers
    assert "…[内容已截断]" in pack.lexicons["zh"].truncation_markers


def test_business_analysis_extends_default() -> None:
    base = load_pack("default")
    pack = load_pack("business_analysis")
    assert pack.name == "business_analysis" and pack.extends == "default"
    modes = {m: b.geomean_seconds for m, b in pack.baselines.modes.items()}
    assert modes == {"normal": 50.0, "simple": 8.0, "deep": 900.0}
    assert pack.baselines.fast_failure_seconds == 5.0
    # Inherited unchanged: segmentation and truncation markers.
    assert pack.segments == base.segments
    assert pack.lexicons["zh"].truncation_markers == base.lexicons["zh"].truncation_markers
    # Keyed merge: the parent's patterns in order, then the child's new ones appended.
    for lang in ("en", "zh"):
        ids = [p.id for p in pack.lexicons[lang].injection]
        parent_ids = [p.id for p in base.lexicons[lang].injection]
        assert ids[: len(parent_ids)] == parent_ids
        assert ids[len(parent_ids):] == [f"{lang}.report_score"]


def test_default_pack_path_is_the_installed_entry_point_target() -> None:
    assert default_pack_path().is_file()
    assert resolve_pack("default") == default_pack_path()
    # The project's own entry point (pyproject.toml) resolves to the same file.
    eps = [ep for ep in loader.pack_entry_points() if ep.name == "default"]
    assert eps and eps[0].load()() == default_pack_path()


def test_list_packs_names_builtins() -> None:
    packs = list_packs()
    assert {"default", "business_analysis"} <= set(packs)
    assert packs["business_analysis"].endswith("business_analysis.yaml")


def test_load_by_path_and_digest_is_stable() -> None:
    by_name = load_pack("business_analysis")
    by_path = load_pack(str(default_pack_path().parent / "business_analysis.yaml"))
    assert by_name == by_path
    assert by_name.digest() == by_path.digest()
    assert by_name.digest() != load_pack("default").digest()


def test_pack_is_frozen() -> None:
    pack = load_pack("default")
    with pytest.raises(pydantic.ValidationError):
        pack.name = "other"  # type: ignore[misc]


# ---- extends ------------------------------------------------------------------------------------------


def test_child_overrides_in_place_appends_and_replaces_plain_lists(tmp_path: Path) -> None:
    child = write(tmp_path / "child.yaml", """\
        name: child
        version: "2"
        extends: default
        segments:
          - name: suggestion_cache
            request_regex: '^\\[suggested\\]'
          - name: replay_bot
            user_id_regex: '^bot-'
        lexicons:
          en:
            injection:
              - id: en.mark_passed
                pattern: 'mark\\s+me\\s+green'
            truncation_markers: ['<<cut>>']
        thresholds:
          redo_jaccard: 0.7
        """)
    pack = load_pack(child)
    assert pack.name == "child" and pack.version == "2" and pack.extends == "default"
    assert [s.name for s in pack.segments] == ["internal_test", "suggestion_cache", "synthetic", "replay_bot"]
    # The child's rule replaced the parent's wholesale (no inherited attribute_equals).
    assert pack.segments[1].attribute_equals == {} and pack.segments[1].request_regex == "^\\[suggested\\]"
    en = pack.lexicons["en"]
    ids = [p.id for p in en.injection]
    assert ids.count("en.mark_passed") == 1
    assert en.injection[ids.index("en.mark_passed")].pattern == "mark\\s+me\\s+green"
    assert en.truncation_markers == ("<<cut>>",)
    assert pack.lexicons["zh"] == load_pack("default").lexicons["zh"]
    assert pack.thresholds.redo_jaccard == 0.7 and pack.thresholds.window_days == 7


def test_extends_relative_path_and_chain(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    write(tmp_path / "base" / "mid.yaml", """\
        name: mid
        version: "1"
        extends: business_analysis
        thresholds: {window_days: 14}
        """)
    leaf = write(tmp_path / "leaf.yaml", """\
        name: leaf
        version: "1"
        extends: base/mid.yaml
        baselines: {modes: {deep: {geomean_seconds: 600}}}
        """)
    pack = load_pack(leaf)
    assert pack.thresholds.window_days == 14
    modes = {m: b.geomean_seconds for m, b in pack.baselines.modes.items()}
    assert modes == {"normal": 50.0, "simple": 8.0, "deep": 600.0}


def test_extends_cycle_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "name: a\nversion: '1'\nextends: b.yaml\n")
    write(tmp_path / "b.yaml", "name: b\nversion: '1'\nextends: a.yaml\n")
    with pytest.raises(SpecError, match=r"extends: cycle .*a\.yaml -> .*b\.yaml -> .*a\.yaml"):
        load_pack(tmp_path / "a.yaml")


def test_extends_unknown_name_lists_valid_names(tmp_path: Path) -> None:
    child = write(tmp_path / "c.yaml", "name: c\nversion: '1'\nextends: nope\n")
    with pytest.raises(SpecError) as err:
        load_pack(child)
    msg = str(err.value)
    assert str(child) in msg and "extends" in msg and "business_analysis, default" in msg


def test_parent_errors_name_the_parent_file(tmp_path: Path) -> None:
    parent = write(tmp_path / "p.yaml", "name: p\nversion: '1'\nthresholds: {window_days: 0}\n")
    write(tmp_path / "c.yaml", "name: c\nversion: '1'\nextends: p.yaml\n")
    with pytest.raises(SpecError) as err:
        load_pack(tmp_path / "c.yaml")
    assert str(err.value).startswith(f"{parent}: thresholds.window_days:")


def test_merge_pack_data_rules() -> None:
    parent = {"a": {"x": 1, "y": [1, 2]}, "items": [{"id": "p", "v": 1}, {"id": "q", "v": 2}]}
    child = {"a": {"y": [3]}, "items": [{"id": "q", "v": 9}, {"id": "r", "v": 3}]}
    assert merge_pack_data(parent, child) == {
        "a": {"x": 1, "y": [3]},
        "items": [{"id": "p", "v": 1}, {"id": "q", "v": 9}, {"id": "r", "v": 3}],
    }
    assert parent["items"][1] == {"id": "q", "v": 2}  # inputs are not mutated


# ---- names and entry points ---------------------------------------------------------------------------


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError) as err:
        load_pack("no_such_pack")
    assert str(err.value) == "unknown knowledge pack 'no_such_pack'; valid: airline, business_analysis, default, retail"
    assert err.value.valid == ["airline", "business_analysis", "default", "retail"]


def test_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="knowledge pack file not found"):
        load_pack(tmp_path / "absent.yaml")


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A third-party package `acme_packs` on sys.path whose pack is registered by fake entry points."""
    pkg = tmp_path / "site"
    pkg.mkdir()
    write(pkg / "acme.yaml", """\
        name: acme
        version: "0.3"
        extends: business_analysis
        description: ACME support agent
        thresholds: {window_days: 30}
        """)
    write(pkg / "acme_packs.py", """\
        from pathlib import Path

        HERE = Path(__file__).parent
        PACK_FILE = str(HERE / "acme.yaml")


        def pack_path():
            return HERE / "acme.yaml"


        def broken():
            raise RuntimeError("no pack here")


        NOT_A_PATH = 42
        """)
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.delitem(sys.modules, "acme_packs", raising=False)
    eps = (
        EntryPoint(name="default", value="agent_factory.knowledge_packs:default_pack_path", group=GROUP),
        EntryPoint(name="acme", value="acme_packs:pack_path", group=GROUP),
        EntryPoint(name="acme_str", value="acme_packs:PACK_FILE", group=GROUP),
        EntryPoint(name="acme_raw", value=str(pkg / "acme.yaml"), group=GROUP),
        EntryPoint(name="broken", value="acme_packs:broken", group=GROUP),
        EntryPoint(name="not_a_path", value="acme_packs:NOT_A_PATH", group=GROUP),
        EntryPoint(name="business_analysis", value="acme_packs:pack_path", group=GROUP),  # cannot shadow
    )
    monkeypatch.setattr(loader, "pack_entry_points", lambda: eps)
    plugins.reload(["pack"])  # the registry reads the replaced entry points on the next lookup
    yield pkg
    monkeypatch.undo()
    plugins.reload(["pack"])


def test_entry_point_packs_are_discovered(acme: Path) -> None:
    for name in ("acme", "acme_str", "acme_raw"):
        pack = load_pack(name)
        assert pack.name == "acme" and pack.thresholds.window_days == 30
        assert pack.baselines.modes["deep"].geomean_seconds == 900.0  # inherited through business_analysis
    packs = list_packs()
    assert packs["acme"] == "acme_packs:pack_path"
    assert packs["business_analysis"].endswith("business_analysis.yaml")
    assert load_pack("business_analysis").name == "business_analysis"


def test_entry_point_pack_can_be_a_parent(acme: Path, tmp_path: Path) -> None:
    child = write(tmp_path / "child.yaml", "name: acme_eu\nversion: '1'\nextends: acme\n")
    assert load_pack(child).thresholds.window_days == 30


def test_bad_entry_points_name_themselves(acme: Path) -> None:
    with pytest.raises(SpecError, match=r"^entry point 'broken' = 'acme_packs:broken' in group "
                                        r"'agent_factory.knowledge_packs' failed to load: RuntimeError: no pack here$"):
        load_pack("broken")
    with pytest.raises(SpecError, match=r"entry point 'not_a_path' .*: pack 'not_a_path': got int, expected a path"):
        load_pack("not_a_path")
    assert load_pack("acme").name == "acme"  # one broken plugin leaves the others usable


def test_unknown_name_lists_entry_point_names(acme: Path) -> None:
    with pytest.raises(UnknownNameError) as err:
        load_pack("acme2")
    assert "acme, acme_raw, acme_str, airline, broken, business_analysis, default, not_a_path, retail" in str(err.value)


# ---- validation ---------------------------------------------------------------------------------------

INVALID = [
    ("wrong type", "thresholds: {window_days: seven}", "thresholds.window_days: Input should be a valid number"),
    ("unknown key", "thresholds: {redo_jacard: 0.5}", "thresholds.redo_jacard: Extra inputs are not permitted"),
    ("unknown top-level key", "segmentz: []", "segmentz: Extra inputs are not permitted"),
    ("invalid regex", "segments: [{name: x, user_id_regex: '(unclosed'}]",
     "segments.0.user_id_regex: invalid regex"),
    ("invalid lexicon regex", "lexicons: {en: {injection: [{id: en.x, pattern: '[a-'}]}}",
     "lexicons.en.injection.0.pattern: invalid regex"),
    ("empty-matching regex", "lexicons: {zh: {injection: [{id: zh.x, pattern: '.*'}]}}",
     "lexicons.zh.injection.0.pattern: regex '.*' matches the empty string"),
    ("rate out of range", "thresholds: {redo_jaccard: 1.5}",
     "thresholds.redo_jaccard: Input should be less than or equal to 1"),
    ("duplicate segment name", "segments: [{name: x, request_regex: a}, {name: x, request_regex: b}]",
     "segments: duplicate segment name 'x' (segments.0 and segments.1)"),
    ("reserved segment name", "segments: [{name: real, request_regex: a}]",
     "segments.0.name: segment name 'real' is reserved"),
    ("rule without condition", "segments: [{name: x, description: nothing}]",
     "segments.0: segment rule 'x' has no condition"),
    ("missing rule name", "segments: [{request_regex: a}]", "segments.0.name: Field required"),
    ("empty any-of list", "segments: [{name: x, attribute_equals: {user.account_type: []}}]",
     "segments.0.attribute_equals: attribute_equals['user.account_type'] is an empty list"),
    ("mapping as attribute value", "segments: [{name: x, attribute_equals: {user.account_type: {a: 1}}}]",
     "segments.0.attribute_equals['user.account_type']: Input should be a valid string or a valid boolean"),
    ("non-positive baseline", "baselines: {modes: {deep: {geomean_seconds: -1}}}",
     "baselines.modes.deep.geomean_seconds: Input should be greater than 0"),
    ("bad language code", "lexicons: {english: {}}", "lexicons.english[key]: String should match pattern"),
    ("duplicate pattern id", "lexicons: {en: {injection: [{id: en.x, pattern: a}, {id: en.x, pattern: b}]}}",
     "lexicons.en.injection: duplicate pattern id 'en.x'"),
    ("unknown span kind", "coverage: {required_span_fields: {llmm: [output]}}",
     "coverage.required_span_fields.llmm:"),
    ("list expected", "segments: {name: x}", "segments: Input should be a valid list"),
    ("duplicate YAML key", "thresholds:\n  window_days: 7\n  window_days: 8",
     "thresholds.window_days: duplicate key (line 5)"),
    ("YAML syntax", "segments: [unclosed", "line 4 column 1: invalid YAML"),
]


@pytest.mark.parametrize(("case", "body", "expected"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_pack_names_file_and_field(tmp_path: Path, case: str, body: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: t\nversion: '1'\n{body}\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_pack(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: "), msg
    assert expected in msg, msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "(top level): the file is empty"),
        ("- name: t\n", "(top level): expected a mapping of pack fields, got list"),
        ("version: '1'\n", "name: field required"),
        ("name: t\n", "version: field required"),
        ("name: t\nversion: '1'\nextends: 3\n", "extends: expected a pack name or path, got 3"),
    ],
)
def test_invalid_top_level(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_pack(path)
    assert str(err.value).startswith(f"{path}: {expected}"), str(err.value)


def test_model_rejects_direct_invalid_values() -> None:
    with pytest.raises(pydantic.ValidationError):
        KnowledgePack(name="bad name!", version="1")
    assert KnowledgePack(name="ok", version="1").segments == ()


# ---- policy clauses (Conduct) -------------------------------------------------------------------------

CLAUSE_OK = "{id: c1, text: Say hi., kind: must, trigger: {regex: hello}, obligation: {regex: hi}}"
CLAUSE_INVALID = [
    ("clause id", "clauses: [{id: C-1, text: t, kind: must, trigger: {regex: a}, obligation: {regex: b}}]",
     "clauses.0.id: String should match pattern"),
    ("clause kind", "clauses: [{id: c, text: t, kind: should, trigger: {regex: a}, obligation: {regex: b}}]",
     "clauses.0.kind: Input should be 'must', 'must_not', 'only_if' or 'before'"),
    ("missing text", "clauses: [{id: c, kind: must, trigger: {regex: a}, obligation: {regex: b}}]",
     "clauses.0.text: Field required"),
    ("clause regex", "clauses: [{id: c, text: t, kind: must, trigger: {regex: '(a'}, obligation: {regex: b}}]",
     "clauses.0.trigger.regex: invalid regex"),
    ("rule name", "clauses: [{id: c, text: t, kind: must, trigger: {rule: NoDots}, obligation: {regex: b}}]",
     "clauses.0.trigger.rule: String should match pattern"),
    ("rule and regex", "clauses: [{id: c, text: t, kind: must, trigger: {regex: a}, "
     "obligation: {rule: conduct.x, regex: b}}]", "clauses.0.obligation: give either rule or"),
    ("params without rule", "clauses: [{id: c, text: t, kind: must, trigger: {regex: a}, "
     "obligation: {regex: b, params: {n: 1}}}]", "clauses.0.obligation: params are parameters of a rule"),
    ("bad regex param", "clauses: [{id: c, text: t, kind: before, trigger: {regex: a}, "
     "obligation: {rule: conduct.x, params: {ask_regex: '[x'}}}]", "clauses.0.obligation.params: invalid regex"),
    ("model trigger", "clauses: [{id: c, text: t, kind: must, trigger: {tiers: [small_model]}, "
     "obligation: {regex: b}}]", "clauses.0.trigger: a trigger must be decided by rules alone"),
    ("rule tier without condition", "clauses: [{id: c, text: t, kind: must, trigger: {regex: a}, obligation: {}}]",
     "clauses.0.obligation: tier 'rule' needs a rule or a condition"),
    ("condition without rule tier", "clauses: [{id: c, text: t, kind: must, trigger: {regex: a}, "
     "obligation: {regex: b, tiers: [jury]}}]", "clauses.0.obligation: a rule or condition is given"),
    ("before needs a rule", "clauses: [{id: c, text: t, kind: before, trigger: {regex: a}, "
     "obligation: {regex: b}}]", "clauses.0.obligation: kind 'before' is about order"),
    ("span layer searches answers", "clauses: [{id: c, text: t, kind: must, layer: span, "
     "trigger: {regex: a, fields: [answer]}, obligation: {regex: b}}]", "clauses.0.trigger: a span-layer clause"),
    ("engagement layer", "clauses: [{id: c, text: t, kind: must, layer: engagement, trigger: {regex: a}, "
     "obligation: {regex: b}}]", "clauses.0.layer: Input should be 'span', 'trace' or 'conversation'"),
    ("unknown lexicon", "clauses: [{id: c, text: t, kind: must, trigger: {lexicon: politeness}, "
     "obligation: {regex: b}}]", "clauses.0.trigger.lexicon: Input should be 'injection'"),
    ("empty lexicon", "clauses: [{id: c, text: t, kind: must, trigger: {lexicon: disclosure}, "
     "obligation: {regex: b}}]", "clauses: clauses.0.trigger.lexicon: lexicon 'disclosure' has no pattern"),
    ("duplicate clause id", f"clauses: [{CLAUSE_OK}, {CLAUSE_OK}]",
     "clauses: duplicate clause id 'c1' (clauses.0 and clauses.1)"),
    ("unknown clause key", "clauses: [{id: c, text: t, kind: must, trigger: {regex: a}, obligation: {regex: b}, "
     "severity: high}]", "clauses.0.severity: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("case", "body", "expected"), CLAUSE_INVALID, ids=[c[0] for c in CLAUSE_INVALID])
def test_invalid_clause_names_file_and_field(tmp_path: Path, case: str, body: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: t\nversion: '1'\n{body}\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_pack(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: "), msg
    assert expected in msg, msg


def test_business_analysis_clauses_and_disclosure_lexicon() -> None:
    from agent_factory.knowledge_packs import compile_pattern

    pack = load_pack("business_analysis")
    assert [c.id for c in pack.clauses] == ["no_unprompted_disclosure", "file_summary_needs_upload"]
    disclosure, template = pack.clauses
    assert (disclosure.kind, disclosure.layer, disclosure.trigger.lexicon) == ("only_if", "trace", "disclosure")
    assert template.obligation.attribute_present and template.trigger.regex is not None
    assert pack.clause("file_summary_needs_upload") is template and pack.clause("nope") is None
    for lang in ("en", "zh"):
        patterns = pack.lexicons[lang].disclosure
        assert patterns and all(p.examples for p in patterns)
        for p in patterns:
            for example in p.examples:
                assert compile_pattern(p.pattern).search(example), (p.id, example)
    # The default pack stays clause-free and its disclosure lexicon empty.
    base = load_pack("default")
    assert base.clauses == () and base.lexicons["en"].disclosure == ()


def test_airline_pack_extends_default_with_rule_checkable_clauses() -> None:
    pack = load_pack(default_pack_path().parent / "airline" / "pack.yaml")
    assert pack.name == "airline" and pack.extends == "default"
    assert pack.segments == load_pack("default").segments
    ids = [c.id for c in pack.clauses]
    assert ids == ["confirm_before_write", "one_tool_call_at_a_time", "no_reply_with_tool_call", "booking_limits",
                   "write_preconditions_hold", "refusal_justified", "claims_grounded", "write_arguments_grounded",
                   "looked_before_refusing", "did_what_was_agreed"]
    confirm = pack.clauses[0]
    assert confirm.invariant and confirm.kind == "before" and confirm.layer == "conversation"
    assert "cancel_reservation" in confirm.trigger.tool_names and "get_user_details" not in confirm.trigger.tool_names
    assert confirm.obligation.rule == "conduct.confirmed_before_action"
    assert set(confirm.obligation.params) == {"confirm_regex", "deny_regex", "ask_regex"}
    assert all(c.trigger.rule_checkable() and c.obligation.rule_checkable() for c in pack.clauses)


def test_clauses_merge_by_id_through_extends(tmp_path: Path) -> None:
    base = write(tmp_path / "base.yaml", f"""
        name: base
        version: '1'
        clauses:
          - {CLAUSE_OK}
          - {{id: c2, text: Two., kind: must_not, trigger: {{tool_names: ['*']}}, obligation: {{regex: x}}}}
    """)
    child = write(tmp_path / "child.yaml", f"""
        name: child
        version: '1'
        extends: {base.name}
        clauses:
          - {{id: c2, text: Two revised., kind: must_not, trigger: {{tool_names: ['*']}}, obligation: {{regex: y}}}}
          - {{id: c3, text: Three., kind: only_if, trigger: {{regex: z}}, obligation: {{attribute_present: [file.id]}}}}
    """)
    pack = load_pack(child)
    assert [(c.id, c.text) for c in pack.clauses] == [("c1", "Say hi."), ("c2", "Two revised."), ("c3", "Three.")]
    assert pack.clauses[1].obligation.regex == "y"
    assert pack.clauses[0].digest() != pack.clauses[1].digest()


# ---- rules_decide: items whose rule's abstention is final for this agent -----------------------------------


def test_rules_decide_is_set_for_context_repair_in_business_analysis_only() -> None:
    assert load_pack("default").rules_decide == ()
    assert load_pack("airline").rules_decide == ()
    business = load_pack("business_analysis")
    assert business.rules_decide == ("trajectory.context_repair",)
    # The digest (in every cache key) moves with the listing, so data collected under the old pack is not reused.
    assert business.model_copy(update={"rules_decide": ()}).digest() != business.digest()


def test_rules_decide_is_inherited_and_replaced_as_a_whole(tmp_path: Path) -> None:
    child = write(tmp_path / "child.yaml", """
        name: child
        version: '1'
        extends: business_analysis
    """)
    assert load_pack(child).rules_decide == ("trajectory.context_repair",)
    write(child, """
        name: child
        version: '1'
        extends: business_analysis
        rules_decide: [trajectory.frustration]
    """)
    assert load_pack(child).rules_decide == ("trajectory.frustration",)
    write(child, """
        name: child
        version: '1'
        extends: business_analysis
        rules_decide: []
    """)
    assert load_pack(child).rules_decide == ()


@pytest.mark.parametrize(("body", "expected"), [
    ("rules_decide: [context_repair]", "rules_decide.0: String should match pattern"),
    ("rules_decide: [Trajectory.Context_Repair]", "rules_decide.0: String should match pattern"),
    ("rules_decide: trajectory.context_repair", "rules_decide: Input should be a valid"),
    ("rules_decide: [trajectory.context_repair, trajectory.context_repair]",
     "rules_decide: items listed more than once: trajectory.context_repair"),
])
def test_invalid_rules_decide_names_file_and_field(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: t\nversion: '1'\n{body}\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_pack(path)
    assert str(err.value).startswith(f"{path}: ") and expected in str(err.value), str(err.value)
