"""Read dialogue files into :class:`DialogueRow` s (SPEC §8).

Formats (``--input-format``, default ``auto``):

* ``jsonl`` — one JSON object per line. ``messages`` in OpenAI chat format (``tool_calls``
  with ``function.arguments`` as a JSON string, ``tool`` turns with ``tool_call_id``) or with
  tau2-style tool calls (``{id, name, arguments}``); or ShareGPT ``conversations``
  (``human``/``gpt``/``system``/``function_call``/``observation``).
* ``json`` — a JSON array of such objects.
* ``tau2`` — a tau2-bench results file ``{tasks, simulations}``; one row per simulation,
  ``rowId = {domain}-{task_id}`` (``-t{trial}`` added when a task ran more than once), the
  task's ``nl_assertions`` as case-level ``expectedBehavior``, its expected actions and
  ``communicate_info`` as ``referenceOutput``.

A :class:`DialogueSource` validates the whole file first (every broken row reported with its
line, before any judge call) and then streams rows, so memory stays flat on large JSONL files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.errors import DatasetError, Problem

InputFormat = Literal["auto", "jsonl", "json", "tau2"]
INPUT_FORMATS: tuple[str, ...] = ("auto", "jsonl", "json", "tau2")
MAX_PROBLEMS = 50

_ID_KEYS = ("rowId", "row_id", "id", "case_id", "caseId")
_KNOWN_KEYS = {
    *_ID_KEYS,
    "messages",
    "conversations",
    "referenceOutput",
    "reference_output",
    "trace",
    "expectedBehavior",
    "expected_behavior",
    "negativeBehavior",
    "negative_behavior",
    "metadata",
}
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "system": "system", "function_call": "assistant", "observation": "tool"}


class RowShapeError(ValueError):
    """A row's shape cannot be mapped to a dialogue; ``field`` says where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _text(content: Any, field: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and "text" in p]
        return "\n".join(parts)
    raise RowShapeError(field, f"content must be a string, a list of text parts or null, "
                               f"not {type(content).__name__}")


def _tool_call(raw: Any, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise RowShapeError(field, "a tool call must be an object with a name and arguments")
    function = raw.get("function")
    if isinstance(function, dict):  # OpenAI: {id, type, function: {name, arguments}}
        return {"id": raw.get("id"), "name": function.get("name"),
                "arguments": function.get("arguments")}
    return {"id": raw.get("id"), "name": raw.get("name"), "arguments": raw.get("arguments")}


def _message(raw: Any, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise RowShapeError(field, "each message must be an object with role and content")
    calls = raw.get("tool_calls") or raw.get("toolCalls") or []
    if not isinstance(calls, list):
        raise RowShapeError(f"{field}.tool_calls", "tool_calls must be a list")
    role = raw.get("role")
    call_id = raw.get("tool_call_id") or raw.get("toolCallId")
    if role == "tool" and call_id is None:
        call_id = raw.get("id")
    return {
        "role": role,
        "content": _text(raw.get("content"), f"{field}.content"),
        "tool_calls": [_tool_call(c, f"{field}.tool_calls[{i}]") for i, c in enumerate(calls)],
        "tool_call_id": call_id,
        "name": raw.get("name"),
    }


def _sharegpt_message(raw: Any, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or "from" not in raw:
        raise RowShapeError(field, "a ShareGPT turn is an object {from, value}")
    speaker, value = raw["from"], raw.get("value")
    role = _SHAREGPT_ROLES.get(speaker)
    if role is None:
        raise RowShapeError(f"{field}.from", f"unknown speaker {speaker!r}; valid: "
                                             f"{', '.join(_SHAREGPT_ROLES)}")
    if speaker == "function_call":
        try:
            call = json.loads(value) if isinstance(value, str) else value
        except json.JSONDecodeError as exc:
            raise RowShapeError(f"{field}.value", f"function_call value is not JSON: {exc}") from exc
        if not isinstance(call, dict):
            raise RowShapeError(f"{field}.value", "function_call value must be {name, arguments}")
        return {"role": "assistant", "content": None,
                "tool_calls": [{"name": call.get("name"), "arguments": call.get("arguments")}]}
    return {"role": role, "content": _text(value, f"{field}.value")}


def row_from_object(obj: Any, default_id: str) -> DialogueRow:
    """Map one input object (any supported row shape) to a :class:`DialogueRow`.

    Raises:
        RowShapeError: the object's shape is not a dialogue.
        pydantic.ValidationError: a field has the wrong type.
    """
    if not isinstance(obj, dict):
        raise RowShapeError("", "each row must be a JSON object with `messages` or "
                                "`conversations`")
    if isinstance(obj.get("messages"), list):
        messages = [_message(m, f"messages[{i}]") for i, m in enumerate(obj["messages"])]
    elif isinstance(obj.get("conversations"), list):
        messages = [_sharegpt_message(m, f"conversations[{i}]")
                    for i, m in enumerate(obj["conversations"])]
    else:
        raise RowShapeError("messages", "missing: a row needs `messages` (OpenAI chat format) "
                                        "or `conversations` (ShareGPT)")
    if not any(m["role"] == "assistant" for m in messages):
        raise RowShapeError("messages", "no assistant turn: there is nothing to evaluate")
    row_id = next((obj[k] for k in _ID_KEYS if obj.get(k) not in (None, "")), default_id)
    metadata = dict(obj.get("metadata") or {}) if isinstance(obj.get("metadata"), dict) else {}
    for key, value in obj.items():
        if key not in _KNOWN_KEYS:
            metadata.setdefault(key, value)
    return DialogueRow.model_validate({
        "row_id": str(row_id),
        "messages": messages,
        "reference_output": obj.get("referenceOutput", obj.get("reference_output")),
        "trace": obj.get("trace"),
        "expected_behavior": obj.get("expectedBehavior", obj.get("expected_behavior")) or (),
        "negative_behavior": obj.get("negativeBehavior", obj.get("negative_behavior")) or (),
        "metadata": metadata,
    })


def _unwrap_tau2_content(content: Any) -> Any:
    """tau2 assistant texts are sometimes ``{"message": "..."}``; the user read the message."""
    if isinstance(content, str) and content.lstrip().startswith("{"):
        try:
            parsed = json.loads(content)
        except json.JSONDecodeError:
            return content
        if isinstance(parsed, dict) and set(parsed) == {"message"} and isinstance(
            parsed["message"], str
        ):
            return parsed["message"]
    return content


def tau2_rows(data: dict[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """Yield ``(where, row object, default id)`` for each simulation of a tau2 results file."""
    info = data.get("info") or {}
    domain = ((info.get("environment_info") or {}).get("domain_name")) or "tau2"
    tasks = {str(t.get("id")): t for t in data.get("tasks") or [] if isinstance(t, dict)}
    sims = data.get("simulations") or []
    trials: dict[str, int] = {}
    for sim in sims:
        tid = str(sim.get("task_id"))
        trials[tid] = trials.get(tid, 0) + 1
    for i, sim in enumerate(sims):
        tid = str(sim.get("task_id"))
        row_id = f"{domain}-{tid}" + (f"-t{sim.get('trial', 0)}" if trials[tid] > 1 else "")
        task = tasks.get(tid, {})
        reward_info = sim.get("reward_info") or {}
        criteria, criteria_source = _tau2_criteria(task, reward_info)
        messages = []
        for m in sim.get("messages") or []:
            if isinstance(m, dict) and m.get("role") == "assistant":
                m = {**m, "content": _unwrap_tau2_content(m.get("content"))}
            messages.append(m)
        yield f"simulations[{i}]", {
            "rowId": row_id,
            "messages": messages,
            "expectedBehavior": criteria["nl_assertions"],
            "referenceOutput": {
                "expectedActions": criteria["actions"],
                "communicateInfo": criteria["communicate_info"],
            },
            "metadata": {
                "source": "tau2-bench",
                "domain": domain,
                "taskId": tid,
                "trial": sim.get("trial"),
                "simulationId": sim.get("id"),
                "reward": reward_info.get("reward"),
                "terminationReason": sim.get("termination_reason"),
                "criteriaSource": criteria_source,
                "taskListDisagrees": criteria_source == "reward_info"
                and criteria != _tau2_task_criteria(task),
            },
        }, row_id


def _tau2_task_criteria(task: dict[str, Any]) -> dict[str, list[Any]]:
    criteria = task.get("evaluation_criteria") or {}
    return {
        "nl_assertions": list(criteria.get("nl_assertions") or []),
        "actions": [{"name": a.get("name"), "arguments": a.get("arguments")}
                    for a in criteria.get("actions") or []],
        "communicate_info": list(criteria.get("communicate_info") or []),
    }


def _tau2_criteria(
    task: dict[str, Any], reward_info: dict[str, Any]
) -> tuple[dict[str, list[Any]], str]:
    """The criteria a simulation was actually graded against.

    Some published tau2 result files label simulations with the wrong ``task_id`` (24 of the 25
    airline dev simulations disagree with their ``tasks`` entry), while each simulation's own
    ``reward_info`` lists the assertions and actions it was graded on. Prefer those.
    """
    if not any(reward_info.get(k) for k in ("nl_assertions", "action_checks",
                                             "communicate_checks")):
        return _tau2_task_criteria(task), "tasks"
    return {
        "nl_assertions": [a.get("nl_assertion") for a in reward_info.get("nl_assertions") or []
                          if isinstance(a, dict) and a.get("nl_assertion")],
        "actions": [{"name": (c.get("action") or {}).get("name"),
                     "arguments": (c.get("action") or {}).get("arguments")}
                    for c in reward_info.get("action_checks") or [] if isinstance(c, dict)],
        "communicate_info": [c.get("info") for c in reward_info.get("communicate_checks") or []
                             if isinstance(c, dict) and c.get("info")],
    }, "reward_info"


@dataclass
class DialogueSource:
    """A dialogue file, validated whole before it is streamed.

    Attributes:
        path: the input file.
        input_format: one of :data:`INPUT_FORMATS`; ``auto`` picks ``tau2`` for a JSON object
            with ``simulations``, ``json`` for a JSON array, else ``jsonl``.
    """

    path: Path
    input_format: InputFormat = "auto"

    def _resolved_format(self) -> str:
        if self.input_format != "auto":
            return self.input_format
        with self.path.open("rb") as handle:
            head = handle.read(4096).lstrip()
        if self.path.suffix.lower() == ".json" or head.startswith(b"["):
            return "json"
        return "jsonl"

    def _objects(self) -> Iterator[tuple[str, Any, str]]:
        """Yield ``(where, raw object or exception, default id)`` in file order."""
        fmt = self._resolved_format()
        stem = self.path.stem
        if fmt == "jsonl":
            with self.path.open(encoding="utf-8") as handle:
                for n, line in enumerate(handle, start=1):
                    if not line.strip():
                        continue
                    try:
                        yield f"{self.path}:{n}", json.loads(line), f"{stem}-{n}"
                    except json.JSONDecodeError as exc:
                        yield f"{self.path}:{n}", exc, f"{stem}-{n}"
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            yield f"{self.path}:{exc.lineno}", exc, stem
            return
        if isinstance(data, dict) and "simulations" in data:
            for where, obj, default_id in tau2_rows(data):
                yield f"{self.path}: {where}", obj, default_id
        elif isinstance(data, list):
            for i, obj in enumerate(data):
                yield f"{self.path}: [{i}]", obj, f"{stem}-{i + 1}"
        else:
            yield str(self.path), RowShapeError(
                "", "a .json input must be an array of rows or a tau2-bench results file "
                    "{tasks, simulations}; for one row per line use .jsonl"
            ), stem

    def _parse(self) -> Iterator[tuple[str, DialogueRow | list[Problem]]]:
        for where, obj, default_id in self._objects():
            if isinstance(obj, json.JSONDecodeError):
                yield where, [Problem(where, "", f"not valid JSON ({obj.msg} at column "
                                                 f"{obj.colno}); each line must be one JSON object")]
                continue
            if isinstance(obj, RowShapeError):
                yield where, [Problem(where, obj.field, str(obj))]
                continue
            try:
                yield where, row_from_object(obj, default_id)
            except RowShapeError as exc:
                yield where, [Problem(where, exc.field, str(exc))]
            except ValidationError as exc:
                yield where, [
                    Problem(where, _loc(err["loc"]), err["msg"]) for err in exc.errors()
                ]

    def validate(self, seen: dict[str, str] | None = None) -> int:
        """Check every row; return the row count.

        Args:
            seen: rowIds already taken (by earlier files of the same batch) → where; updated.

        Raises:
            DatasetError: the file is missing or unreadable, or rows are malformed or share a
                rowId; lists up to :data:`MAX_PROBLEMS` problems with their lines.
        """
        if not self.path.is_file():
            raise DatasetError(f"{self.path}: input file not found")
        problems: list[Problem] = []
        seen = {} if seen is None else seen
        count = 0
        try:
            for where, parsed in self._parse():
                if isinstance(parsed, list):
                    problems.extend(parsed)
                    continue
                count += 1
                if parsed.row_id in seen:
                    problems.append(Problem(where, "rowId", f"duplicate rowId {parsed.row_id!r} "
                                            f"(first at {seen[parsed.row_id]}); rowIds must be "
                                            "unique within a task"))
                else:
                    seen[parsed.row_id] = where
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{self.path}: not UTF-8 text ({exc}); save the file as UTF-8") \
                from exc
        if problems:
            shown = problems[:MAX_PROBLEMS]
            more = len(problems) - len(shown)
            raise DatasetError(
                f"{self.path}: {len(problems)} malformed row(s); nothing was scored. Fix them "
                "and run again" + (f" ({more} more not shown)" if more else ""),
                shown,
            )
        if count == 0:
            raise DatasetError(f"{self.path}: no rows found; expected one JSON object per line "
                               "with `messages`")
        return count

    def __iter__(self) -> Iterator[DialogueRow]:
        """Stream rows in file order. Call :meth:`validate` first; a broken row here raises."""
        for where, parsed in self._parse():
            if isinstance(parsed, list):
                raise DatasetError(f"{where}: row changed since validation", parsed)
            yield parsed


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
