"""Row digests: what a stored row was derived from and what it says, hashed (docs/verify.md).

A task created by this engine records in ``extra.rowDigests`` how its rows are digested:
``sha256`` (anyone can recompute it: it catches edits made without knowing the recipe) or
``hmac-sha256:<key id>`` (HMAC-SHA256 under ``$RUBRIC_EVAL_SIGNING_KEY``: only a key holder
can make one). A task without the mark was stored before digests, and its rows are not
checked, only when the store agrees (:meth:`~rubric_engine.store.task_store.TaskStore.digests`):
a task created after the store took digests lost its mark to an edit, and so did a task whose
rows carry digests (each such row is refused as it is read).

The digest covers the task's identity (id, rubric and prompt hashes, model, judge mode and
parameters, sampling) and, for tasks made since it did (:data:`COVERS_KEY`), its planned row
count; and of the row: its position, rowId, the SHA-256 of its stored result,
input row and raw judge replies, its status and score columns, usage and cassette key; and of
each sample of a sampled row the same (:data:`SAMPLE_COLUMNS`). The values are the column
values as stored, so the store computes it when writing and checks it when reading, from the
same tuples.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rubric_engine.errors import ConfigurationError, StoreError
from rubric_engine.formats.canonical import canonical_json, sha256_text

if TYPE_CHECKING:
    from rubric_engine.store.task_store import TaskRecord

#: the environment variable holding the signing key
SIGNING_KEY_ENV = "RUBRIC_EVAL_SIGNING_KEY"
#: the shortest signing key accepted, in characters
MIN_KEY_CHARS = 32
#: the task's ``extra`` entry naming its rows' digest scheme
EXTRA_KEY = "rowDigests"
#: the task's ``extra`` entry listing what of the task record its row digests cover besides
#: its identity: :data:`COVERS`, the planned row count, for tasks made since; tasks made before
#: have no entry, and their digests do not cover it. Removing the entry changes every row's
#: digest, as editing the row count does.
COVERS_KEY = "rowDigestsCover"
COVERS = ("rowCount",)
_VERSION = "rubric-eval row digest/1"
_KEY_ID_TEXT = b"rubric-eval signing key id"

#: where each column sits in a ``rows`` tuple (:func:`~rubric_engine.store.task_store.row_values`)
#: and which of them are hashed as text (the long JSON columns) rather than kept as they are
ROW_COLUMNS = (
    "task_id", "seq", "row_id", "status", "final_score", "result", "dialogue", "raw_attempts",
    "calls", "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms", "cassette_key",
    "cache_read_tokens", "cache_creation_tokens",
)  # fmt: skip
#: the columns of a ``row_samples`` tuple (:func:`~rubric_engine.store.samples.sample_values`)
SAMPLE_COLUMNS = (
    "task_id", "row_id", "judge", "sample", "model", "result", "raw_attempts", "calls",
    "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms", "cassette_key",
    "cache_read_tokens", "cache_creation_tokens",
)  # fmt: skip
_HASHED = frozenset({"result", "dialogue", "raw_attempts"})
_FLOATS = frozenset({"cost_usd", "latency_ms"})


def key_id(key: bytes) -> str:
    """The public id of a signing key: 16 hex digits of an HMAC of a fixed text under it."""
    return hmac.new(key, _KEY_ID_TEXT, hashlib.sha256).hexdigest()[:16]


def signing_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The signing key from the environment, or ``None``.

    Raises:
        ConfigurationError: the variable is set but shorter than :data:`MIN_KEY_CHARS` (a bad
            setting, exit 2: nothing in the store is wrong).
    """
    text = (os.environ if environ is None else environ).get(SIGNING_KEY_ENV)
    if not text:
        return None
    if len(text) < MIN_KEY_CHARS:
        raise ConfigurationError(
            f"${SIGNING_KEY_ENV} holds {len(text)} characters; a signing key needs at least "
            f"{MIN_KEY_CHARS} (e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`)"
        )
    return text.encode("utf-8")


def scheme_mark(key: bytes | None) -> str:
    """What a new task records as its rows' digest scheme (``extra.rowDigests``)."""
    return "sha256" if key is None else f"hmac-sha256:{key_id(key)}"


def new_task_marks(key: bytes | None) -> dict[str, Any]:
    """What a new task's ``extra`` records of its row digests: the scheme and what they cover."""
    return {EXTRA_KEY: scheme_mark(key), COVERS_KEY: list(COVERS)}


def task_binding(task: TaskRecord) -> dict[str, Any]:
    """What of the task every row digest includes: its identity and what judged it, and for a
    task that records :data:`COVERS_KEY`, its planned row count (fields that never change once
    the task exists).

    Raises:
        StoreError: the task's digests cover something this rubric-eval does not know.
    """
    binding = {
        "task": task.id,
        "rubricHash": task.rubric_hash,
        "promptVersion": task.prompt_version,
        "promptHash": task.prompt_hash,
        "model": task.model,
        "judgeMode": task.judge_mode,
        "judgeParams": task.judge_params,
        "sampling": task.extra.get("sampling"),
    }
    covers = task.extra.get(COVERS_KEY)
    if covers is None:
        return binding  # a task made before its digests covered the row count
    if covers != list(COVERS):
        raise StoreError(
            f"task {task.id}: its row digests cover {covers!r}, which this rubric-eval does not "
            f"know ({list(COVERS)!r}); upgrade rubric-eval"
        )
    return {**binding, "rowCount": task.row_count}


def _part(names: Sequence[str], values: Sequence[Any]) -> list[Any]:
    """A column tuple as it enters the digest: long texts by their hash, numbers as numbers
    (a float column read back as an integer, or the reverse, is the same value)."""
    out: list[Any] = []
    for name, value in zip(names, values, strict=True):
        if name == "task_id":
            continue  # in the binding
        if name in _HASHED:
            out.append(sha256_text(value))
        elif name in _FLOATS and value is not None:
            out.append(float(value))
        else:
            out.append(value)
    return out


@dataclass(frozen=True)
class RowDigests:
    """Digests of one task's rows under one scheme.

    Attributes:
        mark: the task's scheme (``sha256`` or ``hmac-sha256:<key id>``).
    """

    mark: str
    binding: str
    key: bytes | None = None

    @classmethod
    def for_task(
        cls, task: TaskRecord, environ: Mapping[str, str] | None = None
    ) -> RowDigests | None:
        """The task's digests, or ``None`` for a task without a mark (stored before digests,
        when :meth:`~rubric_engine.store.task_store.TaskStore.digests` agrees it was).

        Raises:
            StoreError: the task's rows are signed and the environment has no key, or another.
            ConfigurationError: the signing key set is too short.
        """
        mark = task.extra.get(EXTRA_KEY)
        if not mark:
            return None
        binding = canonical_json(task_binding(task))
        if mark == "sha256":
            return cls(mark, binding)
        scheme, _, wanted = str(mark).partition(":")
        if scheme != "hmac-sha256" or not wanted:
            raise StoreError(
                f"task {task.id}: its rows' digest scheme {mark!r} is not one this rubric-eval "
                "knows (sha256, hmac-sha256:<key id>); upgrade rubric-eval"
            )
        key = signing_key(environ)
        if key is None or key_id(key) != wanted:
            held = "no key is set" if key is None else f"the key set has id {key_id(key)}"
            raise StoreError(
                f"task {task.id}: its rows are signed with the key of id {wanted}, and "
                f"{held}; set ${SIGNING_KEY_ENV} to that key to read or resume the task "
                "(docs/verify.md)"
            )
        return cls(str(mark), binding, key)

    def of(self, row: Sequence[Any], samples: Sequence[Sequence[Any]] = ()) -> str:
        """The digest of a ``rows`` tuple and its ``row_samples`` tuples (any order)."""
        parts = [_part(SAMPLE_COLUMNS, s) for s in samples]
        parts.sort(key=lambda p: (p[1], p[2]))  # judge, sample
        text = canonical_json([_VERSION, self.binding, _part(ROW_COLUMNS, row), parts])
        if self.key is None:
            return sha256_text(text)
        mac = hmac.new(self.key, text.encode("utf-8"), hashlib.sha256).hexdigest()
        return f"{self.mark}:{mac}"

    def matches(self, row: Sequence[Any], samples: Sequence[Sequence[Any]], stored: Any) -> bool:
        """Whether ``stored`` is the digest of these columns (compared in constant time)."""
        return isinstance(stored, str) and hmac.compare_digest(self.of(row, samples), stored)


#: rows a digest mismatch names before "and N more"
NAMED_ROWS = 20


class DigestCheck:
    """The rows of one read whose digests do not match, or whose input positions lie beyond
    the task's planned rows, named once the read ends.

    A row's position (``seq``, in its digest) is where it stood in the input, ``0`` up to the
    task's planned row count: a row beyond that count means rows were deleted and the count
    (``tasks.row_count``) edited down to hide it. A renormalized task's rows keep the
    positions of the task they came from, which may hold more rows: theirs are not checked.

    Args:
        digests: the task's digests; ``None`` (a task stored before digests) checks no digest.
        planned: the task's planned rows, or ``None``: positions are not checked.
    """

    def __init__(
        self, task_id: str, digests: RowDigests | None, planned: int | None = None
    ) -> None:
        self.task_id = task_id
        self.digests = digests
        self.planned = planned
        self.failed: list[str] = []
        self.misplaced: list[str] = []
        self.rows = 0
        #: the last row checked: its digest matched, did not, or ``None`` (nothing to check)
        self.last: bool | None = None
        #: whether the last row had a digest at all
        self.last_had_digest = False
        #: whether the last row's position lies beyond the planned rows
        self.last_misplaced = False
        #: of a row that did not match, its columns that disagree with its stored result
        #: (:func:`disagreeing_columns`)
        self.last_columns: list[tuple[str, str]] = []

    def row(self, row: Sequence[Any], samples: Sequence[Sequence[Any]], stored: Any) -> None:
        """Check one row (its ``rows`` columns without the digest, its samples, the digest)."""
        self.rows += 1
        self.last_had_digest = stored is not None
        seq = row[1]
        self.last_misplaced = self.planned is not None and not 0 <= int(seq) < self.planned
        if self.last_misplaced:
            self.misplaced.append(f"{row[2]} (position {seq})")
        if self.digests is None and stored is not None:
            # no engine writes a digest into a task without a mark: the mark was removed
            self.last = False
            self.last_columns = []
            self.failed.append(f"{row[2]} (a digest, in a task whose record names no scheme)")
            return
        if self.digests is None:
            self.last = None
            return
        self.last = self.digests.matches(row, samples, stored)
        self.last_columns = [] if self.last else disagreeing_columns(row)
        if not self.last:
            self.failed.append(str(row[2]) + _why(stored, [c for c, _ in self.last_columns]))

    def finish(self) -> None:
        """Raises: StoreError: rows that did not match, or lie beyond the planned rows, named."""
        found = []
        if self.failed:
            found.append(
                f"{len(self.failed)} stored row(s) do not match their digest: {_named(self.failed)}"
            )
        if self.misplaced:
            found.append(
                f"{len(self.misplaced)} stored row(s) stand at input positions beyond the task's "
                f"{self.planned} planned row(s): {_named(self.misplaced)}; rows were deleted and "
                "the task's row count edited"
            )
        if not found:
            return
        raise StoreError(
            f"task {self.task_id}: {'; '.join(found)}. The store was changed after the rows "
            "were written; restore it from a backup or score again. "
            f"`rubric-eval verify {self.task_id}` re-derives every row (docs/verify.md)"
        )


def disagreeing_columns(row: Sequence[Any]) -> list[tuple[str, str]]:
    """Which of a ``rows`` tuple's columns that repeat its result (``status``, ``final_score``)
    disagree with the result JSON: (the column, ``"<column> column <value> but <field> <value>
    in the result"``), a clue to where an edit went, worked out only for a row whose digest
    did not match. A result that is not JSON names nothing (its reader says so)."""
    try:
        result = json.loads(row[5])
    except (TypeError, ValueError):
        return []
    if not isinstance(result, dict):
        return []
    found = []
    for column, field, value in (
        ("status", "status", row[3]),
        ("final_score", "finalScore", row[4]),
    ):
        if value != result.get(field):
            said = f"{column} column {value!r} but {field} {result.get(field)!r} in the result"
            found.append((column, said))
    return found


def _why(stored: Any, columns: list[str]) -> str:
    """What a mismatched row is named with: no digest, or its columns that disagree with its
    result (not their values: a blind reviewer may read this, docs/review.md)."""
    if not stored:
        return " (no digest)"
    if not columns:
        return ""
    verb = "columns disagree" if len(columns) > 1 else "column disagrees"
    return f" ({', '.join(columns)} {verb} with its result)"


def _named(rows: list[str]) -> str:
    """Up to :data:`NAMED_ROWS` rows, then how many more."""
    more = f" and {len(rows) - NAMED_ROWS} more" if len(rows) > NAMED_ROWS else ""
    return ", ".join(rows[:NAMED_ROWS]) + more
