"""Server-sent-event chunks of a chat completion, as the OpenAI API streams it (``stream: true``).

Pure: the fake server builds the complete ``chat.completion`` body first and streams these chunks of
it, so a streamed answer carries exactly what the non-streamed one would. The order follows the API:
a role chunk, content in a few pieces, each tool call (id and name first, then its arguments in
pieces), a chunk with the finish reason, and, when ``stream_options.include_usage`` is set, a last
chunk with empty ``choices`` and the ``usage`` block (every other chunk then has ``"usage": null``).
"""

from __future__ import annotations

from typing import Any

PIECES = 3


def split_text(text: str, pieces: int = PIECES) -> list[str]:
    """The text in up to `pieces` consecutive non-empty parts that join back to it."""
    if not text:
        return []
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_chunks(completion: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects that stream this completion's first choice."""
    choice = completion["choices"][0]
    message = choice["message"]
    head = {key: completion[key] for key in ("id", "created", "model", "system_fingerprint")}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out = {**head, "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}
        if include_usage:
            out["usage"] = None
        return out

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in split_text(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": function["name"], "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in split_text(function["arguments"])]
    chunks.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]})
    return chunks
