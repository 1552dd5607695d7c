"""`evaluators/<component>.yaml`: one `EvaluatorSpec` per component, written by `build`, read by every run.

The file is what a person reviews and approves, so it is what runs: its data definitions replace the
registered ones. Its derived fields (`rules`, `output_schema` sigma, `version` v) may be left out by a hand
edit; a value the file states must equal the one derived from the rest, so a stale v cannot pass unnoticed.
Analyses and rules are referenced by registered name; a name this installation does not know, or an analysis
whose version moved on since the build, is a `SpecError` asking for a rebuild. A generated component's
definitions (`ComponentSpec.generated`, Conduct's from the clauses) are the exception: they come from
`pack.yaml`, where a person edits them, so the run takes them from there; `approve` rewrites such a file that
a hand edit of `pack.yaml` made stale (`refresh`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from agent_factory.errors import SpecError, UnknownNameError
from agent_factory.evaluators.collect.prompt import PromptKind, template_digest, template_dir
from agent_factory.evaluators.collect.schema import build_sigma, json_schema
from agent_factory.evaluators.core import (
    AnalysisRef,
    ComponentSpec,
    DataDefinition,
    EvaluatorSpec,
    KnowledgeRef,
    TemplateRef,
    get_component,
    get_rule,
    load_yaml_model,
)
from agent_factory.knowledge_packs import KnowledgePack

PACK_FILE = "pack.yaml"
TEMPLATE_KINDS: tuple[PromptKind, ...] = ("checklist", "jury")
EVALUATORS_DIR = "evaluators"


def _sigma(defs: tuple[DataDefinition, ...]) -> dict[str, Any] | None:
    modelled = [d for d in defs if any(t != "rule" for t in d.tiers)]
    return json_schema(build_sigma(modelled)) if modelled else None


def derive(ev: EvaluatorSpec) -> EvaluatorSpec:
    """`ev` with its derived fields computed from the rest."""
    rules = tuple(sorted({n for d in ev.definitions for n in (d.rule, d.applies_when) if n}))
    done = ev.model_copy(update={"rules": rules, "output_schema": _sigma(ev.definitions), "version": None})
    return done.model_copy(update={"version": done.computed_version()})


def make_evaluator(component: str, pack: KnowledgePack, *, pack_file: str = PACK_FILE) -> EvaluatorSpec:
    """The evaluator `build` writes for `component` over `pack`."""
    spec = get_component(component)
    defs = get_component(component).definitions_for(pack)
    modelled = any(t != "rule" for d in defs for t in d.tiers)
    templates = {
        kind: TemplateRef(file=f"templates/{kind}.j2", digest=template_digest(kind))
        for kind in TEMPLATE_KINDS
    } if modelled else {}
    return derive(EvaluatorSpec(
        component=component,
        description=spec.description,
        knowledge_pack=KnowledgeRef(file=pack_file, knowledge_digest=pack.knowledge_digest()),
        analyses=tuple(AnalysisRef(name=a.name, version=a.version) for a in spec.analyses),
        templates=templates,
        definitions=defs,
    ))


def evaluator_yaml(ev: EvaluatorSpec) -> str:
    """The file's text: a header for the reviewer, then the spec."""
    head = (
        f"# Evaluator of component `{ev.component}` (v = {ev.version}): data definitions rho with their projection\n"
        "# pi, the output schema sigma model tiers answer in, and the rules and analyses it uses by registered name.\n"
        "# Written by `agent-factory build` and read by every run of the approved suite. A hand edit may drop the\n"
        "# derived fields (rules, output_schema, version); stated values must equal the derived ones.\n"
    )
    if get_component(ev.component).generated:
        head += ("# These definitions are generated from the clauses of pack.yaml: edit a clause there (a run takes\n"
                 "# them from the clauses, and `agent-factory approve` rewrites this file to match).\n")
    body = ev.model_dump(mode="json")
    return head + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False)


def stale(ev: EvaluatorSpec, pack: KnowledgePack) -> bool:
    """Whether a generated evaluator's definitions (`ComponentSpec.generated`) no longer match what `pack` generates."""
    spec = get_component(ev.component)
    if not spec.generated:
        return False
    return [d.digest() for d in ev.definitions] != [d.digest() for d in spec.definitions_for(pack)]


def refresh(directory: Path, pack: KnowledgePack) -> list[str]:
    """Rewrite the generated evaluator files of a suite directory that `pack` makes stale; the files rewritten."""
    done = []
    for path in sorted((directory / EVALUATORS_DIR).glob("*.yaml")):
        ev = load_yaml_model(EvaluatorSpec, path)
        if stale(ev, pack):
            fresh = make_evaluator(ev.component, pack, pack_file=ev.knowledge_pack.file)
            path.write_text(evaluator_yaml(fresh), encoding="utf-8")
            done.append(f"{EVALUATORS_DIR}/{path.name}")
    return done


def _check(path: Path, ev: EvaluatorSpec, derived: EvaluatorSpec) -> None:
    for name in ("rules", "output_schema", "version"):
        if name in ev.model_fields_set and getattr(ev, name) != getattr(derived, name):
            shown = derived.version if name == "version" else "the value derived from the definitions"
            raise SpecError(f"{path}: {name}: does not match the rest of the file (derived: {shown}); "
                            f"update it or delete the field, then approve again")
    for kind in ev.templates:
        _template_kind(kind, path)


def _template_kind(kind: str, path: Path) -> PromptKind:
    for known in TEMPLATE_KINDS:
        if kind == known:
            return known
    raise SpecError(f"{path}: templates.{kind}: unknown template; valid: {', '.join(TEMPLATE_KINDS)}")


def load_evaluator(path: Path, *, component: str, pack: KnowledgePack) -> tuple[ComponentSpec, list[str]]:
    """The component spec a run uses from a suite's evaluator file, and notices for the person running it."""
    ev: EvaluatorSpec = load_yaml_model(EvaluatorSpec, path)
    if ev.component != component:
        raise SpecError(f"{path}: component: {ev.component!r}, but the suite lists this file for {component!r}")
    registered = get_component(component)
    by_name = {a.name: a for a in registered.analyses}
    analyses = []
    for i, ref in enumerate(ev.analyses):
        a = by_name.get(ref.name)
        if a is None:
            raise SpecError(f"{path}: analyses.{i}.name: unknown analysis {ref.name!r}; valid: "
                            f"{', '.join(sorted(by_name))}")
        if a.version != ref.version:
            raise SpecError(f"{path}: analyses.{i}.version: {ref.name} is version {a.version} in this installation, "
                            f"the suite was built with {ref.version}; rebuild the suite and approve it")
        analyses.append(a)
    for i, d in enumerate(ev.definitions):
        for field in ("rule", "applies_when"):
            name = getattr(d, field)
            if name is None:
                continue
            try:
                get_rule(name)
            except UnknownNameError as e:
                raise SpecError(f"{path}: definitions.{i}.{field}: {e}") from None
    if d_ids := [d.id for d in ev.definitions if d.component != component]:
        raise SpecError(f"{path}: definitions: {', '.join(d_ids)} belong to another component")
    _check(path, ev, derive(ev))  # after the names: an unknown one is the more useful message
    notices = []
    definitions = ev.definitions
    if registered.generated:
        # Generated definitions (Conduct's, from the clauses of pack.yaml, where a person edits them): the
        # file lists them for review. A hand edit of pack.yaml makes the list stale: the clauses win.
        definitions = registered.definitions_for(pack)
        if stale(ev, pack):
            notices.append(f"{path.name} lists other definitions than the clauses of the suite's pack give "
                           "(pack.yaml edited by hand?); the run uses the pack's clauses, and `agent-factory "
                           "approve` rewrites the file from them")
    if ev.knowledge_pack.knowledge_digest != pack.knowledge_digest():
        notices.append(f"{path.name}: the pack's knowledge changed since the build (base pack updated?); "
                       "`agent-factory build` and `agent-factory diff` show the effect")
    templates = template_dir(path.parent.parent)  # the suite's own copy is what renders (see `template_dir`)
    for kind, template in ev.templates.items():
        if template.digest != template_digest(_template_kind(kind, path), templates):
            notices.append(f"{path.name}: prompt template {kind} changed since the build; the run renders "
                           f"{templates / template.file.removeprefix('templates/')}")
    # The run's definitions are fixed now (generated ones from this pack): the spec no longer generates.
    spec = dataclasses.replace(registered, definitions=definitions, analyses=tuple(analyses), generate=None)
    return spec, notices
