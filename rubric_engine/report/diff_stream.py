"""A diff of two stored tasks in bounded memory: the store edge of
:mod:`rubric_engine.report.diff` (docs/scale.md).

Each task's report is rebuilt a row at a time (:func:`~rubric_engine.report.stored.stream_report`),
then the two tasks' rows are read again in rowId order, a page at a time from each store, their
digests checked (:meth:`~rubric_engine.store.task_store.TaskStore.checked_rows`), and merged:
a rowId in both is compared, a rowId in one is a presence item. Each case item is counted,
written to the items file when one is asked for, and kept for the report only if it is among
the most important (:class:`~rubric_engine.report.diff_list.CaseItems`). Memory holds two
pages of rows and the kept items, whatever the tasks' size.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from rubric_engine.errors import StoreError
from rubric_engine.report.diff import DiffStart
from rubric_engine.report.diff_cases import Row
from rubric_engine.report.diff_list import MAX_ITEMS, CaseItems
from rubric_engine.report.model import Diff, DiffItem
from rubric_engine.report.rows import row_facts
from rubric_engine.report.stored import stream_report
from rubric_engine.store.task_store import TaskStore, decode_column, parse_result

#: one task's row in the merge: its seq and (result, facts)
Side = tuple[int, Row]


def stream_diff(
    base_store: TaskStore,
    baseline: str,
    cur_store: TaskStore,
    current: str,
    *,
    pass_score: int | None = None,
    max_items: int | None = MAX_ITEMS,
    items_file: Path | None = None,
) -> Diff:
    """The diff of task ``baseline`` (in ``base_store``) and task ``current`` (in
    ``cur_store``, which may be the same store), as
    :func:`~rubric_engine.report.diff.diff_tasks` makes it, with at most ``max_items`` case
    items listed (``None``: all).

    Args:
        items_file: where every item (aggregate, then case items in rowId order) is written
            as JSON Lines when the case items are more than ``max_items``; not written when
            every one is listed, or when ``None``.

    Raises:
        TaskNotFoundError / StoreError: as :func:`~rubric_engine.report.stored.load_task`;
            StoreError too when a store does not return rows in rowId order.
        ConfigurationError: the tasks share neither a rowId nor a requirement ID.
        OSError: ``items_file`` cannot be written.
    """
    base = stream_report(base_store, baseline, pass_score=pass_score, exact=True)
    cur = stream_report(cur_store, current, pass_score=pass_score, exact=True)
    start = DiffStart.of(base.report, base.rubric, cur.report, cur.rubric)
    temp = items_file.with_name(f".{items_file.name}.{os.getpid()}.tmp") if items_file else None
    try:
        with temp.open("w", encoding="utf-8") if temp else contextlib.nullcontext() as out:
            write = _line_writer(out) if out else None
            for item in start.aggregate if write else ():
                write(item)  # type: ignore[misc]
            case = CaseItems(max_items, write)
            samples = _compare(
                start, case, merged_rows(base_store, base.record.id, cur_store, cur.record.id)
            )
        if samples is not None:
            raise start.nothing_comparable(*samples)
        if temp and items_file and case.capped:
            os.replace(temp, items_file)
        else:
            items_file = None
    finally:
        if temp:
            temp.unlink(missing_ok=True)
    return start.finish(case, str(items_file) if items_file else None)


def _line_writer(out: IO[str]) -> Callable[[DiffItem], None]:
    """Writes an item as one JSON line to ``out``."""

    def write(item: DiffItem) -> None:
        out.write(json.dumps(item.to_json_dict(), ensure_ascii=False) + "\n")

    return write


def _compare(
    start: DiffStart, case: CaseItems, pairs: Iterator[tuple[Side | None, Side | None]]
) -> tuple[list[str], list[str]] | None:
    """Add each pair's items to ``case``; when the rubrics share no requirement and no rowId
    was in both tasks, a few rowIds of each (for the error), else ``None``."""
    shared_row = False
    samples: tuple[list[str], list[str]] = ([], [])
    for b, c in pairs:
        shared_row = shared_row or (b is not None and c is not None)
        for side, sample in zip((b, c), samples, strict=True):
            if side is not None and len(sample) < 4:
                sample.append(side[1][0].row_id)
        place = (0, c[0]) if c is not None else (1, b[0] if b is not None else 0)
        case.add(start.pair_items(b[1] if b else None, c[1] if c else None), place)
    return None if start.shared or shared_row else samples


def merged_rows(
    base_store: TaskStore, baseline: str, cur_store: TaskStore, current: str
) -> Iterator[tuple[Side | None, Side | None]]:
    """The rows of two tasks by rowId, in rowId order: ``(baseline row, current row)``, one of
    them ``None`` for a rowId only the other task has."""
    a, b = rows_by_id(base_store, baseline), rows_by_id(cur_store, current)
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x[1][0].row_id < y[1][0].row_id):
            yield x, None
            x = next(a, None)
        elif x is None or y[1][0].row_id < x[1][0].row_id:
            yield None, y
            y = next(b, None)
        else:
            yield x, y
            x, y = next(a, None), next(b, None)


def rows_by_id(store: TaskStore, task_id: str) -> Iterator[Side]:
    """``(seq, (result, facts))`` of each stored row of a task, in rowId order.

    Raises:
        StoreError: the store returned a rowId out of order (a merge would pair rows wrongly).
    """
    last = None
    for row, _ in store.checked_rows(task_id, by="row_id"):  # digests checked
        seq, row_id, result, dialogue = row[1], row[2], row[5], row[6]
        if last is not None and row_id <= last:
            raise StoreError(
                f"task {task_id}: the store returned row {row_id!r} after {last!r}; rows must "
                "come in rowId (code point) order to be compared. Copy the store into a new "
                "one (`rubric-eval store migrate`) and diff there"
            )
        last = row_id
        facts = row_facts(decode_column(dialogue, f"task {task_id} row {row_id!r} dialogue"))
        yield seq, (parse_result(result, task_id, row_id), facts)
