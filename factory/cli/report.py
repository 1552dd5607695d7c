"""`agent-factory report`: the store's findings as one self-contained HTML file.

Registered on the app of `factory.cli.app` (which imports this module at its end), so it shares its options,
error handling and exit codes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from agent_factory.errors import AgentFactoryError
from agent_factory.factory.cli.app import (
    JsonOpt,
    ReadPackOpt,
    ReadSuiteOpt,
    RedactorConfigOpt,
    StoreOpt,
    app,
    emit_json,
    fail,
    out,
)
from agent_factory.factory.store import DEFAULT_STORE


@app.command()
def report(
    store: StoreOpt = DEFAULT_STORE,
    out_file: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    evidence: Annotated[
        bool, typer.Option("--evidence", help="Add redacted example quotes of the evidence behind each finding.")
    ] = False,
    with_composite: Annotated[
        bool, typer.Option("--composite", help="Add a weighted composite, labelled as a view, at the end.")
    ] = False,
    suite: ReadSuiteOpt = None,
    pack: ReadPackOpt = None,
    config: RedactorConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one self-contained HTML report (scripts, styles and data inline): the seven components at the four
    layers, the spine, each component's results with plots, outcome associations. Aggregates only by default."""
    from agent_factory.evaluators.collect.config import load_model_config
    from agent_factory.evaluators.collect.redact import load_redactor
    from agent_factory.factory.views.findings import flags_at
    from agent_factory.factory.views.report import build_html, report_sections
    from agent_factory.factory.views.report.read import read_report_data
    from agent_factory.factory.views.report.runtime import vega_bundle

    try:
        redactor = load_redactor(load_model_config(config).redactor) if evidence else None
        data = read_report_data(store, redactor=redactor, flags=flags_at(store, suite, pack))
        runtime_js = vega_bundle(cache_dir=store.parent / "cache")
        generated = datetime.now(UTC).isoformat(timespec="seconds")
        page = build_html(data, runtime_js=runtime_js, generated=generated, with_composite=with_composite)
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(page, encoding="utf-8")
    except (AgentFactoryError, OSError) as e:
        raise fail(e) from e
    sections = report_sections(data, with_composite=with_composite)
    charts = sum(1 for s in sections for b in s.blocks if b.chart is not None)
    size = out_file.stat().st_size
    absent = {s.key: s.absent for s in sections if s.absent is not None}
    summary = {"out": str(out_file), "bytes": size, "sections": [s.key for s in sections], "absent": absent,
               "charts": charts, "quotes": len(data.quotes or ()), "composite": with_composite}
    if as_json:
        emit_json(summary)
        return
    out.print(f"wrote {out_file} ({size / 1e6:.1f} MB): {len(sections)} sections, {charts} plots"
              + (f", {summary['quotes']} redacted quotes" if evidence else ""), soft_wrap=True)
    for key, why in absent.items():
        out.print(f"  {key}: {why}", soft_wrap=True)
