"""Shared set-up of the serve tests: a demo store scored the way README's first block does it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.labels.model import LabelStatus
from rubric_engine.report.stored import load_task
from rubric_engine.results.model import RowResult
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS

WORSE = ROOT / "cassettes-worse"


def publish(store: Path, pack: str) -> None:
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    result = CliRunner().invoke(
        app, ["rubric", "publish", str(RUBRICS / pack), "--store", str(store)]
    )
    assert result.exit_code == 0, result.output


def score_demo(
    store: Path, cases: str, rubric: str, out: Path, *, cassettes: Path = CASSETTES, **extra: Any
) -> str:
    result = score(
        ScoreOptions(
            inputs=[CASES / cases],
            rubric=rubric,
            store=store,
            out=out,
            cassettes=cassettes,
            **extra,
        )
    )
    assert not result.cassette_misses
    return result.task_id


def copy_store(source: Path, target_dir: Path) -> Path:
    target = target_dir / "store.sqlite"
    shutil.copyfile(source, target)
    return target


def red_line_row(store: Path, task_id: str) -> tuple[RowResult, EvalRubric, str]:
    """The first row whose judge verdict violates a red line, the rubric and that requirement."""
    with TaskStore(store) as opened:
        task = load_task(opened, task_id)
    for row in task.rows:
        for entry in row.result.reference_basis:
            req = task.rubric.requirements_by_id.get(entry.requirement_id)
            if req is not None and req.critical and str(entry.status) == "VIOLATED":
                return row.result, task.rubric, entry.requirement_id
    raise AssertionError("the demo has no red-line violation")


def confirm_form(result: RowResult, **changes: Any) -> dict[str, Any]:
    """The review form as it is pre-filled with the judge's verdict (a plain confirmation)."""
    form: dict[str, Any] = {
        "blind": "0",
        "strategy": "random",
        "intent": result.intent_key,
        "score": str(result.final_score),
        "flag": list(result.red_flag_types),
        "reason": "",
    }
    for entry in result.reference_basis:
        form[f"status.{entry.requirement_id}"] = str(entry.status)
    form.update(changes)
    return form


def override_red_line(
    result: RowResult, rubric: EvalRubric, requirement_id: str, reason: str | None
) -> dict[str, Any]:
    """The form with one red line turned FOLLOWED (its flag dropped when no other red line of
    that type stays VIOLATED), the score raised to the top of the scale."""
    req = rubric.requirements_by_id[requirement_id]
    form = confirm_form(result, **{f"status.{requirement_id}": str(LabelStatus.FOLLOWED)})
    still = any(
        rubric.requirements_by_id[e.requirement_id].red_flag_type == req.red_flag_type
        for e in result.reference_basis
        if e.requirement_id != requirement_id
        and str(e.status) == "VIOLATED"
        and e.requirement_id in rubric.requirements_by_id
        and rubric.requirements_by_id[e.requirement_id].critical
    )
    if not still:
        form["flag"] = [f for f in form["flag"] if f != req.red_flag_type]
    form["score"] = str(rubric.score_scale.max)
    form["reason"] = reason or ""
    return form
