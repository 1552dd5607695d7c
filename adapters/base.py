"""What an adapter is, what it yields, and the registry that finds one by name or by sniffing a file.

An adapter reads one source (`adapters.source`: a file, bytes, a request body) as a stream and yields normalized
items one record at a time, so memory stays constant in the number of records. A record it cannot read becomes a
`Quarantine` item naming the source, the record and the field; the adapter then goes on with the next record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from agent_factory import plugins
from agent_factory.adapters.jsonguard import DepthScanner, mark_lone_surrogates
from agent_factory.adapters.model import Conversation, OutcomeEvent, Span, Turn
from agent_factory.adapters.source import Source, as_source
from agent_factory.errors import SpecError, UnknownNameError
from agent_factory.frozen import Frozen

HEAD_BYTES = 65536
"""How much of a file `detect` reads to sniff its format."""


class Quarantine(Frozen):
    """A record that could not be accepted, with a one-line reason."""

    source: str
    """The file the record came from."""
    location: str
    """Which record: `line 12`, `record 3`, `resourceSpans[0].scopeSpans[1].spans[4]`, `file`, ..."""
    field: str | None = None
    """The offending field (dotted path), when one can be named."""
    message: str
    """What is wrong, in one line."""

    def line(self) -> str:
        """The one-line human form: `file: location: field: message`."""
        where = f"{self.location}: {self.field}" if self.field else self.location
        return f"{self.source}: {where}: {self.message}".replace("\n", " ")


AdapterItem = Conversation | Turn | Span | OutcomeEvent | Quarantine
"""One record's worth of output. Standalone spans are grouped into turns by `adapters.assemble`."""


@runtime_checkable
class Adapter(Protocol):
    """A reader for one trace format."""

    name: str
    """Registry name, used with `--format`."""
    description: str
    """One line for `--help` and error messages."""

    def sniff(self, head: bytes, path: Path) -> bool:
        """True if `head` (the first bytes of `path`) looks like this format."""
        ...

    def read(self, source: Source) -> Iterator[AdapterItem]:
        """Stream the source's records as normalized items (one item per record), reading its content decoded
        (`Source.open_text`, `read_head`). An adapter written for `read(path)` is given a decoded file instead
        (`Source.decoded`) unless it says it reads sources (`reads_sources`)."""
        ...


READS_SOURCES = "reads_sources"
"""The attribute (True) by which an adapter says its `read` and `line_items` take a `Source`; one without it was
written for a path and is given a decoded file (the built-ins all read sources)."""


LineItems = Callable[[str, Any], Iterator[AdapterItem]]
"""The items of one parsed JSON line: `(location, value)` -> what `read` yields for that line."""


@runtime_checkable
class LineAdapter(Adapter, Protocol):
    """An adapter that reads a JSON-lines file one line at a time, carrying nothing from one line to the next:
    ingest may then parse a large file's lines in worker processes (`factory.ingest_lines`), with the items, their
    order and every quarantine exactly as `read` gives them."""

    def line_items(self, source: Source) -> LineItems | None:
        """How one line of `source` is read, if it is JSON lines this adapter reads line by line (after
        `adapters.jsonio.json_line`); None when it is read some other way (`read` is then the only way)."""
        ...


AdapterT = TypeVar("AdapterT", bound=Adapter)

DEFAULT_PRIORITY = 100
"""Sniffing priority of an adapter registered without one: after the built-ins (10-80), which are specific."""


def _instance(ep: EntryPoint) -> object:
    obj = ep.load()
    return obj() if isinstance(obj, type) else obj  # an adapter class is instantiated without arguments


ADAPTER_KIND = plugins.KindSpec(check=lambda o: isinstance(o, Adapter),
                                what="an Adapter (name, description, sniff, read)", loader=_instance)
"""The `adapter` kind (`plugins.KIND_SPECS` names it): an entry point's class is instantiated."""


def declare(adapter: AdapterT, *, priority: int = DEFAULT_PRIORITY) -> AdapterT:
    """Tag an adapter with its name and sniffing priority (a lower `priority` sniffs it earlier; ties: by name):
    a registry registers it when it loads the entry-point module defining it (`adapters.builtin`)."""
    return plugins.tag("adapter", adapter.name, adapter, metadata={"priority": priority})


def register(adapter: Adapter, *, priority: int = DEFAULT_PRIORITY) -> Adapter:
    """Add an adapter to the registry in use under its name, at run time (`priority` as in `declare`)."""
    return plugins.register("adapter", adapter.name, adapter, metadata={"priority": priority})


def _sniff_order() -> list[tuple[str, Adapter]]:
    ranked = sorted(plugins.items("adapter"), key=lambda it: (it[0].metadata.get("priority", DEFAULT_PRIORITY),
                                                              it[0].name))
    return [(info.name, cast(Adapter, obj)) for info, obj in ranked]


def adapter_names() -> list[str]:
    """Registered format names in sniffing order."""
    return [name for name, _ in _sniff_order()]


def get_adapter(name: str) -> Adapter:
    """The adapter registered as `name`; an `UnknownNameError` listing valid names otherwise."""
    try:
        return cast(Adapter, plugins.lookup("adapter", name))
    except UnknownNameError as e:
        raise UnknownNameError("format", name, e.valid) from None


def read_head(source: Source | Path, n: int = HEAD_BYTES) -> bytes:
    """The first `n` bytes of a source (or a file) as sniffers and layout checks see them: decompressed and
    decoded to UTF-8 as the adapters will read it (`adapters.source`), cut where the JSON nesting first goes over
    `MAX_NESTING` (such a record is quarantined when read; ijson's per-event prefixes would make sniffing it
    quadratic, and `json` would recurse through it), lone surrogate escapes marked (`jsonguard`)."""
    return _sniffable(as_source(source).head(n)[0])


def _sniffable(head: bytes) -> bytes:
    return cut_at_depth(mark_lone_surrogates(head)[0])


MAX_NESTING = 64
"""JSON nested deeper than this in a file's head is not a trace format (and would make sniffing quadratic)."""


def cut_at_depth(head: bytes, limit: int = MAX_NESTING) -> bytes:
    """`head` up to where its JSON nesting (outside strings) first exceeds `limit`; all of it otherwise."""
    at = DepthScanner(limit).feed(head)
    return head if at is None else head[:at]


def detect(source: Source | Path) -> Adapter:
    """Find the adapter for a source (or a file) by sniffing its first bytes, decoded; `SpecError` if none
    matches."""
    src = as_source(source)
    order = _sniff_order()
    head, broken = src.head(HEAD_BYTES)
    head = _sniffable(head)  # only up to absurd nesting
    sniffed_as = Path(src.id)  # what a sniffer is told the source is called (none reads it)
    if not head.strip():
        raise SpecError(f"{src.id}: {broken or 'file is empty'}; nothing to ingest")
    for _name, adapter in order:
        if adapter.sniff(head, sniffed_as):
            return adapter
    hint = src.encoding_hint()
    raise SpecError(
        f"{src.id}: unknown format (no adapter recognised the first {len(head)} bytes); "
        + (f"{hint}; or " if hint else "") + f"pass --format with one of: {', '.join(n for n, _ in order)}"
    )
