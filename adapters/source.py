"""What ingest reads: a source, bytes that arrive from somewhere (a file, bytes in memory, an HTTP request body),
each with an id and a digest, read by the adapters decoded once (`adapters.decoding`: gzip, byte-order marks,
UTF-16/32) whatever its kind.

A source's `id` is what the store records and messages name (a file's path as given, as it always was; else the
caller's name); its `digest` is the sha256 of its bytes as they arrived, so the same bytes are the same source.
Adapters read a source through `open_text` (its content decoded, as a binary stream) and `head` (its first
bytes decoded, for sniffing); they take a plain path too (`as_source`).
"""

from __future__ import annotations

import hashlib
import io
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

from pydantic import Field, field_validator, model_validator

from agent_factory.adapters.decoding import (
    BLOCK,
    GZIP_MAGIC,
    HINT_BYTES,
    decoded,
    decoded_copy,
    decoded_head,
    decoded_size,
    encoding_hint,
    head_of,
    hint_for,
    noting_problems,
    open_decoded,
    problem,
    shown,
    text_encoding,
)
from agent_factory.frozen import Frozen


class Source(Frozen, ABC):
    """What ingest reads: bytes that arrive from somewhere (a file, a request body, a task run), each with the
    `id` the store records it under and the `digest` of its bytes, decoded here once (gzip, byte-order marks,
    UTF-16/32) whatever the adapter that reads it."""

    format: str | None = None
    """The adapter (registry name) the caller knows the content to be read with; None: sniffed from its head."""

    @property
    @abstractmethod
    def id(self) -> str:
        """What the store records as the source and messages name: a file's path as given, else the caller's name."""

    @abstractmethod
    def open_raw(self) -> BinaryIO:
        """The bytes as they arrived (maybe compressed, in their own encoding), opened for reading from the start
        (seekable: their head is looked at first)."""

    def digest(self) -> str:
        """sha256 of the bytes as they arrived: the same content is the same source, whatever its name."""
        h = hashlib.sha256()
        with self.open_raw() as f:
            for chunk in iter(lambda: f.read(BLOCK), b""):
                h.update(chunk)
        return h.hexdigest()

    def head(self, n: int) -> tuple[bytes, str | None]:
        """The first `n` bytes (at most) of the decoded content, and what stopped decoding them early."""
        with self.open_raw() as raw:
            return head_of(raw, n)

    def encoding_hint(self) -> str | None:
        """What the content looks like when it is not UTF-8 (`encoding_hint`), for messages."""
        try:
            head, _ = self.head(HINT_BYTES)
        except OSError:
            return None
        return hint_for(head)

    def open_text(self) -> BinaryIO:
        """The content decompressed and as UTF-8 without a mark, as a binary stream (`open_decoded`): what adapters
        read. Inside a `noting_problems` block, what stopped decoding early is noted when it is closed."""
        return open_decoded(self.open_raw())

    def size_hint(self) -> int:
        """About how many bytes `open_text` gives (`decoded_size`), for choosing how to read it."""
        with self.open_raw() as raw:
            return decoded_size(raw)

    @abstractmethod
    def decoded(self) -> AbstractContextManager[Path]:
        """The content decompressed and as UTF-8 without a mark, as a file (for an adapter that reads only files:
        `shown` gives this source's `id` for it, `problem` what stopped decoding), alive as long as the block."""


class FileSource(Source):
    """A file on disk, read where it lies unless it needs decoding."""

    path: Path
    """The file, as given (its string is the source id, as it always was)."""

    @property
    def id(self) -> str:
        """The path as given."""
        return shown(self.path)

    def open_raw(self) -> BinaryIO:
        """The file opened for reading bytes."""
        return open(self.path, "rb")

    def decoded(self) -> AbstractContextManager[Path]:
        """The file itself, or a decoded copy (`decoded`)."""
        return decoded(self.path)


class BytesSource(Source):
    """Bytes already in memory (a task run's log, a test's content), under a name the caller gives."""

    name: str = Field(min_length=1)
    """The source id: what the store records and messages name (unique per distinct stream of records: two
    sources under one name are two versions of one source)."""
    data: bytes
    """The content as it arrived: plain, gzip, with a byte-order mark or UTF-16/32 are all read."""

    @property
    def id(self) -> str:
        """The caller's name."""
        return self.name

    def open_raw(self) -> BinaryIO:
        """The bytes as a stream."""
        return io.BytesIO(self.data)

    def decoded(self) -> AbstractContextManager[Path]:
        """A temporary file of the decoded content."""
        return decoded_copy(self.open_raw, shown_as=self.name, name="body")


JSON_MEDIA_TYPES = ("application/json", "application/x-ndjson", "application/jsonl")
"""Content types a request body may carry (OTLP/HTTP sends `application/json`)."""
CONTENT_ENCODINGS = ("identity", "gzip", "x-gzip")
"""Content encodings a request body may carry (gzip is what OTLP exporters compress with)."""


class RequestBody(BytesSource):
    """The body of an HTTP request (what an OTLP/HTTP receiver takes in), with the headers that say how to read
    it: a JSON content type, and gzip or no content encoding."""

    content_type: str = "application/json"
    """The `Content-Type` header; its parameters (`; charset=utf-8`) are not needed: the bytes tell the encoding."""
    content_encoding: str | None = None
    """The `Content-Encoding` header: `gzip` (also `x-gzip`), `identity` or None."""

    @field_validator("content_type")
    @classmethod
    def _json_only(cls, v: str) -> str:
        media = v.split(";", 1)[0].strip().lower()
        if media not in JSON_MEDIA_TYPES:
            raise ValueError(f"content type {v!r} is not read (protobuf bodies are not); valid: "
                             f"{', '.join(JSON_MEDIA_TYPES)}")
        return v

    @model_validator(mode="after")
    def _encoding_matches(self) -> RequestBody:
        enc = (self.content_encoding or "identity").strip().lower()
        if enc not in CONTENT_ENCODINGS:
            raise ValueError(f"content encoding {self.content_encoding!r} is not read; valid: "
                             f"{', '.join(CONTENT_ENCODINGS)}")
        if enc != "identity" and not self.data.startswith(GZIP_MAGIC):
            raise ValueError(f"content encoding {self.content_encoding!r} but the body is not gzip (it does not "
                             "start with the gzip magic bytes 1f 8b)")
        return self


def as_source(given: Source | Path) -> Source:
    """A source as given, or a path as a `FileSource` (readers take either)."""
    return given if isinstance(given, Source) else FileSource(path=given)


__all__ = ["BLOCK", "CONTENT_ENCODINGS", "HINT_BYTES", "JSON_MEDIA_TYPES", "BytesSource", "FileSource", "RequestBody",
           "Source", "as_source", "decoded", "decoded_head", "encoding_hint", "head_of", "hint_for",
           "noting_problems", "open_decoded", "problem", "shown", "text_encoding"]
