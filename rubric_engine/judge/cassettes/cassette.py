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
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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
