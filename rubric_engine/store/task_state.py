"""A task's lifecycle state, as stored and reported (docs/rubric-packs.md).

A ``StrEnum``: stored and written to reports as its value, and equal to that string, so
stores and reports written before the enum existed read the same.
"""

from __future__ import annotations

from enum import StrEnum


class TaskState(StrEnum):
    """Where a task is in its run.

    ``RUNNING`` while rows are judged (also what a killed run leaves behind); ``COMPLETED``
    once every row has a result; ``STOPPED`` when a budget ran out or the judge was
    unreachable; ``INTERRUPTED`` after Ctrl-C or an unexpected error. A STOPPED,
    INTERRUPTED or killed task can be resumed. ``QUEUED`` until the first worker starts on a
    task made for workers.
    """

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    STOPPED = "STOPPED"
    INTERRUPTED = "INTERRUPTED"
    #: made by ``score --workers-only``: its rows wait for workers (``rubric-eval work``),
    #: the first of which sets it RUNNING
    QUEUED = "QUEUED"
