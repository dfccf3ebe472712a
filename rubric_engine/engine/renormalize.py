"""What-if for rubric authors: a stored task's judge outputs under another rubric version.

``rubric-eval renormalize TASK --rubric KEY@N`` parses each row's stored final judge reply with the
verdict model of the rubric the judge actually saw, then runs normalization (docs/protocol.md) with
version N: its caps, observability, red-line and red-flag mapping. No judge is called. The result is
a new task (judge mode ``renormalize``, ``extra.renormalizedFrom`` = the source task) whose report
can be compared with the original. Changes that would need the judge to answer again (see
:func:`rubric_engine.rubric.diff.renormalize_blockers`) are refused up front.

A task scored with ``--samples K`` is re-aggregated: each stored sample's reply is normalized
under version N, and the row's result is their aggregate by the rules of docs/stability.md
(:func:`rubric_engine.results.samples.aggregate_samples`); the new task keeps every sample.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.sampling import aggregate_row
from rubric_engine.engine.task import creation_time, new_task_extra
from rubric_engine.errors import Problem, StoreError
from rubric_engine.judge.prompt import EVIDENCE_PROMPTS
from rubric_engine.report import ReportFiles, stream_report, write_reports
from rubric_engine.report.model import Report
from rubric_engine.results.model import RowResult, RowStatus, WarningCode
from rubric_engine.results.row_result import row_result
from rubric_engine.rubric.case_level import row_case_requirements
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rubric.diff import RubricDiff, diff_rubrics, renormalize_blockers
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rubric.versions import LifecycleError, rubric_for_scoring, verified_snapshot
from rubric_engine.rules.run import run_rules
from rubric_engine.store.location import StoreLocation
from rubric_engine.store.task_state import TaskState
from rubric_engine.store.task_store import StoredRow, StoredSample, TaskStore, new_task_id
from rubric_engine.verdict.model import verdict_model
from rubric_engine.verdict.parse import ParseFailure, RowContext, parse_reply


@dataclass(frozen=True)
class RenormalizeResult:
    task_id: str
    source_task_id: str
    diff: RubricDiff
    report: Report
    files: ReportFiles


def _final_response(stored: StoredRow) -> dict[str, Any]:
    """The row's last stored provider response: the one its verdict was read from."""
    for attempt in reversed(stored.raw_attempts):
        response = attempt.get("response")
        if response:
            return dict(response)
    raise StoreError(f"row {stored.result.row_id}: no stored judge reply to re-apply")


#: a renormalized row (or sample) cost no call
_NO_USAGE: dict[str, Any] = {
    "calls": 0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "cost_usd": 0.0,
    "latency_ms": 0.0,
    "cache_read_tokens": 0,
    "cache_creation_tokens": 0,
}


def sample_as_row(stored: StoredRow, sample: StoredSample) -> StoredRow:
    """A stored sample as a row of its own: its result and replies, the row's dialogue."""
    return replace(stored, result=sample.result, raw_attempts=sample.raw_attempts, samples=())


def renormalized_row(
    stored: StoredRow, judged: EvalRubric, target: CompiledRubric, evidence: bool = False
) -> StoredRow:
    """The row under ``target``, costing nothing; a sampled row's samples each renormalized,
    then aggregated again."""
    if not stored.samples:
        return replace(stored, result=_renormalized(stored, judged, target, evidence), **_NO_USAGE)
    samples = tuple(
        replace(
            sample,
            result=_renormalized(sample_as_row(stored, sample), judged, target, evidence),
            **_NO_USAGE,
        )
        for sample in stored.samples
    )
    case = row_case_requirements(DialogueRow.model_validate(stored.dialogue)).all
    result = aggregate_row(target, case, samples)
    return replace(stored, result=result, samples=samples, **_NO_USAGE)


#: warnings of the stored row about how the judge answered, kept as they were
_JUDGE_CALL_WARNINGS = (WarningCode.JUDGE_REASKED, WarningCode.AMBIGUOUS_REPLY)


def _renormalized(
    stored: StoredRow, judged: EvalRubric, target: CompiledRubric, evidence: bool = False
) -> RowResult:
    result = stored.result
    if result.status is not RowStatus.SCORED:
        return result  # a JUDGE_ERROR stays one: there is no verdict to re-apply
    row = DialogueRow.model_validate(stored.dialogue)
    case = row_case_requirements(row)
    context = RowContext(row.row_id, tuple(r.id for r in case.behaviours), len(row.messages))
    # the model the judge answered under: a judge_v3 reply keeps its evidence turns
    parsed = parse_reply(_final_response(stored), verdict_model(judged, evidence), context)
    if isinstance(parsed, ParseFailure):
        raise StoreError(
            f"row {row.row_id}: its stored judge reply no longer parses under the rubric it was "
            f"judged with ({parsed.kind}: {parsed.reason}); the store was changed after the "
            "task ran"
        )
    verdict = parsed.verdict
    known = set(target.rubric.requirements_by_id) | {r.id for r in case.behaviours}
    verdict = verdict.model_copy(
        update={
            "unmet_requirement_ids": [i for i in verdict.unmet_requirement_ids if i in known],
            "partial_requirement_ids": [i for i in verdict.partial_requirement_ids if i in known],
        }
    )
    asked = [w for w in result.warnings if w.code in _JUDGE_CALL_WARNINGS]
    # rule checks are re-run under the target version: they read only the stored dialogue; the
    # row's thinking-marker warnings are worked out again by row_result under the target pack
    return row_result(
        target, row, case, run_rules(target, row), verdict, warnings=[*asked, *parsed.cleanups]
    )


def _sampling_of(extra: dict[str, Any]) -> dict[str, Any]:
    return {"sampling": extra["sampling"]} if extra.get("sampling") else {}


def renormalize(
    store_path: StoreLocation,
    task_id: str,
    rubric_ref: str,
    draft: bool = False,
    out: Path | None = None,
) -> RenormalizeResult:
    """Make a new task from ``task_id``'s stored judge outputs under ``rubric_ref``.

    Args:
        rubric_ref: ``KEY@N`` / ``KEY`` in the store, or a pack file with ``draft=True``.
        out: report folder (default ``reports/<new task id>``).

    Raises:
        TaskNotFoundError: no such task.
        LifecycleError: another rubric key; a change that needs new judge calls (each listed);
            the version is RETIRED or unknown.
        StoreError: the task's snapshot or stored replies were altered.
    """
    target = rubric_for_scoring(rubric_ref, store_path, draft)
    with TaskStore(store_path) as store:
        from rubric_engine.store.task_ref import resolve_in_store

        task_id = resolve_in_store(store, task_id)
        source = store.task(task_id)
        judged = verified_snapshot(source.rubric_snapshot, source.rubric_hash, f"task {task_id}")
        if target.key != judged.key:
            raise LifecycleError(
                f"task {task_id} was judged with rubric {judged.key!r}; renormalize it with a "
                f"version of {judged.key!r}, not {target.key!r}"
            )
        diff = diff_rubrics(judged, target)
        blockers = renormalize_blockers(diff, target)
        if blockers:
            raise LifecycleError(
                f"cannot re-apply task {task_id}'s judge outputs under {target.key} "
                f"v{target.version} without new judge calls; score the rows again with "
                f"`rubric-eval score … --rubric {target.key}@{target.version}` instead",
                [Problem(f"{target.key} v{target.version}", "", b) for b in blockers],
            )
        new_id = new_task_id()
        rows = list(store.rows(task_id))
        store.create_task(
            replace(
                source,
                id=new_id,
                created_at=creation_time(),
                finished_at=None,
                state=TaskState.RUNNING,
                rubric_version=target.version,
                rubric_status=str(target.status),
                rubric_hash=target.content_hash(),
                rubric_snapshot=target.snapshot(),
                judge_mode="renormalize",
                row_count=len(rows),
                # a sampled source: its sampling is the new task's (report, verify, calibrate)
                extra={**new_task_extra(), **_sampling_of(source.extra)},
            )
        )
        compiled = CompiledRubric.of(target)
        evidence = source.prompt_version in EVIDENCE_PROMPTS
        for stored in rows:
            store.add_row(new_id, renormalized_row(stored, judged, compiled, evidence))
        store.finish_task(
            new_id,
            TaskState.COMPLETED,
            {
                "renormalizedFrom": task_id,
                "judgedUnder": f"{judged.key} v{judged.version}",
                "rubricChanges": json.loads(json.dumps(diff.to_json()["changes"])),
            },
        )
        task = stream_report(store, new_id)  # one pass over the rows for the report and files
        report = task.report
        files = write_reports(store, new_id, report, out or Path("reports") / new_id, task)
    return RenormalizeResult(new_id, task_id, diff, report, files)
