"""Adjudication analysis (f): agreement of two raters per data item, and admission (docs/method.md section 6).

The two raters are compared on the *data items* (yes / no judgments), not on scores. Per item:

- `kappa.<item>`: Cohen's kappa over the (unit, item) pairs both raters judged yes or no, unrounded;
- `admission.<item>`: `admitted` when kappa read at two decimals (half up) is >= 0.60, else `retired`; the
  note carries the unrounded and the rounded value (0.599 and 0.596 both read 0.60 and are admitted).

Pairs where either rater left the item uncollected, or judged it not applicable, are excluded and counted in
the notes; a pair where one rater found the item applicable and the other did not is counted separately as an
applicability disagreement (it is still excluded: kappa is on the yes/no judgment).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from agent_factory.evaluators.components.adjudication.metrics import ADMISSION, KAPPA
from agent_factory.evaluators.components.adjudication.rules import as_value, parse_rater_key, rater_key
from agent_factory.evaluators.core.model import Layer, Result, Value
from agent_factory.evaluators.core.registry import Observations
from agent_factory.evaluators.stats import ADMISSION_THRESHOLD, admit, cohen_kappa
from agent_factory.knowledge_packs import KnowledgePack

VERSION = "1"
NAME = "adjudication.kappa"
LABELS = ("yes", "no")


def _result(metric: str, layer: Layer, value: float | str | None, n: int, note: str) -> Result:
    return Result(
        component="adjudication", layer=layer, metric=metric, value=value, n=n, note=note, analysis=NAME,
        analysis_version=VERSION,
    )


def adjudicate(
    pairs: Sequence[tuple[str, Value, Value]],
    *,
    layer: Layer = "trace",
    threshold: float = ADMISSION_THRESHOLD,
) -> list[Result]:
    """Kappa and admission per item from (item, rater A value, rater B value) triples, items in sorted order.

    Only pairs both raters judged yes or no enter kappa; the others are excluded and counted.
    """
    by_item: dict[str, list[tuple[Value, Value]]] = defaultdict(list)
    for item, a, b in pairs:
        by_item[item].append((a, b))
    out: list[Result] = []
    for item in sorted(by_item):
        judged = [(a, b) for a, b in by_item[item] if a in LABELS and b in LABELS]
        uncollected = sum(1 for a, b in by_item[item] if "uncollected" in (a, b))
        not_applicable = len(by_item[item]) - len(judged) - uncollected
        split = sum(1 for a, b in by_item[item] if {a, b} in ({"not_applicable", "yes"}, {"not_applicable", "no"}))
        kappa = cohen_kappa([a for a, _ in judged], [b for _, b in judged], labels=LABELS)
        excluded = (
            f"excluded: {not_applicable} not_applicable ({split} where only one rater found it applicable), "
            f"{uncollected} uncollected"
        )
        if kappa.value is None:
            detail = f"cohen; kappa undefined: {kappa.reason}"
        else:
            detail = f"cohen; observed agreement {kappa.observed:.4f}, chance {kappa.expected:.4f}"
        out.append(_result(KAPPA.of(item=item), layer, kappa.value, kappa.n, f"{detail}; {excluded}"))
        adm = admit(kappa, threshold)
        out.append(_result(ADMISSION.of(item=item), layer, "admitted" if adm.admitted else "retired", kappa.n,
                           f"{adm.reason} ({adm.rule}); {excluded}"))
    return out


def rater_pairs(obs: Observations, layer: Layer) -> list[tuple[str, Value, Value]]:
    """The (item, A, B) pairs of one layer's rows under the fact convention of `rules`."""
    pairs: list[tuple[str, Value, Value]] = []
    for row in obs.layer(layer):
        for key, raw in row.facts.items():
            parsed = parse_rater_key(key)
            if parsed is None or parsed[1] != "rater_b":
                continue
            item = parsed[0]
            a_fact = row.facts.get(rater_key(item, "rater_a"))
            a = as_value(a_fact) if a_fact is not None else row.values.get(item)
            pairs.append((item, a or "uncollected", as_value(raw) or "uncollected"))
    return pairs


def adjudication_analysis(obs: Observations, pack: KnowledgePack) -> list[Result]:
    """Kappa and admission per item and layer, from rows carrying a second rater's values."""
    out: list[Result] = []
    for layer in ("span", "trace", "conversation", "engagement"):
        pairs = rater_pairs(obs, layer)
        if pairs:
            out += adjudicate(pairs, layer=layer)
    return out
