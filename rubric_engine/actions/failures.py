"""Failures no rule names: the explanations of low rows that no unmet requirement explains,
clustered by their words, each cluster a candidate requirement for the next version
(docs/actions.md). Pure and deterministic: TF-IDF vectors and k-means with a fixed seed
(:mod:`rubric_engine.rubric.similarity`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rubric_engine.actions.model import TextCluster
from rubric_engine.rubric.similarity import (
    DocumentFrequency,
    auto_k,
    kmeans,
    terms,
    tfidf,
    top_terms,
)

EXAMPLES = 3
TERMS = 6
#: explanations clustered at most: of more, an evenly spaced sample in row order. The k-means
#: cost grows with the texts times their vocabulary (1,000 explanations: about 10 CPU-s and
#: 110 MB; 10,000: over a minute and 0.7 GB), and 1,000 show every failure common enough to
#: become a rule (benchmarks/RESULTS.md §10)
MOST = 1000


def explanation_clusters(
    texts: Sequence[tuple[str, str]],
    k: int | None = None,
    seed: int = 0,
    background: DocumentFrequency | None = None,
) -> list[TextCluster]:
    """Cluster ``(row id, explanation)`` pairs; largest cluster first.

    Args:
        k: the number of clusters (default :func:`~rubric_engine.rubric.similarity.auto_k`
            of the texts; fewer when fewer texts differ).
        seed: the k-means seed; the same texts and seed give the same clusters.
        background: term counts over every explanation of the task, for the IDF: words
            all explanations use ("the reply", "did not") weigh little.

    Returns:
        One :class:`~rubric_engine.actions.model.TextCluster` per cluster: its rows, its
        top terms, up to three explanations nearest its centre (the most typical first), and
        a candidate line for a person to turn into a rule. Texts without a term are left out;
        of more than :data:`MOST` texts, an evenly spaced sample of them is clustered.
    """
    kept = [(rid, text) for rid, text in texts if terms(text)]
    if not kept:
        return []
    if len(kept) > MOST:
        kept = [kept[i * len(kept) // MOST] for i in range(MOST)]
    matrix, vocabulary = tfidf([text for _, text in kept], background)
    labels = kmeans(matrix, k or auto_k(len(kept)), seed=seed)
    clusters = []
    for label in range(int(labels.max()) + 1):
        members = [i for i in range(len(kept)) if labels[i] == label]
        centre = matrix[members].mean(axis=0)
        nearest = sorted(members, key=lambda i: (-float(np.dot(matrix[i], centre)), i))
        words = top_terms(matrix, vocabulary, members, TERMS)
        examples = tuple(kept[i][1] for i in nearest[:EXAMPLES])
        first = kept[nearest[0]]
        clusters.append(
            TextCluster(
                rank=label + 1,
                rows=len(members),
                terms=tuple(words),
                row_ids=tuple(kept[i][0] for i in members),
                examples=examples,
                candidate=f"A rule about: {', '.join(words)} (as in {first[0]}: "
                f'"{_short(first[1])}")',
            )
        )
    return clusters


def _short(text: str, limit: int = 120) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
