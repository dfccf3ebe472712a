"""Budgets of a task shared by workers (docs/stores.md): ``--max-calls`` / ``--max-cost`` per task.

The rule is the pipeline's (:class:`rubric_engine.engine.pipeline.Budget`), applied across every
worker
through the store: a row may be claimed only while the calls already made by all workers plus
one per row claimed and not yet stored (under a live lease) stay within ``max_calls``; likewise
the cost, at the mean cost per call so far, and a cost budget starts with one probe row. Claims
of one task are serialized while the allowance is computed (an advisory lock in the claim's
transaction), so two workers never both take the last calls. Re-asks and retries of rows already
claimed may go past the budget; they are counted, never cut off — as in a single run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

_NOW = "extract(epoch from clock_timestamp())"


@dataclass(frozen=True)
class TaskBudget:
    max_calls: int | None = None
    max_cost_usd: float | None = None

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> TaskBudget | None:
        """The budget ``queue_task`` recorded in the task's ``extra.budget``, if any."""
        found = extra.get("budget")
        if not found:
            return None
        return cls(found.get("maxCalls"), found.get("maxCostUsd"))

    def to_extra(self) -> dict[str, Any]:
        return {"maxCalls": self.max_calls, "maxCostUsd": self.max_cost_usd}


@dataclass(frozen=True)
class Spend:
    calls: int
    cost_usd: float
    outstanding: int  #: rows claimed under a live lease and not stored yet


def spend(conn: Any, task_id: str) -> Spend:
    """What all workers have spent on the task so far (psycopg connection, inside the caller's
    transaction).

    One statement, so one snapshot: a row a worker stores meanwhile moves from "claimed" to
    "stored" atomically, and two separate reads could count it in neither.
    """
    calls, cost, outstanding = conn.execute(
        "SELECT (SELECT COALESCE(SUM(calls), 0) FROM rows WHERE task_id = %s), "
        "(SELECT COALESCE(SUM(cost_usd), 0) FROM rows WHERE task_id = %s), "
        "(SELECT COUNT(*) FROM work_items WHERE task_id = %s AND state = 'CLAIMED' "
        f"AND lease_until >= {_NOW})",
        (task_id, task_id, task_id),
    ).fetchone()
    return Spend(int(calls), float(cost), int(outstanding))


def allowance(budget: TaskBudget, spent: Spend, wanted: int) -> tuple[int, str | None]:
    """How many rows may be claimed now (0..wanted), and which limit is used up (``"calls"``,
    ``"cost"``) when none may and none ever will (``None``: within budget, or waiting for the
    cost probe row)."""
    allowed = wanted
    if budget.max_calls is not None:
        room = budget.max_calls - spent.calls - spent.outstanding
        if room <= 0:
            return 0, "calls" if spent.outstanding == 0 else None
        allowed = min(allowed, room)
    if budget.max_cost_usd is not None:
        if spent.calls == 0:  # no price per call yet: one probe row first
            return (min(allowed, 1), None) if spent.outstanding == 0 else (0, None)
        per_call = spent.cost_usd / spent.calls
        room = (
            math.floor((budget.max_cost_usd - spent.cost_usd) / per_call) - spent.outstanding
            if per_call > 0
            else allowed
        )
        if room <= 0:
            return 0, "cost" if spent.outstanding == 0 else None
        allowed = min(allowed, room)
    return allowed, None


def stop_reason(budget: TaskBudget, spent: Spend, limit: str) -> str:
    """The same words as a single run's :attr:`rubric_engine.engine.pipeline.Budget.stop_reason`."""
    if limit == "calls":
        return f"--max-calls {budget.max_calls} reached ({spent.calls} call(s) made)"
    return (
        f"--max-cost {budget.max_cost_usd:g} USD reached ({spent.cost_usd:.4f} USD spent in "
        f"{spent.calls} call(s))"
    )
