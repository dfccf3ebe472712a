"""Commit finished rows on a clock, independent of later rows finishing (docs/judges.md).

:meth:`rubric_engine.store.task_store.TaskStore.add_row` commits every N rows, or when a row
arrives more
than ``COMMIT_INTERVAL_S`` after the last commit. That alone leaves the last rows before a
quiet spell uncommitted: while the remaining calls are slow (a slow provider, long re-asks, a
batch being polled) nothing arrives to trigger the commit, and a SIGKILL loses rows that were
answered and paid for. :func:`committing` adds the clock: while its block runs, pending rows
are committed at least every ``interval_s`` seconds.

Any loop that stores rows as they finish (the live/replay pipeline, batch mode's result
collector) wraps its work in ``async with committing(store):``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from rubric_engine.store.task_store import COMMIT_INTERVAL_S


class Committable(Protocol):
    """What the clock needs of a store: a commit that is cheap when nothing is pending."""

    def commit(self) -> None: ...


async def _tick(store: Committable, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        store.commit()


@contextlib.asynccontextmanager
async def committing(
    store: Committable, interval_s: float = COMMIT_INTERVAL_S
) -> AsyncIterator[None]:
    """Commit ``store`` every ``interval_s`` seconds (> 0) while the block runs, and once at
    its end, however it ends (an exception, a cancellation).

    The commits run on the caller's event loop, in the thread that owns the store's
    connection (SQLite connections stay on one thread). A row stored at time t is therefore
    durable by t + ``interval_s`` (plus the time of one row's processing), whatever else is
    in flight.
    """
    ticker = asyncio.get_running_loop().create_task(_tick(store, interval_s))
    try:
        yield
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        store.commit()
