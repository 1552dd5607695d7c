"""`build_suite`: a spec -> a suite directory a person can review, approve and run.

    DIR/suite.yaml            pack: pack.yaml, components: the seven
    DIR/pack.yaml             a pack extending the base pack, holding the compiled clauses (a comment gives
                              each clause's spec line, kept out of the clause so moving a line recomputes nothing)
    DIR/evaluators/<c>.yaml   per component, an `EvaluatorSpec` (factory.evaluator_file): rho (data definitions
                              with their projection pi), sigma (the JSON schema model tiers answer in), the
                              rules and analyses by registered name, v; runs read these files
    DIR/templates/*.j2        the prompt templates the model tiers render
    DIR/invariants.yaml       proposed invariants (must-not / never clauses) for a person to confirm
    DIR/uncompiled.yaml       normative sentences the compiler could not compile, with line and reason
    DIR/manifest.json         spec sha256, pack digest, per-file sha256, evaluator versions, compiler version
                              (and, when a model is configured, `compiler`: the deterministic version and the model)

A check the spec states and the base pack states too (or the spec twice) is written once, with the spec's
line as its source (`factory.compile.merge`); the report says which were merged. A spec that states no rule
(no normative sentence, or a JSON file) is refused: a suite without clauses would measure nothing.

The bytes depend only on the spec, the base pack, the options and the registered components: building the
same spec twice gives identical files, wherever the directory is. With a small model configured, the
orchestrator (`factory.compile.orchestrator`) compiles what the deterministic compiler could not; its answers
are cached, so a rebuild with the same model is identical too. Without a model nothing here changes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from agent_factory.digest import digest
from agent_factory.errors import SpecError
from agent_factory.evaluators.collect.backends import CallCounters
from agent_factory.evaluators.collect.cache import DatumCache
from agent_factory.evaluators.collect.config import ModelConfig
from agent_factory.evaluators.collect.prompt import TEMPLATES
from agent_factory.evaluators.core import COMPONENTS
from agent_factory.factory.compile.compiler import compile_spec
from agent_factory.factory.compile.detect import ANY_TEXT
from agent_factory.factory.compile.merge import check_text, merge_checks
from agent_factory.factory.compile.model import (
    COMPILER_VERSION,
    BuildReport,
    ClauseSummary,
    CompiledClause,
    CompiledSpec,
    MergedCheck,
)
from agent_factory.factory.suite.evaluator_file import EVALUATORS_DIR, PACK_FILE, evaluator_yaml, make_evaluator
from agent_factory.factory.suite.read import INVARIANTS_FILE, MANIFEST_FILE, SUITE_FILE, read_invariants
from agent_factory.knowledge_packs import KnowledgePack, load_pack
from agent_factory.knowledge_packs.loader import resolve_pack
from agent_factory.knowledge_packs.model import Clause, ClauseCondition, ClauseLayer

_LEXICONS = ("injection", "frustration", "abandonment", "disclosure", "clarification", "context_repair")


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False)


def _header(*lines: str) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def _pack_name(stem: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("_.-")
    return name if name and name[0].isalnum() else f"spec_{name}" if name else "spec"


def _extends(pack: str | Path, out: Path) -> str:
    """How pack.yaml names its base: a registry name as is, a file relative to the suite directory."""
    if isinstance(pack, str) and ("/" not in pack and os.sep not in pack and not pack.endswith((".yaml", ".yml"))):
        return pack
    path = resolve_pack(Path(pack)).resolve()
    return Path(os.path.relpath(path, out.resolve())).as_posix()


def base_tools(pack: KnowledgePack) -> tuple[str, ...]:
    """Tool names the pack's clauses name (the catalogue a spec's detectors may use)."""
    names = [n for c in pack.clauses for part in (c.trigger, c.obligation) for n in part.tool_names if n != "*"]
    return tuple(dict.fromkeys(names))


def base_lexicons(pack: KnowledgePack) -> tuple[str, ...]:
    """Lexicon categories with at least one pattern in some language."""
    return tuple(c for c in _LEXICONS if any(getattr(lex, c) for lex in pack.lexicons.values()))


def _pack_text(spec: CompiledSpec, *, name: str, extends: str, model: str | None = None,
               overrides: Sequence[Clause] = (), merges: Sequence[MergedCheck] = ()) -> str:
    clauses = [c.clause.model_dump(mode="json") for c in spec.clauses]
    clauses += [c.model_dump(mode="json") for c in overrides]
    by = "the deterministic spec compiler" + (f", then the model orchestrator ({model})" if model else "")
    head = {
        "name": name,
        # From the clauses, not the spec text: an edit that changes no clause leaves the pack's digest alone.
        "version": f"{COMPILER_VERSION}+{digest(json.dumps(clauses, sort_keys=True).encode(), n=12)}",
        "extends": extends,
        "description": f"Clauses compiled from {spec.source} by {by}.",
    }
    out = [_header(
        f"Knowledge pack compiled from {spec.source} (sha256 {spec.sha256[:16]}), compiler {COMPILER_VERSION}.",
        f"It extends `{extends}`; its clauses are the spec's rules as r = (trigger, obligation). Review each one:",
        "the trigger must be decided by rules; an obligation without a rule is asked of the model tiers.",
    ), _yaml(head)]
    if not spec.clauses and not overrides:
        out.append("clauses: []\n")
        return "".join(out)
    out.append("clauses:\n")
    by_kept = {m.kept: m for m in merges}
    for c in spec.clauses:
        merge = by_kept.get(c.id)
        notes = ["compiled by the model"] if c.compiled_by == "model" else []
        if merge is not None and merge.pack_clause:
            notes.append(f"replaces the base pack clause {merge.pack_clause} (the same check)")
        if merge is not None and merge.dropped:
            notes.append(f"also stated as {', '.join(merge.dropped)} (the same check, not written)")
        out.append(f"  # line {c.source_line}: {c.kind} ({c.polarity}); trigger {c.detector.how}; "
                   f"obligation {c.check.how}{' ' + c.check.rule if c.check.rule else ''}"
                   + "".join(f"; {n}" for n in notes) + "\n")
        out.append(_clause_yaml(c.clause))
    for clause in overrides:
        out.append("  # the base pack's clause, without the parameters the spec states itself\n")
        out.append(_clause_yaml(clause))
    return "".join(out)


def _clause_yaml(clause: Clause) -> str:
    data = clause.model_dump(mode="json", exclude_defaults=True)
    data["layer"] = clause.layer
    data["kind"] = clause.kind
    order = ("id", "text", "source", "kind", "layer", "invariant", "trigger", "obligation", "description")
    data = {k: data[k] for k in order if k in data} | {k: v for k, v in data.items() if k not in order}
    return "".join(f"  {line}\n" for line in _yaml([data]).splitlines())


def _confirmed(path: Path) -> frozenset[str]:
    """Clauses a person already confirmed in the suite being rebuilt: a rebuild keeps those decisions for the
    clauses it still proposes (an edited clause has a new id, so it asks again)."""
    if not path.is_file():
        return frozenset()
    try:
        return frozenset(e.clause for e in read_invariants(path) if e.confirmed)
    except SpecError:
        return frozenset()  # a broken file is rewritten; the review asks again


def _read_spec(path: Path) -> str:
    """The spec's text; `SpecError` naming the file when it cannot be one (unreadable, binary, JSON)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a text file; a role spec is markdown or plain text") from None
    except OSError as e:
        raise SpecError(f"{path}: cannot read the spec ({e.strerror or e})") from None
    if text.lstrip()[:1] in ("{", "["):
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            raise SpecError(f"{path}: a JSON file, not a role spec; give the agent's system prompt (markdown or text)")
    return text


def _summary(clause: Clause, compiled: CompiledClause | None) -> ClauseSummary:
    everything = matches_everything(clause.trigger)
    if compiled is not None:
        return ClauseSummary(
            id=clause.id, origin="spec", kind=compiled.kind, polarity=compiled.polarity, trigger=compiled.trigger,
            obligation=compiled.obligation, source_line=compiled.source_line, check=check_text(clause.obligation),
            layer=clause.layer, detector=compiled.detector.note, invariant=compiled.invariant,
            matches_everything=everything,
        )
    return ClauseSummary(
        id=clause.id, origin="pack", kind=clause.kind, polarity="avoid" if clause.kind == "must_not" else "do",
        trigger=clause.trigger.describe(), obligation=clause.text, source_line=None,
        check=check_text(clause.obligation), layer=clause.layer, detector=clause.trigger.describe(),
        invariant=clause.invariant, matches_everything=everything,
    )


def matches_everything(trigger: ClauseCondition) -> bool:
    """A trigger that holds in every unit with any text (the `always` detector, or one like it)."""
    return (trigger.rule is None and not trigger.tool_names and not trigger.attribute_present
            and not trigger.attribute_equals and trigger.lexicon is None
            and trigger.regex in (ANY_TEXT, r"\S", ".", r"[\s\S]"))


def _write(out: Path, files: dict[str, bytes]) -> None:
    old = out / MANIFEST_FILE
    if old.is_file():
        try:
            stale = set(json.loads(old.read_text(encoding="utf-8")).get("files", {})) - set(files)
        except (ValueError, AttributeError):
            stale = set()
        for rel in sorted(stale):
            target = out / rel
            if target.is_file() and out.resolve() in target.resolve().parents:
                target.unlink()
    for rel, data in files.items():
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def build_suite(
    spec_path: Path, *, pack: str | Path, out: Path, tools: Sequence[str] = (), layer: ClauseLayer | None = None,
    model: ModelConfig | None = None, cache: DatumCache | None = None, counters: CallCounters | None = None,
) -> BuildReport:
    """Compile `spec_path` and write the suite directory `out` (see the module docstring).

    `pack` is the base pack (built-in or entry-point name, or a path); its clauses' tool names and its
    non-empty lexicon categories are what the compiler may use besides the spec itself; `tools` adds names.
    `model` with a small model: the orchestrator compiles the sentences the rules could not, its answers kept
    in `cache` (none: every build asks again); `counters` adds up its model calls. A compiled pack that does
    not validate raises `SpecError` naming the file.
    """
    text = _read_spec(spec_path)
    base = load_pack(pack)
    spec = compile_spec(text, source=spec_path.name, tools=(*base_tools(base), *tools),
                        lexicons=base_lexicons(base), layer=layer, modes=tuple(base.baselines.modes))
    if not spec.sentences:
        raise SpecError(f"{spec_path}: no sentence states a rule (must, should, never, only if, if ... then, an "
                        "order); nothing to build a suite from")
    model_name: str | None = None
    if model is not None and model.small is not None:
        # Imported here: only model builds need the orchestrator (and the model stack it imports).
        from agent_factory.factory.compile.orchestrator import orchestrate

        result = orchestrate(spec, text, model=model, cache=cache, lexicons=base_lexicons(base), layer=layer,
                             counters=counters)
        spec, model_name = result.spec, result.model
    compiled = len(spec.clauses)
    kept, overrides, merges = merge_checks(spec.clauses, base)
    spec = spec.model_copy(update={"clauses": kept})
    out.mkdir(parents=True, exist_ok=True)
    name, extends = _pack_name(spec_path.stem), _extends(pack, out)
    pack_text = _pack_text(spec, name=name, extends=extends, model=model_name, overrides=overrides, merges=merges)
    (out / PACK_FILE).write_text(pack_text, encoding="utf-8")
    try:
        merged = load_pack(out / PACK_FILE)
    except SpecError:
        (out / PACK_FILE).unlink()  # never leave a pack behind that does not load
        raise

    files: dict[str, bytes] = {PACK_FILE: pack_text.encode("utf-8")}
    files[SUITE_FILE] = (_header(f"Evaluator suite compiled from {spec.source}; run it with "
                                 "`agent-factory run --suite DIR`.")
                         + _yaml({"pack": PACK_FILE, "components": list(COMPONENTS)})).encode("utf-8")
    versions: dict[str, str] = {}
    for component in COMPONENTS:
        ev = make_evaluator(component, merged, pack_file=PACK_FILE)
        versions[component] = ev.version or ""
        files[f"{EVALUATORS_DIR}/{component}.yaml"] = evaluator_yaml(ev).encode("utf-8")
    for template in sorted(TEMPLATES.glob("*.j2")):
        files[f"templates/{template.name}"] = template.read_bytes()
    # A clause that replaces a base-pack clause the pack declares an invariant stays one, as the pack decided.
    declared = {c.id for c in base.clauses if c.invariant}
    invariants = [c for c in spec.clauses if c.invariant and c.id not in declared]
    confirmed = _confirmed(out / INVARIANTS_FILE)
    files[INVARIANTS_FILE] = (_header(
        "Proposed invariants: zero tolerance at the gate (one violation opens an incident). The compiler proposes",
        "every must-not and never clause; a person confirms each by setting `confirmed: true`, or removes it.",
        "A rebuild keeps the confirmations of clauses it still proposes.",
    ) + _yaml({"invariants": [
        {"clause": c.id, "kind": c.kind, "source_line": c.source_line, "text": c.sentence,
         "confirmed": c.id in confirmed}
        for c in invariants
    ]})).encode("utf-8")
    files["uncompiled.yaml"] = (_header(
        f"Normative sentences of {spec.source} the deterministic compiler could not turn into clauses"
        + (f" (nor the model orchestrator, {model_name})." if model_name else "."),
        "Rewrite them in a recognised form, or add clauses to pack.yaml by hand.",
    ) + _yaml({"uncompiled": [u.model_dump(mode="json") for u in spec.uncompiled]})).encode("utf-8")
    manifest = {
        "compiler_version": COMPILER_VERSION,
        "spec": {"file": spec.source, "sha256": spec.sha256},
        "pack": {"file": PACK_FILE, "name": merged.name, "extends": extends, "digest": merged.digest()},
        "evaluators": versions,
        "files": {rel: digest(data) for rel, data in sorted(files.items())},
    }
    if model is not None and model.small is not None:
        # Only when a model is configured: a deterministic build's manifest stays as it always was.
        manifest["compiler"] = {"deterministic": COMPILER_VERSION, "model": model_name}
    files[MANIFEST_FILE] = (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    _write(out, files)
    missing = tuple(f"{c.id}: {c.check.missing_rule}" for c in spec.clauses if c.check.missing_rule)
    by_id = {c.id: c for c in spec.clauses}
    summaries = tuple(_summary(c, by_id.get(c.id)) for c in merged.clauses)
    return BuildReport(
        spec=spec.source, spec_sha256=spec.sha256, pack=merged.name, extends=extends, out=str(out), files=len(files),
        normative_sentences=spec.sentences, compiled=compiled, clauses=summaries, merged=merges,
        always_triggers=sum(1 for c in summaries if c.matches_everything), uncompiled=spec.uncompiled,
        invariants=tuple(c.id for c in invariants), missing_rules=missing, evaluators=versions,
    )


__all__ = ["PACK_FILE", "base_lexicons", "base_tools", "build_suite", "matches_everything"]
