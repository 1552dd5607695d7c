"""Redaction benchmark: the default redactor's throughput on adversarial inputs, at several sizes.

Usage:  .venv/bin/python bench/redact_bench.py [--sizes 4000,40000,400000] [--repeat 3] [--json]

Each input is built to the size asked (in characters) from one repeated unit, the shapes that once made the
redactor slow or that a pattern scans hardest: runs of single digits and of 4-digit groups, ISO dates (a tool
output listing dates), long words (one 10,000-letter word, then more), long Chinese text, many emails, base64
blobs, a mixed tool output (JSON with dates, ids, prices, a phone, an email, a key), and a support chat (numbers
after their labels, international numbers, passwords in prose, en and zh). For each input and size it prints
the best of `--repeat` cold runs of `redact_text` (the redactor's whole work: the matching view, every shape,
cards, phones; the remembered answers of the phone matcher and of the international check dropped before each
run), the throughput in UTF-8 bytes per second, the cost per byte, and what was found; then the worst cost per
byte against the median of all (the redactor is linear when the cost per byte holds across sizes).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _seeded(make: Callable[[random.Random], str]) -> Callable[[int], str]:
    def build(size: int) -> str:
        rng = random.Random(size)
        parts: list[str] = []
        n = 0
        while n < size:
            unit = make(rng)
            parts.append(unit)
            n += len(unit)
        return "".join(parts)[:size]

    return build


def _date(rng: random.Random) -> str:
    return f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10_000)) + " "


_HAN = "我们今天去北京开会讨论项目进展客户希望下周交付报告请尽快确认预算和时间安排谢谢大家的支持"


def _cjk(rng: random.Random) -> str:
    return "".join(rng.choice(_HAN) for _ in range(rng.randint(20, 60))) + "。"


def _email(rng: random.Random) -> str:
    user = "".join(rng.choice("abcdefghij.") for _ in range(8)).strip(".") or "x"
    return f"{user}{rng.randint(1, 999)}@mail{rng.randint(1, 99)}.example.com, "


def _blob(rng: random.Random) -> str:
    return base64.b64encode(rng.randbytes(3000)).decode() + "\n"


def _mixed(rng: random.Random) -> str:
    row = {"order": f"ORD-{rng.randint(10**7, 10**8)}", "date": _date(rng).strip(), "price": rng.randint(1, 9999) / 100,
           "flight": f"UA{rng.randint(10, 9999)}", "trace": f"{rng.getrandbits(128):032x}",
           "note": rng.choice(["ok", "call 415 555 0132", "mail bob@example.com", "key sk-proj-" + "a1" * 12, "确认"])}
    return json.dumps(row, ensure_ascii=False) + "\n"


def _support(rng: random.Random) -> str:
    """A support chat: numbers after their labels, international numbers, passwords in prose, in en and zh."""
    def d(n: int) -> str:
        return "".join(rng.choice("0123456789") for _ in range(n))

    return rng.choice([
        f"Tel: 06 {d(2)} {d(2)} {d(2)} {d(2)}, ask for Marie. ",
        f"call me on +33 6 {d(2)} {d(2)} {d(2)} {d(2)} tomorrow. ",
        f"Berlin: +49 (0)30 {d(8)}; ",
        f"联系电话：0{d(2)}-{d(4)}-{d(4)}，工作日。",
        f"the temp password they emailed me was \"Xk#{d(4)}q\" but it expired. ",
        f"my SSN is {d(3)} {d(2)} {d(4)} and passport no. X{d(8)}. ",
        f"护照号码：E{d(8)}，有效期至20{d(2)}年。",
        f"REDIS_URL=redis://:pw{d(6)}@cache.internal:6379/0 ",
        "The password is incorrect; please reset it from the login page. ",
        f"call us about tracking {d(12)} if the parcel is late. ",
    ])


INPUTS: dict[str, Callable[[int], str]] = {
    "single digits": _seeded(lambda rng: f"{rng.randint(0, 9)} "),
    "4-digit groups": _seeded(lambda rng: f"{rng.randint(1000, 9999)} "),
    "ISO dates": _seeded(_date),
    "long words": _seeded(_word),
    "Chinese text": _seeded(_cjk),
    "emails": _seeded(_email),
    "base64 blobs": _seeded(_blob),
    "mixed tool output": _seeded(_mixed),
    "support chat": _seeded(_support),
}


def measure(texts: dict[tuple[str, int], str], repeat: int) -> dict[tuple[str, int], tuple[float, int]]:
    """Per input: the best time of `repeat` runs of the default redactor over it, cold (no phone answer kept
    from an earlier run), and how many ranges it found. The runs go round the inputs `repeat` times, so a
    moment of load on the machine does not fall on every run of one input."""
    from agent_factory.evaluators.collect import redact_phones
    from agent_factory.evaluators.collect.redact import DefaultRedactor, redact_text

    redactor = DefaultRedactor()
    found = {key: len(redactor.find(text)) for key, text in texts.items()}
    best = dict.fromkeys(texts, float("inf"))
    for _ in range(repeat):
        for key, text in texts.items():
            redact_phones._matched.cache_clear()
            redact_phones._valid_international.cache_clear()
            t0 = time.perf_counter()
            redact_text(text, redactor)
            best[key] = min(best[key], time.perf_counter() - t0)
    return {key: (best[key], found[key]) for key in texts}


def main() -> None:
    """Print the table (or `--json`)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4000,40000,400000", help="Input sizes in characters, comma-separated.")
    parser.add_argument("--repeat", type=int, default=3, help="Runs per input; the best is kept.")
    parser.add_argument("--json", action="store_true", help="Print the rows as JSON.")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    measure({("warm up", 0): "warm up 415 555 0132 a@b.co"}, 1)  # compile the patterns, load phone metadata
    texts = {(name, size): build(size) for name, build in INPUTS.items() for size in sizes}
    rows = []
    for (name, _), (seconds, found) in measure(texts, args.repeat).items():
        text = texts[(name, _)]
        nbytes = len(text.encode("utf-8"))
        rows.append({"input": name, "chars": len(text), "bytes": nbytes, "seconds": seconds, "found": found,
                     "mb_per_s": nbytes / seconds / 1e6, "us_per_kb": seconds / nbytes * 1e9})
    median = statistics.median(r["us_per_kb"] for r in rows)
    worst = max(rows, key=lambda r: r["us_per_kb"])
    if args.json:
        print(json.dumps({"rows": rows, "median_us_per_kb": median, "worst_over_median": worst["us_per_kb"] / median}))
        return
    print(f"{'input':<18} {'chars':>9} {'bytes':>9} {'seconds':>9} {'MB/s':>7} {'us/KB':>8} {'found':>7}")
    for r in rows:
        print(f"{r['input']:<18} {r['chars']:>9,} {r['bytes']:>9,} {r['seconds']:>9.4f} {r['mb_per_s']:>7.2f} "
              f"{r['us_per_kb']:>8.1f} {r['found']:>7,}")
    print(f"median {median:.1f} us/KB; worst {worst['input']} at {worst['chars']:,} chars: "
          f"{worst['us_per_kb']:.1f} us/KB, {worst['us_per_kb'] / median:.2f}x the median")


if __name__ == "__main__":
    main()
