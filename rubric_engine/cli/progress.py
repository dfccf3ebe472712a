"""Progress of ``score`` when stdout is not a terminal (CI logs): plain lines, not a bar.

``--display plain`` (the default off a terminal) prints a line every ``every`` rows or every
``interval_s`` seconds, whichever comes first, and one at the end: rows done of planned, rate,
JUDGE_ERROR rows so far and the time left at that rate. ``--display rich`` is the bar;
``none`` prints nothing. An edge of the CLI: it reads the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

DISPLAYS = ("rich", "plain", "none")


@dataclass
class PlainProgress:
    """Counts rows and writes a line through ``echo`` when one is due."""

    echo: Callable[[str], None]
    interval_s: float = 5.0
    every: int = 0
    clock: Callable[[], float] = time.monotonic
    total: int = 0
    done: int = 0
    errors: int = 0
    _started: float = 0.0
    _last: float = 0.0
    _task: str = field(default="")

    def start(self, task_id: str, total: int) -> None:
        self._task, self.total = task_id, total
        self.every = self.every or max(25, total // 20)
        self._started = self._last = self.clock()
        self.echo(f"task {task_id}: scoring {total} row(s)")

    def row(self, judge_error: bool) -> None:
        self.done += 1
        self.errors += judge_error
        now = self.clock()
        if (
            self.done == self.total
            or self.done % self.every == 0
            or now - self._last >= self.interval_s
        ):
            self._last = now
            self.echo(self.line(now))

    def line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        eta = "done" if self.done >= self.total else f"ETA {left:.0f} s"
        return (
            f"task {self._task}: {self.done}/{self.total} rows{share}, {rate:.1f} rows/s, "
            f"{self.errors} JUDGE_ERROR, {eta}"
        )
