"""The plugin registry: a third-party plugin installed as a real distribution (a `*.dist-info` with
`entry_points.txt` on sys.path) is found by name; unknown and broken names say what is wrong in one line; the
built-ins all come through this project's own entry points; the compiler's rule catalogue is a registry query."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_factory import plugins
from agent_factory.adapters.base import adapter_names, detect, get_adapter
from agent_factory.errors import PluginError, SpecError, UnknownNameError, UsageError
from agent_factory.evaluators.core import COMPONENTS, RuleAnswer, RuleContext, components, get_component, get_rule
from agent_factory.evaluators.core.registry import clause_rules, register_rule, rule
from agent_factory.factory.compile.orchestrator import Catalogue
from agent_factory.factory.compile.orchestrator import clause_rules as compiler_rules

ACME = '''
from agent_factory.adapters.chat import OpenAIChatAdapter
from agent_factory.evaluators.core.registry import RuleAnswer, rule


@rule("acme.always_yes", layers=("span", "trace"), params={"threshold": "how sure"}, summary="Always yes.")
def always_yes(unit, ctx):
    return RuleAnswer("yes", reason="acme")


class AcmeChat(OpenAIChatAdapter):
    name = "acme-chat"
    description = "ACME's chat logs"

    def sniff(self, head, path):
        return path.suffix == ".acme"


NOT_A_RULE = 42
'''

ENTRY_POINTS = """
[agent_factory.rules]
acme = acme_plugin

[agent_factory.adapters]
acme-chat = acme_plugin:AcmeChat
"""


def _install(site: Path, name: str, module: str, source: str, entry_points: str) -> None:
    """A distribution as pip leaves it: the module and its `.dist-info` with METADATA and entry_points.txt."""
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A site directory on sys.path holding the `acme-plugin` distribution; the registry rereads entry points."""
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "acme-plugin", "acme_plugin", ACME, ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    plugins.reload(["rule", "adapter"])
    yield site
    monkeypatch.undo()
    sys.modules.pop("acme_plugin", None)
    sys.modules.pop("acme_bad", None)
    for kind, name in (("rule", "acme.always_yes"), ("adapter", "acme-chat")):
        plugins.unregister(kind, name)
    importlib.invalidate_caches()
    plugins.reload(["rule", "adapter"])


def test_a_third_party_rule_module_is_found_by_name_with_its_metadata(site: Path) -> None:
    fn = get_rule("acme.always_yes")
    assert fn.__module__ == "acme_plugin"
    info = plugins.info("rule", "acme.always_yes")
    assert (info.kind, info.name, info.metadata["layers"], dict(info.metadata["params"])) == (
        "rule", "acme.always_yes", ("span", "trace"), {"threshold": "how sure"})
    assert plugins.registry_info(fn) == info
    assert "acme.always_yes" in plugins.names("rule")


def test_a_third_party_adapter_class_is_instantiated_and_sniffed_after_the_builtins(site: Path) -> None:
    adapter = get_adapter("acme-chat")
    assert type(adapter).__name__ == "AcmeChat"
    assert adapter_names()[-1] == "acme-chat" and adapter_names()[0] == "otel-nested"
    (site / "log.acme").write_text('{"x": 1}\n', encoding="utf-8")
    assert detect(site / "log.acme").name == "acme-chat"


def test_the_compiler_offers_a_plugin_rule_with_its_declared_layers(site: Path) -> None:
    assert compiler_rules()["acme.always_yes"] == "Always yes."
    cat = Catalogue(tools=(), lexicons=(), rules=compiler_rules(), default_layer="trace")
    assert cat.data()["rules"]["acme.always_yes"] == "Always yes. Layers: span, trace."


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError) as err:
        get_rule("conduct.no_such_rule")
    assert err.value.valid == plugins.names("rule")
    assert "conduct.clause_trigger" in err.value.valid and "conduct.booking_limits" in err.value.valid
    assert str(err.value).startswith("unknown rule 'conduct.no_such_rule'; valid: ")
    with pytest.raises(UnknownNameError, match=r"^unknown format 'nope'; valid: .*tau-bench"):
        get_adapter("nope")
    with pytest.raises(UnknownNameError, match=r"^unknown plugin kind 'widget'"):
        plugins.names("widget")  # type: ignore[arg-type]


def test_a_broken_entry_point_is_one_line_naming_it_and_its_group(site: Path) -> None:
    _install(site, "acme-bad", "acme_bad", "NOT_A_RULE = 42\n",
             "[agent_factory.rules]\nwrong = acme_bad:NOT_A_RULE\nmissing = acme_bad:no_such_attribute\n")
    importlib.invalidate_caches()
    plugins.reload(["rule"])
    with pytest.raises(PluginError) as err:
        get_rule("missing")
    message = str(err.value)
    assert message.startswith("entry point 'missing' = 'acme_bad:no_such_attribute' in group "
                              "'agent_factory.rules' failed to load: AttributeError")
    assert "\n" not in message and isinstance(err.value, SpecError)
    with pytest.raises(PluginError, match=r"^entry point 'wrong' = 'acme_bad:NOT_A_RULE' in group "
                                          r"'agent_factory.rules': rule 'wrong': got int, expected a rule function"):
        get_rule("wrong")
    assert get_rule("conduct.clause_trigger") is not None  # the broken ones leave the rest usable
    assert get_rule("acme.always_yes") is not None
    with pytest.raises(PluginError, match="'missing'"):
        plugins.items("rule")  # what needs every rule (the compiler's catalogue) says which one is broken


def test_a_plugin_module_that_fails_to_import_is_named_when_a_name_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "acme-broken", "acme_broken", "raise ImportError('needs acme-core')\n",
             "[agent_factory.rules]\nacme = acme_broken\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    plugins.reload(["rule"])
    try:
        assert get_rule("conduct.clause_trigger") is not None
        with pytest.raises(PluginError) as err:
            get_rule("acme.rule")
        assert "unknown rule 'acme.rule'" in str(err.value)
        assert ("entry point 'acme' = 'acme_broken' in group 'agent_factory.rules' failed to load: "
                "ImportError: needs acme-core") in str(err.value)
        assert "\n" not in str(err.value)
    finally:
        monkeypatch.undo()
        sys.modules.pop("acme_broken", None)
        importlib.invalidate_caches()
        plugins.reload(["rule"])


def test_a_name_registered_twice_is_a_usage_error() -> None:
    def other(unit: object, ctx: RuleContext) -> RuleAnswer:
        return RuleAnswer("no")

    with pytest.raises(UsageError, match=r"^rule 'conduct.clause_trigger' registered twice: "):
        register_rule(rule("conduct.clause_trigger")(other))
    assert get_rule("conduct.clause_trigger") is not other
    with pytest.raises(UsageError, match=r"component 'x': got str, expected a ComponentSpec"):
        plugins.register("component", "x", "not a spec")


def test_the_builtins_all_come_through_this_projects_entry_points() -> None:
    ours = [ep for kind in plugins.KINDS for ep in plugins.kind_entry_points(kind)
            if ep.dist is not None and ep.dist.name == "agent-factory"]
    groups = {ep.group for ep in ours}
    assert {"agent_factory.adapters", "agent_factory.rules", "agent_factory.components"} <= groups
    assert [s.name for s in components()] == list(COMPONENTS)
    assert all(plugins.origin("component", c) is not None for c in COMPONENTS)  # from entry points, not imports
    assert adapter_names() == ["otel-nested", "otlp-json", "otel-spans-jsonl", "tau-bench", "openai-chat",
                               "who-and-when", "run-contract", "step-log"]
    rules_by_module = {get_rule(n).__module__ for n in plugins.names("rule")}
    assert "agent_factory.knowledge_packs.airline.rules" in rules_by_module  # the pack plugin
    assert get_component("provenance").all_segments and get_component("conduct").generated


def test_the_compilers_rule_layers_are_the_registry_declarations() -> None:
    declared = {r.name: r for r in clause_rules()}
    assert {n: r.layers for n, r in declared.items()} == {
        "conduct.agreed_action": ("conversation",),
        "conduct.agreed_action_done": ("conversation",),
        "conduct.booking_limits": ("trace", "conversation"),
        "conduct.claims_grounded": ("conversation",),
        "conduct.confirmed_before_action": ("conversation",),
        "conduct.deflected_own_records": ("conversation",),
        "conduct.looked_before_refusing": ("conversation",),
        "conduct.no_reply_with_tool_call": ("trace", "conversation"),
        "conduct.one_tool_call_per_message": ("trace", "conversation"),
        "conduct.refusal_justified": ("conversation",),
        "conduct.refused_write_request": ("conversation",),
        "conduct.states_amounts_or_terms": ("conversation",),
        "conduct.write_arguments_grounded": ("conversation",),
        "conduct.write_preconditions_hold": ("conversation",),
        "execution.has_retrieval": ("trace",),
    }
    assert {n for n, r in declared.items() if r.needs_trigger_tools} == {
        "conduct.booking_limits", "conduct.confirmed_before_action", "conduct.write_arguments_grounded"}
    assert list(compiler_rules()) == sorted(declared)
    assert compiler_rules()["execution.has_retrieval"] == "The turn has a retrieval step."


def test_without_any_installed_entry_point_a_miss_says_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "group_entry_points", lambda group: ())
    with pytest.raises(PluginError, match=r"^unknown component 'nope': no entry point of group "
                                          r"'agent_factory.components' is installed.*pip install -e \.\)$"):
        get_component("nope")


def test_a_decorator_only_tags_its_function_and_registers_nothing() -> None:
    @rule("test.tagged_only", layers=("trace",))
    def tagged(unit: object, ctx: RuleContext) -> RuleAnswer:
        return RuleAnswer("yes")

    info = plugins.registry_info(tagged)
    assert info is not None and (info.kind, info.name, info.metadata["layers"]) == ("rule", "test.tagged_only", ("trace",))
    assert "test.tagged_only" not in plugins.names("rule")
    with pytest.raises(UnknownNameError, match=r"^unknown rule 'test.tagged_only'; valid: .*conduct.clause_trigger"):
        get_rule("test.tagged_only")
    with pytest.raises(UsageError, match=r"^register_rule: .* is not declared as a rule; decorate it with @rule"):
        register_rule(lambda unit, ctx: RuleAnswer("no"))


def test_two_registries_share_no_registration_and_each_reads_the_entry_points() -> None:
    ours, theirs = plugins.Registry(), plugins.Registry()

    @rule("test.only_ours")
    def only_ours(unit: object, ctx: RuleContext) -> RuleAnswer:
        return RuleAnswer("yes")

    with plugins.using(ours):
        assert plugins.registry() is ours
        register_rule(only_ours)
        assert get_rule("test.only_ours") is only_ours
    with plugins.using(theirs):
        with pytest.raises(UnknownNameError):
            get_rule("test.only_ours")
        assert get_rule("conduct.clause_trigger") is not None and get_component("conduct").generated
    assert plugins.registry() is not ours and "test.only_ours" not in plugins.names("rule")
    assert ours.names("rule") == sorted({*theirs.names("rule"), "test.only_ours"})
    fresh = plugins.Registry()  # the process's registry may hold other tests' rules: compare with a new one
    assert theirs.names("rule") == fresh.names("rule") and theirs.names("pack") == fresh.names("pack")
    assert set(theirs.kinds_used()) == {"rule", "component", "pack"}  # what it was asked for, nothing more
