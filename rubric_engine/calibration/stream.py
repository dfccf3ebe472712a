"""A task's rows and its labels in two passes over the store (the edge of :mod:`.run`):
every row's result in input order (the order rows are stored in) for the judge's observed
rates; then the current labels on the task's rows in rowId order, each page of labelled rows'
results and dialogues looked up by rowId. A task with labels on a tenth of its rows reads that
tenth again, not every row in rowId order (a page at a random place per row). Each label's
pins are checked against the calibrated rubric on the way (docs/calibration.md "Labels pinned
to what they judged"), and its dialogue against the task's row's, read with it; every judged
row is observed and every labelled row fed to a :class:`~.tally.CalibrationTally` with its
answer length.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rubric_engine.calibration.leniency import answer_chars
from rubric_engine.calibration.sample_one import first_sample_view
from rubric_engine.calibration.tally import CalibrationTally
from rubric_engine.calibration.views import unit_of_labels, view_of_result
from rubric_engine.labels.model import Label
from rubric_engine.labels.pins import RubricPins, dialogue_pin, unpinned
from rubric_engine.labels.store import PinsByHash
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.task_store import TaskRecord, TaskStore

__all__ = ["LabelSelection", "LeftOut", "feed"]

#: labelled rows whose dialogues are read in one query (answer lengths)
_BATCH = 500


@dataclass
class LeftOut:
    """Labels left out because what they judged changed since (their pins differ), and, apart
    from those (not in :meth:`summary`), labels made on another dialogue than the task's row
    of their rowId."""

    requirements: Counter[str]
    rows: int = 0
    other_dialogue: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "labels": sum(self.requirements.values()) + self.rows,
            "requirements": dict(sorted(self.requirements.items())),
            "rowLabels": self.rows,
        }


class LabelSelection:
    """The labels used, one row at a time: dialogue and pins checked, counted and hashed on
    the way."""

    def __init__(self, pins: RubricPins, lookup: PinsByHash, include_changed: bool) -> None:
        self.pins, self.lookup, self.include_changed = pins, lookup, include_changed
        self.left_out = LeftOut(Counter())
        #: labels used that name no dialogue (stored before dialogues were pinned, or
        #: imported without a task): they apply to every task's row of their rowId
        self.no_dialogue = 0
        self.count = 0
        self.reviewers: set[str] = set()
        self.digest = hashlib.sha256()

    def row(self, labels: list[Label], dialogue: Any) -> list[Label]:
        """One row's labels that apply to the task's row, whose stored dialogue is
        ``dialogue``: made on it (or naming no dialogue) and holding under the calibrated pins.
        A label made on another dialogue is counted in ``left_out.other_dialogue`` unless the
        same reviewer labelled the same requirement (or the row) again on this one."""
        seen = dialogue_pin(dialogue)
        here = [lab for lab in labels if lab.dialogue_hash in (None, seen)]
        again = {(lab.reviewer, lab.requirement_id) for lab in here}
        self.left_out.other_dialogue += sum(
            1
            for lab in labels
            if lab.dialogue_hash not in (None, seen)
            and (lab.reviewer, lab.requirement_id) not in again
        )
        return self._pinned(here)

    def _pinned(self, labels: list[Label]) -> list[Label]:
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
                self.no_dialogue += found.dialogue_hash is None
        return kept


def feed(
    store: TaskStore,
    record: TaskRecord,
    rubric: EvalRubric,
    groups: Iterable[tuple[str, list[Label]]],
    tally: CalibrationTally,
    order: Sequence[str],
    selected: LabelSelection,
    first: CalibrationTally | None = None,
) -> int:
    """Feed ``tally`` (and ``first``, with sample 1 as the judge of each sampled row): every
    judged row observed, then each labelled row in the order of ``groups`` (labels on rows of
    the task only) with the labels ``selected`` keeps of it (:meth:`LabelSelection.row`).

    Returns:
        How many labelled rows had a sample 1 of their own (sampled and not a judge error).
    """
    for result in store.results(record.id):
        judge = view_of_result(result)
        if judge is not None:
            tally.observe(judge)
    batch: list[tuple[str, list[Label]]] = []
    sampled = 0

    def flush() -> None:
        nonlocal sampled
        found = store.results_and_dialogues(record.id, [row_id for row_id, _ in batch])
        for row_id, labels in batch:
            result, dialogue = found[row_id]
            kept = selected.row(labels, dialogue)
            if not kept:
                continue
            judge = view_of_result(result)
            unit = unit_of_labels(row_id, kept, judge, rubric, order, answer_chars(dialogue))
            tally.add(unit)
            if first is not None:
                one = first_sample_view(result, judge)
                first.add(replace(unit, judge=one))
                sampled += one is not judge
        batch.clear()

    for group in groups:
        batch.append(group)
        if len(batch) >= _BATCH:
            flush()
    if batch:
        flush()
    return sampled
