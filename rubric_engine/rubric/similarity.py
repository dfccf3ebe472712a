"""Text similarity for rule texts and judge explanations: terms, TF-IDF, cosine, k-means.

Used by the pack lint (near-duplicate requirements, overlapping trigger hints; see
docs/authoring.md) and by the clusters of judge explanations no rule names (docs/actions.md).
Pure and deterministic: the same texts (and seed) give the same vectors and clusters.

Terms: Latin words of two or more letters, lower-cased, minus a few English function words;
a run of CJK characters becomes its character bigrams (a lone character stays one term), so
Chinese needs no word segmenter. Rule IDs in a text (``COMMON_BACKEND_EXPOSURE``) are one
term each, not their parts.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

_ID = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_LATIN = re.compile(r"[a-z][a-z0-9'\-]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
#: English words too common to tell two rules apart
# fmt: off
STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "do", "does", "for",
    "from", "has", "have", "if", "in", "into", "is", "it", "its", "may", "must", "no", "not",
    "of", "on", "or", "so", "such", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "to", "was", "were", "when", "which", "while", "who", "will", "with",
    "without", "would", "you", "your", "agent", "user",
))
# fmt: on


def terms(text: str) -> list[str]:
    """The terms of ``text`` in order (see the module docstring); empty for empty text."""
    text = unicodedata.normalize("NFKC", text)
    found = [m.group(0) for m in _ID.finditer(text)]
    text = _ID.sub(" ", text)
    lower = text.lower()
    found += [w for w in _LATIN.findall(lower) if w not in STOPWORDS]
    for run in _CJK.findall(text):
        found += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    return found


def tfidf(
    texts: Sequence[str], background: DocumentFrequency | None = None
) -> tuple[NDArray[np.float64], list[str]]:
    """One L2-normalised TF-IDF row per text, and the vocabulary (column order: sorted terms).

    Weights: raw term count × smoothed IDF ``ln((1 + n) / (1 + df)) + 1`` (as scikit-learn's
    default ``TfidfVectorizer``), with ``n`` and ``df`` counted over ``texts``, or over
    ``background`` when given (a larger set the texts belong to, so words every text of it
    uses weigh little). A text with no term is a zero row.
    """
    counted = [Counter(terms(t)) for t in texts]
    vocabulary = sorted({term for counts in counted for term in counts})
    column = {term: i for i, term in enumerate(vocabulary)}
    matrix = np.zeros((len(texts), len(vocabulary)))
    for row, counts in enumerate(counted):
        for term, n in counts.items():
            matrix[row, column[term]] = n
    if background is not None and background.docs:
        df = np.array([background.df.get(term, 0) for term in vocabulary], dtype=float)
        docs = background.docs
    else:
        df, docs = (matrix > 0).sum(axis=0), len(texts)
    matrix *= np.log((1 + docs) / (1 + df)) + 1
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix, vocabulary


class DocumentFrequency:
    """In how many documents each term appears, counted one document at a time (the IDF of
    :func:`tfidf` over a larger set than the texts clustered)."""

    def __init__(self) -> None:
        self.df: Counter[str] = Counter()
        self.docs = 0

    def add(self, text: str) -> None:
        self.df.update(set(terms(text)))
        self.docs += 1


def cosine_matrix(texts: Sequence[str]) -> NDArray[np.float64]:
    """Pairwise cosine similarity (0–1) of the texts' TF-IDF vectors; 1 on the diagonal of a
    text with terms, 0 for a text without."""
    matrix, _ = tfidf(texts)
    return matrix @ matrix.T


def kmeans(
    matrix: NDArray[np.float64], k: int, seed: int = 0, restarts: int = 10, max_iter: int = 100
) -> NDArray[np.int64]:
    """Cluster the rows of ``matrix`` into at most ``k`` groups; returns each row's label.

    ``restarts`` runs of k-means++ seeding (from one ``numpy.random.default_rng(seed)``) then
    Lloyd's iterations until no label changes (at most ``max_iter``); the run with the least
    within-cluster sum of squares wins (the first on a tie), as scikit-learn's ``n_init``.
    Labels are renumbered by cluster size (largest first), ties by the first row in the
    cluster, so they do not depend on the seeding order. ``k`` is lowered to the number of
    distinct rows.

    Raises:
        ValueError: ``k`` < 1 or the matrix has no row.
    """
    if k < 1 or len(matrix) == 0:
        raise ValueError("k-means needs k >= 1 and at least one row")
    k = min(k, len(np.unique(matrix, axis=0)))
    rng = np.random.default_rng(seed)
    best: tuple[float, NDArray[np.int64]] | None = None
    for _ in range(max(1, restarts)):
        labels, inertia = _lloyd(matrix, _seed_centers(matrix, k, rng), max_iter)
        if best is None or inertia < best[0] - 1e-12:
            best = (inertia, labels)
    assert best is not None
    return _renumbered(best[1])


def _lloyd(
    matrix: NDArray[np.float64], centers: NDArray[np.float64], max_iter: int
) -> tuple[NDArray[np.int64], float]:
    """Lloyd's iterations from ``centers``: the labels and their sum of squared distances."""
    labels = np.full(len(matrix), -1)
    distances = np.zeros((len(matrix), len(centers)))
    for _ in range(max_iter):
        # one center at a time: rows × terms numbers at once, never rows × centers × terms
        for c, center in enumerate(centers):
            distances[:, c] = ((matrix - center) ** 2).sum(axis=1)
        new = distances.argmin(axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for c in range(len(centers)):
            members = matrix[labels == c]
            if len(members):
                centers[c] = members.mean(axis=0)
    inertia = float(distances[np.arange(len(matrix)), labels].sum())
    return labels.astype(np.int64), inertia


def _seed_centers(
    matrix: NDArray[np.float64], k: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """k-means++: the first center uniformly, each next one with probability ∝ its squared
    distance to the nearest center chosen so far."""
    chosen = [int(rng.integers(len(matrix)))]
    nearest = ((matrix - matrix[chosen[0]]) ** 2).sum(axis=1)
    while len(chosen) < k:
        total = float(nearest.sum())
        if total <= 0:
            break
        pick = int(rng.choice(len(matrix), p=nearest / total))
        chosen.append(pick)
        nearest = np.minimum(nearest, ((matrix - matrix[pick]) ** 2).sum(axis=1))
    return matrix[chosen].copy()


def _renumbered(labels: NDArray[np.int64]) -> NDArray[np.int64]:
    sizes = Counter(labels.tolist())
    first = {label: int(np.argmax(labels == label)) for label in sizes}
    order = sorted(sizes, key=lambda label: (-sizes[label], first[label]))
    mapping = {old: new for new, old in enumerate(order)}
    return np.array([mapping[label] for label in labels.tolist()], dtype=np.int64)


def top_terms(
    matrix: NDArray[np.float64], vocabulary: Sequence[str], rows: Sequence[int], n: int = 5
) -> list[str]:
    """The ``n`` terms that best describe ``rows``: those most of the rows use first, then
    by summed weight (ties: term order), so a word one row alone repeats does not name the
    group."""
    if not rows or not len(vocabulary):
        return []
    part = matrix[list(rows)]
    weight, used = part.sum(axis=0), (part > 0).sum(axis=0)
    order = sorted(
        range(len(vocabulary)), key=lambda i: (-int(used[i]), -float(weight[i]), vocabulary[i])
    )
    return [vocabulary[i] for i in order[:n] if weight[i] > 0]


def auto_k(n: int, most: int = 8) -> int:
    """A default cluster count for ``n`` texts: ``round(sqrt(n))``, between 1 and ``most``."""
    return max(1, min(most, round(math.sqrt(n))))
