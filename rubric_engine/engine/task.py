"""Task creation: the stored record of a new task, and what a resumed task is taken from.

A task records everything needed to read its report later and to resume it: the rubric
snapshot, the prompt, the judge settings, the inputs with their hashes, and the run settings
``--resume`` needs (names of secrets only, never their values). A task runs under an
exclusive lock so it is never run twice at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_engine import DEFAULT_STORE, __version__
from rubric_engine.engine.options import ScoreOptions, effective_model, effective_output_mode
from rubric_engine.engine.preflight import Inputs
from rubric_engine.errors import ConfigurationError
from rubric_engine.formats.canonical import canonical_hash
from rubric_engine.judge.prompt import PromptTemplate
from rubric_engine.judge.secrets import masked_url
from rubric_engine.results.model import JudgeErrorKind
from rubric_engine.rubric.loader import parse_rubric
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.store.digest import new_task_marks, signing_key
from rubric_engine.store.location import StoreLocation
from rubric_engine.store.task_ref import check_name_and_tags
from rubric_engine.store.task_state import TaskState
from rubric_engine.store.task_store import TaskRecord, TaskStore

ANALYSIS_VERSION = "normalizer/1"
#: the ``path`` a task records for rows given in memory (such a task cannot be resumed)
MEMORY_INPUT = "<rows in memory>"
#: JUDGE_ERROR kinds a resumed run judges again: the judge never answered these rows
RETRIED_ON_RESUME = frozenset({JudgeErrorKind.TRANSPORT, JudgeErrorKind.CASSETTE_MISS})
#: ``extra`` key of a task made by ``score --workers-only``: workers judge it, so
#: ``score --resume`` refuses it (:mod:`rubric_engine.engine.workers`)
QUEUED_FOR_WORKERS = "queuedForWorkers"

#: JSON-ready values as the store keeps them
JsonValue = object


def creation_time() -> str:
    """Now in UTC to the millisecond (``2026-01-01T00:00:00.000Z``): tasks created within one
    second still sort in the order they were made, so "the newest task of a name" and
    ``trend`` see them in that order."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def report_command(task_id: str, store: StoreLocation) -> str:
    """The command that shows a task's report, with ``--store`` when it is not the default."""
    extra = "" if store == DEFAULT_STORE else f" --store {store}"
    return f"rubric-eval report {task_id}{extra}"


def work_command(task_id: str, store: StoreLocation) -> str:
    """The command a worker machine runs for a task queued for workers (a PostgreSQL store:
    ``--store`` always, a password in its URL shown as ``***``)."""
    return f"rubric-eval work {task_id} --store {store}"


def resume_command(task_id: str, store: StoreLocation) -> str:
    """The command that finishes a stopped or interrupted task."""
    extra = "" if store == DEFAULT_STORE else f" --store {store}"
    return f"rubric-eval score --resume {task_id}{extra}"


@contextmanager
def task_lock(store: StoreLocation, task_id: str) -> Iterator[None]:
    """Hold an exclusive lock on a task while it runs, so it is never run twice at once
    (SQLite: a file lock beside the store; PostgreSQL: an advisory lock; the backend's
    :meth:`~rubric_engine.store.backend.Backend.task_lock`).

    Raises:
        StoreError: another process holds it.
    """
    with TaskStore(store) as opened, opened.task_lock(task_id):
        yield


def file_sha256(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _memory_sha256(inputs: Inputs) -> str:
    """``sha256:<hex>`` of the rows given in memory, as validated (canonical JSON)."""
    return canonical_hash([r.model_dump(mode="json", by_alias=True) for r in inputs.memory])


def input_records(inputs: Inputs) -> list[dict[str, JsonValue]]:
    """The task's ``inputs``: each file's name and hash, then the rows given in memory."""
    found: list[dict[str, JsonValue]] = [
        {"path": p.name, "sha256": file_sha256(p)} for p in inputs.files
    ]
    if inputs.from_memory:
        found.append({"path": MEMORY_INPUT, "sha256": _memory_sha256(inputs)})
    return found


def task_record(
    task_id: str,
    options: ScoreOptions,
    rubric: EvalRubric,
    template: PromptTemplate | None,
    system_text: str,
    params: Mapping[str, float | int | str],
    inputs: Inputs,
) -> TaskRecord:
    """The task as stored; without a template (``--judge none``) judge fields say ``none``."""
    return TaskRecord(
        id=task_id,
        created_at=creation_time(),
        finished_at=None,
        state=TaskState.RUNNING,
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
        judge_params=judge_params(options, params) if template else {},
        inputs=input_records(inputs),
        row_count=inputs.total,
        extra={
            "run": run_settings(options),
            **check_name_and_tags(options.name, options.tags),
            **new_task_extra(),
            **(
                {"sampling": sampling_extra(options)}
                if options.samples > 1 or options.panel
                else {}
            ),
        },
    )


def sampling_extra(options: ScoreOptions) -> dict[str, JsonValue]:
    """``extra.sampling`` of a sampled task: K, ``when`` for adaptive sampling, and a panel's
    ``judges`` (their models in order, docs/panels.md)."""
    when = {"when": options.samples_when} if options.samples_when != "always" else {}
    judges: dict[str, JsonValue] = {"judges": list(options.panel)} if options.panel else {}
    return {"samples": options.samples, **when, **judges}


def samples_of(extra: Mapping[str, Any]) -> tuple[int, str]:
    """The asks of each row a task records and when (``extra.sampling``; a single ask when
    it has none)."""
    sampling = extra.get("sampling")
    if not isinstance(sampling, dict):
        return 1, "always"
    return int(sampling.get("samples", 1)), str(sampling.get("when", "always"))


def new_task_extra() -> dict[str, JsonValue]:
    """What every new task records besides its run: how its rows are digested (plain SHA-256,
    or HMAC under ``$RUBRIC_EVAL_SIGNING_KEY``) and that the digests cover its planned row count
    (docs/verify.md).

    Raises:
        ConfigurationError: the signing key is set but too short.
    """
    return new_task_marks(signing_key())


def judge_params(
    options: ScoreOptions, params: Mapping[str, float | int | str]
) -> dict[str, JsonValue]:
    """The task's judge parameters: sampling, re-asks, the output mode (``instructor/JSON``
    for the default ``json`` mode, as before output modes existed), ``systemAsUser`` when
    set."""
    from rubric_engine.judge.instructor_adapter import OUTPUT_MODES

    out: dict[str, JsonValue] = {
        **params,
        "maxReasks": options.max_reasks,
        "outputMode": f"instructor/{OUTPUT_MODES[effective_output_mode(options)]}",
    }
    if options.system_as_user:
        out["systemAsUser"] = True
    return out


def run_settings(options: ScoreOptions) -> dict[str, JsonValue]:
    """What ``--resume`` needs beyond the task's own fields. Names of secrets only."""
    base, had_credentials = masked_url(options.api_base) if options.api_base else (None, False)
    # user:password@ and query values (?code=…) are never stored: --resume then needs
    # --api-base again, and says so
    return {
        "inputs": [str(Path(p).resolve()) for p in options.inputs],
        "inputFormat": options.input_format,
        "cassettes": str(options.cassettes.resolve()),
        "apiBase": base,
        "apiBaseHadCredentials": had_credentials,
        "apiKeyEnv": options.api_key_env,
        "timeoutS": options.timeout_s,
        "concurrency": options.concurrency,
        **({} if options.prompt_cache else {"promptCache": False}),
        **({"judgeWhen": options.judge_when} if options.judge_when else {}),
        "out": str(options.out.resolve()) if options.out is not None else None,
        **({"batch": options.batch.to_json()} if options.mode == "batch" else {}),
    }


def check_inputs_unchanged(task: TaskRecord, files: list[Path]) -> None:
    """A resumed task reads the same files at the same places, byte for byte.

    Raises:
        ConfigurationError: the task was scored from rows in memory, or a file is missing or
            changed since the task started.
    """
    if any(recorded.get("path") == MEMORY_INPUT for recorded in task.inputs):
        raise ConfigurationError(
            f"task {task.id} was scored from rows given in memory, which the store does not "
            "keep for a re-run; score the rows again (or write them to a file and score that)"
        )
    for recorded, path in zip(task.inputs, files, strict=True):
        if not path.is_file() or file_sha256(path) != recorded["sha256"]:
            raise ConfigurationError(
                f"{path}: {'missing' if not path.is_file() else 'changed'} since task "
                f"{task.id} started ({recorded['sha256'][:19]}…); resume needs the same "
                "input file at the same place"
            )


def rules_only_rubric() -> EvalRubric:
    """The pack a ``--judge none`` task records when no ``--rubric`` is given: no requirements.

    The task store keeps a snapshot of every task's pack (docs/rubric-packs.md); with rules alone
    there is none, so this placeholder says so. Its only intent exists because every pack needs one.
    """
    return parse_rubric(
        {
            "key": "rules_only",
            "name": "Rule checks only (no rubric pack)",
            "version": 1,
            "status": "DRAFT",
            "language": "und",
            "description": "placeholder for --judge none without --rubric: the rows' own "
            "rule checks (expected:) decide everything",
            "intents": [
                {"key": "RULES_ONLY", "name": "Rule checks only", "triggerHints": "every row"}
            ],
            # the user never saw <think> sections (docs/protocol.md §12): checks must not either
            "outputParsing": {"thinkingMarkers": True},
        },
        source="<rules only>",
    )
