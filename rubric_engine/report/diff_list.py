"""The case items of a diff, collected as rows are compared: counted, and bounded.

A diff of two large tasks finds a case item for most changed rows, often several: listing
them all made a 100,000-row diff a 133 MB page. :class:`CaseItems` counts every item by type,
hands each one to ``on_item`` (the complete list, written as JSON Lines by the store edge,
docs/scale.md) and keeps at most ``cap`` of the most important for the report, in a bounded
heap. Most important first: regressions, then improvements, then changes; within a type a
row's status (JUDGE_ERROR, a missing row), then a pass lost or gained, a red flag, the final
score, a requirement's status, anything else; then the larger change; then the earlier row.
The kept items are listed in the current task's row order (then the baseline's rows the
current task lacks), as a diff that keeps every item lists them. Pure.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from itertools import count

from rubric_engine.report.model import DiffItem

#: case items a diff lists by default (the report keeps the most important; docs/scale.md)
MAX_ITEMS = 500
_TYPE_RANK = {"REGRESSION": 0, "IMPROVEMENT": 1, "CHANGED": 2}
_METRIC_RANK = {"status": 0, "presence": 0, "passed": 1, "finalScore": 3}
#: (group, seq): group 0 for a row of the current task (its seq there), 1 for a row only in
#: the baseline (its seq there)
Place = tuple[int, int]


def importance(item: DiffItem) -> tuple[int, int, float]:
    """Smaller is more important: (type, metric, minus the size of the change)."""
    metric = item.metric
    if metric.startswith("redFlags."):
        rank = 2
    elif metric.startswith("requirements."):
        rank = 4
    else:
        rank = _METRIC_RANK.get(metric, 5)
    size = abs(item.delta) if isinstance(item.delta, int | float) else 0
    return _TYPE_RANK[item.type], rank, -float(size)


class CaseItems:
    """Case items as they are found (see the module docstring).

    Args:
        cap: items kept for the report; ``None`` keeps every one.
        on_item: called with every item, in the order they are added.
    """

    def __init__(self, cap: int | None, on_item: Callable[[DiffItem], None] | None = None) -> None:
        self.cap = cap
        self.on_item = on_item
        self.found = 0
        self.counts = {"REGRESSION": 0, "IMPROVEMENT": 0, "CHANGED": 0}
        # a max-heap of the kept items by (importance, place, n), each negated
        self._kept: list[tuple[tuple[float, ...], DiffItem]] = []
        self._n = count()

    def add(self, items: Iterable[DiffItem], place: Place) -> None:
        """One row's items, in the order the row lists them."""
        for item in items:
            self.found += 1
            self.counts[item.type] += 1
            if self.on_item is not None:
                self.on_item(item)
            n = next(self._n)
            key = (*importance(item), *place, n)
            entry = (tuple(-k for k in key), item)
            if self.cap is None or len(self._kept) < self.cap:
                heapq.heappush(self._kept, entry)
            elif self.cap and entry > self._kept[0]:  # more important than the least kept
                heapq.heapreplace(self._kept, entry)

    @property
    def capped(self) -> bool:
        """Some items are not kept."""
        return len(self._kept) < self.found

    def listed(self) -> list[DiffItem]:
        """The kept items in row order (current task's rows, then baseline-only rows)."""
        by_place = sorted(self._kept, key=lambda entry: tuple(-k for k in entry[0][3:]))
        return [item for _, item in by_place]
