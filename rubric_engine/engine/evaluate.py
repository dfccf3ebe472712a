"""Score rows and get every row's result back in memory: the call plug-ins build on.

:func:`score` stores a task and writes report files; a harness that asks "what did the judge
say about *these* samples" (an Inspect scorer, a DeepEval metric, a promptfoo assertion, a
test) wants the row results themselves, in the order it gave the rows, and usually no task in
the team's store. :func:`evaluate_async` is that call: one engine run over all the rows (the
same preflight, judge, normalization and report as ``score``), then the stored rows read back
in input order.

By default the run happens in a temporary folder (a throwaway SQLite store and report folder,
deleted afterwards): a published ``KEY[@N]`` rubric is read from ``options.store`` and copied
into the temporary store with its snapshot, so the task records the same rubric version and
hash a stored run would. ``keep_task=True`` scores into ``options.store`` as ``score`` does.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from rubric_engine.engine.options import ScoreOptions, check_options
from rubric_engine.engine.run import score_async
from rubric_engine.errors import ConfigurationError
from rubric_engine.report.model import Report
from rubric_engine.results.model import RowResult
from rubric_engine.store.location import StoreLocation


@dataclass(frozen=True, repr=False)
class Evaluation:
    """What :func:`evaluate` returns.

    Attributes:
        task_id: the task's id (in ``store``, or in the deleted temporary store).
        rows: one result per input row, in input order (a JUDGE_ERROR row is a result too:
            its scores are ``None`` and ``error`` says why).
        report: the task's report (``report.json``'s content).
        store: where the task is kept, or ``None`` when it was scored in a temporary store.
    """

    task_id: str
    rows: tuple[RowResult, ...]
    report: Report
    store: StoreLocation | None

    def __repr__(self) -> str:
        return f"Evaluation(task_id={self.task_id!r}, rows={len(self.rows)}, store={self.store!r})"


def evaluate(options: ScoreOptions, *, keep_task: bool = False) -> Evaluation:
    """:func:`evaluate_async` on a new event loop (refused inside a running one, as
    :func:`~rubric_engine.engine.run.score` refuses).

    Raises:
        ConfigurationError: called while an event loop runs in this thread; and every error of
            :func:`evaluate_async`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(evaluate_async(options, keep_task=keep_task))
    raise ConfigurationError(
        "evaluate() was called inside a running event loop; use `await evaluate_async(options)`"
    )


async def evaluate_async(options: ScoreOptions, *, keep_task: bool = False) -> Evaluation:
    """Score ``options``' rows in one run and return each row's result.

    Args:
        options: as for ``score`` (rows in memory in ``options.rows``, or input files); not
            ``resume``. With ``keep_task=False``, ``options.store`` is only read (for a
            published rubric) and ``options.out`` is ignored.
        keep_task: score into ``options.store`` and write the report files to
            ``options.out`` (default ``reports/<task id>``), as ``score`` does.

    Returns:
        The task id, the row results in input order and the report.

    Raises:
        ConfigurationError: ``options.resume`` is set; and every error of
            :func:`~rubric_engine.engine.run.score_async` (bad input, a cassette file, the
            judge unreachable …). Per-row judge failures are JUDGE_ERROR results, not errors.
    """
    if options.resume is not None:
        raise ConfigurationError("evaluate() scores rows; finish a stored task with score()")
    check_options(options)
    if keep_task:
        result = await score_async(options)
        return Evaluation(
            result.task_id, _stored_results(options.store, result.task_id), result.report,
            options.store,
        )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rubric-eval-") as folder:
        store = Path(folder) / "store.sqlite"
        rubric = options.rubric
        if rubric and not options.draft:
            rubric = _copy_published(str(rubric), options.store, store)
        temporary = replace(options, store=store, out=Path(folder) / "report", rubric=rubric)
        result = await score_async(temporary)
        rows = _stored_results(store, result.task_id)
        return Evaluation(result.task_id, rows, result.report, None)


def _copy_published(ref: str, source: StoreLocation, target: Path) -> str:
    """Publish the rubric version ``ref`` names in ``source`` into the new store ``target``;
    returns the exact ``KEY@N`` to score with (the same snapshot and hash)."""
    from rubric_engine.rubric.versions import RubricRegistry, rubric_for_scoring
    from rubric_engine.store.task_store import TaskStore

    rubric = rubric_for_scoring(ref, source, draft=False)
    with TaskStore(target) as store:
        RubricRegistry(store).publish(Path(f"{rubric.key}.yaml"), rubric)
    return f"{rubric.key}@{rubric.version}"


def _stored_results(store_location: StoreLocation, task_id: str) -> tuple[RowResult, ...]:
    from rubric_engine.store.task_store import TaskStore

    with TaskStore(store_location) as store:
        return tuple(row.result for row in store.rows(task_id))
