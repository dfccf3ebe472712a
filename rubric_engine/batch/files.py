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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rubric_engine.batch.backend import BatchBackend
from rubric_engine.batch.ledger import Ledger
from rubric_engine.batch.lines import LineResult, parse_custom_id, read_output_line, task_hash
from rubric_engine.batch.run import STORE_CHUNK, BatchLimits, BatchRun, batch_judge, chunks
from rubric_engine.batch.settings import BATCH_PROVIDERS
from rubric_engine.batch.sinks import FileSink
from rubric_engine.engine.options import (
    ScoreOptions,
    check_options,
    effective_output_mode,
    non_batch_provider,
)
from rubric_engine.engine.pipeline import RequestBuilder
from rubric_engine.engine.plan import output_mode_of, stored_judge
from rubric_engine.engine.preflight import Inputs, read_inputs
from rubric_engine.engine.task import check_inputs_unchanged, task_record
from rubric_engine.errors import ConfigurationError, InputError
from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS
from rubric_engine.judge.prompt import DEFAULT_PROMPT, load_prompt
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.report.model import Report
from rubric_engine.report.render.output import write_atomic
from rubric_engine.report.stored import stream_report, write_reports
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
    #: lines whose request an earlier import answered (the same results imported again)
    already: int = 0
    #: lines answering a request whose row was re-asked or judged without that answer
    judged: int = 0


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
        store, task_id, builder, inputs, options.max_reasks, params,
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
    inputs = read_inputs(ScoreOptions(inputs=files, input_format=run["inputFormat"]))
    builder = RequestBuilder(rubric, template)
    maxreasks = int(task.judge_params["maxReasks"])
    return _batch_run(
        store, task_id, builder, inputs, maxreasks, params,
        output_mode_of(task.judge_params), bool(task.judge_params.get("systemAsUser")),
        model=task.model,
    )  # fmt: skip


def _batch_run(
    store: TaskStore,
    task_id: str,
    builder: RequestBuilder,
    inputs: Inputs,
    max_reasks: int,
    params: dict[str, Any],
    output_mode: str,
    system_as_user: bool,
    model: str | None = None,
) -> BatchRun:
    model = model or store.task(task_id).model
    backend = BatchBackend({}, max_attempts=RetryPolicy().max_attempts)
    return BatchRun(
        rows=lambda: enumerate(inputs.stream()),  # read from the spool on each pass
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
        exported = {j.job_no for j in run.ledger.jobs(task_id) if j.state == "EXPORTED"}
        head = {
            "format": "rubric-eval-batch-export/1",
            "taskId": task_id,
            "model": task.model,
            "endpoint": "/v1/chat/completions",
            "files": [p.name for p in sink.written],
            "requests": sent,
        }
        awaiting = [0]

        def requests() -> Iterator[tuple[str, str]]:
            for pair in run.ledger.requests_of_jobs(task_id, exported):
                awaiting[0] += 1
                yield pair

        tail = {"import": f"rubric-eval batch import {task_id} RESULTS.jsonl"}
        write_atomic(manifest, manifest_chunks(head, requests(), tail))
        return ExportResult(
            task_id, sink.written, sent, manifest, awaiting[0], tuple(run.oversized)
        )


def manifest_chunks(
    head: dict[str, Any], awaiting: Iterable[tuple[str, str]], tail: dict[str, Any]
) -> Iterator[str]:
    """``manifest.json``'s text: ``json.dumps(…, ensure_ascii=False, indent=1)`` of ``head``,
    then ``"awaiting"`` (custom_id → rowId of every request awaiting its answer), then
    ``tail``, written as the requests are read (a million of them are tens of MB)."""

    def dumps(value: Any, level: int = 1) -> str:
        text = json.dumps(value, ensure_ascii=False, indent=1)
        return text.replace("\n", "\n" + " " * level)

    yield "{"
    for key, value in head.items():
        yield f"\n {dumps(key)}: {dumps(value)},"
    yield '\n "awaiting": {'
    first = True
    for cid, row_id in awaiting:
        yield f"{'' if first else ','}\n  {dumps(cid)}: {dumps(row_id)}"
        first = False
    yield "}" if first else "\n }"
    for key, value in tail.items():
        yield f",\n {dumps(key)}: {dumps(value)}"
    yield "\n}\n"


def import_results(
    store_path: Path, task_id: str, results: Sequence[Path], out: Path | None = None
) -> ImportResult:
    """Store the results in ``results`` (OpenAI batch output lines) and judge what they answer.

    The files are read a line at a time, twice: once to check every line (nothing is stored
    when one is not a batch output line), once to store the answers in chunks; the task's
    report is rebuilt from the store a row at a time (docs/scale.md).

    Raises:
        InputError: a results line is not JSON or not a batch output line (file:line).
        ConfigurationError: the task is not a batch-file task.
    """
    with TaskStore(store_path) as store:
        run = _open_task(store, task_id)
        for path in results:  # every line checked before any is stored
            for n, raw in _lines(path):
                got = _output_line(path, n, raw)
                _refuse_another_task(run.ledger, task_id, got.custom_id, f"{path}:{n}")
        matched, counts = _store_answers(run, task_id, results)
        ignored, already, judged = counts.foreign, counts.already, counts.judged
        run.limits.max_requests = 1 << 30
        needed = asyncio.run(run.run_pass(None))
        waiting = run.ledger.waiting_count(task_id)
        if needed or waiting:
            return ImportResult(
                task_id, matched, ignored, needed + waiting, None, None, already, judged
            )
        store.finish_task(task_id, TaskState.COMPLETED, {"stopReason": None})
        folder = out or Path(store.task(task_id).extra["run"].get("out") or f"reports/{task_id}")
        task = stream_report(store, task_id)
        write_reports(store, task_id, task.report, folder, task)
        return ImportResult(task_id, matched, ignored, 0, task.report, folder, already, judged)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of each line of ``path`` that is not blank, read as it goes."""
    with path.open("rb") as handle:
        for n, raw in enumerate(handle, start=1):
            if raw.strip():
                yield n, raw


def _output_line(path: Path, n: int, raw: bytes) -> LineResult:
    """Raises: InputError: not JSON, or not a batch output line (``path:n``)."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{n}: not JSON ({exc.msg})") from exc
    return read_output_line(obj, f"{path}:{n}")


#: the error an exported request gets when an import closes its job without its answer; an
#: answer that comes in a later import still counts (:func:`_late_answer`)
NO_ANSWER = "no answer for this request in the imported results"


@dataclass
class _Counts:
    """What an import made of its lines."""

    #: answers stored for requests of exported jobs
    late: int = 0
    #: lines whose request was answered by an earlier import (the same file imported again)
    already: int = 0
    #: lines answering a request whose row was judged without that answer
    judged: int = 0
    #: lines that answer no request of the task
    foreign: int = 0


def _store_answers(run: BatchRun, task_id: str, results: Sequence[Path]) -> tuple[int, _Counts]:
    """Store every line that answers a request of an exported job, a chunk of lines at a
    time; each such job's requests without an answer get the error :data:`NO_ANSWER`, and
    the job is DOWNLOADED. An answer to such a request that comes in a later import is
    stored too (:func:`_late_answer`). One commit at the end. Returns the requests answered
    and what the other lines were."""
    ledger = run.ledger
    exported = {j.job_no for j in ledger.jobs(task_id) if j.state == "EXPORTED"}
    touched: set[int] = set()
    counts = _Counts()
    for path in results:
        for chunk in chunks(_lines(path), STORE_CHUNK):
            found = [_output_line(path, n, raw) for n, raw in chunk]
            jobs = ledger.jobs_of(task_id, [got.custom_id for got in found])
            answers: list[tuple[str, dict[str, Any]]] = []
            for got in found:
                job_no = jobs.get(got.custom_id)
                if job_no is None or parse_custom_id(got.custom_id) is None:
                    counts.foreign += 1
                    continue
                cid = got.custom_id
                if job_no not in exported:
                    ledger.set_results(task_id, answers)  # what this chunk answered so far
                    answers = []
                    target = _late_answer(run, task_id, cid, counts)
                    if target is None:
                        continue
                    cid, job_no = target
                    if job_no not in exported:
                        counts.late += 1
                        answers.append((cid, run.result_of(got)))
                        continue
                touched.add(job_no)
                answers.append((cid, run.result_of(got)))
            ledger.set_results(task_id, answers)
    matched = ledger.answered_count(task_id, touched) + counts.late
    for job_no in sorted(touched):
        ledger.close_job(task_id, job_no, NO_ANSWER, "DOWNLOADED")
    run.store.commit()
    return matched, counts


def _late_answer(
    run: BatchRun, task_id: str, custom_id: str, counts: _Counts
) -> tuple[str, int] | None:
    """Where an answer to a request of a job an earlier import closed goes, or ``None`` (then
    ``counts`` says why it is not used).

    The request got :data:`NO_ANSWER` when its job was closed, and its row was then asked
    again with the same body (a retry, ``.a1`` after ``.a0``); its answer, found in another
    results file, answers that retry as well. It is stored as the result of the row's last
    request when every request from this one on has no answer yet (waiting, or
    :data:`NO_ANSWER`) and the row is not judged: the row then reads as a retry that was
    answered. An answer to a request that has one (the same file imported again), or whose
    row was re-asked or judged meanwhile, is not used.
    """
    ledger = run.ledger
    parsed = parse_custom_id(custom_id)
    row_id = ledger.row_of(task_id, custom_id)
    assert parsed is not None and row_id is not None
    chain = [a for a in ledger.requests_of_row(task_id, row_id, parsed.sample)]
    chain = [a for a in chain if a.attempt >= parsed.attempt]
    unanswered = {"error": NO_ANSWER}
    if not chain or chain[0].result != unanswered:
        counts.already += 1
        return None
    if any(a.result not in (None, unanswered) for a in chain[1:]) or run.store.rows_of(
        task_id, [row_id]
    ):
        counts.judged += 1
        return None
    return chain[-1].custom_id, chain[-1].job_no


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
