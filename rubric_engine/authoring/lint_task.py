"""``rubric validate --lint --task TASK``: the task's figures and label disagreement for
:mod:`rubric_engine.rubric.lint`, read from the store (docs/authoring.md "Lint")."""

from __future__ import annotations

from rubric_engine.errors import ConfigurationError, InputError
from rubric_engine.rubric.lint import LintFinding, RowFigures, lint_labels, lint_task
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.location import StoreLocation


def task_findings(
    rubric: EvalRubric, store: StoreLocation, task_ref: str
) -> tuple[list[LintFinding], str]:
    """The task lint of ``rubric`` over the task's scored rows, then the label-disagreement
    ranking when labels for the task's rows exist; and one line saying what was read.

    The pack need not be the task's version, but must be the same key: rules are matched by
    ID (a rule the task never judged has no figures).

    Raises:
        ConfigurationError: the task used another rubric key.
        TaskNotFoundError / StoreError: from the store.
    """
    from rubric_engine.calibration.run import calibrate_task
    from rubric_engine.report.run import require_store
    from rubric_engine.report.stored import stored_report_rows
    from rubric_engine.store.task_ref import resolve_in_store
    from rubric_engine.store.task_store import TaskStore

    require_store(store)
    with TaskStore(store) as opened:
        task_id = resolve_in_store(opened, task_ref)
        record = opened.task(task_id)
        if record.rubric_key != rubric.key:
            raise ConfigurationError(
                f"task {task_id} was scored with rubric {record.rubric_key!r}, not "
                f"{rubric.key!r}: lint a pack against a task of the same key"
            )
        figures = RowFigures()
        for row in stored_report_rows(opened, task_id):
            figures.add(row.result, rubric)
        found = lint_task(rubric, figures)
        said = (
            f"task {task_id} ({record.rubric_key}@{record.rubric_version}, "
            f"{figures.scored} scored rows)"
        )
        try:
            calibration = calibrate_task(opened, task_id, save=False)
        except InputError:  # no label for the task's rows: nothing to rank
            return found, said + "; no labels"
    disagreement = {
        entry["id"]: (int(entry["fp"]) + int(entry["fn"]), int(entry["n"]))
        for entry in calibration["requirements"]
    }
    labels = calibration["labels"]["count"]
    return found + lint_labels(rubric, disagreement), f"{said}; {labels} label(s)"
