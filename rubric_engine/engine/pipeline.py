"""The row engine: judges a run's rows concurrently and stores each result as it ends.

Rows come in validated (parsed once, before the task was created); ``concurrency`` workers
judge them; each finished row becomes its result through
:func:`rubric_engine.results.row_result.row_result` (normalized, or a ``JUDGE_ERROR`` value) and is
written to the store at once, so an interrupted run keeps what it finished. The run around it
(checks, task, report) is :mod:`rubric_engine.engine.run`, the one orchestrator.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Literal

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.sampling import Sampling, aggregate_row, ask_samples, sampled_row
from rubric_engine.errors import StoreError
from rubric_engine.judge.prompt import PromptTemplate, render_system, render_user
from rubric_engine.judge.protocol import BudgetSpent, Judge, JudgeOutcome, JudgeRequest
from rubric_engine.judge.server_checks import RubricNotDelivered
from rubric_engine.results.model import JudgeErrorKind, ProtocolWarning, RowResult, WarningCode
from rubric_engine.results.row_result import row_result as _row_result
from rubric_engine.rubric.case_level import CaseRequirements, row_case_requirements
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rubric.model import EvalRubric, HardRequirement
from rubric_engine.rules.run import RuleRun, run_rules
from rubric_engine.store.commit_timer import committing
from rubric_engine.store.task_store import RowSink, StoredRow


@dataclass(slots=True)
class PreparedRow:
    """A row ready for the judge.

    Attributes:
        case: the row's case-level requirements, derived once: the behaviours the judge sees
            and the case's rule checks (decided by the rules, not shown to the judge).
        rules: the row's rule checks, already run (docs/rule-checks.md).
    """

    seq: int
    row: DialogueRow
    case: CaseRequirements
    request: JudgeRequest
    rules: RuleRun

    @property
    def case_requirements(self) -> tuple[HardRequirement, ...]:
        """Every case-level requirement: the behaviours, then the rule checks."""
        return self.case.all


class RequestBuilder:
    """Renders judge requests for one rubric and template; the system text is rendered once.

    With ``template=None`` (``--judge none``) nothing is rendered: requests carry no messages
    and rows are decided by their rule checks alone.
    """

    def __init__(self, rubric: EvalRubric, template: PromptTemplate | None) -> None:
        self.rubric = rubric
        #: what every row asks of the rubric, worked out once for the task
        self.compiled = CompiledRubric.of(rubric)
        self.template = template
        self.system_text = render_system(template, rubric) if template else ""
        self.rubric_hash = rubric.content_hash()
        #: the prompt asks for evidence turns (``judge_v3``): the judge's verdict model has them
        self.asks_evidence = bool(template and template.asks_evidence)

    def prepare(self, seq: int, row: DialogueRow) -> PreparedRow:
        case = row_case_requirements(row)
        rules = run_rules(self.compiled, row)
        messages: tuple[dict[str, str], ...] = ()
        if self.template is not None:
            user_text = render_user(self.template, self.rubric, row, case.behaviours)
            messages = (
                {"role": "system", "content": self.system_text},
                {"role": "user", "content": user_text},
            )
        request = JudgeRequest(
            row_id=row.row_id,
            messages=messages,
            case_requirement_ids=tuple([r.id for r in case.behaviours]) if case.behaviours else (),
            rubric_hash=self.rubric_hash,
            prompt_hash=self.template.hash if self.template else "",
            turn_count=len(row.messages),
        )
        return PreparedRow(seq=seq, row=row, case=case, request=request, rules=rules)


class NoJudge:
    """``--judge none``: answers every row with neither verdict nor error, calling nothing."""

    async def judge(self, request: JudgeRequest) -> JudgeOutcome:
        return JudgeOutcome(verdict=None, error=None)


_NO_JUDGE = NoJudge()


def judge_warnings(outcome: JudgeOutcome) -> tuple[ProtocolWarning, ...]:
    """The warnings a judge outcome brings to its row: one ``JUDGE_REASKED`` per re-ask, in
    order (detail: why, at most 500 characters), then the parse warnings
    (``AMBIGUOUS_REPLY``, then the accepted verdict's clean-ups of its values).
    """
    reasked = tuple(
        ProtocolWarning(code=WarningCode.JUDGE_REASKED, detail=why[:500]) for why in outcome.reasks
    )
    return reasked + tuple(outcome.parse_warnings)


def row_result(rubric: CompiledRubric, prepared: PreparedRow, outcome: JudgeOutcome) -> RowResult:
    """A judged (or ``--judge none``) row's result:
    :func:`rubric_engine.results.row_result.row_result`
    with the judge's verdict, error and warnings taken from ``outcome``.

    An outcome with neither verdict nor error is a ``--judge none`` row (status CHECKED).
    """
    return _row_result(
        rubric,
        prepared.row,
        prepared.case,
        prepared.rules,
        verdict=outcome.verdict,
        error=outcome.error,
        warnings=judge_warnings(outcome),
    )


def stored_row(prepared: PreparedRow, outcome: JudgeOutcome, result: RowResult) -> StoredRow:
    """The row as the store keeps it. The attempts' counts are added up in one pass, each as
    :class:`~rubric_engine.judge.protocol.JudgeOutcome`'s totals add them (``sum``: from 0,
    in attempt order; the cost ``None`` when no attempt has one)."""
    raw_attempts = []
    prompt = completion = cache_read = cache_creation = 0
    latency: float = 0
    cost: float | None = None
    for a in outcome.attempts:
        recorded = round(a.latency_ms, 1)
        raw_attempts.append({"response": a.response, "error": a.error, "latencyMs": recorded})
        prompt += a.prompt_tokens
        completion += a.completion_tokens
        cache_read += a.cache_read_tokens
        cache_creation += a.cache_creation_tokens
        latency += recorded
        if a.cost_usd is not None:
            cost = (0 if cost is None else cost) + a.cost_usd
    return StoredRow(
        seq=prepared.seq,
        result=result,
        dialogue=prepared.row.model_dump(mode="json", by_alias=True),
        raw_attempts=raw_attempts,
        calls=len(raw_attempts),
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
        # the sum of the attempts as stored (and recorded in cassettes), so a replay of the
        # recorded attempts gives the row the same latency to the 0.1 ms
        latency_ms=round(latency, 1),
        cassette_key=outcome.cassette_key,
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_creation,
    )


@dataclass
class Budget:
    """Per-run limits (``--max-calls``, ``--max-cost``); ``None`` = no limit.

    Every call is asked for before it goes out (:meth:`take_call`, by the run's backend:
    first asks, re-asks and transport retries alike), so a run never makes more calls than
    ``max_calls``: a call that would pass it is not made, and its row ends unjudged, stored
    as nothing (:class:`~rubric_engine.judge.protocol.BudgetSpent`; ``--resume`` judges it,
    with the answers it already had). A call goes out on a cost budget only while the cost
    spent so far plus the dearest call so far for each call on the wire, this one included,
    stays within ``max_cost_usd``: the price of a call is known only once it is answered, so
    the spend can pass the limit by what the calls on the wire cost beyond the dearest
    earlier call (docs/judge-replies.md "Budgets, interruptions, resume").

    A row is started only while the calls made plus one per row in flight stay within
    ``max_calls`` (and likewise the cost, at the mean cost per call so far).
    """

    max_calls: int | None = None
    max_cost_usd: float | None = None
    calls: int = 0
    cost_usd: float = 0.0
    #: calls taken and not yet ended
    on_wire: int = 0
    #: the price of the dearest call so far
    dearest: float = 0.0
    #: which limit stopped new rows; ``None`` while within budget
    exhausted: Literal["calls", "cost"] | None = None
    #: set once the first row has finished or a call's price is known
    first_spend: asyncio.Event = field(default_factory=asyncio.Event)

    def take_call(self) -> bool:
        if self.max_calls is not None and self.calls + 1 > self.max_calls:
            self.exhausted = "calls"
            return False
        if (
            self.max_cost_usd is not None
            and self.cost_usd + (self.on_wire + 1) * self.dearest > self.max_cost_usd
        ):
            self.exhausted = "cost"
            return False
        self.calls += 1
        self.on_wire += 1
        return True

    def settle_call(self, cost_usd: float | None) -> None:
        self.on_wire -= 1
        if cost_usd is not None:
            self.cost_usd += cost_usd
            self.dearest = max(self.dearest, cost_usd)
            self.first_spend.set()

    def spend(self, outcome: JudgeOutcome) -> None:
        """A row ended (its calls were counted as they went out)."""
        self.first_spend.set()

    def allows_another_row(self, in_flight: int) -> bool:
        if self.max_calls is not None and self.calls + in_flight + 1 > self.max_calls:
            self.exhausted = "calls"
        elif self.max_cost_usd is not None and self.calls:
            per_call = self.cost_usd / self.calls
            if self.cost_usd + (in_flight + 1) * per_call > self.max_cost_usd:
                self.exhausted = "cost"
        return self.exhausted is None

    @property
    def stop_reason(self) -> str | None:
        """Why no more rows started, with the figures as they are now (after the batch)."""
        if self.exhausted == "calls":
            return f"--max-calls {self.max_calls} reached ({self.calls} call(s) made)"
        if self.exhausted == "cost":
            return (
                f"--max-cost {self.max_cost_usd:g} USD reached ({self.cost_usd:.4f} USD spent in "
                f"{self.calls} call(s))"
            )
        return None


class JudgeUnavailable(Exception):
    """The first rows of a run all failed in transport (see :func:`run_batch`).

    Attributes:
        calls: the calls those rows made, and ``answered`` of them the judge answered
            before it stopped answering (a server restarted mid-row).
    """

    def __init__(self, failed: int, first_error: str, calls: int = 0, answered: int = 0) -> None:
        super().__init__(first_error)
        self.failed = failed
        self.first_error = first_error
        self.calls = calls
        self.answered = answered


#: HTTP statuses that say the credentials are refused: no later row can do better
AUTH_REFUSED = frozenset({401, 403})


class CredentialsRefused(Exception):
    """The provider answered a row with 401/403 (see :func:`run_batch`).

    Attributes:
        status: the HTTP status.
        message: the row's error, with the provider's (redacted) message.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BatchStepFailed(Exception):
    """A step of the provider's batch API (upload, create, poll, download) failed for good,
    after the retry policy; ``message`` is the provider's error, redacted."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message


def refused_credentials(outcome: JudgeOutcome) -> int | None:
    """The 401/403 status of an outcome whose row failed in transport on one, else ``None``."""
    if outcome.error is None or outcome.error.kind is not JudgeErrorKind.TRANSPORT:
        return None
    failed = [a for a in outcome.attempts if a.response is None]
    status = failed[-1].status if failed else None
    return status if status in AUTH_REFUSED else None


#: a row whose rule checks took longer than this yields to the event loop after them (a
#: Ctrl-C's cancellation takes effect between rows, not after the whole queue is prepared)
_SLOW_PREPARE_S = 0.05


async def run_batch(
    rows: Iterable[DialogueRow],
    builder: RequestBuilder,
    judge: Judge,
    store: RowSink,
    task_id: str,
    concurrency: int = 8,
    on_row: Callable[[RowResult], None] | None = None,
    stop_after_failures: int = 0,
    skip: Container[str] = frozenset(),
    budget: Budget | None = None,
    on_stored: Callable[[StoredRow], None] | None = None,
    judge_if: Callable[[DialogueRow], bool] | None = None,
    sampling: Sampling | None = None,
) -> None:
    """Judge every row with at most ``concurrency`` calls in flight; store each as it ends.

    A stored row is committed within ``COMMIT_INTERVAL_S`` (or every ``COMMIT_EVERY_ROWS``
    rows), whatever the calls still in flight do
    (:func:`rubric_engine.store.commit_timer.committing`).

    Args:
        rows: validated rows in input order.
        concurrency: at least 1.
        on_row: called after each row is stored (progress bars).
        stop_after_failures: when the first this-many finished rows all failed in transport
            (after the retry policy), stop instead of failing every row; 0 never stops.
        skip: rowIds already finished (``--resume``); their ``seq`` numbers are kept.
        budget: when it runs out no new row starts and no further call is made (the
            judge's backend asks it before each call, :class:`Budget`); rows in flight
            finish and are stored, except one whose next call found no room, which stays
            unjudged; ``budget.stop_reason`` says why.
        on_stored: called with each row exactly as it was stored (a report built from these
            equals one rebuilt from the store, without reading it back).
        judge_if: when given, rows it rejects are not sent to ``judge``: their rule checks
            decide them (CHECKED, as with ``--judge none``; ``--judge-when``).
        sampling: ``--samples K`` (docs/stability.md): each judged row is asked K times, each
            sample stored as it finishes, the row's result their aggregate.

    Raises:
        JudgeUnavailable: the stop above; the failed rows are stored.
        CredentialsRefused: a row failed on HTTP 401/403; it is stored (a TRANSPORT error,
            judged again on resume), no row starts after it, and the rows in flight finish and
            are stored before it is raised.
        RubricNotDelivered: the judge found the server dropped the system message; the
            rows finished before it are stored.
    """
    queue: asyncio.Queue[PreparedRow | None] = asyncio.Queue(maxsize=2 * concurrency)

    async def _sampled(
        prepared: PreparedRow, chosen: Judge, sampling: Sampling
    ) -> tuple[StoredRow, JudgeOutcome | None]:
        asked: list[JudgeOutcome] = []

        def spent(outcome: JudgeOutcome) -> None:
            asked.append(outcome)
            if budget is not None:
                budget.spend(outcome)

        samples = await ask_samples(
            chosen,
            prepared.request,
            sampling,
            lambda outcome: stored_row(
                prepared, outcome, row_result(builder.compiled, prepared, outcome)
            ),
            lambda sample: store.add_sample(task_id, sample),
            spent,
        )
        result = aggregate_row(builder.compiled, prepared.case.all, samples)
        dialogue = prepared.row.model_dump(mode="json", by_alias=True)
        return sampled_row(prepared.seq, dialogue, result, samples), (asked[-1] if asked else None)

    finished = [0, 0]  # rows, transport failures among the first rows
    failed_calls = [0, 0]  # the calls of those failures, and those the judge answered
    in_flight = [0]
    #: a 401/403: no row starts after it, the rows in flight finish and are stored, then it
    #: is raised (their answers were paid for)
    refusal: list[CredentialsRefused] = []

    async def worker() -> None:
        while (prepared := await queue.get()) is not None:
            if refusal:
                continue  # not started: judged on resume
            in_flight[0] += 1
            chosen = judge if judge_if is None or judge_if(prepared.row) else _NO_JUDGE
            try:
                if chosen is judge and sampling is not None and sampling.many:
                    stored, outcome = await _sampled(prepared, chosen, sampling)
                else:
                    outcome = await chosen.judge(prepared.request)
                    if budget is not None:
                        budget.spend(outcome)
                    result = row_result(builder.compiled, prepared, outcome)
                    stored = stored_row(prepared, outcome, result)
            except BudgetSpent:
                continue  # a call the budget had no room for: the row stays unjudged
            finally:
                in_flight[0] -= 1
            result = stored.result
            store.add_row(task_id, stored)
            if on_stored is not None:
                on_stored(stored)
            if on_row is not None:
                on_row(result)
            finished[0] += 1
            if outcome is None:  # every sample was kept from before
                continue
            if outcome.error is not None and outcome.error.kind is JudgeErrorKind.TRANSPORT:
                finished[1] += 1
                failed_calls[0] += len(outcome.attempts)
                failed_calls[1] += sum(a.response is not None for a in outcome.attempts)
            refused = refused_credentials(outcome)
            if refused is not None and not refusal:  # every later row would be refused too
                assert outcome.error is not None
                refusal.append(CredentialsRefused(refused, outcome.error.message))
            # a refusal says more than "unreachable": it is raised once the rows in flight end
            if stop_after_failures and finished == [stop_after_failures] * 2 and not refusal:
                assert outcome.error is not None
                raise JudgeUnavailable(finished[1], outcome.error.message, *failed_calls)

    async def produce() -> None:
        for seq, row in enumerate(rows):
            if refusal:
                break
            if row.row_id in skip:
                continue
            if budget is not None:
                ahead = in_flight[0] + queue.qsize()  # rows waiting will make calls too
                if budget.max_cost_usd is not None and ahead and not budget.first_spend.is_set():
                    await budget.first_spend.wait()  # a cost budget starts with one probe row
                    ahead = in_flight[0] + queue.qsize()
                if not budget.allows_another_row(ahead):
                    break
            started = time.perf_counter()
            prepared = builder.prepare(seq, row)
            if time.perf_counter() - started > _SLOW_PREPARE_S:
                await asyncio.sleep(0)  # long rule checks: let a Ctrl-C take effect now
            await queue.put(prepared)
        for _ in range(workers):
            await queue.put(None)

    workers = max(1, concurrency)
    try:
        # rows are committed on a clock too, not only when a later row arrives: while the
        # remaining calls are slow, answered rows must not wait uncommitted for a SIGKILL
        async with committing(store), asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker())
            group.create_task(produce())
    except* (JudgeUnavailable, CredentialsRefused, RubricNotDelivered) as stopped:
        raise stopped.exceptions[0] from None
    except* StoreError as unwritable:  # a worker's rows could not be sent: a full disk
        raise unwritable.exceptions[0] from None
    if refusal:
        raise refusal[0]
