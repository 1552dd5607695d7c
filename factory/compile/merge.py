"""One check once: a compiled clause that states a check the base pack (or an earlier sentence) already states is
kept once, with the spec's line as its source.

Two clauses are the same check when they fire on the same trigger (tool names compared as sets) and collect the
obligation the same way: the same rule with the same parameters (a rule reads the same calls and messages on a
turn or a conversation), or, on the same layer, the same built-in condition for the same kind or the same model
question. A rule's `*_regex` parameters only tune how it
reads text (what counts as a "yes"): they do not make another check, and a merged clause keeps the pack's
where the spec sets none.

- Among the compiled clauses, a later one with the same rule or built-in check as an earlier one is dropped
  (both lines listed). A clause the model judges asks its own sentence's question and is kept.
- A base-pack clause decided by a rule is replaced by the compiled clauses of that rule and trigger that together
  state each of its parameters: the one sharing most of them takes the pack clause's id (so the pack's copy is
  overridden, not run twice) and keeps the pack's invariant flag; the others keep their own ids. Where the spec
  states another value than the pack, the spec's value wins and the merge says so. A pack clause the spec covers
  only in part keeps the parameters the spec does not state.

- One behaviour under one clause: a compiled clause that restricts the same behaviour as a base-pack clause (what
  an `only_if` clause allows only under its condition, or what a `must_not` clause forbids in every unit; both
  found by the same built-in matcher: the same tool names, or text matchers on the same fields that the pack's
  lexicon or regex covers) is the pack's clause: the pack's clause runs once, citing the spec's lines as its
  sources, and every compiled clause of that behaviour is dropped (listed in the merge). Two clauses counting the
  same answers under two names would report one behaviour twice, at two rates.

Pure: the same compiled clauses and base pack give the same result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from agent_factory.evaluators.provenance.normalize import normalize
from agent_factory.factory.compile.detect import ANY_TEXT, DetectorHow
from agent_factory.factory.compile.model import Check as CheckModel
from agent_factory.factory.compile.model import CompiledClause, Detector, MergedCheck
from agent_factory.knowledge_packs.model import Clause, ClauseCondition, KnowledgePack, compile_pattern


def _tuning(key: str) -> bool:
    return key.endswith("_regex")


def policy_params(cond: ClauseCondition) -> dict[str, Any]:
    """The parameters that state the policy (limits and the like), not how the rule reads text."""
    return {k: v for k, v in cond.params.items() if not _tuning(k)}


def _key(cond: ClauseCondition) -> str:
    data = cond.model_dump(mode="json")
    data["tool_names"] = sorted(data["tool_names"])
    data["params"] = policy_params(cond)
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def check_key(clause: Clause) -> str:
    """What makes two clauses the same check (see the module docstring)."""
    ob = clause.obligation
    if ob.rule is not None:  # a rule decides alone, on the calls or messages it reads, whatever the unit
        return json.dumps(["rule", _key(clause.trigger), _key(ob)], ensure_ascii=False)
    return json.dumps([clause.layer, _key(clause.trigger), clause.kind, _key(ob)], ensure_ascii=False)


def _trigger_key(clause: Clause) -> str:
    return json.dumps([_key(clause.trigger), clause.obligation.rule])


def check_text(cond: ClauseCondition) -> str:
    """How an obligation is collected, as `build --json` prints it: `model`, `rule <name> {param: value}`, or
    `matcher <conditions>`."""
    if cond.rule is not None:
        params = policy_params(cond)
        shown = " {" + ", ".join(f"{k}: {v}" for k, v in params.items()) + "}" if params else ""
        tuned = [k for k in cond.params if _tuning(k)]
        return f"rule {cond.rule}{shown}" + (f" (reads text with {', '.join(tuned)})" if tuned else "")
    if not cond.rule_checkable():
        return "model"
    return "matcher " + ", ".join(cond.matchers())


def _dedupe(clauses: Sequence[CompiledClause]) -> tuple[list[CompiledClause], list[MergedCheck]]:
    kept: list[CompiledClause] = []
    first: dict[str, CompiledClause] = {}
    dropped: dict[str, list[CompiledClause]] = {}
    for c in clauses:
        key = check_key(c.clause)
        if key in first and c.clause.obligation.rule_checkable():
            dropped.setdefault(key, []).append(c)
        else:
            first[key] = c
            kept.append(c)
    merges = [
        MergedCheck(kept=first[key].id, source_line=first[key].source_line, dropped=tuple(d.id for d in ds),
                    lines=(first[key].source_line, *(d.source_line for d in ds)),
                    check=check_text(first[key].clause.obligation),
                    note="the same check stated again in the spec")
        for key, ds in dropped.items()
    ]
    return kept, merges


def _take_over(c: CompiledClause, pack: Clause) -> CompiledClause:
    """`c` under the pack clause's id: the spec's sentence and line, the pack's text tuning and invariant flag."""
    ob = c.clause.obligation
    params = {**{k: v for k, v in pack.obligation.params.items() if _tuning(k)}, **ob.params}
    clause = c.clause.model_copy(update={
        "id": pack.id, "obligation": ob.model_copy(update={"params": params}),
        "invariant": pack.invariant or c.clause.invariant,
        "description": f"{c.clause.description} Merged with the base pack's clause {pack.id} (the same check).",
    })
    return c.model_copy(update={"id": pack.id, "clause": clause, "invariant": pack.invariant or c.invariant})


def _literal(regex: str) -> str | None:
    r"""The text a regex matches when it is a plain literal (specials escaped), else None (`\S`, `a|b`)."""
    out: list[str] = []
    chars = iter(regex)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            if not nxt or nxt.isalnum():
                return None  # a class or an anchor such as \S, \d, \b
            out.append(nxt)
        elif ch in "[]().*+?{}|^$":
            return None
        else:
            out.append(ch)
    return "".join(out)


def _trigger_covers(pack: ClauseCondition, compiled: ClauseCondition) -> bool:
    """Whether the pack's trigger fires wherever the compiled one does (equal, or the compiled trigger is a
    literal the pack's regex matches, on overlapping fields)."""
    if _key(pack) == _key(compiled):
        return True
    if (sorted(pack.tool_names) != sorted(compiled.tool_names) or pack.lexicon != compiled.lexicon
            or pack.attribute_present != compiled.attribute_present or pack.regex is None or compiled.regex is None
            or not set(pack.fields) & set(compiled.fields)):
        return False
    literal = _literal(compiled.regex)
    return literal is not None and bool(literal.strip()) and compile_pattern(pack.regex).search(literal) is not None


def same_matcher_check(compiled: Clause, pack: Clause) -> bool:
    """A compiled clause decided by a built-in matcher that states a pack clause's check: same kind, layer and
    obligation, and a trigger the pack's covers (the pack's regex matches the compiled literal)."""
    return (compiled.obligation.rule is None and compiled.obligation.rule_checkable()
            and compiled.kind == pack.kind and compiled.layer == pack.layer
            and _key(compiled.obligation) == _key(pack.obligation)
            and _trigger_covers(pack.trigger, compiled.trigger))


def _take_over_matcher(c: CompiledClause, pack: Clause) -> CompiledClause:
    """`c` under the pack clause's id with the pack's (broader) trigger: the spec's sentence and line."""
    clause = c.clause.model_copy(update={
        "id": pack.id, "trigger": pack.trigger, "invariant": pack.invariant or c.clause.invariant,
        "description": f"{c.clause.description} Merged with the base pack's clause {pack.id} (the same check).",
    })
    return c.model_copy(update={"id": pack.id, "clause": clause, "invariant": pack.invariant or c.invariant})


def _every_unit(cond: ClauseCondition) -> bool:
    """A trigger that holds wherever there is text (the compiler's `always`)."""
    return (cond.rule is None and cond.lexicon is None and not cond.tool_names and not cond.attribute_present
            and not cond.attribute_equals and cond.regex in (ANY_TEXT, r"\S", ".", r"[\s\S]"))


def behaviour(clause: Clause) -> ClauseCondition | None:
    """The behaviour a clause restricts, when a built-in matcher finds it: an `only_if` clause's trigger (allowed
    only under the condition), a `must_not` clause's obligation when it applies to every unit (forbidden); else
    None (a rule's check is compared by its rule and parameters instead)."""
    if clause.kind == "only_if":
        cond = clause.trigger
    elif clause.kind == "must_not" and _every_unit(clause.trigger):
        cond = clause.obligation
    else:
        return None
    return cond if cond.rule is None and cond.rule_checkable() else None


def _literals(regex: str) -> list[str] | None:
    r"""The texts an alternation of plain literals matches (`\bfoo\s+bar\b|baz`), else None."""
    out: list[str] = []
    for branch in regex.split("|"):
        plain = _literal(branch.replace(r"\b", "").replace(r"\s+", " "))
        if plain is None or not plain.strip():
            return None
        out.append(plain)
    return out


def _pack_patterns(cond: ClauseCondition, base: KnowledgePack) -> list[str]:
    patterns = [cond.regex] if cond.regex is not None else []
    if cond.lexicon is not None:
        patterns += [e.pattern for lang in sorted(base.lexicons)
                     for e in getattr(base.lexicons[lang], cond.lexicon)]
    return patterns


def same_behaviour(compiled: Clause, pack: Clause, base: KnowledgePack) -> bool:
    """Whether a compiled clause restricts the behaviour a pack clause restricts (see the module docstring): the
    same tool names, or text matchers on shared fields whose every literal the pack's lexicon or regex matches."""
    mine, theirs = behaviour(compiled), behaviour(pack)
    if mine is None or theirs is None or compiled.layer != pack.layer:
        return False
    if mine.attribute_present or mine.attribute_equals or theirs.attribute_present or theirs.attribute_equals:
        return False
    if mine.tool_names or theirs.tool_names:
        return (sorted(mine.tool_names) == sorted(theirs.tool_names) and mine.lexicon is None
                and mine.regex is None and theirs.lexicon is None and theirs.regex is None)
    if not set(mine.fields) & set(theirs.fields) or (mine.lexicon is not None and mine.lexicon != theirs.lexicon):
        return False
    if mine.regex is None or mine.regex == theirs.regex:
        return mine.lexicon is not None or mine.regex is not None
    literals = _literals(mine.regex)
    patterns = [compile_pattern(p) for p in _pack_patterns(theirs, base)]
    return literals is not None and all(any(p.search(normalize(t).text) for p in patterns) for t in literals)


def _as_pack_clause(c: CompiledClause, pack: Clause, lines: Sequence[int]) -> CompiledClause:
    """The pack's clause in place of `c`, citing the spec's lines that state the same behaviour."""
    where = ", ".join(str(n) for n in lines)
    spec = f"{c.clause.source} " if c.clause.source else ""
    ob = pack.obligation
    clause = pack.model_copy(update={
        "source": f"{pack.source}; the spec's {spec}line {where}".strip("; "),
        "invariant": pack.invariant or c.clause.invariant,
        "description": f"{pack.description} The spec states the same behaviour (line {where}): run once, as this "
                       "clause.".strip(),
    })
    how = "rule" if ob.rule is not None else "matcher" if ob.rule_checkable() else "model"
    trig = pack.trigger
    detected: DetectorHow = ("any_tool" if "*" in trig.tool_names else "tool" if trig.tool_names
                             else "lexicon" if trig.lexicon is not None else "regex" if trig.regex is not None
                             else "attribute")
    return c.model_copy(update={
        "id": pack.id, "kind": pack.kind, "polarity": "avoid" if pack.kind == "must_not" else "do",
        "trigger": trig.describe(), "obligation": pack.text, "invariant": clause.invariant,
        "detector": Detector(how=detected, note=trig.describe()),
        "check": CheckModel(how=how, note=check_text(ob), rule=ob.rule), "clause": clause,
    })


def merge_checks(
    clauses: Sequence[CompiledClause], base: KnowledgePack,
) -> tuple[tuple[CompiledClause, ...], tuple[Clause, ...], tuple[MergedCheck, ...]]:
    """(compiled clauses to write, base-pack clauses to override with fewer parameters, the merges made)."""
    kept, merges = _dedupe(clauses)
    taken: set[str] = set()
    overrides: list[Clause] = []
    own_ids = {c.id for c in kept}
    gone: set[str] = set()
    for pack in base.clauses:
        if pack.id in own_ids:
            continue
        alike = [c for c in kept if c.id not in taken and c.id not in gone and same_behaviour(c.clause, pack, base)]
        if alike:
            lines = sorted({c.source_line for c in alike})
            taker = alike[0]
            taken.add(taker.id)
            gone.update(c.id for c in alike[1:])
            kept[kept.index(taker)] = _as_pack_clause(taker, pack, lines)
            merges.append(MergedCheck(
                kept=pack.id, source_line=taker.source_line, pack_clause=pack.id,
                dropped=tuple(c.id for c in alike if c is not taker) + (taker.id,), lines=tuple(lines),
                check=check_text(pack.obligation),
                note=f"the spec's line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))} "
                     f"restrict{'' if len(lines) > 1 else 's'} the behaviour the base pack's clause {pack.id} "
                     f"restricts ({pack.trigger.describe() if pack.kind == 'only_if' else 'its obligation'}"
                     "): one behaviour under one clause, the pack's"))
            continue
        if pack.obligation.rule is None:
            twin = next((c for c in kept if c.id not in taken and same_matcher_check(c.clause, pack)), None)
            if twin is not None:
                taken.add(twin.id)
                index = kept.index(twin)
                kept[index] = _take_over_matcher(twin, pack)
                merges.append(MergedCheck(
                    kept=pack.id, source_line=twin.source_line, pack_clause=pack.id, dropped=(),
                    lines=(twin.source_line,), check=check_text(pack.obligation),
                    note=f"the spec's line {twin.source_line} states the base pack's clause; the pack's trigger "
                         "(a superset of the compiled one) is kept"))
            continue
        same = [c for c in kept if c.id not in taken and _trigger_key(c.clause) == _trigger_key(pack)]
        wanted = policy_params(pack.obligation)
        if not wanted:
            same = [c for c in same if not policy_params(c.clause.obligation)]
        else:
            same = [c for c in same if set(policy_params(c.clause.obligation)) & set(wanted)]
        if not same:
            continue
        stated: dict[str, Any] = {}
        for c in same:
            stated.update(policy_params(c.clause.obligation))
        conflicts = [f"{k}: the pack's {wanted[k]}, the spec's {stated[k]}" for k in wanted
                     if k in stated and stated[k] != wanted[k]]
        missing = {k: v for k, v in pack.obligation.params.items() if not _tuning(k) and k not in stated}
        if missing:
            # The spec states part of it: the pack's clause keeps the rest, the spec's clauses keep theirs.
            params = {**missing, **{k: v for k, v in pack.obligation.params.items() if _tuning(k)}}
            overrides.append(pack.model_copy(update={
                "obligation": pack.obligation.model_copy(update={"params": params}),
                "description": f"{pack.description} The spec states {', '.join(sorted(set(wanted) - set(missing)))} "
                               f"itself (line {', '.join(str(c.source_line) for c in same)}).".strip(),
            }))
            merges.append(MergedCheck(
                kept=pack.id, source_line=same[0].source_line, pack_clause=pack.id, dropped=(),
                lines=tuple(c.source_line for c in same), check=check_text(overrides[-1].obligation),
                note=f"the pack's clause keeps {', '.join(missing)}; the spec's clauses check the rest"
                     + (f"; {'; '.join(conflicts)} (the spec's value wins)" if conflicts else "")))
            continue
        taker = max(same, key=lambda c: len(set(policy_params(c.clause.obligation)) & set(wanted)))
        taken.add(taker.id)
        index = kept.index(taker)
        kept[index] = _take_over(taker, pack)
        merges.append(MergedCheck(
            kept=pack.id, source_line=taker.source_line, pack_clause=pack.id,
            dropped=(), lines=tuple(c.source_line for c in same), check=check_text(kept[index].clause.obligation),
            note=(f"the spec's line {taker.source_line} replaces the base pack's clause"
                  + (f" (line {', '.join(str(c.source_line) for c in same if c is not taker)} states the rest)"
                     if len(same) > 1 else "")
                  + (f"; {'; '.join(conflicts)} (the spec's value wins)" if conflicts else ""))))
    renamed = {old.id: new.id for old, new in zip(_dedupe(clauses)[0], kept, strict=True) if old.id != new.id}
    kept = [c for c in kept if c.id not in gone]
    return tuple(kept), tuple(overrides), _combined(m.model_copy(update={"kept": renamed.get(m.kept, m.kept)})
                                                     for m in merges if m.kept not in gone)


def _combined(merges: Iterable[MergedCheck]) -> tuple[MergedCheck, ...]:
    """One record per kept clause (a check stated twice in the spec and once in the pack is one merge)."""
    out: dict[str, MergedCheck] = {}
    for m in merges:
        was = out.get(m.kept)
        if was is None:
            out[m.kept] = m
            continue
        out[m.kept] = was.model_copy(update={
            "pack_clause": was.pack_clause or m.pack_clause, "dropped": (*was.dropped, *m.dropped),
            "lines": tuple(sorted({*was.lines, *m.lines})), "note": f"{was.note}; {m.note}",
        })
    return tuple(out.values())
