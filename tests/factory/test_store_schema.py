"""A store written with another schema is refused at open, in one line naming both versions and what to do; and
the store's DuckDB memory limit, lowered for a while by caps that nest."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from agent_factory.errors import StoreError
from agent_factory.factory.cli.app import app
from agent_factory.factory.store import SCHEMA_VERSION, Store


def _older_store(path: Path) -> None:
    with Store(path):
        pass
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.close()


def test_an_older_store_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _older_store(path)
    with pytest.raises(StoreError) as e:
        Store(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    assert "v2" in msg and f"v{SCHEMA_VERSION}" in msg and "remove it" in msg
    with pytest.raises(StoreError, match="schema v2"):  # read-only opens are checked too
        Store(path, read_only=True)
    with Store(tmp_path / "new.duckdb"):  # a new store opens, and opens again
        pass
    with Store(tmp_path / "new.duckdb", read_only=True):
        pass


def test_the_cli_says_it_in_one_line_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _older_store(path)
    result = CliRunner().invoke(app, ["stats", "--store", str(path)])
    assert result.exit_code == 1
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "v2" in lines[0] and "Traceback" not in result.output


def test_long_json_columns_are_stored_compressed(tmp_path: Path) -> None:
    # Many distinct long records in one row group: DuckDB's own choice stored such a column uncompressed
    # (100k turns' provenance took 448 MB); the schema asks for zstd.
    path = tmp_path / "s.duckdb"
    with Store(path) as st:
        st.con.execute(
            "INSERT INTO provenance SELECT 't' || i, 'real', '{\"turn_id\":\"t' || i || '\",\"fields\":[' ||"
            " repeat('{\"field\":\"request\",\"state\":\"present\",\"chars\":' || i || '},', 60) || '{}]}',"
            " true, 0, 'src' FROM range(20000) r(i)")
        st.con.execute("CHECKPOINT")
        raw = st.con.execute("SELECT sum(strlen(record)) FROM provenance").fetchone()[0]
        comp = {r[0] for r in st.con.execute(
            "SELECT compression FROM pragma_storage_info('provenance') WHERE column_name = 'record'"
            " AND segment_type = 'VARCHAR'").fetchall()}
        blocks = st.con.execute("SELECT count(DISTINCT block_id) FROM pragma_storage_info('provenance')").fetchone()[0]
    assert raw > 50_000_000
    assert comp == {"ZSTD"}
    assert blocks * 262_144 < raw / 10


def test_memory_caps_nest_and_never_raise_a_lower_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_factory.factory.store.base import limit_bytes

    def now(st: Store) -> float | None:
        return limit_bytes(st.con.execute("SELECT current_setting('memory_limit')").fetchone()[0])

    monkeypatch.delenv("AGENT_FACTORY_DUCKDB_MEMORY", raising=False)
    with Store(tmp_path / "s.duckdb") as st:
        assert now(st) == pytest.approx(256e6, rel=0.01)
        with st.memory_capped():
            assert now(st) == pytest.approx(128e6, rel=0.01)
            with st.memory_capped("64MB"):
                assert now(st) == pytest.approx(64e6, rel=0.01)
            assert now(st) == pytest.approx(128e6, rel=0.01)  # the enclosing cap, not the store's limit
            with st.memory_capped("1GB"):
                assert now(st) == pytest.approx(128e6, rel=0.01)  # a cap never raises the limit
        assert now(st) == pytest.approx(256e6, rel=0.01)
    monkeypatch.setenv("AGENT_FACTORY_DUCKDB_MEMORY", "96MB")
    with Store(tmp_path / "s.duckdb") as st, st.memory_capped():
        assert now(st) == pytest.approx(96e6, rel=0.01)
    assert limit_bytes("1.5GiB") == 1.5 * 2**30 and limit_bytes("80%") is None
