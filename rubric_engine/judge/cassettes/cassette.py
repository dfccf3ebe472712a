"""Cassettes: recorded or authored judge responses for offline runs (docs/judges.md).

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

import codecs
import hashlib
import json
import os
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from rubric_engine.errors import CassetteError
from rubric_engine.formats import jsonl
from rubric_engine.formats.canonical import canonical_hash, canonical_json
from rubric_engine.formats.jsonl import json_problem

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

    Every row of a task starts with the same long system message (rubric + schema, tens of
    kilobytes to encode and hash), so the hash state after it is kept, by its plain
    ``role``/``content`` pair, and copied. The compact JSON of a list is ``[`` + its items'
    JSON joined by ``,`` + ``]``.
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
    digest.update(",".join(map(_dumps, messages[1:])).encode("utf-8"))
    digest.update(b"]")
    return "sha256:" + digest.hexdigest()


def static_key_parts(request: dict[str, Any]) -> dict[str, str]:
    """The parts of :func:`key_parts` that do not depend on the messages: ``model``,
    ``paramsHash`` and ``schemaHash`` (in that order)."""
    params = {k: request[k] for k in KEY_PARAMS if request.get(k) is not None}
    schema = {k: params.pop(k) for k in ("response_format", "tools", "tool_choice") if k in params}
    return {
        "model": str(request.get("model")),
        "paramsHash": _small_digest(_dumps(params)),
        "schemaHash": _small_digest(_dumps(schema)),
    }


def key_parts(
    request: dict[str, Any],
    rubric_hash: str,
    prompt_hash: str,
    static: dict[str, str] | None = None,
) -> dict[str, str]:
    """The named parts of a request's canonical key (see module docstring).

    Args:
        static: :func:`static_key_parts` of ``request``, when the caller already has them
            (a judge's requests differ only in their messages); worked out here otherwise.
    """
    return {
        **(static if static is not None else static_key_parts(request)),
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


def _json_kind(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words (``null``, ``true``, a number …)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return "a number"
    return "a JSON array" if isinstance(value, list) else f"a JSON {type(value).__name__}"


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
        return f"it is {_json_kind(response)}, not a chat.completion object"
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


class CassetteChanged(CassetteError):
    """A line the index loaded no longer reads as an entry: its file was changed during the
    run. The row it was asked for fails (a cassette miss); the batch goes on."""


@dataclass(slots=True)
class CassetteEntry:
    key: str
    row_id: str
    key_parts: dict[str, str]
    provenance: dict[str, Any]
    attempts: list[dict[str, Any]]
    where: str = ""

    def to_json(self) -> str:
        """The entry's line (without its newline): UTF-8 kept, unless a reply holds a lone
        surrogate (half of a UTF-16 pair, which UTF-8 cannot hold): then every character
        beyond ASCII is written as its escape, and the line reads back the same."""
        entry = {
            "format": FORMAT,
            "key": self.key,
            "rowId": self.row_id,
            "keyParts": self.key_parts,
            "provenance": self.provenance,
            "attempts": self.attempts,
        }
        text = json.dumps(entry, ensure_ascii=False, sort_keys=False)
        if jsonl.lone_surrogate_at(text) is not None:
            return json.dumps(entry, sort_keys=False)
        return text


#: the members an entry names besides its format, provenance and attempts, in the order a
#: missing one is reported
_ENTRY_NAMES = ("key", "rowId", "keyParts")


def _entry_problem(obj: Any) -> str | None:
    """Why ``obj`` (a decoded line) is not a cassette entry, or ``None`` when it is one (the
    text follows the line's place in :func:`_entry_from`'s error)."""
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        return f'not a cassette entry (expected "format": "{FORMAT}")'
    prov = obj.get("provenance")
    kind = prov.get("kind") if isinstance(prov, dict) else None
    if kind not in _REQUIRED_PROVENANCE:
        return (
            "provenance.kind must be 'recorded' or 'authored'; every cassette says "
            "where its responses came from (docs/judges.md). Record the row again with "
            "--mode record, or write hand judgments with `rubric-eval cassette author`"
        )
    assert isinstance(prov, dict)
    required = _REQUIRED_PROVENANCE[kind]
    if not all(map(prov.get, required)):  # the usual entry has every field: no list made
        missing = [f for f in required if not prov.get(f)]
        return f"{kind} provenance lacks {', '.join(missing)}"
    attempts = obj.get("attempts")
    # a response the replay cannot read is that row's error, not the file's
    # (:func:`response_problem`): one bad entry must not stop a whole batch
    if (
        not isinstance(attempts, list)
        or not attempts
        or not all(isinstance(a, dict) and "response" in a for a in attempts)
    ):
        return "attempts must be a non-empty list of {response: …}"
    if not all(map(obj.get, _ENTRY_NAMES)):
        return "missing " + next(name for name in _ENTRY_NAMES if not obj.get(name))
    return None


def _entry_from(obj: Any, where: str) -> CassetteEntry:
    problem = _entry_problem(obj)
    if problem is not None:
        raise CassetteError(f"{where}: {problem}")
    return CassetteEntry(
        key=obj["key"],
        row_id=str(obj["rowId"]),
        key_parts=obj["keyParts"],
        provenance=obj["provenance"],
        attempts=obj["attempts"],
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
#: a file's number sits above the byte offset in one 64-bit location (offsets below 1 TiB)
_OFFSET_BITS = 40


_TEXT = frozenset({str})


def _provenance_key(provenance: dict[str, Any]) -> Any:
    """What tells provenances apart: their sorted items when every key and value is text
    (``str`` itself; then equal exactly when their canonical JSON is), else the canonical
    JSON itself."""
    if _TEXT.issuperset(map(type, provenance)) and _TEXT.issuperset(map(type, provenance.values())):
        return tuple(sorted(provenance.items()))
    return _dumps(provenance)


def _key_hash(key: str) -> tuple[int, int]:
    """A key as the index holds it: 128 bits of its digest as two 64-bit halves (the first 32
    hex digits of a ``sha256:<64 hex>`` key; any other key is hashed first)."""
    if len(key) == 71 and key.startswith("sha256:"):
        try:
            return int(key[7:23], 16), int(key[23:39], 16)
        except ValueError:
            pass
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:16], "big")


@dataclass
class CassetteIndex:
    """Every entry under a folder, by key (a later duplicate replaces an earlier one).

    Only where each entry starts is kept, in flat arrays sorted by key: 128 bits of its key,
    its file and byte offset (one 64-bit number), length, line and provenance (a number into
    the table of distinct provenances) — 36 bytes per entry, not its responses. :meth:`get`
    finds the key by bisection and reads the entry back through one open handle per file (at
    most :data:`MAX_OPEN_FILES`), checking the whole key on the line it read (two keys sharing
    128 bits would just continue the search). :meth:`provenance`, :meth:`kind` and ``in`` read
    nothing and match the 128 bits. The rowId → entries table that explains a miss is built on
    the first miss (16 bytes per entry).
    """

    root: Path
    files: list[Path] = field(default_factory=list)
    replaced: int = 0  # entries superseded by a later one with the same key
    torn: list[str] = field(default_factory=list)  # half-written last lines, skipped
    _high: array[int] = field(default_factory=lambda: array("Q"))  # key bits 0-63, sorted
    _low: array[int] = field(default_factory=lambda: array("Q"))  # key bits 64-127
    _at: array[int] = field(default_factory=lambda: array("Q"))  # file << 40 | byte offset
    _length: array[int] = field(default_factory=lambda: array("I"))
    #: each line's CRC-32 as loaded: a line changed in place since reads as changed
    _crc: array[int] = field(default_factory=lambda: array("I"))
    _line: array[int] = field(default_factory=lambda: array("I"))
    _provenance: array[int] = field(default_factory=lambda: array("I"))
    _provenances: list[dict[str, Any]] = field(default_factory=list)  # distinct, first seen
    #: a replaced key's in-force entry -> where its first entry was (:meth:`entries`' order)
    _first_at: dict[int, int] = field(default_factory=dict)
    #: on the first miss: rowId hashes, sorted, and their entry numbers
    _row_hashes: array[int] | None = None
    _row_numbers: array[int] = field(default_factory=lambda: array("I"))
    _handles: dict[int, int] = field(default_factory=dict)  # file number -> open descriptor

    @classmethod
    def load(
        cls, root: Path, problems: list[str] | None = None, strict: bool = False
    ) -> CassetteIndex:
        """Read ``root/**/*.jsonl``; ``problems`` collects bad lines instead of raising.

        Args:
            strict: a line whose JSON names a key twice in one object (two ``response``
                members of an attempt, two ``attempts``…) is a bad line too: a replay reads
                it as ``json.loads`` does, the last value winning, so which one was meant is
                ambiguous. For ``cassette check``; a run's load does not pay for the walk.

        Raises:
            CassetteError: a line is not JSON, not an entry, or lacks provenance.
        """
        index = cls(root=root)
        high, low, at = array("Q"), array("Q"), array("Q")
        length, line, prov, crc = array("I"), array("I"), array("I"), array("I")
        provenances: dict[Any, int] = {}  # a provenance's :func:`_provenance_key` -> its number
        for path in sorted(root.rglob("*.jsonl")):
            index.files.append(path)
            file = (len(index.files) - 1) << _OFFSET_BITS
            # the lines as checked entries: only the key and provenance are kept
            lines = _objects_at(path, problems, index.torn, strict)
            for (offset, size, n), entry, check in lines:
                h, lo = _key_hash(entry["key"])
                high.append(h)
                low.append(lo)
                at.append(file | offset)
                length.append(size)
                crc.append(check)
                line.append(n)
                provenance = entry["provenance"]
                found = provenances.setdefault(_provenance_key(provenance), len(provenances))
                if found == len(index._provenances):
                    index._provenances.append(provenance)
                prov.append(found)
        # sorted by key; entries of one key stay in file order (a stable sort), the last one
        # in force; two keys sharing the first 64 bits sit in one run, compared in full
        order = sorted(range(len(high)), key=high.__getitem__)
        kept: list[int] = []
        run = 0  # where the run of entries with the current first 64 bits starts in kept
        for i in order:
            if not kept or high[kept[-1]] != high[i]:
                run = len(kept)
                kept.append(i)  # the first of its 64 bits: nothing to compare it with
                continue
            same = next(
                (
                    k
                    for k in range(run, len(kept))
                    if low[kept[k]] == low[i]
                    and index._key_at(at[kept[k]], length[kept[k]])
                    == index._key_at(at[i], length[i])
                ),
                None,
            )
            if same is None:
                kept.append(i)
                continue
            index.replaced += 1
            index._first_at[i] = index._first_at.pop(kept[same], at[kept[same]])
            kept[same] = i
        index.close()
        del order
        index._high = array("Q", map(high.__getitem__, kept))
        index._low = array("Q", map(low.__getitem__, kept))
        index._at = array("Q", map(at.__getitem__, kept))
        index._length = array("I", map(length.__getitem__, kept))
        index._crc = array("I", map(crc.__getitem__, kept))
        index._line = array("I", map(line.__getitem__, kept))
        index._provenance = array("I", map(prov.__getitem__, kept))
        number = {i: n for n, i in enumerate(kept) if i in index._first_at}
        index._first_at = {number[i]: first for i, first in index._first_at.items()}
        return index

    def __len__(self) -> int:
        return len(self._high)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._number(key) is not None

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        """Close the open cassette files (reopened if the index is read again)."""
        handles, self._handles = self._handles, {}
        for fd in handles.values():
            os.close(fd)

    def _numbers(self, key: str) -> Iterator[int]:
        """The entries whose 128 key bits are ``key``'s (one, unless two keys share them)."""
        high, low = _key_hash(key)
        number = bisect_left(self._high, high)
        while number < len(self._high) and self._high[number] == high:
            if self._low[number] == low:
                yield number
            number += 1

    def _number(self, key: str) -> int | None:
        high, low = _key_hash(key)
        keys = self._high
        number, end = bisect_left(keys, high), len(keys)
        while number < end and keys[number] == high:  # :meth:`_numbers`' first, inline
            if self._low[number] == low:
                return number
            number += 1
        return None

    def get(self, key: str) -> CassetteEntry | None:
        """The entry stored under ``key``, read from its file, or ``None``."""
        high, low = _key_hash(key)
        keys = self._high
        number, end = bisect_left(keys, high), len(keys)
        while number < end and keys[number] == high:  # :meth:`_numbers`, inline: once a row
            if self._low[number] == low:
                entry = self._read(number)
                if entry.key == key:
                    return entry
            number += 1
        return None

    def replayed(self, key: str) -> tuple[list[dict[str, Any]], str] | None:
        """``(entry.attempts, entry.where)`` of :meth:`get`'s entry for ``key``, or ``None``
        as :meth:`get` gives it; what a replay reads of an entry.

        Raises:
            CassetteChanged: the line no longer reads as it did at load (its CRC-32 differs,
                or it is no longer an entry): its file was changed during the run.
        """
        for number in self._numbers(key):
            raw, file = self._raw(self._at[number], self._length[number])
            where = f"{self.files[file]}:{self._line[number]}"
            try:
                if zlib.crc32(raw) != self._crc[number]:  # edited in place, same length
                    raise CassetteError("its bytes differ")
                entry = _entry_from(_loads(_text(raw)), where)
            except (ValueError, CassetteError) as exc:  # JSON and UTF-8 errors too
                raise CassetteChanged(
                    f"cassette {where} no longer reads as it did when the run loaded it "
                    f"({exc}); a cassette file was changed during the run: put it back, "
                    "then `rubric-eval score --resume TASK` judges this row again"
                ) from None
            if entry.key == key:
                return entry.attempts, entry.where
        return None

    def _raw(self, at: int, length: int) -> tuple[bytes, int]:
        file = at >> _OFFSET_BITS
        fd = self._handles.get(file)
        if fd is None:
            if len(self._handles) >= MAX_OPEN_FILES:  # a folder of many small cassettes
                self.close()
            fd = self._handles[file] = os.open(self.files[file], os.O_RDONLY)
        return os.pread(fd, length, at & ((1 << _OFFSET_BITS) - 1)), file

    def _key_at(self, at: int, length: int) -> Any:
        raw, _ = self._raw(at, length)
        return _loads(_text(raw)).get("key")

    def _read(self, number: int) -> CassetteEntry:
        raw, file = self._raw(self._at[number], self._length[number])
        return _entry_from(_loads(_text(raw)), f"{self.files[file]}:{self._line[number]}")

    def _in_file_order(self) -> list[int]:
        """Entry numbers in force, in the order their keys first appear in the files."""
        first = self._first_at
        return sorted(range(len(self._at)), key=lambda n: first.get(n, self._at[n]))

    def entries(self) -> Iterator[CassetteEntry]:
        """Every entry in force (later duplicates replace earlier ones), read one at a time, in
        the order their keys first appear."""
        for number in self._in_file_order():
            yield self._read(number)

    def provenance(self, key: str | None) -> dict[str, Any] | None:
        """The provenance of the entry under ``key`` (without reading the entry), or ``None``."""
        number = self._number(key) if key is not None else None
        return None if number is None else self._provenances[self._provenance[number]]

    def provenance_rows(self, keys: Iterable[str | None]) -> list[tuple[dict[str, Any], int]]:
        """How many of ``keys`` each provenance answered: ``(provenance, keys)`` in the order
        the provenances first answer one (as :meth:`provenance` of each key, counted in one
        pass; a key without an entry, or ``None``, counts for none)."""
        counts: dict[int, int] = {}
        for key in keys:
            number = self._number(key) if key is not None else None
            if number is not None:
                found = self._provenance[number]
                counts[found] = counts.get(found, 0) + 1
        return [(self._provenances[found], n) for found, n in counts.items()]

    def kind(self, key: str | None) -> str | None:
        """The provenance kind (``recorded`` / ``authored``) of the entry under ``key``."""
        found = self.provenance(key)
        return None if found is None else str(found["kind"])

    def _row_entries(self, row_id: str) -> list[CassetteEntry]:
        """The entries recorded for ``row_id``, in the order their keys first appear."""
        if self._row_hashes is None:
            hashes, numbers = array("Q"), array("I")
            for number in self._in_file_order():
                hashes.append(_key_hash(self._read(number).row_id)[0])
                numbers.append(number)
            order = sorted(range(len(hashes)), key=hashes.__getitem__)  # stable: file order
            self._row_hashes = array("Q", (hashes[i] for i in order))
            self._row_numbers = array("I", (numbers[i] for i in order))
        wanted = _key_hash(row_id)[0]
        found = []
        at = bisect_left(self._row_hashes, wanted)
        while at < len(self._row_hashes) and self._row_hashes[at] == wanted:
            entry = self._read(self._row_numbers[at])
            if entry.row_id == row_id:
                found.append(entry)
            at += 1
        return found

    def explain_miss(self, row_id: str, parts: dict[str, str]) -> str:
        """Say which key part differs from the nearest entry recorded for the same row."""
        candidates = self._row_entries(row_id)
        if not candidates:
            return f"no entry for row {row_id!r} under {self.root}"

        def differing(entry: CassetteEntry) -> list[str]:
            names = dict.fromkeys([*parts, *entry.key_parts])  # a sample part may be on one side
            return [k for k in names if entry.key_parts.get(k) != parts.get(k)]

        best = min(candidates, key=lambda e: len(differing(e)))
        differ = differing(best)
        hints = {
            "promptHash": "the prompt template changed",
            "rubricHash": "the rubric content changed",
            "model": f"the model differs (cassette has {best.key_parts.get('model')!r}; pass "
            f"--model {best.key_parts.get('model')} to replay it)",
            "paramsHash": "sampling parameters differ (temperature, max tokens …)",
            "schemaHash": "the verdict schema or output mode differs",
            "messagesHash": "the dialogue or rendered prompt differs",
            "sample": f"no answer for sample {parts.get('sample', '1')} of this row (record "
            "it with --mode record --samples K, or author it with `cassette author --sample N`)",
        }
        if not differ:  # its keyParts match: the key itself was edited
            return (
                f"an entry for row {row_id!r} exists at {best.where} with the same key parts "
                f"but another key ({best.key}); its key no longer matches its parts (edited by "
                "hand?): record the row again with --mode record"
            )
        return f"an entry for row {row_id!r} exists at {best.where} but " + "; ".join(
            hints.get(k, k) for k in differ
        )

    def provenance_counts(self) -> dict[str, int]:
        """Entries in force by provenance kind (``recorded`` / ``authored``)."""
        kinds = [str(p["kind"]) for p in self._provenances]
        counts: dict[str, int] = {}
        for number in self._provenance:
            counts[kinds[number]] = counts.get(kinds[number], 0) + 1
        return counts


def _loads(text: str) -> Any:
    """``json.loads(text)``; a too-long number is a JSON error too
    (:func:`~rubric_engine.formats.jsonl.loads`)."""
    return jsonl.loads(text)


def _text(raw: bytes) -> str:
    """``raw.decode("utf-8-sig")``: the C decoder for a line without a byte-order mark (every
    line but perhaps a file's first; the ``utf-8-sig`` codec is Python code)."""
    return raw.decode("utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8")


def _entries_at(
    path: Path, problems: list[str] | None, torn: list[str] | None = None
) -> Iterator[tuple[tuple[int, int, int], CassetteEntry]]:
    """``((byte offset, byte length, line number), entry)`` per non-blank line of a file.

    Errors as :func:`~rubric_engine.formats.jsonl.read_jsonl` reports them: a line that is not UTF-8
    or not JSON, or not an entry; with ``torn``, a last line with no newline that is not JSON
    (a killed writer's half record) is named there and skipped.
    """
    name = str(path)
    for place, obj, _ in _objects_at(path, problems, torn):
        yield place, _entry_from(obj, f"{name}:{place[2]}")


def _objects_at(
    path: Path, problems: list[str] | None, torn: list[str] | None = None, strict: bool = False
) -> Iterator[tuple[tuple[int, int, int], dict[str, Any], int]]:
    """:func:`_entries_at` with each entry as its decoded line (checked to be one), for a
    reader that needs only some of its fields (the index load), and the line's CRC-32.
    ``strict``: a key named twice in one object is a bad line (:meth:`CassetteIndex.load`)."""
    offset = 0
    name = str(path)
    with path.open("rb") as handle:
        for n, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            if raw.isspace():  # as ``not raw.strip()`` (the same ASCII spaces), without a copy
                continue
            try:
                try:
                    text = raw.decode("utf-8-sig" if n == 1 else "utf-8")
                    obj = jsonl.loads_strict(text) if strict else _loads(text)
                except jsonl.DuplicateKeyError as exc:
                    raise CassetteError(
                        f"{name}:{n}: {exc}; a replay would read only the last one, so the "
                        "line is ambiguous: keep the one meant, or record the row again"
                    ) from exc
                except UnicodeDecodeError as exc:
                    raise CassetteError(
                        f"{name}:{n}: not UTF-8 text (byte {exc.start}); save the file as UTF-8"
                    ) from exc
                except json.JSONDecodeError as exc:
                    if torn is not None and not raw.endswith(b"\n"):
                        torn.append(f"{name}:{n}")
                        continue
                    syntax = json_problem(exc)  # the message with its column
                    raise CassetteError(f"{name}:{n}: not valid JSON ({syntax})") from exc
                problem = _entry_problem(obj)
                if problem is not None:
                    raise CassetteError(f"{name}:{n}: {problem}")
                yield (start, len(raw), n), obj, zlib.crc32(raw)
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
