"""``score`` as a library call: validate everything, create the task, run, report.

The CLI is a thin shell over :func:`score`; tests and notebooks call it directly.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from rubric_engine import __version__
from rubric_engine.cassette import CassetteIndex, CassetteWriter
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import DialogueSource, InputFormat
from rubric_engine.errors import ConfigurationError
from rubric_engine.judge.backends import (
    LiveBackend,
    LiveSettings,
    RecordBackend,
    ReplayBackend,
)
from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS, InstructorJudge
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.pipeline import RequestBuilder, run_batch
from rubric_engine.prompt import DEFAULT_PROMPT, load_prompt
from rubric_engine.report import ReportFiles, report_for_task, write_reports
from rubric_engine.results import JudgeErrorKind, RowResult
from rubric_engine.rubric.loader import load_rubric
from rubric_engine.store import TaskRecord, TaskStore, new_task_id

Mode = Literal["replay", "record", "live"]
MODES: tuple[str, ...] = ("replay", "record", "live")
DEFAULT_MODEL = "openai/gpt-4o-mini"
ANALYSIS_VERSION = "normalizer/1"


@dataclass
class ScoreOptions:
    """Everything ``rubric-eval score`` takes. Units in names; defaults are the CLI's."""

    inputs: Sequence[Path]
    rubric: Path
    mode: Mode = "replay"
    cassettes: Path = Path("cassettes")
    model: str = DEFAULT_MODEL
    api_base: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    store: Path = Path(".rubric-eval/store.sqlite")
    out: Path | None = None
    input_format: InputFormat = "auto"
    prompt_version: str = DEFAULT_PROMPT
    max_reasks: int = 2
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = 120.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass
class ScoreResult:
    task_id: str
    report: dict[str, Any]
    files: ReportFiles
    cassette_misses: list[RowResult] = field(default_factory=list)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _validate(options: ScoreOptions) -> tuple[list[DialogueSource], int]:
    if options.mode not in MODES:
        raise ConfigurationError(
            f"--mode {options.mode!r} is not valid; use one of {', '.join(MODES)}"
        )
    if options.concurrency < 1:
        raise ConfigurationError("--concurrency must be at least 1")
    if options.max_reasks < 0:
        raise ConfigurationError("--max-reasks must be 0 or more")
    if options.api_base and options.mode == "replay":
        raise ConfigurationError(
            "--api-base is for --mode live or record; replay never calls a provider"
        )
    sources = [DialogueSource(Path(p), options.input_format) for p in options.inputs]
    seen: dict[str, str] = {}
    total = sum(source.validate(seen) for source in sources)  # all files, before any judge call
    return sources, total


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
        InputError: a rubric, dataset or option problem (nothing is scored).
        CassetteError: a cassette file is malformed (replay).
        StoreError: the store cannot be opened.
    """
    rubric = load_rubric(options.rubric)
    template = load_prompt(options.prompt_version)
    sources, total = _validate(options)
    params = {
        **DEFAULT_PARAMS,
        "temperature": float(options.temperature),
        "max_tokens": int(options.max_tokens),
    }
    live = LiveSettings(
        api_base=options.api_base,
        api_key_env=options.api_key_env,
        timeout_s=options.timeout_s,
        retry=options.retry,
    )
    replay: ReplayBackend | None = None
    backend: ReplayBackend | LiveBackend
    if options.mode == "replay":
        replay = backend = ReplayBackend(CassetteIndex.load(options.cassettes))
    elif options.mode == "record":
        stem = "+".join(Path(p).stem for p in options.inputs)
        writer = CassetteWriter(options.cassettes / rubric.key / f"{stem}.jsonl")
        backend = RecordBackend(live, writer, provider=options.model.split("/")[0])
    else:
        backend = LiveBackend(live)
    judge = InstructorJudge(backend, rubric, options.model, params, options.max_reasks)
    builder = RequestBuilder(rubric, template)

    task_id = new_task_id()
    with TaskStore(options.store) as store:
        store.create_task(
            TaskRecord(
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
                prompt_system=builder.system_text,
                engine_version=__version__,
                analysis_version=ANALYSIS_VERSION,
                judge_mode=options.mode,
                model=options.model,
                judge_params={
                    **params,
                    "maxReasks": options.max_reasks,
                    "outputMode": "instructor/JSON",
                },
                inputs=[
                    {"path": Path(s.path).name, "sha256": _file_sha256(s.path)} for s in sources
                ],
                row_count=total,
                extra={},
            )
        )
        if on_start is not None:
            on_start(task_id, total)
        misses: list[RowResult] = []
        provenance: Counter[str] = Counter()

        def track(result: RowResult) -> None:
            if result.error is not None and result.error.kind is JudgeErrorKind.CASSETTE_MISS:
                misses.append(result)
            if on_row is not None:
                on_row(result)

        try:
            asyncio.run(
                run_batch(
                    _all_rows(sources), builder, judge, store, task_id, options.concurrency, track
                )
            )
        except BaseException:
            store.finish_task(task_id, "INTERRUPTED", {})
            raise
        if replay is not None:
            for stored in store.rows(task_id):
                entry = replay.index.by_key.get(stored.cassette_key or "")
                if entry is not None:
                    provenance[entry.provenance["kind"]] += 1
        store.finish_task(
            task_id, "COMPLETED", {"cassettes": dict(sorted(provenance.items()))} if replay else {}
        )
        report = report_for_task(store, task_id)
        out = options.out or Path("reports") / task_id
        files = write_reports(store, task_id, report, out)
    return ScoreResult(task_id=task_id, report=report, files=files, cassette_misses=misses)
