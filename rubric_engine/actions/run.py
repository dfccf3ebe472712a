"""``rubric-eval actions TASK [--baseline TASK]``: read the tasks from the store, cluster their
low rows, rank the action items, fill in the evidence turns, cluster the explanations no rule
names (optionally summarised by a model). The store edge of :mod:`rubric_engine.actions`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rubric_engine.actions.clusters import LowRows, action_items, states
from rubric_engine.actions.failures import explanation_clusters
from rubric_engine.actions.model import ActionItem, ActionsReport, EvidenceTurn, Unexplained
from rubric_engine.errors import ConfigurationError
from rubric_engine.report.outcome import checked_pass_score
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.location import StoreLocation

TURN_CHARS = 200


@dataclass(frozen=True)
class ActionOptions:
    pass_score: int | None = None
    by: tuple[str, ...] = ()
    owner_field: str = "owner"
    text_clusters: int | None = None
    seed: int = 0


def _read_task(
    store: Any, task_ref: str, options: ActionOptions
) -> tuple[str, EvalRubric, LowRows, set[str]]:
    """The task's id, rubric snapshot, low rows and the metadata fields its rows carry."""
    from rubric_engine.report.stored import check_row_count, stored_report_rows
    from rubric_engine.rubric.versions import verified_snapshot
    from rubric_engine.store.task_ref import resolve_in_store

    task_id = resolve_in_store(store, task_ref)
    record = store.task(task_id)
    rubric = verified_snapshot(record.rubric_snapshot, record.rubric_hash, f"task {task_id}")
    pass_score = checked_pass_score(rubric, options.pass_score)
    low = LowRows(rubric, pass_score, options.by, options.owner_field)
    fields: set[str] = set()
    count = 0
    for seq, row in enumerate(stored_report_rows(store, task_id)):
        low.add(seq, row.result, row.facts)
        fields.update(row.facts.metadata)
        count += 1
    check_row_count(record, count)
    return task_id, rubric, low, fields


def build_actions(
    store: StoreLocation,
    task_ref: str,
    baseline_ref: str | None = None,
    baseline_store: StoreLocation | None = None,
    options: ActionOptions = ActionOptions(),
    summarize: Any = None,
) -> ActionsReport:
    """The action list of a task (see :mod:`rubric_engine.actions.clusters`).

    Args:
        summarize: a callable ``(rubric, clusters, texts) -> clusters`` that adds a model's
            candidate rule to each explanation cluster (:mod:`rubric_engine.actions.summary`),
            or ``None``.

    Raises:
        TaskNotFoundError / StoreError: from the store.
        ConfigurationError: the tasks use different rubric keys, a ``--by`` field no row
            carries, a pass score off the scale.
    """
    from rubric_engine.report.run import require_store
    from rubric_engine.store.task_store import TaskStore

    require_store(store)
    with TaskStore(store) as opened:
        task_id, rubric, low, fields = _read_task(opened, task_ref, options)
        missing = [f for f in options.by if f not in fields]
        if missing:
            raise ConfigurationError(
                f"--by {', '.join(missing)}: no row of task {task_id} has that metadata field; "
                f"fields: {', '.join(sorted(fields)) or '(none)'}"
            )
        baseline = None
        baseline_id = baseline_rubric = None
        if baseline_ref is not None:
            other = baseline_store if baseline_store is not None else store
            with TaskStore(other) as base:
                baseline_id, base_rubric, baseline, _ = _read_task(base, baseline_ref, options)
            if base_rubric.key != rubric.key:
                raise ConfigurationError(
                    f"baseline task {baseline_id} used rubric {base_rubric.key!r} and task "
                    f"{task_id} {rubric.key!r}: clusters are compared by requirement ID, so "
                    "compare two tasks of the same pack"
                )
            baseline_rubric = f"{base_rubric.key}@{base_rubric.version}"
        items = action_items(low, baseline)
        items = _with_turn_texts(opened, task_id, items)
    clusters = explanation_clusters(low.texts, options.text_clusters, options.seed, low.background)
    if summarize is not None and clusters:
        clusters = summarize(rubric, clusters, dict(low.texts))
    return ActionsReport(
        task_id=task_id,
        rubric=f"{rubric.key}@{rubric.version}",
        baseline_task_id=baseline_id,
        baseline_rubric=baseline_rubric,
        pass_score=low.pass_score,
        scored_rows=low.scored,
        low_rows=low.low,
        baseline_low_rows=baseline.low if baseline is not None else None,
        by=options.by,
        owner_field=options.owner_field,
        states=states(items),
        items=tuple(items),
        unexplained=Unexplained(
            rows=len(low.unexplained_ids),
            row_ids=tuple(low.unexplained_ids),
            clustered=sum(c.rows for c in clusters),
            seed=options.seed,
            clusters=tuple(clusters),
        ),
    )


def _with_turn_texts(store: Any, task_id: str, items: list[ActionItem]) -> list[ActionItem]:
    """Each evidence turn with its role and the start of its text, read from the stored
    dialogues of the evidence rows only."""
    wanted = {e.row_id for i in items for e in i.evidence if e.turns}
    if not wanted:
        return items
    dialogues = store.dialogues(task_id, wanted)
    out = []
    for item in items:
        evidence = tuple(
            e.model_copy(
                update={"turns": tuple(_turn(dialogues.get(e.row_id), t.turn) for t in e.turns)}
            )
            if e.turns
            else e
            for e in item.evidence
        )
        out.append(item.model_copy(update={"evidence": evidence}))
    return out


def _turn(dialogue: dict[str, Any] | None, index: int) -> EvidenceTurn:
    messages = (dialogue or {}).get("messages") or []
    if not 0 <= index < len(messages):
        return EvidenceTurn(turn=index)
    message = messages[index]
    text = str(message.get("content") or "")
    if not text and message.get("toolCalls"):
        call = message["toolCalls"][0]
        text = f"{call.get('name')} {call.get('arguments')}"
    one = " ".join(text.split())
    return EvidenceTurn(
        turn=index,
        role=message.get("role"),
        text=one if len(one) <= TURN_CHARS else one[: TURN_CHARS - 1] + "…",
    )
