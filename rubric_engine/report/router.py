"""Router / classification metrics (docs/ci.md) for rows that carry the agent's own routing.

A row takes part when its metadata has ``expectedRoute`` (the label a person gave) and
``route`` (what the agent chose; a missing one counts as the label ``(none)``). Per class:
precision, recall, F1 and support (rows whose expected label it is); ``macroF1`` is the mean
F1 over the expected classes, the usual CI figure of a router ("macro F1 ≥ 0.85, per-class
recall ≥ 0.80"); ``confusions`` counts every (expected, predicted) pair that differ, most
first, so the
costly pairs a suite names can be bounded. Pure; no section when no row has ``expectedRoute``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rubric_engine.report.model import RouterClass, RouterConfusion, RouterSection
from rubric_engine.report.outcome import Figures

EXPECTED_FIELD, PREDICTED_FIELD, NO_ROUTE = "expectedRoute", "route", "(none)"


def _shown(value: float, fig: Figures) -> float:
    return value if fig.places is None else round(value, fig.places)


def route_pair(metadata: dict[str, Any]) -> tuple[str, str] | None:
    """A row's ``(expected, predicted)`` labels, or ``None`` when the row is not labelled."""
    if metadata.get(EXPECTED_FIELD) in (None, ""):
        return None
    return str(metadata[EXPECTED_FIELD]), str(metadata.get(PREDICTED_FIELD) or NO_ROUTE)


def router_section(metadata: Sequence[dict[str, Any]], fig: Figures) -> RouterSection | None:
    """The section for rows' metadata in input order, or ``None`` when no row is labelled."""
    return router_from_pairs(Counter(p for p in map(route_pair, metadata) if p is not None), fig)


def router_from_pairs(pairs: Counter[tuple[str, str]], fig: Figures) -> RouterSection | None:
    """The section from the rows' :func:`route_pair` counts (``None`` when there are none); a
    report built as a stream keeps this counter, not the rows."""
    if not pairs:
        return None
    expected: Counter[str] = Counter()
    predicted: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for (t, p), n in pairs.items():
        expected[t] += n
        predicted[p] += n
        if t == p:
            hits[t] += n
    classes = []
    for label in sorted(expected):
        precision = fig.ratio(hits[label], predicted[label])
        recall = fig.ratio(hits[label], expected[label])
        both = 2 * hits[label]
        f1 = fig.ratio(both, expected[label] + predicted[label])
        classes.append(
            RouterClass(label=label, support=expected[label], precision=precision,
                        recall=recall, f1=f1)
        )  # fmt: skip
    f1s = [2 * hits[c] / (expected[c] + predicted[c]) for c in sorted(expected)]
    wrong = {(t, p): n for (t, p), n in pairs.items() if t != p}
    return RouterSection(
        rows=sum(pairs.values()),
        accuracy=fig.ratio(sum(hits.values()), sum(pairs.values())),
        macro_f1=_shown(sum(f1s) / len(f1s), fig),
        classes=tuple(classes),
        confusions=tuple(
            RouterConfusion(expected=t, predicted=p, rows=n)
            for (t, p), n in sorted(wrong.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    )
