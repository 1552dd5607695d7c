"""Adjudication has no rule collectors; this module fixes how two raters' values sit in `Observations`.

Convention (the registered analysis `adjudication.kappa` reads it; nothing writes it, and the audit does not:
it stores its own report, which the component reads instead, see `audit`), for a datum `<item>` of a unit row:

- rater A is the row's own value `values[<item>]`, unless a fact `adjudication.<item>.rater_a` is present
  (for comparing two re-collections, neither of which is the stored value);
- rater B is the fact `adjudication.<item>.rater_b`: one of `yes`, `no`, `not_applicable`, `uncollected`.

A row with a rater B fact for an item is one (unit, item) pair; rows without it are not in the audit sample.
"""

from __future__ import annotations

from typing import Literal

from agent_factory.evaluators.core.model import Value

PREFIX = "adjudication."
RATERS = ("rater_a", "rater_b")
VALUES: tuple[Value, ...] = ("yes", "no", "not_applicable", "uncollected")


def rater_key(item: str, rater: Literal["rater_a", "rater_b"]) -> str:
    """The fact key that holds `rater`'s value of `item`."""
    return f"{PREFIX}{item}.{rater}"


def parse_rater_key(key: str) -> tuple[str, str] | None:
    """(item, rater) of a rater fact key, or None when `key` is not one."""
    if not key.startswith(PREFIX):
        return None
    item, _, rater = key[len(PREFIX):].rpartition(".")
    if not item or rater not in RATERS:
        return None
    return item, rater


def as_value(raw: object) -> Value | None:
    """A stored rater fact as a Value; None when it is not one (a malformed fact is not a rating)."""
    if isinstance(raw, str) and raw in VALUES:
        return raw
    return None
