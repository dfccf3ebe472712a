"""The three ways to calibrate, wiring the store, label files and the counting
(docs/calibration.md "Calibrate"): a task's judge against labels, two label files, or two tasks
over the same rows.

A task is calibrated as a stream (:mod:`.stream`): every row's result in input order for the
judge's observed rates, then its labelled rows in rowId order, one row's labels and result at a
time (both read from the store a page at a time), into a :class:`~.tally.CalibrationTally`.
Memory holds counters and a page, so a task of a million rows with a hundred thousand labels
calibrates in the memory of a small one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from rubric_engine.calibration.alt_fields import AltTestOptions
from rubric_engine.calibration.binary import ratio
from rubric_engine.calibration.compare import calibrate_views
from rubric_engine.calibration.metrics import flat_metrics
from rubric_engine.calibration.record import default_selection, save_calibration
from rubric_engine.calibration.sample_one import side_by_side
from rubric_engine.calibration.stream import LabelSelection, LeftOut, feed
from rubric_engine.calibration.tally import CalibrationTally
from rubric_engine.calibration.views import (
    RowView,
    by_reviewer,
    view_of_labels,
    view_of_result,
)
from rubric_engine.engine.task import samples_of
from rubric_engine.errors import InputError
from rubric_engine.labels.io import read_against_task, read_label_file, unknown_fields
from rubric_engine.labels.model import Label, LabelSource
from rubric_engine.labels.pins import rubric_pins
from rubric_engine.labels.store import PinsByHash, current_labels_by_row, reviewer_order
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.task_store import TaskRecord, TaskStore

__all__ = ["calibrate_files", "calibrate_task", "compare_tasks", "judge_comparison"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _task(store: TaskStore, task_id: str) -> tuple[TaskRecord, EvalRubric]:
    from rubric_engine.rubric.versions import verified_snapshot
    from rubric_engine.store.task_ref import resolve_in_store

    record = store.task(resolve_in_store(store, task_id))
    where = f"task {record.id}"
    return record, verified_snapshot(record.rubric_snapshot, record.rubric_hash, where)


def calibrate_task(
    store: TaskStore,
    task_id: str,
    *,
    labels_file: Path | None = None,
    reviewers: tuple[str, ...] = (),
    include_changed: bool = False,
    half_width: float | None = None,
    seed: int = 0,
    save: bool = True,
    alt_test: AltTestOptions | None = None,
    rows: Collection[str] | None = None,
) -> dict[str, Any]:
    """A task's judge results against labels from a file (checked against the task, not
    stored) or from the store (current labels of the task's rubric key on the task's rows).

    The public entry for other views of agreement (the review app's agreement panel calls it
    with ``save=False`` and a queue's ``rows``).

    Store labels pinned to another content of their requirement (or, for row labels, of the
    intents, red flags, scale or caps) than this task's rubric are left out and counted by
    requirement, unless ``include_changed``.

    Args:
        reviewers: only these reviewers' labels, in this precedence (default: all).
        include_changed: also use labels whose pins differ from the task's rubric.
        save: store the calibration record (the gate reads the default selection's only).
        alt_test: the alternative annotator test's ε, q and minimum instances.
        rows: only these rows' labels (default: every row of the task); such a calibration is
            not the default selection.

    Returns:
        The calibration result plus ``pinnedTo`` (what it is pinned to), ``labels`` (the
        selection, how many were used and left out, a digest of their ids) and, when saved,
        ``calibrationId``.

    Raises:
        InputError: the file fails its checks, or no label applies to the task's rows.
        TaskNotFoundError / StoreError: from the store.
    """
    record, rubric = _task(store, task_id)
    pins = rubric_pins(rubric)
    lookup = PinsByHash(store.backend)
    lookup.add(record.rubric_key, record.rubric_hash, pins)
    selected = LabelSelection(pins, lookup, include_changed)
    order = [*reviewers, *reviewer_order(store.backend, record.rubric_key)]
    if labels_file is not None:
        from rubric_engine.report import load_task

        checked = read_against_task(labels_file, load_task(store, record.id), store.backend)
        chosen = [lab for lab in checked if not reviewers or lab.reviewer in reviewers]
        order = [*reviewers, *dict.fromkeys(lab.reviewer for lab in checked)]
        ordered = sorted(chosen, key=lambda lab: lab.row_id)
        groups: Iterable[tuple[str, list[Label]]] = (
            (row, list(labs)) for row, labs in groupby(ordered, key=lambda lab: lab.row_id)
        )
        source: Any = {"file": labels_file.name, "sha256": _sha256(labels_file)}
    else:
        groups = current_labels_by_row(
            store.backend, record.rubric_key, reviewers=reviewers, task_id=record.id
        )
        source = "store"
    if rows is not None:
        wanted = set(rows)
        groups = ((row, labs) for row, labs in groups if row in wanted)
    tally = CalibrationTally(rubric, half_width=half_width, seed=seed, alt_test=alt_test)
    # a sampled task: sample 1 alone against the same reviewers, beside the aggregate
    first = CalibrationTally(rubric, seed=seed) if samples_of(record.extra)[0] > 1 else None
    sampled = feed(
        store, record, rubric, groups, tally, list(dict.fromkeys(order)), selected, first
    )
    if not tally.labelled:
        others = [name for name in dict.fromkeys(order) if name not in reviewers]
        raise InputError(_no_labels(record.id, reviewers, selected.left_out, others))
    result = tally.result()
    if first is not None:
        result["sampling"] = side_by_side(result, first.result(), sampled)
    result["pinnedTo"] = {
        "taskId": record.id,
        "rubricKey": record.rubric_key,
        "rubricVersion": record.rubric_version,
        "rubricHash": record.rubric_hash,
        "promptVersion": record.prompt_version,
        "promptHash": record.prompt_hash,
        "model": record.model,
        "judgeParams": record.judge_params,
    }
    selection: dict[str, Any] = {"reviewers": list(reviewers) or "all", "labels": source,
                                 "includeChanged": include_changed}  # fmt: skip
    if rows is not None:
        selection["rows"] = len(set(rows))
    result["labels"] = {
        "selection": selection,
        "default": selection == default_selection(),
        "reviewers": sorted(selected.reviewers),
        "count": selected.count,
        "digest": "sha256:" + selected.digest.hexdigest(),
        "leftOut": selected.left_out.summary(),
        "otherDialogue": selected.left_out.other_dialogue,
        "noDialoguePin": selected.no_dialogue,
    }
    if save:
        result["calibrationId"] = save_calibration(
            store.backend, record, result, flat_metrics(result), result["labels"]
        )
    return result


def _no_labels(
    task_id: str, reviewers: Sequence[str], left_out: LeftOut, others: Sequence[str] = ()
) -> str:
    """Why no label applies, and the fix; ``others``: the reviewers whose labels there are
    (named when ``reviewers`` chose none of them)."""
    why = (
        f"; {left_out.summary()['labels']} label(s) were left out because what they judged "
        "changed since (pass --include-changed to use them)"
        if left_out.summary()["labels"]
        else ""
    )
    if left_out.other_dialogue:
        why += (
            f"; {left_out.other_dialogue} label(s) were left out because they were made on a "
            "different dialogue than this task's row of their rowId (label this task's rows)"
        )
    if reviewers and others:
        why += f"; reviewers with labels here: {', '.join(others)} (--reviewer takes their names)"
    return (
        f"no label for the rows of task {task_id}"
        + (f" by {', '.join(reviewers)}" if reviewers else "")
        + why
        + ": import some with `rubric-eval labels import FILE --task "
        + f"{task_id}`, or pass --labels FILE"
    )


def calibrate_files(
    judge_file: Path,
    labels_file: Path,
    *,
    half_width: float | None = None,
    seed: int = 0,
    alt_test: AltTestOptions | None = None,
) -> dict[str, Any]:
    """Two label files (the judge's and the reference's), no task and no rubric: red flags
    are compared only where both files state them. Every reviewer of the reference file
    (adjudications aside) is one annotator of the alternative annotator test.

    Raises:
        InputError: a file fails its checks, or the files share no row.
    """
    judge_labels: list[Label] = read_label_file(judge_file)
    ref_labels = read_label_file(labels_file)
    judge = view_of_labels(judge_labels)
    reference = view_of_labels(ref_labels)
    if not set(judge) & set(reference):
        raise InputError(
            f"{judge_file} and {labels_file} share no rowId; both must label the same rows "
            f"(e.g. {next(iter(judge))!r} vs {next(iter(reference))!r})"
        )
    decided = [lab for lab in ref_labels if lab.source is LabelSource.ADJUDICATION]
    result = calibrate_views(
        reference,
        judge,
        reviewers=by_reviewer(
            lab for lab in ref_labels if lab.source is not LabelSource.ADJUDICATION
        ),
        adjudicators=by_reviewer(decided),
        half_width=half_width,
        seed=seed,
        alt_test=alt_test,
    )
    result["labels"] = {
        side: {
            "file": path.name,
            "sha256": _sha256(path),
            "count": len(labs),
            "unknownFields": unknown_fields(labs),
        }
        for side, path, labs in (
            ("judge", judge_file, judge_labels),
            ("reference", labels_file, ref_labels),
        )
    }
    return result


def judge_comparison(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Judges side by side on the alternative annotator test: per field (and requirement and
    red-flag type) each judge's advantage probability ρ, winning rate ω and pass. ρ is the
    paper's measure for choosing between judges (higher is better).

    Args:
        results: judge name → its calibration result (each against the same reviewers).
    """
    rows: dict[str, dict[str, Any]] = {}
    for judge, result in results.items():
        alt = result.get("altTest") or {}
        for field in ("status", "intent", "redFlags", "score"):
            if field not in alt:
                continue
            tests = [(field, alt[field])]
            for sub in (*alt[field].get("requirements", ()), *alt[field].get("types", ())):
                tests.append((f"{field}:{sub.get('id') or sub.get('type')}", sub))
            for name, test in tests:
                rows.setdefault(name, {})[judge] = {
                    "advantageProbability": test["advantageProbability"],
                    "winningRate": test["winningRate"],
                    "passed": test["passed"],
                }
    best = {
        name: max(
            (j for j, v in by.items() if v["advantageProbability"] is not None),
            key=lambda j: by[j]["advantageProbability"],
            default=None,
        )
        for name, by in rows.items()
    }
    return {"judges": list(results), "tests": rows, "highestAdvantage": best}


def compare_tasks(store: TaskStore, task_a: str, task_b: str, *, seed: int = 0) -> dict[str, Any]:
    """Judge against judge over the same rows (two models, or repeated runs of one): the
    calibration of ``task_b`` against ``task_a`` plus ``flipRate`` = (FP + FN) / n, overall and
    per requirement, and the share of rows whose intent or final score differs.

    Raises:
        InputError: the tasks use different rubric keys or share no row.
    """
    from rubric_engine.report import load_task

    a, b = load_task(store, task_a), load_task(store, task_b)
    if a.record.rubric_key != b.record.rubric_key:
        raise InputError(
            f"tasks {task_a} and {task_b} use rubrics {a.record.rubric_key} and "
            f"{b.record.rubric_key}; judge-vs-judge needs the same rubric"
        )
    first, second = _judge_views(a), _judge_views(b)
    shared = sorted(set(first) & set(second))
    if not shared:
        raise InputError(f"tasks {task_a} and {task_b} share no scored row")
    result = calibrate_views(first, second, rubric=a.rubric, judge_all=second, seed=seed)
    for block in (result["overall"], *result["requirements"]):
        block["flipRate"] = ratio(block["fp"] + block["fn"], block["n"])
    result["rowFlips"] = {
        "rows": len(shared),
        "intent": sum(first[r].intent_key != second[r].intent_key for r in shared) / len(shared),
        "finalScore": sum(first[r].score != second[r].score for r in shared) / len(shared),
    }
    result["tasks"] = {"reference": task_a, "judge": task_b}
    return result


def _judge_views(task: Any) -> dict[str, RowView]:
    views = (view_of_result(row.result) for row in task.rows)
    return {v.row_id: v for v in views if v is not None}
