"""``rubric-eval verify TASK``: every stored row re-derived and compared byte for byte
(docs/verify.md).

For each row, in input order: its digest is checked; its stored input row is read back and its
rule checks run again; its stored judge replies are handed, in order, to the task's own judge
(:class:`~rubric_engine.judge.stored_replies.StoredReplies` in place of a provider), whose
outcome goes through the one row → result path; the result must be the stored one, byte for
byte, and possible (:func:`~rubric_engine.results.possible.impossibilities`). A renormalized
task's rows are re-derived through renormalize's own step from the source task's rubric.
Then the task's report is built from the stored rows and its aggregates checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.judge_when import judge_if_for
from rubric_engine.engine.panel import panel_of
from rubric_engine.engine.pipeline import NoJudge, PreparedRow, RequestBuilder, row_result
from rubric_engine.engine.plan import output_mode_of, stored_judge
from rubric_engine.engine.sampling import aggregate_row
from rubric_engine.errors import RubricEvalError, StoreError
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.protocol import Judge, JudgeOutcome
from rubric_engine.judge.stored_replies import StoredReplies
from rubric_engine.report.accumulate import ReportAccumulator
from rubric_engine.report.rows import RowUsage, row_facts
from rubric_engine.report.scratch_tables import ScratchTables
from rubric_engine.report.stored import task_section
from rubric_engine.results.model import JudgeErrorKind, RowResult
from rubric_engine.results.possible import impossibilities
from rubric_engine.rubric.case_level import row_case_requirements
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rubric.versions import verified_snapshot
from rubric_engine.store.digest import DigestCheck, signing_key
from rubric_engine.store.location import StoreLocation
from rubric_engine.store.task_ref import resolve_in_store
from rubric_engine.store.task_store import StoredRow, TaskRecord, TaskStore, result_json

#: errors whose text came from outside the replies (a provider, a cassette folder, a server's
#: context): verify takes it as stored and checks the rest
ENVIRONMENT_ERRORS = frozenset(
    {JudgeErrorKind.TRANSPORT, JudgeErrorKind.CASSETTE_MISS, JudgeErrorKind.CONTEXT_EXCEEDED}
)


@dataclass
class VerifyResult:
    """What ``verify`` found.

    Attributes:
        rows: rows read.
        derived: rows whose result (and every sample's) was re-derived byte for byte.
        digests: the task's digest scheme, or ``None`` (stored before digests).
        undigested: rows stored before digests (their digest is not verifiable).
        problems: ``(rowId, what)`` for each failed check, in input order.
        aggregates: what is impossible about the task's report.
        state: the task's stored state (a task not COMPLETED holds only some of its rows).
        planned: the rows the task planned to judge.
        key_set: ``$RUBRIC_EVAL_SIGNING_KEY`` is set.
        unsigned: the signing key is set and the task's rows carry plain digests (one of the
            ``aggregates``).
    """

    task_id: str
    rows: int = 0
    derived: int = 0
    digests: str | None = None
    undigested: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)
    aggregates: list[str] = field(default_factory=list)
    state: str = "COMPLETED"
    planned: int | None = None
    key_set: bool = False
    unsigned: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems and not self.aggregates


def verify_task(location: StoreLocation, task_id: str) -> VerifyResult:
    """Verify every row of a stored task (see the module docstring).

    Raises:
        TaskNotFoundError: no such task.
        StoreError: the task's rubric snapshot was altered; its rows are signed and the
            signing key is not set.
        ConfigurationError: this engine's prompt template differs from the task's (verify
            it with the rubric-eval version that scored it).
    """
    with TaskStore(location) as store:
        task_id = resolve_in_store(store, task_id)
        task = store.task(task_id)
        rubric = verified_snapshot(task.rubric_snapshot, task.rubric_hash, f"task {task_id}")
        derive = _deriver(store, task, rubric)
        found = VerifyResult(task_id, state=task.state, planned=task.row_count)
        digests = store.digests(task_id)  # refuses a task record that lost its digest mark
        found.digests = digests.mark if digests is not None else None
        found.key_set = signing_key() is not None
        found.unsigned = found.key_set and digests is not None and digests.key is None
        if found.unsigned:
            found.aggregates.append(
                f"the signing key is set but the task's rows carry plain digests ({found.digests})"
                ", not signatures: it was scored without the key, or its signatures were "
                "replaced"
            )
        built = ReportAccumulator(rubric, storage=ScratchTables())
        planned = store.planned(task_id)
        check = DigestCheck(task_id, digests, planned)
        for seq, stored in enumerate(store.rows(task_id, check=check)):
            found.rows += 1
            problems = [] if check.last is not False else [_digest_problem(check)]
            if check.last_misplaced:
                problems.append(
                    f"position: input position {stored.seq} is beyond the task's {planned} "
                    "planned row(s) (rows deleted and the row count edited)"
                )
            if check.last is None and not check.last_had_digest:
                found.undigested += 1
            derived = _derived_problems(stored, derive)
            if not derived:
                found.derived += 1
            problems += derived + _impossible(stored, rubric)
            found.problems += [(stored.result.row_id, p) for p in problems]
            usage = RowUsage(
                stored.calls, stored.prompt_tokens, stored.completion_tokens, stored.cost_usd,
                stored.latency_ms, stored.cache_read_tokens, stored.cache_creation_tokens,
            )  # fmt: skip
            built.add(seq, stored.result, usage, row_facts(stored.dialogue))
        found.aggregates += _aggregate_problems(built, task, found.rows)
    return found


def _digest_problem(check: DigestCheck) -> str:
    if not check.last_had_digest:
        return "digest: missing"
    if check.digests is None:
        return "digest: present, but the task record names no digest scheme (it was edited)"
    where = f" ({'; '.join(said for _, said in check.last_columns)})" if check.last_columns else ""
    return f"digest: does not match{where}"


Derive = Callable[[StoredRow], RowResult]


def _derived_problems(stored: StoredRow, derive: Derive) -> list[str]:
    """Why the row's result is not what its stored replies derive (empty: it is, byte for
    byte)."""
    try:
        derived = derive(stored)
    except RubricEvalError as exc:
        return [f"re-derived: cannot be ({exc})"]
    if result_json(derived) == result_json(stored.result):
        return []
    return [f"re-derived: {_differences(stored.result, derived)} differ from the stored result"]


def _impossible(stored: StoredRow, rubric: EvalRubric) -> list[str]:
    case = row_case_requirements(DialogueRow.model_validate(stored.dialogue)).all
    return [f"impossible: {p}" for p in impossibilities(stored.result, rubric, case)]


def _differences(stored: RowResult, derived: RowResult) -> str:
    """The result fields that differ, by their JSON names."""
    a, b = stored.to_json_dict(), derived.to_json_dict()
    names = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    return ", ".join(names) or "the bytes (field order or spelling)"


def _deriver(store: TaskStore, task: TaskRecord, rubric: EvalRubric) -> Derive:
    """How the task's rows are derived from what is stored with them."""
    if task.judge_mode == "renormalize":
        return _renormalized_deriver(store, task, rubric)
    compiled = CompiledRubric.of(rubric)
    panel_models = panel_of(task.extra)
    panel: dict[str, Judge] = {}  # a panel's judges, by each sample's model (docs/panels.md)
    make: Callable[[str], Judge] | None = None
    if task.judge_mode == "none":
        builder = RequestBuilder(rubric, None)
        judge: Judge = NoJudge()
        judge_if = None
        replies = None
    else:
        rubric, template, params = stored_judge(
            task, "verify it with the rubric-eval version that scored it"
        )
        builder = RequestBuilder(rubric, template)
        replies = StoredReplies()
        settled = task.extra.get("outputForm")

        def judge_of(model: str) -> Judge:
            return InstructorJudge(
                replies,
                rubric,
                model,
                params,
                int(task.judge_params.get("maxReasks", 2)),
                evidence=builder.asks_evidence,
                output_mode=output_mode_of(task.judge_params),  # type: ignore[arg-type]
                system_as_user=bool(task.judge_params.get("systemAsUser")),
                settled_form=settled if isinstance(settled, dict) and model == task.model else None,
            )

        judge = panel[task.model] = judge_of(task.model)
        make = judge_of
        judge_if = judge_if_for((task.extra.get("run") or {}).get("judgeWhen"))
    loop = asyncio.new_event_loop()

    def one(
        prepared: PreparedRow,
        raw: list[dict[str, Any]],
        stored: RowResult,
        sample: int,
        by: tuple[int, str] | None = None,
    ) -> RowResult:
        """``by``: a sample's judge (its place and model) when it is not the task's model."""
        assert replies is not None
        replies.load(raw, stored.error)
        asking, request = judge, replace(prepared.request, sample=sample)
        if by is not None:
            assert make is not None
            if by[1] not in panel:
                panel[by[1]] = make(by[1])
            asking, request = panel[by[1]], replace(request, judge=by[0])
        outcome = loop.run_until_complete(asking.judge(request))
        if replies.unread:
            raise StoreError(
                f"{replies.unread} stored repl(ies) follow the one the judge's answer was read from"
            )
        return _as_stored_error(row_result(compiled, prepared, outcome), stored)

    def derive(stored: StoredRow) -> RowResult:
        row = DialogueRow.model_validate(stored.dialogue)
        prepared = builder.prepare(stored.seq, row)
        if replies is None or (judge_if is not None and not judge_if(row)):
            outcome = JudgeOutcome(verdict=None, error=None)
            return row_result(compiled, prepared, outcome)
        if not stored.samples:
            return one(prepared, stored.raw_attempts, stored.result, 1)
        # a sampled row: each sample from its own replies, then their aggregate
        samples = []
        for sample in stored.samples:
            by = (sample.judge, sample.model) if panel_models else None
            derived = one(prepared, sample.raw_attempts, sample.result, sample.sample, by)
            if result_json(derived) != result_json(sample.result):
                raise StoreError(
                    f"{f'judge {sample.judge} ' if panel_models else ''}sample {sample.sample}: "
                    f"{_differences(sample.result, derived)} differ "
                    "from the stored sample"
                )
            samples.append(replace(sample, result=derived))
        return aggregate_row(compiled, prepared.case.all, samples)

    return derive


def _as_stored_error(derived: RowResult, stored: RowResult) -> RowResult:
    """A derived error whose text came from the environment takes the stored text."""
    if (
        derived.error is not None
        and stored.error is not None
        and derived.error.kind is stored.error.kind
        and derived.error.kind in ENVIRONMENT_ERRORS
    ):
        error = derived.error.model_copy(update={"message": stored.error.message})
        return derived.model_copy(update={"error": error})
    return derived


def _renormalized_deriver(store: TaskStore, task: TaskRecord, target: EvalRubric) -> Derive:
    from rubric_engine.engine.renormalize import _renormalized, sample_as_row
    from rubric_engine.judge.prompt import EVIDENCE_PROMPTS

    source_id = str(task.extra.get("renormalizedFrom") or "")
    try:
        source = store.task(source_id)
    except StoreError as exc:
        raise StoreError(
            f"task {task.id} was renormalized from task {source_id!r}, which is not in this "
            "store: its rows cannot be re-derived without the rubric they were judged under"
        ) from exc
    judged = verified_snapshot(source.rubric_snapshot, source.rubric_hash, f"task {source_id}")
    compiled = CompiledRubric.of(target)
    evidence = source.prompt_version in EVIDENCE_PROMPTS

    def derive(stored: StoredRow) -> RowResult:
        if not stored.samples:
            return _renormalized(stored, judged, compiled, evidence)
        # a sampled row: each sample renormalized from its own replies, then their aggregate
        samples = []
        for sample in stored.samples:
            derived = _renormalized(sample_as_row(stored, sample), judged, compiled, evidence)
            if result_json(derived) != result_json(sample.result):
                raise StoreError(
                    f"sample {sample.sample}: {_differences(sample.result, derived)} differ "
                    "from the stored sample"
                )
            samples.append(replace(sample, result=derived))
        case = row_case_requirements(DialogueRow.model_validate(stored.dialogue)).all
        return aggregate_row(compiled, case, samples)

    return derive


def _aggregate_problems(built: ReportAccumulator, task: TaskRecord, rows: int) -> list[str]:
    """What is impossible about the report the stored rows make."""
    report = built.finish(task_section(task))
    totals = report.totals
    found = []
    if (
        totals.mean_score is not None
        and totals.mean_judge_score is not None
        and totals.mean_score > totals.mean_judge_score
    ):
        found.append(
            f"meanScore {totals.mean_score} is above meanJudgeScore {totals.mean_judge_score}"
        )
    counted = totals.scored + totals.judge_errors + (totals.checked or 0)
    if counted != rows:
        found.append(f"{counted} row(s) counted by status, {rows} stored")
    if totals.passed_rows > totals.scored + (totals.checked or 0):
        found.append(f"{totals.passed_rows} passed rows of {totals.scored} scored")
    if rows > task.row_count:
        found.append(f"{rows} rows stored, {task.row_count} planned")
    elif task.state == "COMPLETED" and rows < task.row_count:
        found.append(
            f"{rows} rows stored, {task.row_count} planned for a COMPLETED task (rows deleted)"
        )
    return found


__all__ = ["ENVIRONMENT_ERRORS", "VerifyResult", "verify_task"]
