"""``batch export`` and ``batch import``: batch files for any runner (docs/batch.md).

``export`` creates a task (judge mode ``batch-file``) exactly as ``score`` would, and writes
the requests its rows need — the very requests live mode sends — as OpenAI batch input files
(``requests-001.jsonl`` …, split under the request and byte limits) plus ``manifest.json``.
Run them anywhere that reads that format: OpenAI's or Azure's batch API by hand, vLLM's
``python -m vllm.entrypoints.openai.run_batch``, Ray Data or Spark.

``import TASK results.jsonl…`` reads OpenAI batch output lines back, matched by
``custom_id``, and passes the task's rows through the live judge's parse → validate →
row-result path. Rows whose answers were invalid (or missing) need another request: a
follow-up ``export TASK`` writes those re-asks, and ``import`` takes their results, until
every row is SCORED or JUDGE_ERROR; then the task is COMPLETED and its reports are written,
the same rows as a direct run on the same answers.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rubric_engine.batch.backend import BatchBackend
from rubric_engine.batch.ledger import Ledger
from rubric_engine.batch.lines import parse_custom_id, read_output_line, task_hash
from rubric_engine.batch.run import BatchLimits, BatchRun, batch_judge
from rubric_engine.batch.settings import BATCH_PROVIDERS
from rubric_engine.batch.sinks import FileSink
from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.options import (
    ScoreOptions,
    check_options,
    effective_output_mode,
    non_batch_provider,
)
from rubric_engine.engine.pipeline import RequestBuilder
from rubric_engine.engine.plan import output_mode_of, stored_judge
from rubric_engine.engine.preflight import read_inputs
from rubric_engine.engine.task import check_inputs_unchanged, task_record
from rubric_engine.errors import ConfigurationError, InputError
from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS
from rubric_engine.judge.prompt import DEFAULT_PROMPT, load_prompt
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.report import load_task, report_from_task, write_reports
from rubric_engine.report.model import Report
from rubric_engine.rubric.versions import rubric_for_scoring
from rubric_engine.store.task_state import TaskState
from rubric_engine.store.task_store import TaskStore, new_task_id

FILE_MODE = "batch-file"


def _check_writable(folder: Path) -> None:
    """Create the export folder if needed and prove a file can be written in it.

    Report folders have their own check
    (:func:`rubric_engine.report.render.output.check_report_folder`,
    which names the report files); an export folder holds batch input files and a manifest.

    Raises:
        ConfigurationError: it is a file, or cannot be written (the operating system's reason).
    """
    if folder.exists() and not folder.is_dir():
        raise ConfigurationError(
            f"export folder {folder} is a file, not a folder; pass the folder that will hold "
            "the batch input files and manifest.json"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".rubric-eval-write-test"):
            pass
    except OSError as exc:
        raise ConfigurationError(
            f"export folder {folder} cannot be written ({exc.strerror or exc}); "
            "pass a folder you can write to"
        ) from exc


def _check_folder_is_free(folder: Path, task_id: str | None) -> None:
    """Refuse a folder holding another task's export: its ``requests-NNN.jsonl`` files (job
    numbers start at 1 in every task) and ``manifest.json`` would be overwritten. A follow-up
    export of the same task writes new job numbers and may share its folder.

    Raises:
        ConfigurationError: names the task that owns the folder and the fix.
    """
    manifest = folder / "manifest.json"
    if manifest.exists():  # a folder of that name too: it cannot be written over
        try:
            owner: str | None = str(json.loads(manifest.read_text("utf-8"))["taskId"])
        except (OSError, ValueError, KeyError, TypeError):
            owner = None  # unreadable: whose it is cannot be told, so it is not overwritten
        if task_id is not None and owner == task_id:
            return
        held = f"task {owner}'s" if owner else "another"
    elif task_id is None and any(folder.glob("requests-*.jsonl")):
        held = "another"  # request files without a manifest: a new task's would overwrite them
    else:
        return
    raise ConfigurationError(
        f"export folder {folder} already holds {held} batch export (manifest.json, "
        "requests-NNN.jsonl); writing this one there would overwrite those requests. Pass an "
        "empty folder to --out, or empty this one once its answers are imported"
    )


@dataclass(frozen=True)
class ExportResult:
    task_id: str
    files: list[Path]
    requests: int  #: requests written by this export
    manifest: Path
    #: requests of the task awaiting answers after this export (this export's included)
    awaiting: int = 0
    #: ``(rowId, bytes)`` of the requests over ``--batch-max-bytes``, each in a file alone
    oversized: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ImportResult:
    task_id: str
    matched: int
    ignored: int
    #: requests the task still needs (``batch export TASK`` writes them); 0 = task complete
    needed: int
    report: Report | None
    out: Path | None


def _check_export(options: ScoreOptions) -> None:
    """What ``batch export`` of new rows needs, worded for it (``score``'s own checks, run
    next, speak of ``--resume``, ``--judge none`` and of ``batch export`` as the way out)."""
    if not options.rubric:
        raise ConfigurationError(
            "give INPUT file(s) and -r/--rubric KEY (a published pack, or a pack FILE with "
            "--draft); `batch export TASK` writes a stored task's follow-up requests"
        )
    provider = non_batch_provider(options)
    if provider is not None:
        raise ConfigurationError(
            f"batch export writes OpenAI-style batch files, for {', '.join(BATCH_PROVIDERS)}; "
            f"--model {options.model!r} names {provider!r}: name one of those, e.g. "
            f"--model openai/{options.model.split('/')[-1]}"
        )


def _new_task(options: ScoreOptions, store: TaskStore) -> tuple[str, BatchRun]:
    _check_export(options)
    check_options(options)
    rubric = rubric_for_scoring(options.rubric, options.store, options.draft)
    template = load_prompt(options.prompt_version or DEFAULT_PROMPT)
    inputs = read_inputs(options)
    params = {
        **DEFAULT_PARAMS,
        "temperature": float(options.temperature),
        "max_tokens": int(options.max_tokens),
    }
    task_id = new_task_id()
    builder = RequestBuilder(rubric, template)
    record = task_record(task_id, options, rubric, template, builder.system_text, params, inputs)
    waiting = {**record.extra, "stopReason": "waiting for `rubric-eval batch import`"}
    store.create_task(replace(record, judge_mode=FILE_MODE, state=TaskState.STOPPED, extra=waiting))
    return task_id, _batch_run(
        store, task_id, builder, inputs.rows, options.max_reasks, params,
        effective_output_mode(options), options.system_as_user,
    )  # fmt: skip


def _open_task(store: TaskStore, task_id: str) -> BatchRun:
    task = store.task(task_id)
    if task.judge_mode != FILE_MODE:
        raise ConfigurationError(
            f"task {task_id} was not made by `rubric-eval batch export` (its judge mode is "
            f"{task.judge_mode}); batch files belong to a task that export created"
        )
    # the task's rubric, template and sampling parameters, checked as --resume checks them
    rubric, template, params = stored_judge(task, "use the rubric-eval version that exported it")
    run = task.extra["run"]
    files = [Path(p) for p in run["inputs"]]
    check_inputs_unchanged(task, files)
    rows = read_inputs(ScoreOptions(inputs=files, input_format=run["inputFormat"])).rows
    builder = RequestBuilder(rubric, template)
    maxreasks = int(task.judge_params["maxReasks"])
    return _batch_run(
        store, task_id, builder, rows, maxreasks, params,
        output_mode_of(task.judge_params), bool(task.judge_params.get("systemAsUser")),
        model=task.model,
    )  # fmt: skip


def _batch_run(
    store: TaskStore,
    task_id: str,
    builder: RequestBuilder,
    rows: Sequence[DialogueRow],
    max_reasks: int,
    params: dict[str, Any],
    output_mode: str,
    system_as_user: bool,
    model: str | None = None,
) -> BatchRun:
    model = model or store.task(task_id).model
    backend = BatchBackend({}, max_attempts=RetryPolicy().max_attempts)
    return BatchRun(
        rows=lambda: enumerate(rows),
        builder=builder,
        judge=batch_judge(backend, builder, model, params, max_reasks, output_mode, system_as_user),
        backend=backend,
        store=store,
        task_id=task_id,
        limits=BatchLimits(),
    )


def export_requests(
    options: ScoreOptions,
    folder: Path,
    task_id: str | None = None,
    max_requests: int | None = None,
    max_bytes: int | None = None,
) -> ExportResult:
    """Write the requests a new task (from ``options``) or task ``task_id`` needs.

    Raises:
        InputError / ConfigurationError: as ``score`` for a new task; a task that is not a
            batch-file task.
    """
    _check_writable(folder)
    _check_folder_is_free(folder, task_id)
    with TaskStore(options.store) as store:
        if task_id is None:
            task_id, run = _new_task(replace(options, mode="batch"), store)
        else:
            run = _open_task(store, task_id)
        if max_requests:
            run.limits.max_requests = max_requests
        if max_bytes:
            run.limits.max_bytes = max_bytes
        sink = FileSink(run, folder)
        sent = asyncio.run(run.run_pass(sink))
        manifest = folder / "manifest.json"
        task = store.task(task_id)
        requests = {
            cid: p.row_id
            for job in run.ledger.jobs(task_id)
            if job.state == "EXPORTED"
            for cid, p in run.ledger.job_requests(task_id, job.job_no).items()
        }
        manifest.write_text(
            json.dumps(
                {
                    "format": "rubric-eval-batch-export/1",
                    "taskId": task_id,
                    "model": task.model,
                    "endpoint": "/v1/chat/completions",
                    "files": [p.name for p in sink.written],
                    "requests": sent,
                    "awaiting": requests,
                    "import": f"rubric-eval batch import {task_id} RESULTS.jsonl",
                },
                ensure_ascii=False,
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
        return ExportResult(
            task_id, sink.written, sent, manifest, len(requests), tuple(run.oversized)
        )


def import_results(
    store_path: Path, task_id: str, results: Sequence[Path], out: Path | None = None
) -> ImportResult:
    """Store the results in ``results`` (OpenAI batch output lines) and judge what they answer.

    Raises:
        InputError: a results line is not JSON or not a batch output line (file:line).
        ConfigurationError: the task is not a batch-file task.
    """
    with TaskStore(store_path) as store:
        run = _open_task(store, task_id)
        by_job: dict[int, list[bytes]] = defaultdict(list)
        ignored = matched = 0
        for path in results:
            lines = path.read_bytes().splitlines()
            parsed = []
            for n, raw in enumerate(lines, start=1):
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{n}: not JSON ({exc.msg})") from exc
                cid = read_output_line(obj, f"{path}:{n}").custom_id
                _refuse_another_task(run.ledger, task_id, cid, f"{path}:{n}")
                parsed.append((raw, cid))
            jobs = run.ledger.jobs_of(task_id, [cid for _, cid in parsed])
            exported = {j.job_no for j in run.ledger.jobs(task_id) if j.state == "EXPORTED"}
            for raw, cid in parsed:
                job_no = jobs.get(cid)
                if job_no is None or job_no not in exported or parse_custom_id(cid) is None:
                    ignored += 1
                    continue
                by_job[job_no].append(raw)
        for job_no, lines in sorted(by_job.items()):
            matched += run.store_results(
                job_no, lines, "no answer for this request in the imported results", "DOWNLOADED"
            )
        run.limits.max_requests = 1 << 30
        needed = asyncio.run(run.run_pass(None))
        waiting = set(run.ledger.waiting_rows(task_id))
        if needed or waiting:
            return ImportResult(task_id, matched, ignored, needed + len(waiting), None, None)
        store.finish_task(task_id, TaskState.COMPLETED, {"stopReason": None})
        folder = out or Path(store.task(task_id).extra["run"].get("out") or f"reports/{task_id}")
        task = load_task(store, task_id)
        report = report_from_task(task)
        write_reports(store, task_id, report, folder, task)
        return ImportResult(task_id, matched, ignored, 0, report, folder)


def _refuse_another_task(ledger: Ledger, task_id: str, cid: str, where: str) -> None:
    """A results line answering another task's request: refused before anything is stored.

    Raises:
        InputError: ``cid`` carries another task (two tasks of one input ask the same rows).
    """
    parsed = parse_custom_id(cid)
    if parsed is None or parsed.task_hash in (None, task_hash(task_id)):
        return
    other = ledger.task_of(cid)
    whose = f"task {other}" if other else "a task that is not in this store"
    fix = f"; import it with `rubric-eval batch import {other} FILE`" if other else ""
    raise InputError(
        f"{where}: custom_id {cid} answers a request of {whose}, not of task {task_id}: the "
        f"file holds another task's results (maybe of another model), so nothing was "
        f"imported{fix}"
    )


__all__ = ["ExportResult", "ImportResult", "export_requests", "import_results"]
