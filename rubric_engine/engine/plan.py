"""What a run needs before its first judge call: a :class:`Plan`, for a new task or a resumed one.

A fresh plan is made from the options alone; a resumed one from the stored task (its rubric
snapshot, prompt, judge settings and inputs), with every check a fresh run makes. Either way
everything that can fail before the first judge call fails here, in the order that shows the
cheapest mistakes first.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from rubric_engine.batch.settings import BatchSettings
from rubric_engine.engine.options import (
    DEFAULTS,
    MODES,
    TRANSPORT_PARAMS,
    Mode,
    ScoreOptions,
    effective_model,
    effective_output_mode,
)
from rubric_engine.engine.panel import panel_of
from rubric_engine.engine.pipeline import RequestBuilder
from rubric_engine.engine.preflight import (
    Inputs,
    check_cassette_folder,
    check_cost_known,
    check_credentials,
    check_something_to_check,
    is_local,
    read_inputs,
)
from rubric_engine.engine.task import (
    QUEUED_FOR_WORKERS,
    RETRIED_ON_RESUME,
    check_inputs_unchanged,
    resume_command,
    rules_only_rubric,
    samples_of,
)
from rubric_engine.errors import ConfigurationError
from rubric_engine.judge.backends import (
    Backend,
    LiveBackend,
    LiveSettings,
    RecordBackend,
    ReplayBackend,
)
from rubric_engine.judge.cassettes.cassette import CassetteWriter
from rubric_engine.judge.cassettes.index import CassetteIndex
from rubric_engine.judge.endpoints import SELF_HOSTED_PREFIXES
from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS, InstructorJudge
from rubric_engine.judge.limiter import AdaptiveLimit
from rubric_engine.judge.output_modes import OutputMode
from rubric_engine.judge.prompt import DEFAULT_PROMPT, PromptTemplate, load_prompt
from rubric_engine.judge.server_checks import (
    SELF_HOSTED_MARGIN,
    ContextLimitWarning,
    DeliveryCheck,
    JudgeServerWarning,
    litellm_estimate,
    oversized_rows,
    server_tokenizer,
)
from rubric_engine.report.render.output import check_report_folder
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rubric.versions import rubric_for_scoring, verified_snapshot
from rubric_engine.store.task_state import TaskState
from rubric_engine.store.task_store import TaskRecord, TaskStore


@dataclass
class Plan:
    """Everything one run needs; made and checked before the first judge call.

    Attributes:
        template: ``None`` for ``--judge none``.
        params: the judge's sampling parameters (``temperature``, ``max_tokens``).
        backend: the judge's transport; ``None`` for ``--judge none``.
        out: the report folder (checked writable).
        builder: renders the requests (the system text once per run).
    """

    options: ScoreOptions
    rubric: EvalRubric
    template: PromptTemplate | None
    params: dict[str, Any]
    inputs: Inputs
    backend: ReplayBackend | LiveBackend | None
    out: Path
    builder: RequestBuilder = field(init=False)
    #: ``json``, ``schema`` or ``tools`` (the task's, on resume)
    output_mode: str = "json"
    #: the judge model's context in tokens, when known (``--max-context`` or litellm)
    context_limit: int | None = None
    #: ``schema`` mode's form a resumed task found by probing (its ``outputForm``)
    settled_form: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.builder = RequestBuilder(self.rubric, self.template)

    def judge(self, backend: Backend | None = None) -> InstructorJudge:
        """The run's judge (:func:`build_judge`), asking ``backend`` when given (the plan's
        own wrapped, e.g. :class:`~rubric_engine.judge.stored_replies.KeptAnswers`)."""
        assert self.backend is not None
        return build_judge(
            backend or self.backend,
            self.rubric,
            self.options,
            self.params,
            self.output_mode,
            self.context_limit,
            evidence=self.builder.asks_evidence,
            settled_form=self.settled_form,
        )

    def judges(self, backend: Backend | None = None) -> list[tuple[InstructorJudge, str]]:
        """Each judge of the run with its model (docs/panels.md): the run's judge alone, or
        one per judge of a panel, in order, in the task's output mode, all asking the same
        backend (a cassette or provider call is keyed and priced by its request's model)."""
        if not self.options.panel:
            return [(self.judge(backend), effective_model(self.options))]
        assert self.backend is not None
        out = []
        for model in self.options.panel:
            options = replace(self.options, model=model)
            judge = build_judge(
                backend or self.backend,
                self.rubric,
                options,
                self.params,
                self.output_mode,
                self.context_limit,
                evidence=self.builder.asks_evidence,
                settled_form=self.settled_form if model == self.options.model else None,
            )
            out.append((judge, effective_model(options)))
        return out


def build_judge(
    backend: Backend,
    rubric: EvalRubric,
    options: ScoreOptions,
    params: dict[str, Any],
    output_mode: str,
    max_context: int | None,
    evidence: bool = False,
    settled_form: dict[str, Any] | None = None,
) -> InstructorJudge:
    """A run's judge, in the task's output mode and prompt shape (``system_as_user``); live
    and record compare reported prompt tokens (the rubric must reach the model, see
    :mod:`rubric_engine.judge.server_checks`). Shared by ``score``, ``--resume`` and the
    workers of :mod:`rubric_engine.engine.workers`. ``evidence``: the prompt asks for evidence turns
    (``judge_v3``), so the verdict model has the ``evidence`` field."""
    model = effective_model(options)
    delivery = None
    if not isinstance(backend, ReplayBackend):
        # litellm's tokenizer is loaded only when a reported count needs checking
        delivery = DeliveryCheck(litellm_estimate(model))
    return InstructorJudge(
        backend,
        rubric,
        model,
        params,
        options.max_reasks,
        output_mode=cast(OutputMode, output_mode),
        system_as_user=options.system_as_user,
        delivery=delivery,
        max_context=max_context,
        evidence=evidence,
        settled_form=settled_form,
    )


def context_limit(options: ScoreOptions) -> int | None:
    """``--max-context``, else litellm's ``max_input_tokens`` for the model, else ``None``."""
    if options.max_context is not None:
        return options.max_context
    from rubric_engine.judge.backends import import_litellm
    from rubric_engine.judge.model_table import answers_for, context_size

    model = effective_model(options)
    if answers_for(model):
        return context_size(model)  # litellm's table, litellm not imported
    try:
        info = import_litellm().get_model_info(model)
    except Exception:  # litellm raises for a model it has no entry for
        return None
    limit = info.get("max_input_tokens") or info.get("max_tokens")
    return int(limit) if limit else None


def judge_unreachable(options: ScoreOptions) -> tuple[str, str] | None:
    """``(api base, why)`` when a run would call a server (``--api-base``, live or record
    mode) that refuses a connection now; nothing is sent to it."""
    if not options.api_base or options.mode not in ("live", "record"):
        return None
    from rubric_engine.judge.server_checks import unreachable
    from rubric_engine.judge.transport import split_base

    why = unreachable(options.api_base)
    return None if why is None else (str(split_base(options.api_base)[0]), why)


def warn_unreachable(options: ScoreOptions) -> None:
    """Before the first call: warn (:class:`JudgeServerWarning`) when the ``--api-base`` server
    refuses a connection now (:func:`judge_unreachable`). The run still starts (a server may
    be starting beside it) and waits for it as its retries allow, which took over a minute
    with nothing said."""
    found = judge_unreachable(options)
    if found is None:
        return
    base, why = found
    waits = (
        f"the run waits up to {options.restart_wait_s:g} s for it (--restart-wait), then stops"
        if is_local(base)  # the same host as --api-base's
        else "each row's call is retried, then the run stops"
    )
    warnings.warn(
        JudgeServerWarning(
            f"judge server not reachable at {base} ({why}); {waits}: start it, or check "
            "--api-base (Ctrl-C stops the run; --resume continues it)"
        ),
        stacklevel=2,
    )


def warn_oversized(plan: Plan, skip: frozenset[str] = frozenset()) -> None:
    """Before the first call: warn (:class:`ContextLimitWarning`) naming the rows whose
    prompts, with room for the answer (``max_tokens``), will not fit the known context; they
    will end as CONTEXT_EXCEEDED rows. A self-hosted server is asked for its own count
    (``/tokenize``, :func:`server_tokenizer`); without one, tiktoken's count is raised by
    :data:`SELF_HOSTED_MARGIN` and the warning says so."""
    limit = plan.context_limit
    if limit is None or plan.template is None or plan.options.mode == "replay":
        return
    estimate, how = prompt_counter(plan.options)
    reserve = int(plan.params.get("max_tokens") or 0)

    def prompts() -> Iterator[tuple[str, list[dict[str, Any]]]]:
        # one row's prompt at a time: a million rows' would not fit in memory
        for seq, row in enumerate(plan.inputs.stream()):
            if row.row_id not in skip:
                yield row.row_id, [dict(m) for m in plan.builder.prepare(seq, row).request.messages]

    try:
        over = oversized_rows(prompts(), limit, estimate, reserve)
    except OSError:  # the tokenizer endpoint stopped answering: tiktoken with the margin
        estimate, how = prompt_counter(plan.options, ask_server=False)
        over = oversized_rows(prompts(), limit, estimate, reserve)
    if over:
        named = ", ".join(f"{r} (~{n} tokens)" for r, n in over[:10])
        more = f" and {len(over) - 10} more" if len(over) > 10 else ""
        warnings.warn(
            ContextLimitWarning(
                f"{len(over)} row(s) will not fit the judge's context of {limit} tokens with "
                f"room for a {reserve}-token answer (--max-tokens): {named}{more}, {how}; they "
                "will be CONTEXT_EXCEEDED rows (the rest are judged). Give --max-context N if "
                "the server's limit differs"
            ),
            stacklevel=2,
        )


def prompt_counter(
    options: ScoreOptions, ask_server: bool = True
) -> tuple[Callable[[list[dict[str, Any]]], int], str]:
    """How a run counts its prompts' tokens, and the words that say how (shared by the
    context check and ``score --dry-run``)."""
    model = effective_model(options)
    estimate = litellm_estimate(model)
    # a batch goes through a provider's batch API, which has no tokenizer endpoint to ask
    self_hosted = (
        bool(options.api_base)
        and options.mode != "batch"
        and model.split("/", 1)[0] in SELF_HOSTED_PREFIXES
    )
    if not self_hosted:
        return estimate, "counted with the model's tokenizer (litellm)"
    assert options.api_base is not None
    served = server_tokenizer(options.api_base, model) if ask_server else None
    if served is not None:
        return served, "counted by the server's /tokenize"
    margin = SELF_HOSTED_MARGIN

    def raised(messages: list[dict[str, Any]]) -> int:
        return math.ceil(estimate(messages) * margin)

    return raised, (
        f"counted with tiktoken plus a {round((margin - 1) * 100)}% margin (the server has no "
        "/tokenize endpoint, and other tokenizers count more for the same text)"
    )


class AlreadyComplete(Exception):
    """``--resume`` of a COMPLETED task with every row: nothing to judge; its report files
    go to ``out`` (checked writable), e.g. when a kill came before they were written."""

    def __init__(self, out: Path) -> None:
        super().__init__(str(out))
        self.out = out


def fresh_plan(
    options: ScoreOptions, out_for: str, judged_here: bool = True, dry: bool = False
) -> Plan:
    """The plan of a new task whose id will be ``out_for`` (the default report folder's name).

    ``judged_here=False`` plans a task queued for workers (``score --workers-only``): they
    judge it with their own credentials and anyone writes its report later, so this
    machine's credentials and report folder are not checked (the cassette folder and the
    price ``--max-cost`` needs are). ``dry=True`` (``score --dry-run``) makes no report folder
    and leaves the context check to :mod:`rubric_engine.engine.dry_run`, which counts every
    prompt.

    Raises:
        InputError, LifecycleError, CassetteError, ConfigurationError: see
            :func:`rubric_engine.engine.score_async`.
    """
    rules_only = options.judge == "none"
    rubric = (
        rubric_for_scoring(options.rubric, options.store, options.draft)
        if options.rubric
        else rules_only_rubric()
    )
    template = None
    if not rules_only:
        template = load_prompt(options.prompt_version or DEFAULT_PROMPT)
    inputs = read_inputs(options)
    backend = None
    if rules_only:
        check_something_to_check(rubric, inputs.stream())
    elif judged_here:
        backend = judge_backend(options, rubric)
    else:  # workers judge it with their own credentials; the cassette folder is checked
        make_backend(options, rubric)
        check_cost_known(options)
    out = options.out or Path("reports") / out_for
    if judged_here and not dry:
        check_report_folder(out)
    params = {
        **DEFAULT_PARAMS,
        "temperature": float(options.temperature),
        "max_tokens": int(options.max_tokens),
        **({"seed": int(options.seed)} if options.seed is not None else {}),
        **sampling_params(options),
    }
    plan = Plan(options, rubric, template, params, inputs, backend, out)
    plan.output_mode = effective_output_mode(options)
    if not rules_only and options.mode != "replay":
        if not dry:
            warn_unreachable(options)
        plan.context_limit = context_limit(options)
        if not dry:
            warn_oversized(plan)
    return plan


def resumed_plan(
    options: ScoreOptions, store: TaskStore, task_id: str
) -> tuple[Plan, frozenset[str]]:
    """The plan that finishes ``task_id``, and the rowIds it keeps (they are not judged again).

    The task is set RUNNING once every check has passed.

    Raises (besides the errors below) :class:`AlreadyComplete` for a COMPLETED task whose
    every row has a result: there is nothing to judge, only its files to (re)write.

    Raises:
        TaskNotFoundError: no such task.
        ConfigurationError: the task cannot be resumed (workers judge it, rule checks only,
            no run settings, nothing left, another prompt template, its inputs changed or were
            in memory).
        StoreError: its rubric snapshot was altered; its rows are signed and the signing key
            is not set.
    """
    task = store.task(task_id)
    store.digests(task_id)  # a signed task's rows are written only with its key
    settings = task.extra.get("run")
    if task.extra.get(QUEUED_FOR_WORKERS):  # resuming would write rows outside the claims
        raise ConfigurationError(
            f"task {task_id} is judged by workers (score --workers-only); finish it with "
            f"`rubric-eval work {task_id} --store URL`, not --resume"
        )
    if task.judge_mode == "none":
        raise ConfigurationError(
            f"task {task_id} ran rule checks only (--judge none): there is no judge call to "
            "save, so it is not resumed; score its inputs again with --judge none"
        )
    if task.judge_mode == "batch-file":
        raise ConfigurationError(
            f"task {task_id} was made by `rubric-eval batch export`: its answers come back "
            f"through `rubric-eval batch import {task_id} RESULTS.jsonl`, and the requests it "
            f"still needs are written by `rubric-eval batch export {task_id} --out DIR`"
        )
    if task.judge_mode not in MODES or settings is None:
        raise ConfigurationError(
            f"task {task_id} ({task.judge_mode}) cannot be resumed: it keeps no run "
            "settings; score its inputs again"
        )
    outcomes = store.row_outcomes(task_id)
    done = frozenset(r for r, kind in outcomes.items() if kind not in RETRIED_ON_RESUME)
    first_out = settings.get("out")
    out = options.out or (Path(first_out) if first_out else Path("reports") / task_id)
    if task.state == TaskState.COMPLETED and len(done) == task.row_count:
        check_report_folder(out)
        raise AlreadyComplete(out)
    rubric, template, params = stored_judge(
        task, "resume it with the rubric-eval version that started it"
    )
    if options.api_base and task.judge_mode == "replay":
        raise ConfigurationError(
            f"task {task_id} is a replay, which never calls a provider; drop --api-base"
        )
    if settings.get("apiBaseHadCredentials") and not options.api_base:
        raise ConfigurationError(
            f"task {task_id} was judged at {settings.get('apiBase')} with credentials in the "
            "URL, which are never stored; pass --api-base again with them, e.g. "
            f"`{resume_command(task_id, options.store)} --api-base URL`"
        )
    resumed = replace(
        options,
        inputs=[Path(p) for p in settings["inputs"]],
        input_format=settings["inputFormat"],
        mode=cast(Mode, task.judge_mode),
        cassettes=Path(settings["cassettes"]),
        # a panel keeps its judges' models as given (judge 1's is the task's model)
        model=panel_of(task.extra)[0] if panel_of(task.extra) else task.model,
        panel=panel_of(task.extra),
        api_base=options.api_base or settings.get("apiBase"),
        api_key_env=options.api_key_env or settings.get("apiKeyEnv"),
        timeout_s=float(settings.get("timeoutS") or options.timeout_s),
        prompt_cache=options.prompt_cache and settings.get("promptCache", True) is not False,
        max_reasks=int(task.judge_params["maxReasks"]),
        samples=samples_of(task.extra)[0],
        samples_when=samples_of(task.extra)[1],
        judge_when=settings.get("judgeWhen"),
        output_mode=output_mode_of(task.judge_params),
        system_as_user=bool(task.judge_params.get("systemAsUser")),
        batch=_resumed_batch(options, settings),
        # the task's concurrency (a one-slot server stays at one) unless another is given
        concurrency=(
            int(settings.get("concurrency") or options.concurrency)
            if options.concurrency == DEFAULT_CONCURRENCY
            else options.concurrency
        ),
    )
    check_inputs_unchanged(task, list(resumed.inputs))
    inputs = read_inputs(resumed)
    backend = judge_backend(resumed, rubric)
    check_report_folder(out)
    store.set_state(task_id, TaskState.RUNNING)
    plan = Plan(resumed, rubric, template, params, inputs, backend, out)
    plan.output_mode = effective_output_mode(resumed)
    form = task.extra.get("outputForm")
    plan.settled_form = form if isinstance(form, dict) else None
    if resumed.mode != "replay":
        warn_unreachable(resumed)
        plan.context_limit = context_limit(resumed)
        warn_oversized(plan, done)
    return plan, done


def output_mode_of(judge_params: dict[str, Any]) -> str:
    """The output mode a task recorded (``instructor/JSON`` → ``json`` …)."""
    from rubric_engine.judge.instructor_adapter import OUTPUT_MODES

    recorded = str(judge_params.get("outputMode") or "instructor/JSON").split("/")[-1]
    return {v: k for k, v in OUTPUT_MODES.items()}.get(recorded, "json")


def stored_judge(task: TaskRecord, fix: str) -> tuple[EvalRubric, PromptTemplate, dict[str, Any]]:
    """What a stored task is judged with: its rubric snapshot, prompt template and sampling
    parameters (shared by ``--resume`` and :mod:`rubric_engine.engine.workers`'s workers).

    Args:
        fix: what to do when this engine's template differs, e.g. ``"resume it with the
            rubric-eval version that started it"``; the task's engine version is appended.

    Raises:
        StoreError: the rubric snapshot was altered.
        ConfigurationError: this engine's prompt template differs from the task's.
    """
    rubric = verified_snapshot(task.rubric_snapshot, task.rubric_hash, f"task {task.id}")
    template = load_prompt(task.prompt_version)
    if template.hash != task.prompt_hash:
        raise ConfigurationError(
            f"task {task.id} was judged with prompt {task.prompt_version} {task.prompt_hash}, "
            f"and this rubric-eval's template has {template.hash}; {fix} "
            f"({task.engine_version})"
        )
    params = {
        k: v
        for k, v in task.judge_params.items()
        if k not in ("maxReasks", "outputMode", "systemAsUser")
    }
    return rubric, template, params


def judge_backend(options: ScoreOptions, rubric: EvalRubric) -> ReplayBackend | LiveBackend:
    """:func:`make_backend`, then the provider's credentials and (``--max-cost``) its price.

    Raises:
        ConfigurationError, CassetteError: see :func:`make_backend`,
            :func:`~rubric_engine.engine.preflight.check_credentials` and
            :func:`~rubric_engine.engine.preflight.check_cost_known`.
    """
    backend = make_backend(options, rubric)
    for model in options.panel or (options.model,):  # each judge of a panel
        check_credentials(replace(options, model=model))
        check_cost_known(replace(options, model=model))
    return backend


def sampling_params(options: ScoreOptions) -> dict[str, Any]:
    """The ``--judge-param`` values that are part of the request (and its cassette key)."""
    return {k: v for k, v in options.judge_params.items() if k not in TRANSPORT_PARAMS}


def _resumed_batch(options: ScoreOptions, settings: dict[str, Any]) -> BatchSettings:
    """A batch task resumes with its own batch settings; a new poll interval may be given."""
    if "batch" not in settings:
        return options.batch
    stored = BatchSettings.from_json(settings["batch"])
    if options.batch.poll_interval_s != BatchSettings().poll_interval_s:
        return replace(stored, poll_interval_s=options.batch.poll_interval_s)
    return stored


DEFAULT_CONCURRENCY = DEFAULTS.concurrency


def make_backend(options: ScoreOptions, rubric: EvalRubric) -> ReplayBackend | LiveBackend:
    """The judge's transport: cassettes for a replay, the provider (and a writer) otherwise.

    Raises:
        ConfigurationError: a replay's cassette folder is missing.
        CassetteError: a cassette file is malformed.
    """
    if options.mode == "replay":
        check_cassette_folder(options)
        flag = "--judge" if options.panel else "--model"  # --model is refused beside a panel
        return ReplayBackend(CassetteIndex.load(options.cassettes), flag)
    from rubric_engine.judge.secrets import remember_run

    # a resumed task's --api-key-env comes from the task: its value joins the redaction list
    remember_run(options.api_base, options.api_key_env, options.judge_params)
    limiter = AdaptiveLimit(options.concurrency)
    retry = options.retry
    if not retry.after_timeout_s:  # a timed-out server may still be generating: let it finish
        retry = replace(retry, after_timeout_s=min(options.timeout_s, retry.max_wait_s))
    if options.api_base and is_local(options.api_base) and not retry.restart_wait_s:
        retry = replace(retry, restart_wait_s=options.restart_wait_s)  # a restart: wait for it
    live = LiveSettings(
        api_base=options.api_base,
        api_key_env=options.api_key_env,
        timeout_s=options.timeout_s,
        extra={k: v for k, v in options.judge_params.items() if k in TRANSPORT_PARAMS},
        retry=retry,
        prompt_cache=options.prompt_cache,
        transport=options.transport,
    )
    if options.mode == "record" or (options.mode == "batch" and options.batch.record):
        stems = [Path(p).stem for p in options.inputs] + (["rows"] if options.rows else [])
        writer = CassetteWriter(options.cassettes / rubric.key / f"{'+'.join(stems)}.jsonl")
        return RecordBackend(
            live, writer, provider=effective_model(options).split("/")[0], limiter=limiter
        )
    return LiveBackend(live, limiter)
