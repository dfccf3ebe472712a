"""Cassettes: recorded or authored judge responses for offline runs (SPEC §10).

A cassette is a JSONL file; each line is one entry for one judged row::

    {"format": "rubric-eval-cassette/1",
     "key": "sha256:…",                    # canonical request key, see request_key()
     "rowId": "airline-3",
     "keyParts": {"model", "paramsHash", "messagesHash", "schemaHash", "rubricHash",
                  "promptHash"},         # what the key was made of, to explain a miss
     "provenance": {"kind": "recorded", "provider", "model", "recordedAt"}
                 | {"kind": "authored", "author", "authoredAt", "method"},
     "attempts": [{"response": {…OpenAI chat.completion wire format…}, "latencyMs": 812.0}]}

``attempts`` holds every response of the row in order, re-asks included; replay serves them
in that order. Entries never hold API keys or headers: only the fields listed above, and the
response is cut down to the chat-completion wire fields.

The key hashes what decides the answer: model, messages (instructor's schema instructions
included), response format / tools, sampling parameters, the rubric snapshot hash and the
prompt hash. Transport settings (API base, key, timeout) are not part of it.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from rubric_engine.canonical import canonical_hash, canonical_json
from rubric_engine.errors import CassetteError

FORMAT = "rubric-eval-cassette/1"
Provenance = Literal["recorded", "authored"]
_REQUIRED_PROVENANCE = {
    "recorded": ("provider", "model", "recordedAt"),
    "authored": ("author", "authoredAt", "method"),
}
#: request fields that change the answer; everything else is transport
KEY_PARAMS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "seed",
    "stop",
    "n",
    "response_format",
    "tools",
    "tool_choice",
)
_RESPONSE_FIELDS = ("id", "object", "created", "model", "choices", "usage", "system_fingerprint")
_MESSAGE_FIELDS = ("role", "content", "tool_calls", "function_call", "refusal")


def _digest(value: Any) -> str:
    return canonical_hash(value)


def _dumps(value: Any) -> str:
    return canonical_json(value)


@lru_cache(maxsize=64)
def _small_digest(text: str) -> str:
    """The digest of a short JSON text that repeats on every row (parameters, schema)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=16)
def _after_first(role: str, content: str) -> hashlib._Hash:
    """A SHA-256 already fed with ``[<first message>,``: a list's JSON up to its second item."""
    first = _dumps({"role": role, "content": content})
    return hashlib.sha256(("[" + first + ",").encode("utf-8"))


def messages_digest(messages: Any) -> str:
    """``_digest(messages)``, byte for byte, without re-encoding a repeated first message.

    Every row of a task starts with the same long system message (rubric + schema), so the
    hash state after it is kept, by its plain ``role``/``content`` pair, and copied. The
    compact JSON of a list is ``[`` + its items' JSON joined by ``,`` + ``]``.
    """
    first = messages[0] if isinstance(messages, list) and len(messages) > 1 else None
    if (
        not isinstance(first, dict)
        or first.keys() != {"role", "content"}
        or not isinstance(first["role"], str)
        or not isinstance(first["content"], str)
    ):
        return _digest(messages)
    digest = _after_first(first["role"], first["content"]).copy()
    digest.update((",".join(_dumps(m) for m in messages[1:]) + "]").encode("utf-8"))
    return "sha256:" + digest.hexdigest()


def key_parts(request: dict[str, Any], rubric_hash: str, prompt_hash: str) -> dict[str, str]:
    """The named parts of a request's canonical key (see module docstring)."""
    params = {k: request[k] for k in KEY_PARAMS if request.get(k) is not None}
    schema = {k: params.pop(k) for k in ("response_format", "tools", "tool_choice") if k in params}
    return {
        "model": str(request.get("model")),
        "paramsHash": _small_digest(_dumps(params)),
        "schemaHash": _small_digest(_dumps(schema)),
        "messagesHash": messages_digest(request.get("messages")),
        "rubricHash": rubric_hash,
        "promptHash": prompt_hash,
    }


def request_key(parts: dict[str, str]) -> str:
    """The canonical key: a hash of :func:`key_parts`."""
    return _digest(parts)


def sanitize_response(response: dict[str, Any]) -> dict[str, Any]:
    """Keep only OpenAI chat-completion wire fields (no headers, no provider extras)."""
    out = {k: response[k] for k in _RESPONSE_FIELDS if response.get(k) is not None}
    choices = []
    for choice in response.get("choices") or []:
        message = choice.get("message") or {}
        choices.append(
            {
                "index": choice.get("index", 0),
                "finish_reason": choice.get("finish_reason"),
                "message": {k: message[k] for k in _MESSAGE_FIELDS if message.get(k) is not None},
            }
        )
    out["choices"] = choices
    usage = response.get("usage")
    if isinstance(usage, dict):
        out["usage"] = {
            k: usage[k]
            for k in ("prompt_tokens", "completion_tokens", "total_tokens")
            if usage.get(k) is not None
        }
        # the breakdowns (reasoning tokens, cached prompt tokens) are usage too: kept as
        # their integer counts, so a replay counts what the live call did
        for name in ("completion_tokens_details", "prompt_tokens_details"):
            details = usage.get(name)
            if isinstance(details, dict):
                counts = {
                    k: v
                    for k, v in details.items()
                    if isinstance(v, int) and not isinstance(v, bool)
                }
                if counts:
                    out["usage"][name] = counts
    return out


def response_problem(response: Any) -> str | None:
    """Why ``response`` cannot be replayed as one chat completion, or ``None`` if it can.

    A replay (and a record run) takes only a whole ``chat.completion`` object: a
    ``choices`` list whose first choice has a ``message`` object. A streamed piece
    (``chat.completion.chunk``, with ``delta`` instead of ``message``) or a server-sent event
    stream kept as text holds no whole answer; it is refused with the reason, never guessed at.
    """
    if isinstance(response, str):
        if response.lstrip().startswith(("data:", "event:")):
            return (
                "it is a server-sent event stream kept as text (a streaming call), not one "
                "chat.completion"
            )
        return "it is text, not a chat.completion object"
    if not isinstance(response, dict):
        return f"it is a JSON {type(response).__name__}, not a chat.completion object"
    kind = response.get("object")
    if kind == "chat.completion.chunk":
        return (
            "it is a chat.completion.chunk (one piece of a streamed answer), not a whole "
            "chat.completion"
        )
    if kind not in (None, "chat.completion"):
        return f"its object is {kind!r}, not 'chat.completion'"
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "it has no choices"
    if not isinstance(choices[0].get("message"), dict):
        return "its first choice has no message object"
    return None


def entry_problems(entry: CassetteEntry) -> list[str]:
    """One line per response of ``entry`` that cannot be replayed (``where``, attempt, why)."""
    return [
        f"{entry.where}: row {entry.row_id!r} response {n}: {problem}; record the row again "
        "with --mode record"
        for n, attempt in enumerate(entry.attempts, start=1)
        if (problem := response_problem(attempt.get("response"))) is not None
    ]


@dataclass
class CassetteEntry:
    key: str
    row_id: str
    key_parts: dict[str, str]
    provenance: dict[str, Any]
    attempts: list[dict[str, Any]]
    where: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "key": self.key,
                "rowId": self.row_id,
                "keyParts": self.key_parts,
                "provenance": self.provenance,
                "attempts": self.attempts,
            },
            ensure_ascii=False,
            sort_keys=False,
        )


def _entry_from(obj: Any, where: str) -> CassetteEntry:
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise CassetteError(f'{where}: not a cassette entry (expected "format": "{FORMAT}")')
    prov = obj.get("provenance")
    kind = prov.get("kind") if isinstance(prov, dict) else None
    if kind not in _REQUIRED_PROVENANCE:
        raise CassetteError(
            f"{where}: provenance.kind must be 'recorded' or 'authored'; every cassette says "
            "where its responses came from (SPEC §10). Record the row again with --mode record, "
            "or write hand judgments with `rubric-eval cassette author`"
        )
    assert isinstance(prov, dict)
    missing = [f for f in _REQUIRED_PROVENANCE[kind] if not prov.get(f)]
    if missing:
        raise CassetteError(f"{where}: {kind} provenance lacks {', '.join(missing)}")
    attempts = obj.get("attempts")
    # a response the replay cannot read is that row's error, not the file's
    # (:func:`response_problem`): one bad entry must not stop a whole batch
    if (
        not isinstance(attempts, list)
        or not attempts
        or not all(isinstance(a, dict) and "response" in a for a in attempts)
    ):
        raise CassetteError(f"{where}: attempts must be a non-empty list of {{response: …}}")
    for name in ("key", "rowId", "keyParts"):
        if not obj.get(name):
            raise CassetteError(f"{where}: missing {name}")
    return CassetteEntry(
        key=obj["key"],
        row_id=str(obj["rowId"]),
        key_parts=obj["keyParts"],
        provenance=prov,
        attempts=attempts,
        where=where,
    )


def read_entries(
    path: Path, problems: list[str] | None = None, torn: list[str] | None = None
) -> Iterable[CassetteEntry]:
    """Entries of one cassette file, in order.

    Args:
        problems: when given, bad lines are listed here and skipped instead of raising.
        torn: collects a half-written last line (a killed record run), which is skipped.

    Raises:
        CassetteError: a line is not JSON, not an entry, or lacks provenance.
    """
    for _, entry in _entries_at(path, problems, torn):
        yield entry


#: cassette files an index keeps open at once (one handle each)
MAX_OPEN_FILES = 32


def _compact_key(key: str) -> bytes | str:
    """A key as the index holds it: the 32 digest bytes of a ``sha256:<64 hex>`` key (a
    third of the string's size), any other key as it is."""
    if len(key) == 71 and key.startswith("sha256:"):
        try:
            return bytes.fromhex(key[7:])
        except ValueError:
            pass
    return key


@dataclass
class CassetteIndex:
    """Every entry under a folder, by key (a later duplicate replaces an earlier one).

    Only where each entry starts is kept — per entry its key (as 32 digest bytes), and in
    flat arrays its file, byte offset, length, line and provenance (a number into the table of
    distinct provenances) — about 150 bytes per entry, not its responses; :meth:`get` reads
    the entry back through one open handle per file (at most :data:`MAX_OPEN_FILES`) when a
    request asks for it. The rowId → keys table that explains a miss is built on the first
    miss.
    """

    root: Path
    files: list[Path] = field(default_factory=list)
    replaced: int = 0  # entries superseded by a later one with the same key
    torn: list[str] = field(default_factory=list)  # half-written last lines, skipped
    _numbers: dict[bytes | str, int] = field(default_factory=dict)  # key -> entry number
    _file: array[int] = field(default_factory=lambda: array("L"))
    _offset: array[int] = field(default_factory=lambda: array("Q"))
    _length: array[int] = field(default_factory=lambda: array("L"))
    _line: array[int] = field(default_factory=lambda: array("L"))
    _provenance: array[int] = field(default_factory=lambda: array("L"))
    _provenances: list[dict[str, Any]] = field(default_factory=list)  # distinct, first seen
    _rows: dict[str, list[str]] | None = None  # rowId -> keys in file order, on the first miss
    _handles: dict[int, int] = field(default_factory=dict)  # file number -> open descriptor

    @classmethod
    def load(cls, root: Path, problems: list[str] | None = None) -> CassetteIndex:
        """Read ``root/**/*.jsonl``; ``problems`` collects bad lines instead of raising.

        Raises:
            CassetteError: a line is not JSON, not an entry, or lacks provenance.
        """
        index = cls(root=root)
        provenances: dict[str, int] = {}  # canonical JSON of a provenance -> its number
        for path in sorted(root.rglob("*.jsonl")):
            index.files.append(path)
            for (offset, length, line), entry in _entries_at(path, problems, index.torn):
                key = _compact_key(entry.key)
                if key in index._numbers:
                    index.replaced += 1
                index._numbers[key] = len(index._offset)
                index._file.append(len(index.files) - 1)
                index._offset.append(offset)
                index._length.append(length)
                index._line.append(line)
                found = provenances.setdefault(_dumps(entry.provenance), len(provenances))
                if found == len(index._provenances):
                    index._provenances.append(entry.provenance)
                index._provenance.append(found)
        return index

    def __len__(self) -> int:
        return len(self._numbers)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _compact_key(key) in self._numbers

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        """Close the open cassette files (reopened if the index is read again)."""
        handles, self._handles = self._handles, {}
        for fd in handles.values():
            os.close(fd)

    def get(self, key: str) -> CassetteEntry | None:
        """The entry stored under ``key``, read from its file, or ``None``."""
        number = self._numbers.get(_compact_key(key))
        return None if number is None else self._read(number)

    def _read(self, number: int) -> CassetteEntry:
        file = self._file[number]
        fd = self._handles.get(file)
        if fd is None:
            if len(self._handles) >= MAX_OPEN_FILES:  # a folder of many small cassettes
                self.close()
            fd = self._handles[file] = os.open(self.files[file], os.O_RDONLY)
        raw = os.pread(fd, self._length[number], self._offset[number])
        return _entry_from(
            json.loads(raw.decode("utf-8-sig")), f"{self.files[file]}:{self._line[number]}"
        )

    def entries(self) -> Iterator[CassetteEntry]:
        """Every entry in force (later duplicates replace earlier ones), read one at a time."""
        for number in list(self._numbers.values()):
            yield self._read(number)

    def provenance(self, key: str | None) -> dict[str, Any] | None:
        """The provenance of the entry under ``key`` (without reading the entry), or ``None``."""
        number = self._numbers.get(_compact_key(key)) if key is not None else None
        return None if number is None else self._provenances[self._provenance[number]]

    def kind(self, key: str | None) -> str | None:
        """The provenance kind (``recorded`` / ``authored``) of the entry under ``key``."""
        found = self.provenance(key)
        return None if found is None else str(found["kind"])

    def _keys_of(self, row_id: str) -> list[str]:
        if self._rows is None:
            self._rows = {}
            for entry in self.entries():
                self._rows.setdefault(entry.row_id, []).append(entry.key)
        return self._rows.get(row_id, [])

    def explain_miss(self, row_id: str, parts: dict[str, str]) -> str:
        """Say which key part differs from the nearest entry recorded for the same row."""
        candidates = [e for e in map(self.get, self._keys_of(row_id)) if e is not None]
        if not candidates:
            return f"no entry for row {row_id!r} under {self.root}"
        best = min(candidates, key=lambda e: sum(e.key_parts.get(k) != v for k, v in parts.items()))
        differ = [k for k, v in parts.items() if best.key_parts.get(k) != v]
        hints = {
            "promptHash": "the prompt template changed",
            "rubricHash": "the rubric content changed",
            "model": f"the model differs (cassette has {best.key_parts.get('model')!r}; pass "
            f"--model {best.key_parts.get('model')} to replay it)",
            "paramsHash": "sampling parameters differ (temperature, max tokens …)",
            "schemaHash": "the verdict schema or output mode differs",
            "messagesHash": "the dialogue or rendered prompt differs",
        }
        return f"an entry for row {row_id!r} exists at {best.where} but " + "; ".join(
            hints.get(k, k) for k in differ
        )

    def provenance_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for number in self._numbers.values():
            kind = str(self._provenances[self._provenance[number]]["kind"])
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def _entries_at(
    path: Path, problems: list[str] | None, torn: list[str] | None = None
) -> Iterator[tuple[tuple[int, int, int], CassetteEntry]]:
    """``((byte offset, byte length, line number), entry)`` per non-blank line of a file.

    Errors as :func:`~rubric_engine.jsonl.read_jsonl` reports them: a line that is not UTF-8
    or not JSON, or not an entry; with ``torn``, a last line with no newline that is not JSON
    (a killed writer's half record) is named there and skipped.
    """
    offset = 0
    with path.open("rb") as handle:
        for n, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            where = f"{path}:{n}"
            try:
                try:
                    obj = json.loads(raw.decode("utf-8-sig" if n == 1 else "utf-8"))
                except UnicodeDecodeError as exc:
                    raise CassetteError(
                        f"{where}: not UTF-8 text (byte {exc.start}); save the file as UTF-8"
                    ) from exc
                except json.JSONDecodeError as exc:
                    if torn is not None and not raw.endswith(b"\n"):
                        torn.append(where)
                        continue
                    raise CassetteError(f"{where}: not valid JSON ({exc.msg})") from exc
                yield (start, len(raw), n), _entry_from(obj, where)
            except CassetteError as exc:
                if problems is None:
                    raise
                problems.append(str(exc))


class CassetteWriter:
    """Appends entries to one cassette file (record and author modes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_torn_tail()

    def _drop_torn_tail(self) -> None:
        """A killed writer may have left half a line: cut it so the next entry starts clean."""
        if not self.path.is_file() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb+") as handle:
            data = handle.read()
            if data.endswith(b"\n"):
                return
            handle.truncate(data.rfind(b"\n") + 1)

    def write(self, entry: CassetteEntry) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(entry.to_json() + "\n")
