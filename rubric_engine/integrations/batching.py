"""Gather the rows a harness scores one at a time into one engine run.

Inspect calls a scorer once per sample and DeepEval a metric once per test case, many at a
time on one event loop; an engine run per row pays the run's fixed cost (checks, task, store,
report) every time — 8.31 s for the 26 demo rows against 0.54 s in one run. A :class:`Batcher`
holds each row until no new row has come for ``wait_s`` (or ``max_rows`` are waiting), then
scores them all with one :func:`~rubric_engine.engine.evaluate.evaluate_async` and gives each
caller its own result. A row whose ``rowId`` is already waiting starts the next batch (a task
holds each row id once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rubric_engine.engine.evaluate import Evaluation, evaluate_async
from rubric_engine.engine.options import ScoreOptions
from rubric_engine.results.model import RowResult


@dataclass(frozen=True)
class Scored:
    """One row's result and the run it was scored in."""

    result: RowResult
    evaluation: Evaluation


@dataclass
class _Pending:
    rows: list[Mapping[str, Any]] = field(default_factory=list)
    waiting: list[asyncio.Future[Scored]] = field(default_factory=list)


class Batcher:
    """Scores rows in batches with ``options`` (its ``rows`` are ignored).

    Args:
        options: the run's options: rubric, judge mode, cassettes, model …
        wait_s: how long a batch stays open after its latest row.
        max_rows: a batch is scored once this many rows wait.

    The batcher belongs to the event loop that first uses it.
    """

    def __init__(self, options: ScoreOptions, wait_s: float = 0.5, max_rows: int = 1000) -> None:
        self.options = options
        self.wait_s = wait_s
        self.max_rows = max_rows
        self.runs = 0
        self._pending = _Pending()
        self._timer: asyncio.TimerHandle | None = None

    async def score(self, row: Mapping[str, Any]) -> Scored:
        """The row's result, once its batch is scored.

        Raises:
            RubricEvalError: what :func:`evaluate_async` raises for the batch (every caller of
                that batch gets it).
        """
        if any(r.get("rowId") == row.get("rowId") for r in self._pending.rows):
            self._flush()
        loop = asyncio.get_running_loop()
        waiting: asyncio.Future[Scored] = loop.create_future()
        self._pending.rows.append(row)
        self._pending.waiting.append(waiting)
        if self._timer is not None:
            self._timer.cancel()
        if len(self._pending.rows) >= self.max_rows:
            self._flush()
        else:
            self._timer = loop.call_later(self.wait_s, self._flush)
        return await waiting

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, _Pending()
        if batch.rows:
            self.runs += 1
            asyncio.get_running_loop().create_task(self._run(batch))

    async def _run(self, batch: _Pending) -> None:
        try:
            evaluation = await evaluate_async(replace(self.options, rows=batch.rows))
        except BaseException as exc:
            for waiting in batch.waiting:
                if not waiting.done():
                    waiting.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for waiting, result in zip(batch.waiting, evaluation.rows, strict=True):
            if not waiting.done():
                waiting.set_result(Scored(result, evaluation))
