"""``score`` as a library call: check everything, create the task, run, report.

Everything that can be checked before the first judge call is (rubric, prompt, every input
row, options, the cassette folder, credentials, the store and the report folder), so a mistake
costs nothing. The CLI is a thin shell over :func:`score`; tests and notebooks call it directly.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from rubric_engine import DEFAULT_STORE, __version__
from rubric_engine.cassette import CassetteIndex, CassetteWriter
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import INPUT_FORMATS, DialogueSource, InputFormat
from rubric_engine.errors import ConfigurationError, RubricEvalError
from rubric_engine.judge.backends import LiveBackend, LiveSettings, RecordBackend, ReplayBackend
from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS, InstructorJudge
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.pipeline import JudgeUnavailable, RequestBuilder, run_batch
from rubric_engine.prompt import DEFAULT_PROMPT, PromptTemplate, load_prompt
from rubric_engine.registry import rubric_for_scoring
from rubric_engine.report import ReportFiles, report_for_task, write_reports
from rubric_engine.results import JudgeErrorKind, RowResult
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store import TaskRecord, TaskStore, new_task_id

Mode = Literal["replay", "record", "live"]
MODES: tuple[str, ...] = ("replay", "record", "live")
DEFAULT_MODEL = "openai/gpt-4o-mini"
ANALYSIS_VERSION = "normalizer/1"


@dataclass
class ScoreOptions:
    """Everything ``rubric-eval score`` takes. Units in names; defaults are the CLI's.

    ``api_key_env`` names the variable holding the key; ``None`` lets litellm read the
    provider's usual one (``OPENAI_API_KEY`` for ``openai/…``).
    """

    inputs: Sequence[Path]
    #: a published ``KEY`` or ``KEY@N`` in ``store``, or a pack file (needs ``draft=True``)
    rubric: str | Path
    mode: Mode = "replay"
    cassettes: Path = Path("cassettes")
    model: str = DEFAULT_MODEL
    api_base: str | None = None
    api_key_env: str | None = None
    concurrency: int = 8
    store: Path = DEFAULT_STORE
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


@dataclass
class ScoreResult:
    task_id: str
    report: dict[str, Any]
    files: ReportFiles
    cassette_misses: list[RowResult] = field(default_factory=list)


class JudgeUnavailableError(RubricEvalError):
    """The first rows all failed in transport; the run stopped instead of failing every row."""

    exit_code = 5

    def __init__(self, task_id: str, saved: int, total: int, first_error: str, store: Path) -> None:
        which = f"all {total} row(s)" if saved == total else f"the first {saved} of {total} row(s)"
        rest = "" if saved == total else ", so the rest were not tried"
        super().__init__(
            f"stopped task {task_id}: {which} failed to reach the judge{rest}. First error: "
            f"{first_error}. Check --model, --api-base and the API key. The failed rows are "
            f"kept: {report_command(task_id, store)}"
        )
        self.task_id = task_id


def report_command(task_id: str, store: Path) -> str:
    """The command that shows a task's report, with ``--store`` when it is not the default."""
    extra = "" if store == DEFAULT_STORE else f" --store {store}"
    return f"rubric-eval report {task_id}{extra}"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _check_options(options: ScoreOptions) -> None:
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
    live = LiveSettings(
        api_base=options.api_base,
        api_key_env=options.api_key_env,
        timeout_s=options.timeout_s,
        retry=options.retry,
    )
    if options.mode == "record":
        stem = "+".join(Path(p).stem for p in options.inputs)
        writer = CassetteWriter(options.cassettes / rubric.key / f"{stem}.jsonl")
        return RecordBackend(live, writer, provider=effective_model(options).split("/")[0])
    return LiveBackend(live)


def _task_record(
    task_id: str,
    options: ScoreOptions,
    rubric: EvalRubric,
    template: PromptTemplate,
    system_text: str,
    params: dict[str, Any],
    sources: Sequence[DialogueSource],
    total: int,
) -> TaskRecord:
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
        prompt_version=template.version,
        prompt_hash=template.hash,
        prompt_system=system_text,
        engine_version=__version__,
        analysis_version=ANALYSIS_VERSION,
        judge_mode=options.mode,
        model=effective_model(options),
        judge_params={**params, "maxReasks": options.max_reasks, "outputMode": "instructor/JSON"},
        inputs=[{"path": Path(s.path).name, "sha256": _file_sha256(s.path)} for s in sources],
        row_count=total,
        extra={},
    )


def _all_rows(sources: Sequence[DialogueSource]) -> Iterator[DialogueRow]:
    for source in sources:
        yield from source


def score(
    options: ScoreOptions,
    on_start: Callable[[str, int], None] | None = None,
    on_row: Callable[[RowResult], None] | None = None,
) -> ScoreResult:
    """Score a batch and write ``report.json``, ``report.md`` and ``rows.jsonl``.

    Raises:
        InputError: a rubric, dataset or option problem (nothing is scored); LifecycleError
            when the rubric is a file without ``draft``, or a RETIRED or unknown version.
        CassetteError: a cassette file is malformed (replay).
        StoreError: the store cannot be opened.
        JudgeUnavailableError: the first rows all failed to reach the judge; the run stopped.
        KeyboardInterrupt: passed on after the task is marked INTERRUPTED; finished rows stay.
    """
    _check_options(options)
    rubric = rubric_for_scoring(options.rubric, options.store, options.draft)
    template = load_prompt(options.prompt_version)
    sources, total = _check_inputs(options)
    backend = _backend(options, rubric)
    _check_credentials(options)
    task_id = new_task_id()
    out = options.out or Path("reports") / task_id
    _check_writable(out, "report folder")
    params = {
        **DEFAULT_PARAMS,
        "temperature": float(options.temperature),
        "max_tokens": int(options.max_tokens),
    }
    model = effective_model(options)
    judge = InstructorJudge(backend, rubric, model, params, options.max_reasks)
    builder = RequestBuilder(rubric, template)

    with TaskStore(options.store) as store:
        store.create_task(
            _task_record(
                task_id, options, rubric, template, builder.system_text, params, sources, total
            )
        )
        if on_start is not None:
            on_start(task_id, total)
        misses: list[RowResult] = []

        def track(result: RowResult) -> None:
            if result.error is not None and result.error.kind is JudgeErrorKind.CASSETTE_MISS:
                misses.append(result)
            if on_row is not None:
                on_row(result)

        batch = run_batch(
            _all_rows(sources),
            builder,
            judge,
            store,
            task_id,
            options.concurrency,
            track,
            stop_after_failures=0 if options.mode == "replay" else 3,
        )
        try:
            asyncio.run(batch)
        except JudgeUnavailable as stop:
            store.finish_task(task_id, "STOPPED", {})
            raise JudgeUnavailableError(
                task_id, stop.failed, total, stop.first_error, options.store
            ) from stop
        except BaseException:
            store.finish_task(task_id, "INTERRUPTED", {})
            raise
        extra: dict[str, Any] = {}
        if isinstance(backend, ReplayBackend):
            extra["cassettes"] = dict(
                sorted(
                    Counter(
                        backend.index.by_key[s.cassette_key].provenance["kind"]
                        for s in store.rows(task_id)
                        if s.cassette_key in backend.index.by_key
                    ).items()
                )
            )
        store.finish_task(task_id, "COMPLETED", extra)
        report = report_for_task(store, task_id)
        files = write_reports(store, task_id, report, out)
    return ScoreResult(task_id=task_id, report=report, files=files, cassette_misses=misses)
