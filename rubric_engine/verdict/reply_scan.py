"""Find the judge's JSON verdict in one reply text, or say exactly why there is none
(docs/protocol.md §5).

Judges wrap their verdict: in Markdown code fences, after prose, after a reasoning block
(``<think>…</think>``, sometimes with only the closing tag when the opening one was in the
chat template). They also quote JSON objects they found in the dialogue. The rules:

1. A reply that is one JSON object as a whole is that object (tags inside its strings are
   harmless).
2. A leading reasoning block is dropped; text before a lone closing tag is reasoning too. An
   opening tag that is never closed means the verdict never came: no JSON is taken from
   inside unfinished reasoning.
3. Of the remaining text, every top-level balanced ``{…}`` (fenced or not) that parses as a
   JSON object with at least one verdict field is a *candidate*. :func:`scan_reply` returns
   them all; the caller (:func:`rubric_engine.verdict.parse.parse_reply`) accepts exactly one.
   Two candidates are ambiguous and never resolved to one of them: a judge that quotes an
   object from the dialogue after its own verdict must not be overruled by the dialogue.
4. Duplicated keys are recorded per candidate (``{"score": 4, "score": 2}`` is ambiguous too:
   Python's ``json`` would silently keep the last).
5. Nothing is repaired. When there is no candidate the reason is precise: an empty reply, a
   JSON syntax error (its message and line/column in the reply), an unfinished reasoning block,
   objects without any verdict field, or no JSON object at all.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from rubric_engine.formats.jsonl import (
    lone_surrogate_at,
    lone_surrogate_in,
    unreadable,
)

_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
ONE_OBJECT = (
    "answer with exactly one JSON object with the schema's fields, with no code fences, "
    "prose, reasoning or other JSON objects around it"
)


class ProblemKind(StrEnum):
    """Why a reply text holds no usable verdict object."""

    EMPTY = "EMPTY"
    NO_JSON = "NO_JSON"
    JSON_SYNTAX = "JSON_SYNTAX"
    NO_VERDICT_FIELDS = "NO_VERDICT_FIELDS"
    UNFINISHED_REASONING = "UNFINISHED_REASONING"
    NOT_TEXT = "NOT_TEXT"


@dataclass(frozen=True)
class ReplyProblem:
    """No candidate in a reply text: the kind and the sentence the judge is re-asked with."""

    kind: ProblemKind
    reason: str


@dataclass(slots=True)
class Candidate:
    """One verdict-shaped JSON object of a reply.

    Attributes:
        value: the object as parsed (for a duplicated key, the last value, as ``json`` does).
        duplicate_keys: keys that occur twice in one object (at any depth), in order found.
        where: ``"line L column C"`` of its opening brace in the reply text (1-based).
    """

    value: dict[str, Any]
    duplicate_keys: tuple[str, ...]
    where: str


@dataclass(slots=True)
class Scan:
    """What :func:`scan_reply` found: the candidates, or (only when there are none) why not."""

    candidates: tuple[Candidate, ...]
    problem: ReplyProblem | None = None


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line} column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


class _Duplicated(Exception):
    """An object of the text names a key twice: :func:`_load` reads it again, listing them."""


def _unique_pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(items)
    if len(out) != len(items):
        raise _Duplicated
    return out


#: the decoder of a text whose keys are all distinct (the usual reply), built once: it holds
#: no state between texts (the hook raises instead of recording)
_UNIQUE = json.JSONDecoder(object_pairs_hook=_unique_pairs)


def _load(text: str) -> tuple[Any, tuple[str, ...]]:
    """``json.loads`` that also lists duplicated keys.

    Raises:
        json.JSONDecodeError: not valid JSON, or JSON Python cannot read: a number of more
            than ``sys.get_int_max_str_digits()`` digits, or nesting deeper than the
            recursion limit (those are malformed replies like any other, never a crash).
    """
    try:
        return _load_json(text)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:
        raise unreadable(text, exc) from None


def _load_json(text: str) -> tuple[Any, tuple[str, ...]]:
    if not text.startswith("\ufeff"):  # json.loads refuses a BOM; the decoder alone does not
        try:  # the usual reply: the decoder that raises on a repeated key
            return _UNIQUE.decode(text), ()
        except _Duplicated:
            pass  # read again below, naming every repeated key
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)  # the last value of a repeated key, as json does
        if len(out) != len(items):  # only then look for which keys repeat
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    duplicates.append(key)
                seen.add(key)
        return out

    return json.loads(text, object_pairs_hook=pairs), tuple(dict.fromkeys(duplicates))


def _reasoning_free(text: str) -> tuple[int, int] | ReplyProblem:
    """The ``[start, end)`` of ``text`` that is not reasoning (rule 2)."""
    opened, closed = _OPEN.search(text), _CLOSE.search(text)
    if closed and (opened is None or closed.start() < opened.start()):
        return closed.end(), len(text)  # the opening tag was in the chat template
    if opened is None:
        return 0, len(text)
    before = text[: opened.start()]
    close_after = _CLOSE.search(text, opened.end())
    if close_after is None:
        if before.strip():
            return 0, opened.start()  # the verdict came first, then unfinished musing
        return ReplyProblem(
            ProblemKind.UNFINISHED_REASONING,
            f"the reasoning block opened with {opened.group(0)} at {_where(text, opened.start())}"
            f" was never closed, so no verdict followed it; {ONE_OBJECT}",
        )
    return (close_after.end(), len(text)) if not before.strip() else (0, len(text))


def _top_level_objects(text: str, start: int, end: int) -> tuple[list[tuple[int, int]], int]:
    """Every top-level ``{…}`` span in ``text[start:end]``, respecting JSON strings, and the
    position of a ``{`` that is never closed (``-1`` when every brace closes)."""
    spans: list[tuple[int, int]] = []
    depth, opened, in_string, escaped = 0, -1, False, False
    for i in range(start, end):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"' and depth > 0:
            in_string = True
        elif char == "{":
            if depth == 0:
                opened = i
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((opened, i + 1))
    return spans, (opened if depth > 0 else -1)


def _syntax(text: str, offset: int, exc: json.JSONDecodeError) -> ReplyProblem:
    pos = offset + exc.pos
    ends = " (the reply ends before its JSON is complete)" if pos >= len(text.rstrip()) else ""
    return ReplyProblem(
        ProblemKind.JSON_SYNTAX,
        f"the reply's JSON is malformed: {exc.msg} at {_where(text, pos)}{ends}; "
        "send it again as valid JSON (double-quoted keys and strings, no trailing commas, "
        f"every bracket closed); {ONE_OBJECT}",
    )


def _shaped(value: Any, keys: frozenset[str]) -> bool:
    return isinstance(value, dict) and any(str(k).casefold() in keys for k in value)


def _names_a_field(span: str, keys: frozenset[str]) -> bool:
    """Whether an object's text (unreadable as JSON) names a verdict field as a key."""
    folded = span.casefold()
    return any(f'"{key}"' in folded for key in keys)


def _fold(keys: Collection[str]) -> frozenset[str]:
    return frozenset(k.casefold() for k in keys)


#: the same verdict keys come with every reply of a task: folded once
_folded = lru_cache(maxsize=8)(_fold)


def scan_reply(text: str, verdict_keys: Collection[str]) -> Scan:
    """Every verdict-shaped JSON object in one reply text (the module's rules).

    Args:
        text: the reply text (a message's content or one tool call's arguments).
        verdict_keys: the verdict's field names in any spelling; an object with at least one
            of them (compared case-insensitively) is verdict-shaped.

    Returns:
        The candidates in reply order (any number); a problem only when there are none.
    """
    keys = _folded(verdict_keys) if isinstance(verdict_keys, frozenset) else _fold(verdict_keys)
    if not text.strip():
        return Scan((), ReplyProblem(ProblemKind.EMPTY, f"the reply is empty; {ONE_OBJECT}"))
    scan = _scan(text, verdict_keys, keys)
    if scan.candidates and _SURROGATE_ESCAPE.search(text):
        # a \uD800-\uDFFF escape not part of a pair decodes to half a character
        for candidate in scan.candidates:
            found = lone_surrogate_in(candidate.value)  # None too for one too deep to write
            if found is not None:
                return Scan((), _not_text_problem(found, f"in the object at {candidate.where}"))
    return scan


#: a ``\\uD800``-``\\uDFFF`` escape (maybe a pair's half: the decoded value decides); a
#: regular expression finds it faster than ``in`` does in a reply full of ``\\"``
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _not_text(text: str) -> ReplyProblem | None:
    """A problem when ``text`` holds a lone surrogate (half of a UTF-16 pair, U+D800 to
    U+DFFF alone): no UTF-8 text holds one, so a verdict with one could be neither stored
    nor shown (a whole run once stopped on it)."""
    at = lone_surrogate_at(text)
    if at is None:
        return None
    return _not_text_problem(f"U+{ord(text[at]):04X}", f"at {_where(text, at)}")


def _not_text_problem(found: str, place: str) -> ReplyProblem:
    """``NOT_TEXT`` for the lone surrogate ``found`` (``U+XXXX``) at ``place``."""
    return ReplyProblem(
        ProblemKind.NOT_TEXT,
        f"the reply is not text: it holds a lone surrogate ({found}, half of a UTF-16 "
        f"pair) {place}; write every character whole; {ONE_OBJECT}",
    )


def _scan(text: str, verdict_keys: Collection[str], keys: frozenset[str]) -> Scan:
    problem = _not_text(text)
    if problem is not None:
        return Scan((), problem)
    lead = len(text) - len(text.lstrip())
    whole = text.strip()
    try:
        value, duplicates = _load(whole)
    except json.JSONDecodeError:
        value = None
    if isinstance(value, dict):
        # a key spelled as one of ``verdict_keys`` folds into ``keys``: no folding needed
        exact = isinstance(verdict_keys, frozenset) and not verdict_keys.isdisjoint(value)
        if exact or _shaped(value, keys):
            return Scan((Candidate(value, duplicates, _where(text, lead)),))
        return Scan((), _no_fields(keys))
    bounds = _reasoning_free(text)
    if isinstance(bounds, ReplyProblem):
        return Scan((), bounds)
    spans, unclosed = _top_level_objects(text, *bounds)
    found: list[Candidate] = []
    first_error: ReplyProblem | None = None
    objects = 0
    broken_verdict: ReplyProblem | None = None
    for start, end in spans:
        try:
            value, duplicates = _load(text[start:end])
        except json.JSONDecodeError as exc:
            first_error = first_error or _syntax(text, start, exc)
            if broken_verdict is None and _names_a_field(text[start:end], keys):
                broken_verdict = _syntax(text, start, exc)
            continue
        objects += 1
        if _shaped(value, keys):
            found.append(Candidate(value, duplicates, _where(text, start)))
    if broken_verdict is not None:
        # an unreadable object naming a verdict field is a verdict too: taking the readable
        # one beside it would resolve two answers to one, silently (re-asked with the error)
        return Scan((), broken_verdict)
    if found:
        return Scan(tuple(found))
    if unclosed >= 0:
        try:
            _load(text[unclosed : bounds[1]])
        except json.JSONDecodeError as exc:
            return Scan((), _syntax(text, unclosed, exc))
    if first_error is not None:
        return Scan((), first_error)
    if objects:
        return Scan((), _no_fields(keys))
    return Scan(
        (), ReplyProblem(ProblemKind.NO_JSON, f"the reply holds no JSON object; {ONE_OBJECT}")
    )


def _no_fields(keys: frozenset[str]) -> ReplyProblem:
    return ReplyProblem(
        ProblemKind.NO_VERDICT_FIELDS,
        "the reply's JSON object has none of the verdict's fields (intentKey, score, …); "
        + ONE_OBJECT,
    )
