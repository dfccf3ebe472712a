"""Adaptive concurrency for live judge calls: shrink on HTTP 429, grow back on success (AIMD).

``--concurrency C`` is the ceiling. Every provider attempt holds a slot for the length of the
HTTP call (not while it sleeps before a retry). A 429 halves the limit — once per window:
requests that were already in flight when the limit last shrank do not shrink it again, so one
burst of 429s counts as one signal. Each success adds ``1 / limit``, i.e. about one slot per
round of successful calls, until the ceiling is reached again (the TCP congestion-control rule).

A ``Retry-After`` hint is about the client, not the one request that carried it: after
:meth:`AdaptiveLimit.hold_off` no attempt of any row starts until the hint has passed, so a
provider enforcing it never sees an early request from the rows that were not told.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Ticket:
    """Handed to the holder of a slot; ``window`` is the shrink count when the call started."""

    window: int


class AdaptiveLimit:
    """An async semaphore whose size follows the provider's rate limiting.

    Args:
        maximum: the ceiling (``--concurrency``), at least 1.
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = max(1, maximum)
        self.limit = float(self.maximum)
        self.lowest = self.maximum
        self.rate_limited = 0
        self.in_flight = 0
        self._window = 0
        self._changed: asyncio.Condition | None = None
        #: event-loop time before which no attempt starts (a Retry-After hint)
        self._resume_at = 0.0

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:  # made on first use, inside the running event loop
            self._changed = asyncio.Condition()
        return self._changed

    def hold_off(self, seconds: float) -> None:
        """Start no attempt for ``seconds`` (>= 0) from now; a later end wins over an earlier."""
        loop = asyncio.get_running_loop()
        self._resume_at = max(self._resume_at, loop.time() + max(0.0, seconds))

    async def _wait_hold_off(self) -> None:
        loop = asyncio.get_running_loop()
        while (remaining := self._resume_at - loop.time()) > 0:
            await asyncio.sleep(remaining)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Ticket]:
        await self._wait_hold_off()
        changed = self._condition()
        async with changed:
            await changed.wait_for(lambda: self.in_flight < int(self.limit))
            self.in_flight += 1
            ticket = Ticket(self._window)
        try:
            yield ticket
        finally:
            async with changed:
                self.in_flight -= 1
                changed.notify_all()

    def on_rate_limited(self, ticket: Ticket) -> None:
        """A 429 answered the call that holds ``ticket``."""
        self.rate_limited += 1
        if ticket.window == self._window:
            self.limit = max(1.0, self.limit / 2)
            self.lowest = min(self.lowest, int(self.limit))
            self._window += 1

    async def on_success(self) -> None:
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1 / self.limit)
            changed = self._condition()
            async with changed:
                changed.notify_all()

    def stats(self) -> dict[str, Any]:
        """For the task record: ceiling, lowest and final limit, and the 429s seen."""
        return {
            "max": self.maximum,
            "lowest": self.lowest,
            "final": int(self.limit),
            "rateLimited": self.rate_limited,
        }
