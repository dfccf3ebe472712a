"""``score`` as a library call: check everything, create the task, run, report.

Everything that can be checked before the first judge call is (rubric, prompt, every input
row, options, the cassette folder, credentials, the store and the report folder), so a mistake
costs nothing. The CLI is a thin shell over :func:`score`; tests and notebooks call it directly.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

from rubric_engine import DEFAULT_STORE, __version__
from rubric_engine.cassette import CassetteIndex, CassetteWriter
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import INPUT_FORMATS, DialogueSource, InputFormat
from rubric_engine.errors import ConfigurationError, RubricEvalError, StoreError
from rubric_engine.judge.backends import LiveBackend, LiveSettings, RecordBackend, ReplayBackend
from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS, InstructorJudge
from rubric_engine.judge.limiter import AdaptiveLimit
from rubric_engine.judge.protocol import Judge
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.pipeline import Budget, JudgeUnavailable, NoJudge, RequestBuilder, run_batch
from rubric_engine.prompt import DEFAULT_PROMPT, PromptTemplate, load_prompt
from rubric_engine.registry import rubric_for_scoring, verified_snapshot
from rubric_engine.report import (
    ReportFiles,
    ReportRow,
    StoredTask,
    load_task,
    report_from_task,
    report_row,
    write_reports,
)
from rubric_engine.results import JudgeErrorKind, RowResult
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rules.run import rules_only_rubric
from rubric_engine.store import StoredRow, TaskRecord, TaskStore, new_task_id
from rubric_engine.stores.location import StoreLocation, store_exists

Mode = Literal["replay", "record", "live"]
MODES: tuple[str, ...] = ("replay", "record", "live")
JudgeKind = Literal["llm", "none"]
JUDGES: tuple[str, ...] = ("llm", "none")
DEFAULT_MODEL = "openai/gpt-4o-mini"
ANALYSIS_VERSION = "normalizer/1"


@dataclass
class ScoreOptions:
    """Everything ``rubric-eval score`` takes. Units in names; defaults are the CLI's.

    ``api_key_env`` names the variable holding the key; ``None`` lets litellm read the
    provider's usual one (``OPENAI_API_KEY`` for ``openai/…``).
    """

    inputs: Sequence[Path] = ()
    #: a published ``KEY`` or ``KEY@N`` in ``store``, or a pack file (needs ``draft=True``);
    #: optional with ``judge="none"``
    rubric: str | Path = ""
    mode: Mode = "replay"
    cassettes: Path = Path("cassettes")
    model: str = DEFAULT_MODEL
    api_base: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    store: StoreLocation = DEFAULT_STORE
    out: Path | None = None
    input_format: InputFormat = "auto"
    prompt_version: str = DEFAULT_PROMPT
    max_reasks: int = 2
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: allow a pack file (a draft) for a trial run; the task and report are marked DRAFT
    draft: bool = False
    #: finish this stored task instead of starting one (inputs and rubric come from the task)
    resume: str | None = None
    #: stop starting rows once this many provider calls (failed ones and re-asks included)
    max_calls: int | None = None
    #: stop starting rows once this much is spent, in USD (needs a model litellm has a price for)
    max_cost_usd: float | None = None
    #: ``none``: no judge call, no cassette, no key; rows are decided by rule checks alone
    judge: JudgeKind = "llm"


@dataclass
class ScoreResult:
    task_id: str
    report: dict[str, Any]
    files: ReportFiles
    cassette_misses: list[RowResult] = field(default_factory=list)
    #: why the run stopped before every row was judged (a budget ran out), else ``None``
    stopped: str | None = None


class JudgeUnavailableError(RubricEvalError):
    """The first rows all failed in transport; the run stopped instead of failing every row."""

    exit_code = 5

    def __init__(
        self, task_id: str, saved: int, total: int, first_error: str, store: StoreLocation
    ) -> None:
        which = f"all {total} row(s)" if saved == total else f"the first {saved} of {total} row(s)"
        rest = "" if saved == total else ", so the rest were not tried"
        super().__init__(
            f"stopped task {task_id}: {which} failed to reach the judge{rest}. First error: "
            f"{first_error}. Check --model, --api-base and the API key. The failed rows are "
            f"kept: {report_command(task_id, store)}; once the judge is reachable, "
            f"`{resume_command(task_id, store)}` judges them again"
        )
        self.task_id = task_id


def report_command(task_id: str, store: StoreLocation) -> str:
    """The command that shows a task's report, with ``--store`` when it is not the default."""
    extra = "" if store == DEFAULT_STORE else f" --store {store}"
    return f"rubric-eval report {task_id}{extra}"


def resume_command(task_id: str, store: StoreLocation) -> str:
    """The command that finishes a stopped or interrupted task."""
    extra = "" if store == DEFAULT_STORE else f" --store {store}"
    return f"rubric-eval score --resume {task_id}{extra}"


#: JUDGE_ERROR kinds a resumed run judges again: the judge never answered these rows
RETRIED_ON_RESUME = frozenset({JudgeErrorKind.TRANSPORT, JudgeErrorKind.CASSETTE_MISS})


@contextmanager
def task_lock(store: StoreLocation, task_id: str) -> Iterator[None]:
    """Hold an exclusive lock on a task while it runs, so it is never run twice at once
    (SQLite: a file lock beside the store; PostgreSQL: an advisory lock).

    Raises:
        StoreError: another process holds it.
    """
    with TaskStore(store) as opened, opened.task_lock(task_id):
        yield


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


#: options a resumed task takes from the task itself, with the flag that sets each
_FROM_TASK = (
    ("model", "--model"),
    ("mode", "--mode"),
    ("cassettes", "--cassettes"),
    ("input_format", "--input-format"),
    ("max_reasks", "--max-reasks"),
    ("temperature", "--temperature"),
    ("max_tokens", "--max-tokens"),
    ("draft", "--draft"),
    ("judge", "--judge"),
)


def _check_options(options: ScoreOptions) -> None:
    if options.resume is not None and (options.inputs or options.rubric):
        raise ConfigurationError(
            "--resume takes the inputs and rubric the task started with; drop INPUT and --rubric"
        )
    if options.resume is not None:
        defaults = ScoreOptions()
        given = [
            flag for name, flag in _FROM_TASK if getattr(options, name) != getattr(defaults, name)
        ]
        if given:
            raise ConfigurationError(
                f"--resume continues the task as it started (its judge, model, mode, cassettes, "
                f"input format and sampling); drop {', '.join(given)}, or start a new task"
            )
    if options.judge not in JUDGES:
        raise ConfigurationError(
            f"--judge {options.judge!r} is not valid; use one of {', '.join(JUDGES)}"
        )
    if options.resume is None and not (
        options.inputs and (options.rubric or options.judge == "none")
    ):
        raise ConfigurationError(
            "give INPUT file(s) and --rubric KEY (or --resume TASK to finish a stored task; or "
            "--judge none to run the rows' rule checks alone)"
        )
    if options.judge == "none" and (options.api_base or options.mode != "replay"):
        raise ConfigurationError(
            "--judge none calls no judge; drop --mode and --api-base (they are for the LLM judge)"
        )
    if options.max_calls is not None and options.max_calls < 1:
        raise ConfigurationError("--max-calls must be at least 1")
    if options.max_cost_usd is not None and not (
        math.isfinite(options.max_cost_usd) and options.max_cost_usd > 0
    ):
        raise ConfigurationError(
            f"--max-cost {options.max_cost_usd!r} is not valid; give a positive number of USD"
        )
    if options.mode not in MODES:
        raise ConfigurationError(
            f"--mode {options.mode!r} is not valid; use one of {', '.join(MODES)}"
        )
    if options.input_format not in INPUT_FORMATS:
        raise ConfigurationError(
            f"--input-format {options.input_format!r} is not valid; use "
            f"one of {', '.join(INPUT_FORMATS)}"
        )
    if options.concurrency < 1:
        raise ConfigurationError("--concurrency must be at least 1")
    if options.max_reasks < 0:
        raise ConfigurationError("--max-reasks must be 0 or more")
    if not 0 <= options.temperature <= 2:
        raise ConfigurationError("--temperature must be between 0 and 2")
    if options.timeout_s <= 0:
        raise ConfigurationError("--timeout must be a positive number of seconds")
    if options.api_base and not options.api_base.startswith(("http://", "https://")):
        raise ConfigurationError(
            f"--api-base {options.api_base!r} needs a scheme, e.g. http://127.0.0.1:8000/v1"
        )
    if options.api_base and options.mode == "replay":
        raise ConfigurationError(
            "--api-base is for --mode live or record; replay never calls a provider"
        )
    resolved = [Path(p).resolve() for p in options.inputs]
    twice = {str(p) for p in options.inputs if resolved.count(Path(p).resolve()) > 1}
    if twice:
        raise ConfigurationError(
            f"{', '.join(sorted(twice))} given more than once; pass each input file once"
        )


def _check_inputs(options: ScoreOptions) -> tuple[list[DialogueSource], int]:
    sources = [DialogueSource(Path(p), options.input_format) for p in options.inputs]
    seen: dict[str, str] = {}
    total = sum(source.validate(seen) for source in sources)  # all files, before any judge call
    return sources, total


def effective_model(options: ScoreOptions) -> str:
    """``--api-base`` means an OpenAI-compatible server: a bare model name gets ``openai/``."""
    if options.api_base and "/" not in options.model:
        return f"openai/{options.model}"
    return options.model


def _check_credentials(options: ScoreOptions) -> None:
    """Live and record need a known provider, and a key unless ``--api-base`` is given."""
    if options.mode == "replay":
        return
    from rubric_engine.judge.backends import import_litellm

    litellm = import_litellm()
    model = effective_model(options)
    try:
        litellm.get_llm_provider(model=model, api_base=options.api_base)
    except Exception as exc:  # litellm raises several kinds for an unknown provider
        raise ConfigurationError(
            f"--model {options.model!r}: litellm cannot tell which provider "
            "serves it; write it as provider/model, e.g. "
            "openai/gpt-4o-mini"
        ) from exc
    if options.api_key_env is not None:
        if not os.environ.get(options.api_key_env):
            raise ConfigurationError(
                f"${options.api_key_env} (from --api-key-env) is not set; "
                "export the API key in it first"
            )
        return
    if options.api_base:
        return
    missing = litellm.validate_environment(model=model).get("missing_keys")
    if missing:
        raise ConfigurationError(
            f"--mode {options.mode} with model {options.model!r} needs "
            f"{', '.join(missing)} set in the environment; or pass "
            "--api-base for an OpenAI-compatible server, or --mode replay"
        )


def _check_cost_known(options: ScoreOptions) -> None:
    """``--max-cost`` can only be kept when litellm knows the model's price."""
    if options.max_cost_usd is None:
        return
    if options.mode == "replay":
        raise ConfigurationError(
            "--max-cost is for --mode live or record: replayed answers cost nothing, so the "
            "budget could never stop the run (use --max-calls to cap a replay)"
        )
    from rubric_engine.judge.backends import import_litellm

    model = effective_model(options)
    try:
        info = import_litellm().get_model_info(model)
        known = bool(info.get("input_cost_per_token"))
    except Exception:  # litellm raises for a model it has no entry for
        known = False
    if not known:
        raise ConfigurationError(
            f"--max-cost needs a model litellm knows the price of, and {model!r} has none; "
            "use --max-calls instead"
        )


def _check_something_to_check(rubric: EvalRubric, sources: Sequence[DialogueSource]) -> None:
    """``--judge none`` decides rows by rule checks alone: refuse a run where there are none."""
    if any(r.check is not None for r in rubric.common_requirements):
        return
    if any(row.expected for source in sources for row in source):
        return
    raise ConfigurationError(
        "--judge none runs rule checks only, and there are none: no row has `expected` checks "
        "(or a seed 001/004 case shape) and no common requirement of the pack has a `check`. "
        "Add checks (see docs/rule-checks.md) or score with the LLM judge"
    )


def _check_writable(folder: Path, what: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".rubric-eval-write-test"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise ConfigurationError(
            f"{what} {folder} cannot be written ({exc.strerror or exc}); "
            "pass a folder you can write to"
        ) from exc


def _backend(options: ScoreOptions, rubric: EvalRubric) -> ReplayBackend | LiveBackend:
    if options.mode == "replay":
        if not options.cassettes.is_dir():
            raise ConfigurationError(
                f"cassette folder {options.cassettes} not found; pass "
                "--cassettes DIR (the repository ships `cassettes/`) or "
                "run from the folder that holds it"
            )
        return ReplayBackend(CassetteIndex.load(options.cassettes))
    limiter = AdaptiveLimit(options.concurrency)
    live = LiveSettings(
        api_base=options.api_base,
        api_key_env=options.api_key_env,
        timeout_s=options.timeout_s,
        retry=options.retry,
    )
    if options.mode == "record":
        stem = "+".join(Path(p).stem for p in options.inputs)
        writer = CassetteWriter(options.cassettes / rubric.key / f"{stem}.jsonl")
        return RecordBackend(
            live, writer, provider=effective_model(options).split("/")[0], limiter=limiter
        )
    return LiveBackend(live, limiter)


def _task_record(
    task_id: str,
    options: ScoreOptions,
    rubric: EvalRubric,
    template: PromptTemplate | None,
    system_text: str,
    params: dict[str, Any],
    sources: Sequence[DialogueSource],
    total: int,
) -> TaskRecord:
    """The task as stored; without a template (``--judge none``) judge fields say ``none``."""
    return TaskRecord(
        id=task_id,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        finished_at=None,
        state="RUNNING",
        rubric_key=rubric.key,
        rubric_version=rubric.version,
        rubric_status=str(rubric.status),
        rubric_hash=rubric.content_hash(),
        rubric_snapshot=rubric.snapshot(),
        prompt_version=template.version if template else "none",
        prompt_hash=template.hash if template else "",
        prompt_system=system_text,
        engine_version=__version__,
        analysis_version=ANALYSIS_VERSION,
        judge_mode=options.mode if template else "none",
        model=effective_model(options) if template else "none",
        judge_params=(
            {**params, "maxReasks": options.max_reasks, "outputMode": "instructor/JSON"}
            if template
            else {}
        ),
        inputs=[{"path": Path(s.path).name, "sha256": _file_sha256(s.path)} for s in sources],
        row_count=total,
        extra={"run": _run_settings(options)},
    )


def _run_settings(options: ScoreOptions) -> dict[str, Any]:
    """What ``--resume`` needs beyond the task's own fields. Names of secrets only."""
    base = options.api_base
    if base and "@" in base.split("//", 1)[-1].split("/", 1)[0]:
        base = None  # credentials in the URL are never stored; pass --api-base on resume
    return {
        "inputs": [str(Path(p).resolve()) for p in options.inputs],
        "inputFormat": options.input_format,
        "cassettes": str(options.cassettes.resolve()),
        "apiBase": base,
        "apiKeyEnv": options.api_key_env,
        "timeoutS": options.timeout_s,
        "out": str(options.out.resolve()) if options.out is not None else None,
    }


def _all_rows(sources: Sequence[DialogueSource]) -> Iterator[DialogueRow]:
    for source in sources:
        yield from source


def score(
    options: ScoreOptions,
    on_start: Callable[[str, int], None] | None = None,
    on_row: Callable[[RowResult], None] | None = None,
) -> ScoreResult:
    """Score a batch (or finish one, ``options.resume``) and write ``report.json``,
    ``report.md`` and ``rows.jsonl``.

    ``on_start(task_id, rows_to_judge)`` is called once the task exists; ``on_row`` after each
    row is stored. When a budget runs out, the rows judged so far are reported and
    ``ScoreResult.stopped`` says why (the task is STOPPED and can be resumed).

    Raises:
        InputError: a rubric, dataset or option problem (nothing is scored); LifecycleError
            when the rubric is a file without ``draft``, or a RETIRED or unknown version.
        CassetteError: a cassette file is malformed (replay).
        StoreError: the store cannot be opened; the task is running in another process.
        JudgeUnavailableError: the first rows all failed to reach the judge; the run stopped.
        KeyboardInterrupt: passed on after the task is marked INTERRUPTED; finished rows stay.
    """
    _check_options(options)
    if options.resume is not None:
        return _resume(options, options.resume, on_start, on_row)
    rules_only = options.judge == "none"
    rubric = (
        rubric_for_scoring(options.rubric, options.store, options.draft)
        if options.rubric
        else rules_only_rubric()
    )
    template = None if rules_only else load_prompt(options.prompt_version)
    sources, total = _check_inputs(options)
    backend = None
    if rules_only:
        _check_something_to_check(rubric, sources)
    else:
        backend = _backend(options, rubric)
        _check_credentials(options)
        _check_cost_known(options)
    task_id = new_task_id()
    out = options.out or Path("reports") / task_id
    _check_writable(out, "report folder")
    params = {
        **DEFAULT_PARAMS,
        "temperature": float(options.temperature),
        "max_tokens": int(options.max_tokens),
    }
    run = _Run(options, rubric, template, params, sources, total, backend, out)
    with TaskStore(options.store) as store, task_lock(options.store, task_id):
        store.create_task(
            _task_record(
                task_id,
                replace(options, out=out),  # resume writes where this run writes
                rubric,
                template,
                run.builder.system_text,
                params,
                sources,
                total,
            )
        )
        return run.execute(store, task_id, frozenset(), on_start, on_row)


def _resume(
    options: ScoreOptions,
    task_id: str,
    on_start: Callable[[str, int], None] | None,
    on_row: Callable[[RowResult], None] | None,
) -> ScoreResult:
    if not store_exists(options.store):
        raise StoreError(f"{options.store}: no task store here; pass --store PATH")
    with TaskStore(options.store) as store, task_lock(options.store, task_id):
        task = store.task(task_id)
        run_settings = task.extra.get("run")
        if task.extra.get("queuedForWorkers"):  # rubric_engine.work.QUEUED_FOR_WORKERS
            raise ConfigurationError(
                f"task {task_id} is judged by workers (score --workers-only); finish it with "
                f"`rubric-eval work {task_id} --store URL`, not --resume"
            )
        if task.judge_mode == "none":
            raise ConfigurationError(
                f"task {task_id} ran rule checks only (--judge none): there is no judge call to "
                "save, so it is not resumed; score its inputs again with --judge none"
            )
        if task.judge_mode not in MODES or run_settings is None:
            raise ConfigurationError(
                f"task {task_id} ({task.judge_mode}) cannot be resumed: it keeps no run "
                "settings; score its inputs again"
            )
        outcomes = store.row_outcomes(task_id)
        done = frozenset(r for r, kind in outcomes.items() if kind not in RETRIED_ON_RESUME)
        if task.state == "COMPLETED" and len(done) == task.row_count:
            raise ConfigurationError(
                f"task {task_id} is COMPLETED and every row has a result; nothing to resume "
                f"(`{report_command(task_id, options.store)}` shows it)"
            )
        rubric = verified_snapshot(task.rubric_snapshot, task.rubric_hash, f"task {task_id}")
        template = load_prompt(task.prompt_version)
        if template.hash != task.prompt_hash:
            raise ConfigurationError(
                f"task {task_id} was judged with prompt {task.prompt_version} {task.prompt_hash}, "
                f"and this rubric-eval's template has {template.hash}; resume it with the "
                f"rubric-eval version that started it ({task.engine_version})"
            )
        params = {
            k: v for k, v in task.judge_params.items() if k not in ("maxReasks", "outputMode")
        }
        resumed = replace(
            options,
            inputs=[Path(p) for p in run_settings["inputs"]],
            input_format=run_settings["inputFormat"],
            mode=cast(Mode, task.judge_mode),
            cassettes=Path(run_settings["cassettes"]),
            model=task.model,
            api_base=options.api_base or run_settings.get("apiBase"),
            api_key_env=options.api_key_env or run_settings.get("apiKeyEnv"),
            timeout_s=float(run_settings.get("timeoutS") or options.timeout_s),
            max_reasks=int(task.judge_params["maxReasks"]),
        )
        for recorded, path in zip(task.inputs, resumed.inputs, strict=True):
            if not path.is_file() or _file_sha256(path) != recorded["sha256"]:
                raise ConfigurationError(
                    f"{path}: {'missing' if not path.is_file() else 'changed'} since task "
                    f"{task_id} started ({recorded['sha256'][:19]}…); resume needs the same "
                    "input file at the same place"
                )
        sources, total = _check_inputs(resumed)
        backend = _backend(resumed, rubric)
        _check_credentials(resumed)
        _check_cost_known(resumed)
        first_out = run_settings.get("out")
        out = options.out or (Path(first_out) if first_out else Path("reports") / task_id)
        _check_writable(out, "report folder")
        store.set_state(task_id, "RUNNING")
        run = _Run(resumed, rubric, template, params, sources, total, backend, out)
        return run.execute(store, task_id, done, on_start, on_row)


@dataclass
class _Run:
    """Everything one run needs once its task exists; :meth:`execute` judges the rows."""

    options: ScoreOptions
    rubric: EvalRubric
    template: PromptTemplate | None  #: ``None``: ``--judge none``
    params: dict[str, Any]
    sources: Sequence[DialogueSource]
    total: int
    backend: ReplayBackend | LiveBackend | None  #: ``None``: ``--judge none``
    out: Path
    builder: RequestBuilder = field(init=False)

    def __post_init__(self) -> None:
        self.builder = RequestBuilder(self.rubric, self.template)

    def execute(
        self,
        store: TaskStore,
        task_id: str,
        done: frozenset[str],
        on_start: Callable[[str, int], None] | None,
        on_row: Callable[[RowResult], None] | None,
    ) -> ScoreResult:
        options = self.options
        judge: Judge = (
            NoJudge()
            if self.backend is None
            else InstructorJudge(
                self.backend, self.rubric, effective_model(options), self.params, options.max_reasks
            )
        )
        budget = None
        if options.max_calls is not None or options.max_cost_usd is not None:
            budget = Budget(options.max_calls, options.max_cost_usd)
        if on_start is not None:
            on_start(task_id, self.total - len(done))
        misses: list[RowResult] = []

        def track(result: RowResult) -> None:
            if result.error is not None and result.error.kind is JudgeErrorKind.CASSETTE_MISS:
                misses.append(result)
            if on_row is not None:
                on_row(result)

        # a fresh run keeps what it stores for its report instead of reading every row back;
        # a resumed one has older rows in the store only, so it reads them all
        kept: list[tuple[int, ReportRow]] | None = None if done else []

        def keep(stored: StoredRow) -> None:
            if kept is not None:
                kept.append((stored.seq, report_row(stored)))

        batch = run_batch(
            _all_rows(self.sources),
            self.builder,
            judge,
            store,
            task_id,
            options.concurrency,
            track,
            stop_after_failures=0 if options.mode == "replay" else 3,
            skip=done,
            budget=budget,
            on_stored=keep,
        )
        try:
            asyncio.run(batch)
        except JudgeUnavailable as stop:
            store.finish_task(task_id, "STOPPED", {"stopReason": "the judge was unreachable"})
            raise JudgeUnavailableError(
                task_id, stop.failed, self.total, stop.first_error, options.store
            ) from stop
        except BaseException:
            store.finish_task(task_id, "INTERRUPTED", {})
            raise
        stopped = budget.stop_reason if budget is not None else None
        store.finish_task(
            task_id, "STOPPED" if stopped else "COMPLETED", self._extra(store, task_id, stopped)
        )
        if kept is None:
            task = load_task(store, task_id)  # read once for the report and its files
        else:
            kept.sort(key=lambda pair: pair[0])
            task = StoredTask(store.task(task_id), self.rubric, [row for _, row in kept])
        report = report_from_task(task)
        files = write_reports(store, task_id, report, self.out, task)
        return ScoreResult(task_id, report, files, misses, stopped)

    def _extra(self, store: TaskStore, task_id: str, stopped: str | None) -> dict[str, Any]:
        extra: dict[str, Any] = {"stopReason": stopped}
        backend = self.backend
        if isinstance(backend, ReplayBackend):
            kinds = map(backend.index.kind, store.cassette_keys(task_id))
            extra["cassettes"] = dict(sorted(Counter(k for k in kinds if k).items()))
        elif backend is not None:
            extra["concurrency"] = backend.limiter.stats()
        return extra
