"""Load the secret corpus (planted secrets and benign look-alikes) and lay it out as chat logs.

Shared by `test_collect_redact_corpus.py` (the redactor on each entry) and `tests/factory/test_secret_corpus.py`
(every output path). See data/secret_corpus.yaml for the fields. `chat_records` puts each secret where its role
says, one conversation each: the user's message, the agent's answer, a tool call's JSON arguments or a tool's
output (every other one JSON-encoded with ASCII escapes, as tools return text), the record's user id or its
session id (the conversation's id). `leaked` finds planted values in an output, read the way a person would
read it (HTML entities and JSON escapes decoded, full-width digits as digits, card, phone and identity numbers
without their separators too).
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CORPUS = Path(__file__).resolve().parent / "data" / "secret_corpus.yaml"
ROLES = ("user", "assistant", "tool_args", "tool_result", "user_id", "session_id")
NUMBERS = ("card", "phone", "labelled_phone", "ssn", "passport", "national", "cn_id")
"""Shapes whose value is a number: its digits run together must not appear either."""
_COUNTING = "01234567890123456789 98765432109876543210"
LANGS = ("en", "zh")


@dataclass(frozen=True)
class Secret:
    """A planted value and the text that carries it."""

    shape: str
    lang: str
    role: str
    value: str
    text: str

    def planted(self) -> str:
        """The text with the value in it."""
        return self.text.replace("{v}", self.value)

    def forms(self) -> list[str]:
        """What must not appear: the value as written, its NFKC form, and the digits run together of a card, a
        phone number or an identity number (7 or more of them; not a counting run such as `123456789`, which a
        page's own scripts hold)."""
        out = {self.value, unicodedata.normalize("NFKC", self.value)}
        digits = re.sub(r"\D", "", unicodedata.normalize("NFKC", self.value))
        if self.shape.startswith(NUMBERS) and len(digits) >= 7 and digits not in _COUNTING:
            out.add(digits)
        return sorted(out)


@dataclass(frozen=True)
class Benign:
    """Text the redactor must leave as it is."""

    shape: str
    lang: str
    text: str


def load(path: Path = CORPUS) -> tuple[list[Secret], list[Benign]]:
    """The corpus; a malformed entry raises ValueError naming its index."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    secrets: list[Secret] = []
    for i, raw in enumerate(doc["secrets"]):
        s = Secret(shape=raw["shape"], lang=raw["lang"], role=raw["role"], value=str(raw["value"]),
                   text=str(raw["text"]))
        if s.role not in ROLES or s.lang not in LANGS or s.value not in s.planted():
            raise ValueError(f"{path}: secrets[{i}]: bad role or lang, or the text does not carry the value")
        secrets.append(s)
    benign = [Benign(shape=b["shape"], lang=b["lang"], text=str(b["text"])) for b in doc["benign"]]
    return secrets, benign


def _tool_call(name: str, arguments: str, call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def chat_records(secrets: list[Secret]) -> list[dict[str, Any]]:
    """One openai-chat record per secret, the secret placed where its role says (module docstring)."""
    records = []
    for n, s in enumerate(secrets):
        text = s.planted()
        ask = "Can you help me with my account?" if s.lang == "en" else "你能帮我处理一下账户吗？"
        done = "Done, anything else?" if s.lang == "en" else "已处理，还有其他问题吗？"
        record: dict[str, Any] = {"id": f"conv-{n:03d}", "user_id": f"user-{n % 7}"}
        messages: list[dict[str, Any]] = [{"role": "user", "content": ask}]
        if s.role == "user":
            messages = [{"role": "user", "content": text}, {"role": "assistant", "content": done}]
        elif s.role == "assistant":
            messages.append({"role": "assistant", "content": text})
        elif s.role == "tool_args":
            args = json.dumps({"query": text}, ensure_ascii=n % 2 == 0)
            messages += [_tool_call("lookup", args, f"call-{n}"),
                         {"role": "tool", "tool_call_id": f"call-{n}", "content": "ok"},
                         {"role": "assistant", "content": done}]
        elif s.role == "tool_result":
            out = text if n % 2 else json.dumps({"status": "ok", "content": text}, ensure_ascii=True)
            messages += [_tool_call("fetch_account", '{"account": "current"}', f"call-{n}"),
                         {"role": "tool", "tool_call_id": f"call-{n}", "content": out},
                         {"role": "assistant", "content": done}]
        else:
            messages.append({"role": "assistant", "content": done})
            if s.role == "user_id":
                record["user_id"] = text
            else:
                del record["id"]
                record["session_id"] = text
        record["messages"] = messages + [{"role": "user", "content": "thanks" if s.lang == "en" else "谢谢"},
                                         {"role": "assistant", "content": done}]
        records.append(record)
    return records


def write_chat_jsonl(path: Path, secrets: list[Secret]) -> Path:
    """The records as a JSON-lines chat log (non-ASCII written as is)."""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chat_records(secrets)),
                    encoding="utf-8")
    return path


def readable(output: str) -> str:
    """An output as a person reads it: HTML entities and JSON string escapes decoded, NFKC applied."""
    text = html.unescape(output)
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    text = text.replace('\\"', '"').replace("\\n", "\n").replace("\\/", "/").replace("\\\\", "\\")
    return unicodedata.normalize("NFKC", text)


def strings(value: Any) -> list[str]:
    """Every string in a decoded JSON value (keys too)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in strings(v)]
    return [str(value)] if value is not None else []


def leaked(output: str, secrets: list[Secret]) -> list[Secret]:
    """The secrets any of whose forms appear in `output` (raw or `readable`)."""
    views = (output, readable(output))
    return [s for s in secrets if any(form in view for form in s.forms() for view in views)]
