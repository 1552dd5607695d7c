"""The audit on the real tau-bench airline set, rules only, over the command line (issue 33, Done-when 4).

`audit --pack airline --json` reports the criterion validity of every per-conversation flag the project uses
(`Project.flags`, rolled up to the conversation) against the task reward, with n and, where n allows, intervals;
a flag pointing the wrong way is named in the terminal output. Then a person's labels (a CSV) that disagree with
the rules on one rule-collected conversation item make the next audit retire it, and it alone: the run after
recollects nothing and reruns only the analyses that read the item's component, the summary no longer raises
its flag, and a later audit with the same labels neither retires it again nor logs it twice.

The item is chosen from the data by what it is, never by name: of the conversation flags whose datum (or gate)
a rule collects, the one raised on the most conversations that is also clear on some. `pytest -s` prints the
criterion table.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, NamedTuple

import pytest
from typer.testing import CliRunner

from agent_factory import open_project
from agent_factory.evaluators.audit.model import Rating
from agent_factory.evaluators.core.flags import FlagSpec
from agent_factory.factory.cli.app import app
from agent_factory.factory.loops.audit.run import MIN_ITEM_UNITS
from agent_factory.factory.pipeline.engine import definitions_by_layer
from agent_factory.factory.pipeline.graph import reads_component
from agent_factory.factory.store import Store
from agent_factory.factory.store.audit import read_corrections, read_ratings

pytestmark = pytest.mark.realdata

REWARD = "task_reward"
LEVEL: Final = "conversation"
PACK = ("--pack", "airline")
NO_MODEL = {"AGENT_FACTORY_SMALL_MODEL": "", "AGENT_FACTORY_JURY": "", "AGENT_FACTORY_CONFIG": "",
            "AGENT_FACTORY_AUDIT_MODELS": "", "AGENT_FACTORY_API_BASE": ""}
AUDIT_KEYS = ("model_calls", "sample", "items", "retired", "corrections", "rules", "criterion", "discriminant",
              "reliability", "corrected")
"""The keys `audit --json` prints at least (issue 33 point 11), and those of its rows below."""
ITEM_KEYS = ("item", "component", "raters", "n", "kappa", "kappa_low", "kappa_high", "alpha", "admitted")
RULE_KEYS = ("item", "precision", "recall", "n")
CRITERION_KEYS = ("flag", "outcome", "auc", "low", "high", "n")
CORRECTED_KEYS = ("metric", "judge", "corrected", "low", "high", "labels")
PERSON = "ana"
RATED = ("yes", "no")
FLIP = {"yes": "no", "no": "yes"}


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args), env=NO_MODEL)
    assert res.exit_code == 0, f"{' '.join(args)}: {res.output}"
    return res.stdout


def _json(*args: str) -> dict[str, Any]:
    return dict(json.loads(_cli(*args, "--json")))


def _f(x: float | None, sign: bool = False) -> str:
    return "    -" if x is None else (f"{x:+.2f}" if sign else f"{x:.3f}")


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'flag':44} {'meaning':11} {'n':>4} {'AUC':>5} {'interval':>13} {'diff':>5} {'interval':>13}"]
    for c in rows:
        lines.append(f"{c['flag'][:44]:44} {c['meaning']:11} {c['n']:>4} {_f(c['auc'])} "
                     f"[{_f(c['low'])},{_f(c['high'])}] {_f(c['difference'], True)} "
                     f"[{_f(c['difference_low'], True)},{_f(c['difference_high'], True)}]"
                     f"{'  FAILS' if c['fails'] else ''}")
    return "\n".join(lines)


class Audited(NamedTuple):
    """The tau-bench store after its first audit (rules only) and the run that follows it."""

    store: Path
    flags: tuple[FlagSpec, ...]
    """`Project.flags` before the audit: every flag the project raises."""
    report: dict[str, Any]
    """`audit --json`."""
    terminal: str
    """`audit` on a copy of the same store, as a person reads it."""
    run_after: dict[str, Any]
    """`run --json` after the audit (it settles whatever the audit retired)."""


@pytest.fixture(scope="module")
def audited(tau_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Audited]:
    """A copy of `tau_store` (ingested with `--pack airline` and run, rules only) audited once."""
    root = tmp_path_factory.mktemp("tau-audit")
    store, twin = root / "tau.duckdb", root / "twin.duckdb"
    shutil.copyfile(tau_store, store)
    shutil.copyfile(tau_store, twin)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # anything the commands write beside the store stays in this test's folder
        with open_project(store=store, pack="airline") as p:
            flags = p.flags
        report = _json("audit", *PACK, "--store", str(store))
        terminal = _cli("audit", *PACK, "--store", str(twin))
        run_after = _json("run", *PACK, "--store", str(store))
        yield Audited(store=store, flags=flags, report=report, terminal=terminal, run_after=run_after)


def test_audit_json_reports_every_conversation_flag_against_the_reward(audited: Audited) -> None:
    report = audited.report
    assert all(k in report for k in AUDIT_KEYS), [k for k in AUDIT_KEYS if k not in report]
    assert report["model_calls"] == 0 and report["sample"] is None  # rules only: nothing re-collected
    rows = [c for c in report["criterion"] if c["outcome"] == REWARD and c["level"] == LEVEL]
    print(f"\ncriterion validity against {REWARD}, per conversation (n = conversations with the flag decided):")
    print(_table(rows))
    print("pointing the wrong way:", [c["flag"] for c in rows if c["fails"]] or "none")
    assert all(k in c for c in report["criterion"] for k in CRITERION_KEYS)
    by_flag: dict[str, list[dict[str, Any]]] = {}
    for c in rows:
        by_flag.setdefault(c["flag"], []).append(c)
    # Every flag the project raises, trace and span flags rolled up to their conversation, has exactly one row.
    assert [f.id for f in audited.flags if len(by_flag.get(f.id, [])) != 1] == []
    conversations = max(c["n"] for c in rows)
    for f in audited.flags:
        [c] = by_flag[f.id]
        assert 0 <= c["n"] <= conversations, f.id
        if c["n"] == 0:
            assert c["auc"] is None and c["low"] is None and c["difference"] is None, f.id
            continue
        # Where n allows, an interval that holds the estimate; where it does not, the note says why.
        if c["auc"] is not None and c["low"] is None:
            assert "AUC:" in c["note"], f.id
        if c["low"] is not None:
            assert c["low"] <= c["auc"] <= c["high"], f.id
        if c["difference"] is not None and c["difference_low"] is None:
            assert "n too small" in c["note"], f.id
        if c["difference_low"] is not None:
            assert c["difference_low"] <= c["difference"] <= c["difference_high"], f.id
        # A flag meant as bad fails exactly when it goes with the good outcome beyond its interval.
        wrong = (c["difference_low"] is not None and c["difference_low"] > 0) or \
            (c["high"] is not None and c["high"] < 0.5)
        assert c["fails"] == (f.meaning == "bad" and wrong), f.id
    # Rules decide flags on the whole set: some carry both intervals.
    assert any(c["low"] is not None and c["difference_low"] is not None for c in rows)


def test_a_flag_pointing_the_wrong_way_is_named_and_its_item_retired(audited: Audited) -> None:
    failing = [c for c in audited.report["criterion"] if c["fails"]]
    text = " ".join(audited.terminal.split())  # the terminal wraps lines
    assert f"{len(audited.report['criterion'])} flag-outcome pair(s), {len(failing)} pointing the wrong way" in text
    assert [c["flag"] for c in failing if f"wrong way: {c['flag']}" not in text] == []
    spec_of = {f.id: f for f in audited.flags}
    wrong_items = {spec_of[c["flag"]].item for c in failing
                   if c["flag"] in spec_of and spec_of[c["flag"]].source == "datum"}
    assert wrong_items <= set(audited.report["retired"])
    # The run after recollects nothing, whatever the audit retired.
    plan = audited.run_after["plan"]
    assert plan["definitions_recollected"] == 0 and audited.run_after["items"]["collected"] == 0
    assert audited.run_after["model_calls"] == 0


class Choice(NamedTuple):
    """The item a person's labels contradict, the flag it decides, and what the rule said on each
    conversation."""

    flag: FlagSpec
    item: str
    component: str
    primary: list[Rating]
    """The rule's yes / no on the conversations it decided."""


def _candidates(store: Path, read: str) -> tuple[list[Choice], dict[str, tuple[str, list[Rating]]]]:
    """Conversation flags whose `read` datum (`item` or `gate`) a rule collects, most raised first, each raised
    and clear on some conversation and decided by the rule on enough of them for a kappa to retire it; and every
    rule-collected conversation check with both values on enough conversations (item -> component, ratings)."""
    with open_project(store=store, pack="airline") as p:
        layer = definitions_by_layer(p.suite.components, p.suite.pack)[LEVEL]
        ruled = {d.id: comp for comp, ds in layer.items() for d in ds
                 if d.kind == "check" and d.rule is not None and d.tiers[:1] == ("rule",)}
        flags = [f for f in p.flags if f.layer == LEVEL and f.source == "datum" and f.fact is None]
        ratings = read_ratings(p.store(), raters=["primary"])
    value: dict[tuple[str, str], str] = {(r.unit_id, r.item): r.value for r in ratings}
    decided: dict[str, list[Rating]] = {}
    for r in ratings:
        if r.item in ruled and r.value in RATED:
            decided.setdefault(r.item, []).append(r)
    enough = {i: (ruled[i], rs) for i, rs in decided.items()
              if len(rs) >= MIN_ITEM_UNITS and {r.value for r in rs} == set(RATED)}
    choices: list[tuple[int, Choice]] = []
    units = {u for u, _ in value}
    for f in flags:
        item = f.item if read == "item" else f.gate
        if item is None or item not in enough:
            continue
        raised = [f.value_of(value.get((u, f.item)), gate=value.get((u, f.gate)) if f.gate else None)
                  for u in units]
        if 1 in raised and 0 in raised:
            choices.append((raised.count(1), Choice(f, item, enough[item][0], enough[item][1])))
    return [c for _, c in sorted(choices, key=lambda x: (-x[0], x[1].flag.id))], enough


def _labels(path: Path, rows: list[tuple[Rating, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["unit_id", "user_id", "item", "rater", "value"])
        w.writerows([r.unit_id, r.user, r.item, PERSON, value] for r, value in rows)
    return path


def _raises(summary: dict[str, Any], label: str) -> bool:
    """Whether the summary's flag-outcome lines raise the flag labelled `label` (a line may be cut short)."""
    for line in summary["outcomes"]:
        said = str(line["text"]).split(f"{REWARD}: ", 1)[-1]
        if said == label or (said.endswith("…") and label.startswith(said[:-1])):
            return True
    return False


@pytest.mark.parametrize("read", ["item", "gate"])
def test_labels_that_disagree_retire_the_item_and_the_next_run_reruns_only_its_readers(
    audited: Audited, read: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`read`: the person contradicts the datum the flag reads, or its gate (a clause's trigger)."""
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "tau.duckdb"
    shutil.copyfile(audited.store, store)
    s = str(store)
    retired_before = set(audited.report["retired"])
    choices, enough = _candidates(store, read)
    choices = [c for c in choices if c.item not in retired_before]
    assert choices, f"no conversation flag whose {read} a rule decides on >= {MIN_ITEM_UNITS} conversations"
    chosen = choices[0]
    # A second item the person labels as the rules did: it is admitted, so the audit tells the items apart.
    agreed = sorted((i for i in enough if i != chosen.item and i not in retired_before),
                    key=lambda i: (-len(enough[i][1]), i))[0]
    before = _json("summary", "--store", s)
    assert _raises(before, chosen.flag.label), (chosen.flag.id, before["outcomes"])

    rows = [(r, FLIP[r.value]) for r in chosen.primary] + [(r, r.value) for r in enough[agreed][1]]
    _cli("labels", "import", str(_labels(tmp_path / "labels.csv", rows)), "--format", "csv", "--store", s)
    report = _json("audit", *PACK, "--store", s)
    assert all(k in report for k in AUDIT_KEYS)
    items = {a["item"]: a for a in report["items"]}
    assert all(k in a for a in report["items"] for k in ITEM_KEYS)
    assert all(k in r for r in report["rules"] for k in RULE_KEYS)
    assert all(k in c for c in report["corrected"] for k in CORRECTED_KEYS)
    mine = items[chosen.item]
    assert mine["raters"] == [f"human:{PERSON}", "primary"] and mine["n"] == len(chosen.primary) >= MIN_ITEM_UNITS
    assert mine["admitted"] is False and mine["kappa"] < 0.60 and mine["kappa_low"] <= mine["kappa"]
    assert items[agreed]["admitted"] is True and items[agreed]["kappa"] == pytest.approx(1.0)
    assert set(report["retired"]) == retired_before | {chosen.item}
    retired_now = [c for c in report["corrections"] if c["action"] == "retired"]
    assert [c["item"] for c in retired_now] == [chosen.item] and "kappa" in retired_now[0]["why"]
    assert {c["item"] for c in report["corrections"]} == {chosen.item}
    print(f"\n{read}: {chosen.item} (flag {chosen.flag.id}) kappa {mine['kappa']:.3f} "
          f"[{mine['kappa_low']:.3f}, {mine['kappa_high']:.3f}] n={mine['n']}; {agreed} kappa "
          f"{items[agreed]['kappa']:.3f}")

    # The run after: nothing recollected; only the analyses reading the item's component rerun.
    after = _json("run", *PACK, "--store", s)
    plan = after["plan"]
    with open_project(store=store, pack="airline") as p:
        readers = [a.name for spec in p.suite.components for a in spec.analyses
                   if reads_component(a.reads, spec.name, chosen.component)]
    print(f"run after: {plan['analyses_rerun']} of {plan['analyses_total']} analyses rerun ({', '.join(readers)})")
    assert plan["definitions_recollected"] == 0 and after["items"]["collected"] == 0 and after["model_calls"] == 0
    assert plan["users_visited"] == 0 and "retired" in plan["trigger"]
    assert plan["analyses_rerun"] == len(readers) < plan["analyses_total"]

    # The summary no longer raises the item's flag; the audit's criterion no longer lists it.
    summary = _json("summary", "--store", s)
    assert not _raises(summary, chosen.flag.label), (chosen.flag.id, summary["outcomes"])

    # The same labels again: the item stays retired, retired and logged once.
    again = _json("audit", *PACK, "--store", s)
    assert set(again["retired"]) == retired_before | {chosen.item} and again["corrections"] == []
    assert chosen.flag.id not in {c["flag"] for c in again["criterion"]}
    with Store(store, read_only=True) as st:
        log = [(c.item, c.action) for c in read_corrections(st) if c.item == chosen.item]
    assert log.count((chosen.item, "retired")) == 1 and len(log) == len(set(log))
