"""The compiler against golden files of the real tau-bench policies: every normative sentence compiled as a careful
reader expects (kind, polarity, trigger, obligation) or listed uncompiled with its reason, nothing else compiled.

The golden files (tests/factory/golden/) were written from the policy text, not from the compiler's output; they
key each sentence by its line and first words. The policies are read from ../shared/data when present.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_factory.factory.compile import CompiledClause, CompiledSpec, compile_spec
from agent_factory.factory.compile.parse import sentences
from agent_factory.factory.suite.write import base_lexicons
from agent_factory.knowledge_packs import load_pack
from tests.conftest import shared_data

GOLDEN = Path(__file__).parent / "golden"
POLICIES = ("tau_airline_policy", "tau_retail_policy")


def _golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((GOLDEN / f"{name}.yaml").read_text(encoding="utf-8"))
    return data


def _trigger_problems(c: CompiledClause, want: Any) -> list[str]:
    cond, tools = c.clause.trigger, set(c.clause.trigger.tool_names)
    if want == "always":
        return [] if c.detector.how == "always" else [f"trigger is {c.detector.how} ({c.detector.note}), not always"]
    if "tools" in want:
        return [] if tools == set(want["tools"]) else [f"trigger tools {sorted(tools)} != {sorted(want['tools'])}"]
    if "mode" in want:
        value = cond.attribute_equals.get("agent.mode")
        values = value if isinstance(value, tuple) else (value,)
        return [] if want["mode"] in values else [f"trigger mode {value!r} != {want['mode']!r}"]
    out = [f"trigger lacks tool {t}" for t in want.get("tools_include", ()) if t not in tools]
    return out + [f"trigger has tool {t}" for t in want.get("tools_exclude", ()) if t in tools]


def _obligation_problems(c: CompiledClause, want: Any) -> list[str]:
    if want == "model":
        return [] if c.check.how == "model" else [f"obligation is {c.check.how} {c.check.rule or ''}, not model"]
    ob = c.clause.obligation
    if ob.rule != want["rule"]:
        return [f"obligation rule {ob.rule} != {want['rule']}"]
    params = {k: v for k, v in ob.params.items() if not k.endswith("_regex")}
    return [] if "params" not in want or params == want["params"] else [f"params {params} != {want['params']}"]


def _words_problems(text: str, what: str, has: list[str], lacks: list[str]) -> list[str]:
    low = text.lower()
    return ([f"{what} {text!r} lacks {w!r}" for w in has if w.lower() not in low]
            + [f"{what} {text!r} has {w!r}" for w in lacks if w.lower() in low])


def _clause_problems(c: CompiledClause, want: dict[str, Any]) -> list[str]:
    out = [] if c.sentence.startswith(want["starts"]) else [f"clause {c.sentence[:40]!r} is not {want['starts']!r}"]
    if (c.kind, c.polarity) != (want["kind"], want["polarity"]):
        out.append(f"{c.kind}/{c.polarity} != {want['kind']}/{want['polarity']}")
    out += _trigger_problems(c, want["trigger"]) + _obligation_problems(c, want["obligation"])
    out += _words_problems(c.trigger, "trigger", want.get("trigger_has", []), want.get("trigger_lacks", []))
    out += _words_problems(c.obligation, "obligation", want.get("obligation_has", []), want.get("obligation_lacks", []))
    if c.kind == "only_if" and c.trigger.strip().lower() == c.obligation.strip().lower():
        out.append("only-if trigger equals its condition")
    return out


def _problems(spec: CompiledSpec, golden: dict[str, Any], text: str) -> list[str]:
    clauses: dict[int, list[CompiledClause]] = defaultdict(list)
    for c in spec.clauses:
        clauses[c.source_line].append(c)
    uncompiled = defaultdict(list)
    for u in spec.uncompiled:
        uncompiled[u.line].append(u)
    starts = defaultdict(list)
    for s in sentences(text):
        starts[s.line].append(s.text)
    out: list[str] = []
    for entry in golden["lines"]:
        line = entry["line"]
        got, want = clauses.pop(line, []), entry.get("clauses", [])
        if len(got) != len(want):
            out.append(f"line {line}: {len(got)} clauses, expected {len(want)}: {[c.sentence[:30] for c in got]}")
        else:
            out += [f"line {line}: {p}" for c, w in zip(got, want, strict=True) for p in _clause_problems(c, w)]
        got_u, want_u = uncompiled.pop(line, []), entry.get("uncompiled", [])
        if [(u.sentence[:len(w["starts"])], w["reason"] in u.reason) for u, w in zip(got_u, want_u, strict=False)] != [
                (w["starts"], True) for w in want_u] or len(got_u) != len(want_u):
            out.append(f"line {line}: uncompiled {[(u.sentence[:30], u.reason) for u in got_u]}, expected {want_u}")
        for note in entry.get("not_rules", []):
            if not any(s.startswith(note["starts"]) for s in starts[line]):
                out.append(f"line {line}: the golden file names a sentence {note['starts']!r} the policy lacks")
    out += [f"line {line}: unexpected clause {c.sentence[:50]!r}" for line, cs in clauses.items() for c in cs]
    out += [f"line {line}: unexpected uncompiled {u.sentence[:50]!r}" for line, us in uncompiled.items() for u in us]
    return out


@pytest.mark.realdata
@pytest.mark.parametrize("name", POLICIES)
def test_golden_clauses_of_the_tau_bench_policies(name: str) -> None:
    golden = _golden(name)
    path = shared_data("tau-bench-policies", golden["policy"])
    text = path.read_text(encoding="utf-8")
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == golden["sha256"], \
        f"{path} is not the policy {GOLDEN / name}.yaml was written for"
    base = load_pack(golden["pack"])
    spec = compile_spec(text, source=path.name, tools=golden["tools"], lexicons=base_lexicons(base),
                        modes=tuple(base.baselines.modes))
    problems = _problems(spec, golden, text)
    sentences_ = sum(len(e.get("clauses", [])) + len(e.get("uncompiled", [])) for e in golden["lines"])
    print(f"\n{name}: {len(spec.clauses)} clauses, {len(spec.uncompiled)} uncompiled "
          f"({sentences_} expected entries)", *(f"  uncompiled line {u.line}: {u.reason}" for u in spec.uncompiled),
          sep="\n")
    assert not problems, "\n".join(problems)


def test_golden_files_quote_the_policies_only_in_short_fragments() -> None:
    # The policy text is not ours to commit: a golden file keys sentences, it does not copy them.
    for name in POLICIES:
        for entry in _golden(name)["lines"]:
            items = [*entry.get("clauses", []), *entry.get("uncompiled", []), *entry.get("not_rules", [])]
            for item in items:
                fragments = [item["starts"], *item.get("trigger_has", []), *item.get("obligation_has", [])]
                assert all(len(f.split()) <= 6 for f in fragments), (name, entry["line"], fragments)
