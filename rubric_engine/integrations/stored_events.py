"""The evaluation events of a stored task, read row by row from the store (an edge).

Shared by ``rubric-eval emit`` and ``score --emit-otlp``/``--emit-phoenix``: the task's rubric
snapshot gives the pass score, each stored row its result and the trace it came from.
"""

from __future__ import annotations

from collections.abc import Iterator

from rubric_engine.integrations.events import EvaluationEvent, Rated, row_events
from rubric_engine.store.location import StoreLocation


def task_events(
    location: StoreLocation, task_ref: str, per_requirement: bool = False
) -> tuple[Rated, Iterator[EvaluationEvent]]:
    """The task's shared fields and its events in row order (read lazily from the store).

    Raises:
        TaskNotFoundError: no task by that id, name or tag. StoreError: no store there.
    """
    from rubric_engine.report.outcome import default_pass_score
    from rubric_engine.report.run import require_store
    from rubric_engine.rubric.versions import verified_snapshot
    from rubric_engine.store.task_ref import resolve_in_store
    from rubric_engine.store.task_store import TaskStore

    require_store(location)
    with TaskStore(location) as store:
        task = store.task(resolve_in_store(store, task_ref))
    rubric = verified_snapshot(task.rubric_snapshot, task.rubric_hash, f"task {task.id}")
    rated = Rated(task.rubric_key, task.rubric_version, task.rubric_hash, task.id,
                  default_pass_score(rubric))  # fmt: skip

    def events() -> Iterator[EvaluationEvent]:
        with TaskStore(location) as store:
            for row in store.rows(rated.task_id):
                metadata = row.dialogue.get("metadata") or {}
                yield from row_events(row.result, metadata, rated, per_requirement)

    return rated, events()
