"""Validation messages: a pydantic `ValidationError` as the one line a user reads (`<field>: <what is wrong>`).

Every loader (packs, suites, model configs, simulator configs, model answers, compiler proposals) says a bad
field the same way, so a message names the file (the caller's prefix), the dotted field and what would be valid.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


def _tidy_loc(loc: tuple[int | str, ...], data: Any, *, missing: bool) -> str:
    if data is None:
        return ".".join(str(p) for p in loc).replace(".[", "[") or "(top level)"
    # Follow the error location through the input. A part the input does not have is kept only for a
    # missing field; otherwise it is one of pydantic's union-member tags (`str`, `tuple[...]`) and dropped.
    parts: list[str] = []
    node = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and (part in node or (missing and last) or part == "[key]"):
            parts.append(f"['{part}']" if isinstance(part, str) and "." in part else str(part))
            if part not in node:
                break
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parts.append(str(part))
            node = node[part]
        else:
            break
    return ".".join(parts).replace(".[", "[") or "(top level)"


def describe_error(err: ValidationError, data: Any = None) -> str:
    """The first problem of `err` as one line: `<dotted field>: <message>` (`(top level)` for the root), the
    alternatives of a union in one sentence, the offending value when short, and how many other problems there
    are. `data` is the validated input: with it, the field path follows the input and drops pydantic's
    union-member tags."""
    errors = err.errors(include_url=False)
    locs = [_tidy_loc(tuple(e["loc"]), data, missing=e["type"] == "missing") for e in errors]
    first = errors[0]
    # Errors at the same place are the alternatives of a union: say them in one sentence.
    same = [e for e, loc in zip(errors, locs, strict=True) if loc == locs[0]]
    # YAML has lists, not tuples: say "list" where the model's sequence type leaks into the message.
    msgs = list(dict.fromkeys(
        str(e["msg"]).removeprefix("Value error, ").replace("valid tuple", "valid list") for e in same
    ))
    prefix = "Input should be "
    if len(msgs) > 1 and all(m.startswith(prefix) for m in msgs):
        msg = prefix + " or ".join(m.removeprefix(prefix) for m in msgs)
    else:
        msg = msgs[0]
    value = first.get("input")
    if first["type"] != "value_error" and isinstance(value, str | int | float | bool):
        msg += f" (got {str(repr(value))[:60]})"
    others = len(errors) - len(same)
    more = f" (and {others} more)" if others else ""
    return f"{locs[0]}: {msg}{more}".replace("\n", " ")
