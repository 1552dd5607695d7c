"""What ingest reads: sources (`adapters.source`: a file, bytes, a request body) and directories, which expand
into the file sources of their trace files.

A directory is not itself a source: it has no bytes and no digest, it names files. Its rules are those `ingest`
always had: files ending in a trace suffix (`TRACE_SUFFIXES`), sorted, hidden files and those an `IGNORE_FILE`
lists skipped.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from pathlib import Path

from agent_factory.adapters.source import BytesSource, FileSource, RequestBody, Source
from agent_factory.errors import SpecError
from agent_factory.frozen import Frozen

IGNORE_FILE = ".agent-factory-ignore"
"""In a directory given to ingest: glob patterns (one per line, `#` comments), relative to that directory, of
files that are not traces (the simulator lists its ground truth and settings there)."""

TRACE_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz"})
"""What a directory's trace files end with (a gzip file is decompressed as it is read: `adapters.source`)."""


class DirectorySource(Frozen):
    """A directory of trace files: each becomes a `FileSource`."""

    path: Path
    """The directory, as given (the files' paths start with it, as stored and shown)."""
    format: str | None = None
    """The adapter its files are read with (None: each file sniffed)."""

    def files(self) -> list[FileSource]:
        """The directory's trace files, by the rules of `expand_paths`; `SpecError` when it is no directory."""
        if not self.path.is_dir():
            raise SpecError(f"{self.path}: no such directory")
        return [FileSource(path=f, format=self.format) for f in _trace_files(self.path)]


Given = Source | DirectorySource | Path
"""What `expand_sources` takes: sources, directories, or paths (a file or a directory)."""


def _ignored(directory: Path) -> Callable[[Path], bool]:
    patterns: dict[Path, list[str]] = {}

    def rules(d: Path) -> list[str]:
        if d not in patterns:
            f = d / IGNORE_FILE
            lines = f.read_text(encoding="utf-8").splitlines() if f.is_file() else []
            patterns[d] = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        return patterns[d]

    def ignored(f: Path) -> bool:
        # Each directory's ignore file speaks for the files below it.
        d = f.parent
        while True:
            rel = f.relative_to(d).as_posix()
            if any(fnmatch.fnmatchcase(rel, pat) for pat in rules(d)):
                return True
            if d == directory:
                return False
            d = d.parent

    return ignored


def _trace_files(directory: Path) -> list[Path]:
    ignored = _ignored(directory)
    return [
        f for f in sorted(directory.rglob("*"))
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(directory).parts)
        and (f.suffix in TRACE_SUFFIXES or "".join(f.suffixes[-2:]) in TRACE_SUFFIXES) and not ignored(f)
    ]


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files as given, directories expanded to their trace files (`TRACE_SUFFIXES`: `.json`, `.jsonl`, `.ndjson`,
    gzipped or not; sorted; hidden files and those an `IGNORE_FILE` lists skipped); `SpecError` naming a path
    that does not exist."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(_trace_files(p))
        elif p.exists():
            out.append(p)
        else:
            raise SpecError(f"{p}: no such file or directory")
    return out


def expand_sources(given: Iterable[Given]) -> list[Source]:
    """Every source to read, in order: sources as given, directories (and paths of directories) expanded to their
    files' sources, paths of files as file sources. A path that does not exist is a `SpecError` (before anything
    is read)."""
    out: list[Source] = []
    for g in given:
        if isinstance(g, DirectorySource):
            out.extend(g.files())
        elif isinstance(g, FileSource) and not g.path.is_file():
            raise SpecError(f"{g.path}: no such file")
        elif isinstance(g, Source):
            out.append(g)
        else:
            out.extend(FileSource(path=p) for p in expand_paths([g]))
    return out


__all__ = ["IGNORE_FILE", "TRACE_SUFFIXES", "BytesSource", "DirectorySource", "FileSource", "Given", "RequestBody",
           "Source", "expand_paths", "expand_sources"]
