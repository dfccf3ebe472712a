"""A task's rows and its labels as one stream (the edge of :mod:`.run`): results in rowId order
merged with the current labels in rowId order, both read from the store a page at a time; each
label's pins checked against the calibrated rubric on the way (docs/calibration.md "Labels
pinned to what they judged"); every judged row observed and every labelled row fed to a
:class:`~.tally.CalibrationTally` with its answer length.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rubric_engine.calibration.leniency import answer_chars
from rubric_engine.calibration.sample_one import first_sample_view
from rubric_engine.calibration.tally import CalibrationTally
from rubric_engine.calibration.views import RowView, unit_of_labels, view_of_result
from rubric_engine.labels.model import Label
from rubric_engine.labels.pins import RubricPins, unpinned
from rubric_engine.labels.store import PinsByHash
from rubric_engine.results.model import RowResult
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.task_store import TaskRecord, TaskStore

__all__ = ["LabelSelection", "LeftOut", "feed"]

#: labelled rows whose dialogues are read in one query (answer lengths)
_BATCH = 500


@dataclass
class LeftOut:
    """Labels left out because what they judged changed since (their pins differ)."""

    requirements: Counter[str]
    rows: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "labels": sum(self.requirements.values()) + self.rows,
            "requirements": dict(sorted(self.requirements.items())),
            "rowLabels": self.rows,
        }


class LabelSelection:
    """The labels used, one row at a time: pins checked, counted and hashed on the way."""

    def __init__(self, pins: RubricPins, lookup: PinsByHash, include_changed: bool) -> None:
        self.pins, self.lookup, self.include_changed = pins, lookup, include_changed
        self.left_out = LeftOut(Counter())
        self.count = 0
        self.reviewers: set[str] = set()
        self.digest = hashlib.sha256()

    def rows(self, groups: Iterable[tuple[str, list[Label]]]) -> Iterator[tuple[str, list[Label]]]:
        for row_id, labels in groups:
            kept = self._row(labels)
            if kept:
                yield row_id, kept

    def _row(self, labels: list[Label]) -> list[Label]:
        """One row's labels that hold under the calibrated pins. A label left out is counted
        unless the same reviewer judged the same thing again under the current pins."""
        checked: list[tuple[Label | None, str | None, bool]] = []
        for label in labels:
            label = self.lookup.pinned(label)
            if self.include_changed:
                checked.append((label, None, False))
            else:
                checked.append(unpinned(label, self.pins))
        again: set[tuple[str, str | None]] = {
            (k.reviewer, k.requirement_id) for k, _, _ in checked if k and k.requirement_id
        }
        again |= {(k.reviewer, None) for k, _, _ in checked if k and k.row_hash}
        kept = []
        for label, (found, requirement, row) in zip(labels, checked, strict=True):
            if requirement is not None and (label.reviewer, requirement) not in again:
                self.left_out.requirements[requirement] += 1
            if row and (label.reviewer, None) not in again:
                self.left_out.rows += 1
            if found is not None:
                kept.append(found)
                self.count += 1
                self.reviewers.add(found.reviewer)
                self.digest.update((found.label_id or found.content_id()).encode() + b"\n")
        return kept


@dataclass(frozen=True)
class _Labelled:
    """A labelled row: the judge's view, sample 1's view (the judge's when not sampled) and
    the row's labels."""

    judge: RowView | None
    first: RowView | None
    labels: list[Label]


def _merge(
    results: Iterator[RowResult],
    groups: Iterator[tuple[str, list[Label]]],
    tally: CalibrationTally,
) -> Iterator[_Labelled]:
    """Both streams in rowId order: every judged row is observed; each labelled row of the task
    comes out with the judge's view (``None``: no verdict) and its labels."""
    pending = next(groups, None)
    for result in results:
        judge = view_of_result(result)
        if judge is not None:
            tally.observe(judge)
        while pending is not None and pending[0] < result.row_id:
            pending = next(groups, None)  # labels of a row this task does not have
        if pending is not None and pending[0] == result.row_id:
            yield _Labelled(judge, first_sample_view(result, judge), pending[1])
            pending = next(groups, None)


def feed(
    store: TaskStore,
    record: TaskRecord,
    rubric: EvalRubric,
    groups: Iterator[tuple[str, list[Label]]],
    tally: CalibrationTally,
    order: Sequence[str],
    first: CalibrationTally | None = None,
) -> int:
    """Feed ``tally`` (and ``first``, with sample 1 as the judge of each sampled row).

    Returns:
        How many labelled rows had a sample 1 of their own (sampled and not a judge error).
    """
    batch: list[_Labelled] = []
    sampled = 0

    def flush() -> None:
        nonlocal sampled
        texts = store.dialogues(record.id, [item.labels[0].row_id for item in batch])
        for item in batch:
            row_id = item.labels[0].row_id
            chars = answer_chars(texts[row_id]) if row_id in texts else None
            unit = unit_of_labels(row_id, item.labels, item.judge, rubric, order, chars)
            tally.add(unit)
            if first is not None:
                first.add(replace(unit, judge=item.first))
                sampled += item.first is not item.judge
        batch.clear()

    for item in _merge(store.results_by_row_id(record.id), groups, tally):
        batch.append(item)
        if len(batch) >= _BATCH:
            flush()
    if batch:
        flush()
    return sampled
