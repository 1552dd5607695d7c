"""Memory stays flat in the number of spans: peak traced memory at 200k spans is that of 50k."""

import json
import tracemalloc
from pathlib import Path

import pytest

from agent_factory.adapters.base import Quarantine
from agent_factory.adapters.otel import FlatSpanLinesAdapter, OtlpJsonAdapter

PEAK_LIMIT = 20 * 1024 * 1024


def _span(i: int) -> dict:
    start = 1_700_000_000_000_000_000 + i * 1_000_000
    return {"traceId": f"{i // 4:032x}", "spanId": f"{i + 1:016x}", "parentSpanId": "", "name": "chat",
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 500_000),
            "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]}


def _request(first: int, count: int) -> dict:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "session.id", "value": {"stringValue": f"s{first}"}}]},
        "scopeSpans": [{"scope": {"name": "bench"}, "spans": [_span(first + j) for j in range(count)]}],
    }]}


def write_otlp_lines(path: Path, n: int, per_line: int = 100) -> None:
    with open(path, "w") as f:
        for first in range(0, n, per_line):
            f.write(json.dumps(_request(first, min(per_line, n - first)), separators=(",", ":")) + "\n")


def write_otlp_document(path: Path, n: int, per_block: int = 100) -> None:
    with open(path, "w") as f:
        f.write('{"resourceSpans":[')
        for first in range(0, n, per_block):
            block = _request(first, min(per_block, n - first))["resourceSpans"][0]
            f.write(("," if first else "") + json.dumps(block, separators=(",", ":")))
        f.write("]}")


def write_flat_lines(path: Path, n: int) -> None:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps(_span(i), separators=(",", ":")) + "\n")


def traced_peak(adapter, path: Path) -> tuple[int, int]:
    """(spans read, peak traced bytes) while iterating the adapter over the file."""
    count = 0
    tracemalloc.start()
    try:
        for item in adapter.read(path):
            assert not isinstance(item, Quarantine), item
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


@pytest.mark.slow
def test_otlp_json_lines_memory_is_flat(tmp_path):
    small, big = tmp_path / "10k.jsonl", tmp_path / "40k.jsonl"
    write_otlp_lines(small, 10_000)
    write_otlp_lines(big, 40_000)
    n_small, peak_small = traced_peak(OtlpJsonAdapter(), small)
    n_big, peak_big = traced_peak(OtlpJsonAdapter(), big)
    assert (n_small, n_big) == (10_000, 40_000)
    assert peak_big < PEAK_LIMIT
    assert peak_big < peak_small * 1.5 + 512 * 1024


@pytest.mark.slow
def test_otlp_document_memory_is_flat(tmp_path):
    small, big = tmp_path / "5k.json", tmp_path / "20k.json"
    write_otlp_document(small, 5_000)
    write_otlp_document(big, 20_000)
    n_small, peak_small = traced_peak(OtlpJsonAdapter(), small)
    n_big, peak_big = traced_peak(OtlpJsonAdapter(), big)
    assert (n_small, n_big) == (5_000, 20_000)
    assert peak_big < PEAK_LIMIT
    assert peak_big < peak_small * 1.5 + 512 * 1024


def test_flat_lines_memory_is_flat(tmp_path):
    small, big = tmp_path / "2k.jsonl", tmp_path / "10k.jsonl"
    write_flat_lines(small, 2_000)
    write_flat_lines(big, 10_000)
    n_small, peak_small = traced_peak(FlatSpanLinesAdapter(), small)
    n_big, peak_big = traced_peak(FlatSpanLinesAdapter(), big)
    assert (n_small, n_big) == (2_000, 10_000)
    assert peak_big < peak_small * 1.5 + 512 * 1024


def test_a_leaky_reader_would_fail(tmp_path):
    # The bound is meaningful: collecting the items (what a non-streaming reader does) grows with the count.
    path = tmp_path / "5k.jsonl"
    write_otlp_lines(path, 5_000)
    tracemalloc.start()
    try:
        kept = list(OtlpJsonAdapter().read(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 5_000
    _, streaming_peak = traced_peak(OtlpJsonAdapter(), path)
    assert peak > 4 * streaming_peak
