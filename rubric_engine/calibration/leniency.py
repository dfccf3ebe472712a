"""Length and leniency (pure): does the judge call long answers "met" more often than the
reviewers do, and do its scores follow length?

LLM judges are known to favour longer answers (the verbosity bias of Zheng et al. 2023,
"Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena"). Where labels exist this measures it
for this judge and rubric, beside the reviewers' own figures:

- **false "met" rate by answer-length quartile**: of the (reviewer, requirement) labels that
  say unmet, the share the judge calls met; beside it, the same share between reviewers (of a
  reviewer's unmet labels, the share another reviewer of the row calls met). Quartiles of the
  characters of the agent's replies over the labelled rows.
- **score–length correlation**: Spearman's ρ between answer length and the judge's score, and
  between answer length and the reviewers' scores, on the rows reviewers scored.

Per labelled row the tally keeps five numbers in typed arrays (a few MB at 100,000 rows).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.calibration.binary import ratio
from rubric_engine.calibration.blocks import unmet
from rubric_engine.calibration.views import RowView

__all__ = ["LengthTally", "answer_chars"]


def answer_chars(dialogue: Mapping[str, Any]) -> int:
    """Characters of the agent's replies (assistant turns' text) of a stored dialogue."""
    total = 0
    for message in dialogue.get("messages") or ():
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str):
            total += len(content)
    return total


def _false_met(reviewers: Mapping[str, RowView], judge: RowView) -> tuple[int, int, int, int]:
    """(judge false met, judge unmet labels, reviewers' false met, reviewers' unmet labels)."""
    j_num = j_den = r_num = r_den = 0
    for name, view in reviewers.items():
        for rid, status in view.statuses.items():
            if unmet(status) is not True:
                continue
            theirs = unmet(judge.statuses.get(rid))
            if theirs is not None:
                j_den += 1
                j_num += not theirs
            for other, seen in reviewers.items():
                said = unmet(seen.statuses.get(rid)) if other != name else None
                if said is not None:
                    r_den += 1
                    r_num += not said
    return j_num, j_den, r_num, r_den


@dataclass
class LengthTally:
    """Per labelled row: its answer length and the counts of :func:`_false_met`; per scored
    row the judge's and the reviewers' scores beside the length."""

    chars: array[int] = field(default_factory=lambda: array("q"))
    counts: array[int] = field(default_factory=lambda: array("q"))  # four per row
    judge_scores: array[float] = field(default_factory=lambda: array("d"))  # length, score
    reviewer_scores: array[float] = field(default_factory=lambda: array("d"))

    def add(
        self, chars: int | None, reviewers: Mapping[str, RowView], judge: RowView | None
    ) -> None:
        if chars is None or judge is None or not reviewers:
            return
        self.chars.append(chars)
        self.counts.extend(_false_met(reviewers, judge))
        scored = [v.score for v in reviewers.values() if v.score is not None]
        if scored and judge.score is not None:
            self.judge_scores.extend((chars, judge.score))
        for score in scored:
            self.reviewer_scores.extend((chars, score))

    def result(self) -> dict[str, Any] | None:
        """``quartiles`` (each: ``fromChars``, ``toChars``, ``rows``, ``judgeFalseMet`` and
        ``reviewersFalseMet`` rates with their counts) and ``scoreLength`` (Spearman ρ of the
        judge and of the reviewers, with n); ``None`` without lengths."""
        if not self.chars:
            return None
        import numpy as np

        chars = np.frombuffer(self.chars, dtype=np.int64)
        counts = np.frombuffer(self.counts, dtype=np.int64).reshape(-1, 4)
        edges = np.quantile(chars, [0.25, 0.5, 0.75])
        which = np.searchsorted(edges, chars, side="left")  # 0..3: at most the upper edge
        quartiles = []
        for q in range(4):
            rows = which == q
            if not rows.any():
                continue
            j_num, j_den, r_num, r_den = (int(v) for v in counts[rows].sum(axis=0))
            quartiles.append(
                {
                    "quartile": q + 1,
                    "fromChars": int(chars[rows].min()),
                    "toChars": int(chars[rows].max()),
                    "rows": int(rows.sum()),
                    "judgeFalseMet": ratio(j_num, j_den),
                    "judgeUnmetLabels": j_den,
                    "reviewersFalseMet": ratio(r_num, r_den),
                    "reviewersUnmetLabels": r_den,
                }
            )
        return {
            "quartiles": quartiles,
            "scoreLength": {
                "judge": _spearman(self.judge_scores),
                "reviewers": _spearman(self.reviewer_scores),
            },
        }


def _spearman(pairs: array[float]) -> dict[str, Any]:
    import numpy as np
    from scipy.stats import spearmanr

    data = np.frombuffer(pairs, dtype=np.float64).reshape(-1, 2)
    n = len(data)
    if n < 3 or np.unique(data[:, 0]).size < 2 or np.unique(data[:, 1]).size < 2:
        return {"n": n, "spearman": None}
    return {"n": n, "spearman": float(spearmanr(data[:, 0], data[:, 1]).statistic)}
