"""Router / classification metrics (seed 004 C.4) for rows that carry the agent's own routing.

A row takes part when its metadata has ``expectedRoute`` (the label a person gave) and
``route`` (what the agent chose; a missing one counts as the label ``(none)``). Per class:
precision, recall, F1 and support (rows whose expected label it is); ``macroF1`` is the mean
F1 over the expected classes, the seed's CI figure ("macro F1 ≥ 0.85, per-class recall ≥
0.80"); ``confusions`` counts every (expected, predicted) pair that differ, most first, so the
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


def router_section(metadata: Sequence[dict[str, Any]], fig: Figures) -> RouterSection | None:
    """The section for rows' metadata in input order, or ``None`` when no row is labelled."""
    pairs = [
        (str(m[EXPECTED_FIELD]), str(m.get(PREDICTED_FIELD) or NO_ROUTE))
        for m in metadata
        if m.get(EXPECTED_FIELD) not in (None, "")
    ]
    if not pairs:
        return None
    expected = Counter(t for t, _ in pairs)
    predicted = Counter(p for _, p in pairs)
    hits = Counter(t for t, p in pairs if t == p)
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
    wrong = Counter((t, p) for t, p in pairs if t != p)
    return RouterSection(
        rows=len(pairs),
        accuracy=fig.ratio(sum(hits.values()), len(pairs)),
        macro_f1=_shown(sum(f1s) / len(f1s), fig),
        classes=tuple(classes),
        confusions=tuple(
            RouterConfusion(expected=t, predicted=p, rows=n)
            for (t, p), n in sorted(wrong.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    )
