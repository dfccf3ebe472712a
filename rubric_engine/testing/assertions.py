"""``assert_rubric``: gate thresholds as a test assertion (pytest, or any test runner).

The thresholds are the gate's (``METRIC OP NUMBER``, :mod:`rubric_engine.report.metrics`),
checked on exact figures as ``rubric-eval gate`` checks them. Rows are scored in **replay** by
default, so the test runs offline in CI from the cassettes; ``mode=``, ``RUBRIC_EVAL_TEST_MODE``
(or the pytest plugin's ``--rubric-mode``) switches to ``record`` or ``live``, and ``model=`` /
``api_base=`` (``RUBRIC_EVAL_TEST_MODEL`` / ``RUBRIC_EVAL_TEST_API_BASE``, ``--rubric-model`` /
``--rubric-api-base``) choose the judge those modes call. A failure raises
``AssertionError`` naming each failing threshold with its figure, then the least-followed
requirements and the failing rows with what they violated.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rubric_engine.report.model import Report

if TYPE_CHECKING:
    from rubric_engine.engine.options import Mode

#: the environment variable that picks the judge mode of ``assert_rubric`` (default replay)
MODE_ENV = "RUBRIC_EVAL_TEST_MODE"
#: the judge model of ``assert_rubric`` when none is passed (default: the engine's)
MODEL_ENV = "RUBRIC_EVAL_TEST_MODEL"
#: the judge's OpenAI-compatible base URL of ``assert_rubric`` when none is passed
API_BASE_ENV = "RUBRIC_EVAL_TEST_API_BASE"


@dataclass(frozen=True)
class _Judge:
    """Which judge ``assert_rubric`` scores with: argument, else environment, else default."""

    mode: str | None = None
    model: str | None = None
    api_base: str | None = None

    def options(self) -> dict[str, Any]:
        from rubric_engine.engine.options import DEFAULTS

        mode = self.mode or os.environ.get(MODE_ENV) or DEFAULTS.mode
        return {
            "mode": cast("Mode", mode),
            "model": self.model or os.environ.get(MODEL_ENV) or DEFAULTS.model,
            "api_base": self.api_base or os.environ.get(API_BASE_ENV) or None,
        }


def _score(
    source: str | Path | Sequence[Mapping[str, Any]],
    rubric: str | Path,
    cassettes: Path,
    store: Path | None,
    pass_score: int | None,
    by: tuple[str, ...],
    judge: _Judge,
) -> Report:
    from rubric_engine.engine import ScoreOptions, score
    from rubric_engine.report.run import _load
    from rubric_engine.report.stored import report_from_task

    draft = Path(rubric).is_file()
    with tempfile.TemporaryDirectory(prefix="rubric-eval-test-") as tmp:
        where = store or Path(tmp) / "store.sqlite"
        files = [Path(source)] if isinstance(source, str | Path) else []
        rows = None if files else list(cast(Sequence[Mapping[str, Any]], source))
        options = ScoreOptions(
            inputs=files, rows=rows, rubric=rubric, draft=draft, store=where,
            out=Path(tmp) / "report", cassettes=cassettes, **judge.options(),
        )  # fmt: skip
        task_id = score(options).task_id
        return report_from_task(_load(where, task_id), pass_score=pass_score, by=by, exact=True)


def assert_rubric(
    source: Report | str | Path | Sequence[Mapping[str, Any]],
    thresholds: Sequence[str],
    *,
    rubric: str | Path = "",
    cassettes: str | Path = "cassettes",
    store: Path | None = None,
    pass_score: int | None = None,
    allow_unjudged: bool = False,
    mode: str | None = None,
    model: str | None = None,
    api_base: str | None = None,
) -> Report:
    """Check gate thresholds on a report, or on rows scored now.

    A row the judge did not answer (``JUDGE_ERROR``: a cassette miss, a transport failure)
    fails the assertion, whatever the thresholds say: a threshold on the rows that were judged
    would pass a test that judged nothing. ``allow_unjudged=True`` checks the thresholds
    alone.

    Args:
        source: a :class:`Report` (e.g. from :func:`rubric_engine.read_report`), a dialogue
            file, or rows (mappings in any row shape a file may hold).
        thresholds: ``METRIC OP NUMBER`` texts, e.g. ``"passRate>=0.9"``.
        rubric: for rows: a pack file (scored as a draft) or a published ``KEY[@N]`` in
            ``store``.
        cassettes: the replay folder.
        store: a task store to keep the task in (default: a temporary one, deleted after).
        allow_unjudged: do not fail on JUDGE_ERROR rows.
        mode: ``replay`` (default), ``record`` or ``live``; default ``$RUBRIC_EVAL_TEST_MODE``.
        model: the judge's litellm model name; default ``$RUBRIC_EVAL_TEST_MODEL``, else the
            engine's default model (the one the demo cassettes are keyed by).
        api_base: an OpenAI-compatible base URL for ``live``/``record``; default
            ``$RUBRIC_EVAL_TEST_API_BASE``.

    Returns:
        The report the thresholds were checked on.

    Raises:
        AssertionError: a threshold fails; the message lists every failing one with its
            figure, the least-followed requirements and up to 5 failing rows.
        ConfigurationError: an unknown metric or parameter (the valid ones listed), or what
            ``score`` refuses.
    """
    from rubric_engine.report.gate import (
        check_parameters,
        check_threshold,
        parse_threshold,
        slice_fields,
    )

    parsed = [parse_threshold(t) for t in thresholds]
    if isinstance(source, Report):
        report = source
    else:
        judge = _Judge(mode, model, api_base)
        report = _score(
            source, rubric, Path(cassettes), store, pass_score, slice_fields(parsed), judge
        )
    check_parameters(parsed, report)
    failed = [c.message for c in (check_threshold(t, report) for t in parsed) if not c.passed]
    if report.totals.judge_errors and not allow_unjudged:
        failed.insert(0, unjudged_message(report))
    if failed:
        raise AssertionError(failure_message(report, failed))
    return report


def unjudged_message(report: Report) -> str:
    """The failure line for rows the judge never answered, naming the first few."""
    errors = report.judge_errors
    named = "; ".join(f"{e.row_id} {e.kind}: {(e.message or '')[:200]}" for e in errors[:3])
    more = f" and {len(errors) - 3} more" if len(errors) > 3 else ""
    return (
        f"{report.totals.judge_errors} of {report.totals.rows} row(s) were not judged "
        f"(JUDGE_ERROR): {named}{more}. Record them (--rubric-mode record) or pass "
        "allow_unjudged=True"
    )


def failure_message(report: Report, failed: Sequence[str]) -> str:
    """The assertion text: failing thresholds, least-followed requirements, failing rows."""
    lines = [f"rubric thresholds failed on task {report.task.id} ({report.totals.rows} rows):"]
    lines += [f"  ✗ {m}" for m in failed]
    weak = sorted(
        (r for r in report.requirements if r.compliance is not None and r.compliance < 1),
        key=lambda r: r.compliance or 0.0,
    )[:5]
    if weak:
        lines.append("least-followed requirements:")
        lines += [
            f"  {r.id}: compliance {r.compliance:.2f} ({r.violated} violated, {r.partial} "
            f"partial){' RED LINE' if r.critical else ''}"
            for r in weak
        ]
    low = report.lowest_rows[:5]
    if low:
        lines.append("lowest rows:")
        for r in low:
            violated = ", ".join(r.violated_requirement_ids) or "none"
            flags = f"; red flags {', '.join(r.red_flag_types)}" if r.red_flag_types else ""
            lines.append(f"  {r.row_id}: score {r.final_score}, violated {violated}{flags}")
    return "\n".join(lines)
