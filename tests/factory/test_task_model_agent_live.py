"""A model agent against a real provider: runs only when `AGENT_FACTORY_LIVE_AGENT` names a litellm model string
(`openai/gpt-4o-mini`) and the provider's key is in the environment litellm reads (`OPENAI_API_KEY`, ...); skipped
otherwise, so the suite never reaches a provider by default. One trial of the single-tool task: it must end with a
reason, its run contract stored as spans with the model's tokens, whatever the model decides."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_factory.factory.cli.app import app
from agent_factory.factory.store import Store
from tests.factory.conftest import NO_MODEL

LIVE = os.environ.get("AGENT_FACTORY_LIVE_AGENT", "").strip()
SUITE = Path(__file__).resolve().parents[2] / "specs" / "tasks" / "sales_report.yaml"

pytestmark = pytest.mark.skipif(not LIVE, reason="AGENT_FACTORY_LIVE_AGENT is not set: no live model to run")


def test_a_live_model_runs_a_task_to_an_end_with_a_reason(tmp_path: Path) -> None:
    import yaml

    spec = yaml.safe_load(SUITE.read_text(encoding="utf-8"))
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump({**spec, "tasks": [t for t in spec["tasks"] if t["id"] == "count_march_orders"]}),
                   encoding="utf-8")
    store = tmp_path / "s.duckdb"
    res = CliRunner().invoke(app, ["tasks", "run", str(one), "--agent", LIVE, "--trials", "1", "--store", str(store),
                                   "--json"], env={**NO_MODEL, "AGENT_FACTORY_AGENT_API_BASE": ""})
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert sum(out["ended_by"].values()) == 1 and out["agent"] == LIVE
    assert out["ended_by"].get("agent_error", 0) == 0, out["reasons"]  # the provider answered
    with Store(store, read_only=True) as st:
        spans = [s for t in st.iter_turns(segment=None) for s in t.spans]
    chats = [s for s in spans if s.kind == "llm"]
    assert chats and all(s.tokens is not None and (s.tokens.input or 0) > 0 for s in chats)
