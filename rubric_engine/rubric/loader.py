"""Read rubric packs from YAML, reporting every problem with ``file:line`` and field path.

Edge module: the only I/O here is reading the file. The rules themselves are in
:mod:`rubric_engine.rubric.model` (structure) and :mod:`rubric_engine.rubric.checks`
(cross-field).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rubric_engine.errors import Problem, RubricError, format_loc
from rubric_engine.formats.safe_yaml import (
    YamlLimitError,
    duplicate_keys,
    load_documents,
    yaml_problem,
)
from rubric_engine.rubric.checks import rubric_problems, rubric_warnings
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rules.model import check_error_message, check_model, strip_tags

LineIndex = dict[tuple[str | int, ...], int]
Found = tuple[int | None, str, str]  # line, field path, message
#: largest pack file read; the shipped packs are under 30 kB
MAX_PACK_BYTES = 2_000_000
_TYPE_MESSAGES = {
    "tuple_type": "must be a list (YAML `- item` lines; `[]` for none)",
    "list_type": "must be a list (YAML `- item` lines; `[]` for none)",
    "model_type": "must be a mapping of fields",
    "dict_type": "must be a mapping of fields",
    "model_attributes_type": "must be a mapping of fields",
}


def _line_index(node: yaml.Node, path: tuple[str | int, ...] = ()) -> LineIndex:
    """Map every field path of a composed YAML document to its 1-based line."""
    index: LineIndex = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = (*path, str(key_node.value))
            index.update(_line_index(value_node, child))
            index[child] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            index.update(_line_index(item, (*path, i)))
    return index


def _duplicate_keys(node: yaml.Node) -> list[Found]:
    """Keys repeated inside one mapping: YAML keeps the last silently, so say so."""
    return [
        (
            line,
            format_loc((*path, key)),
            f"key {key!r} appears twice in this mapping (first at line {first}); YAML would "
            "keep only the last one, so remove or rename one",
        )
        for line, path, key, first in duplicate_keys(node)
    ]


def _line_for(loc: tuple[str | int, ...], lines: LineIndex) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _fields_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The valid (aliased) field names of the model found at ``loc`` inside ``model``."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        tagged = check_model(part)
        if tagged is not None:  # pydantic's discriminated-union tag: the check's own model
            current = tagged
            continue
        fields = {(f.alias or n): f for n, f in current.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return []
        current = _model_in(field.annotation)
        if current is None:
            return []
    return [(f.alias or n) for n, f in current.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _check_owner(data: Any, loc: tuple[str | int, ...]) -> str:
    """``requirement <ID>: `` for an error inside a requirement's ``check``, else ``""``."""
    if "check" not in loc:
        return ""
    node = data
    for part in loc[: loc.index("check")]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return ""
    rid = node.get("id") if isinstance(node, dict) else None
    return f"requirement {rid}: " if isinstance(rid, str) else ""


def _validation_problems(
    error: ValidationError, source: str, lines: LineIndex, data: Any = None
) -> list[tuple[int | None, str, str]]:
    found = []
    for err in error.errors():
        tagged_loc = tuple(err["loc"])
        loc = strip_tags(tagged_loc)
        if check_error_message(err):
            message = str(check_error_message(err))
        elif err["type"] == "extra_forbidden":
            valid = _fields_at(EvalRubric, tagged_loc[:-1])
            message = f"unknown field {loc[-1]!r}; valid fields here: {', '.join(valid)}"
        elif err["type"] == "missing":
            message = "required field is missing"
        elif err["type"] in _TYPE_MESSAGES:
            message = _TYPE_MESSAGES[err["type"]]
        elif err["type"] in ("bool_parsing", "bool_type"):
            message = f"must be true or false (got {err.get('input')!r})"
        else:
            message = err["msg"]
            if not isinstance(err.get("input"), dict | list):
                message += f" (got {err.get('input')!r})"
            if (
                err["type"] == "string_pattern_mismatch"
                and loc
                and loc[-1] in ("id", "key", "type")
            ):
                message += " (IDs and types are UPPER_SNAKE_CASE; a pack key is lower_snake_case)"
        message = _check_owner(data, loc) + message
        found.append((_line_for(loc, lines), format_loc(loc), message))
    return found


def parse_rubric(
    data: Any,
    source: str = "<rubric>",
    lines: LineIndex | None = None,
    found_before: list[Found] | None = None,
) -> EvalRubric:
    """Validate a raw mapping as a rubric pack: structure and cross-field rules together.

    Args:
        data: the mapping (camelCase keys) as read from YAML or JSON.
        source: a file name used in messages.
        lines: optional field-path → line map, to report ``file:line``.
        found_before: problems found while reading the file (duplicate keys), reported too.

    Returns:
        The validated, frozen :class:`EvalRubric` (its warnings: :func:`parse_rubric_checked`).

    Raises:
        RubricError: with *every* problem found, each naming line (when known), field path,
            valid choices and fix; the pack's warnings are listed after them.
    """
    return parse_rubric_checked(data, source, lines, found_before)[0]


def parse_rubric_checked(
    data: Any,
    source: str = "<rubric>",
    lines: LineIndex | None = None,
    found_before: list[Found] | None = None,
    warnings_before: list[Found] | None = None,
) -> tuple[EvalRubric, list[Problem]]:
    """:func:`parse_rubric`, also returning the pack's warnings
    (:func:`~rubric_engine.rubric.checks.rubric_warnings`, then ``warnings_before``) as
    :class:`Problem` s, in line order.

    Raises:
        RubricError: as :func:`parse_rubric`.
    """
    lines = lines or {}
    found: list[Found] = list(found_before or [])
    rubric: EvalRubric | None = None
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}, not a mapping"
        raise RubricError(
            f"{source}: the file is {what}; a rubric pack is a mapping with key, "
            "name, version, language, commonRequirements, intents and redFlags "
            "(see rubrics/health_cs.yaml)"
        )
    try:
        rubric = EvalRubric.model_validate(data)
    except ValidationError as exc:
        found.extend(_validation_problems(exc, source, lines, data))
    for path, message in rubric_problems(data):
        found.append((_line_for(_loc(path), lines), path, message))
    warned: list[Found] = list(warnings_before or [])
    warned += [(_line_for(_loc(path), lines), path, m) for path, m in rubric_warnings(data)]
    warnings = _as_problems(warned, source, prefix="warning: ")
    if found:
        problems = _as_problems(found, source)
        also = f" and {len(warnings)} warning(s)" if warnings else ""
        raise RubricError(
            f"{source}: {len(problems)} problem(s){also} in rubric pack; fix them and run "
            "`rubric-eval rubric validate` again",
            problems + warnings,
        )
    assert rubric is not None
    return rubric, warnings


def _loc(path: str) -> tuple[str | int, ...]:
    return tuple(int(p) if p.isdigit() else p for p in _split_path(path))


def _as_problems(found: list[Found], source: str, prefix: str = "") -> list[Problem]:
    ordered = sorted(found, key=lambda item: (item[0] or 0, item[1]))
    return [
        Problem(f"{source}:{line}" if line else source, field, prefix + message)
        for line, field, message in ordered
    ]


def _split_path(path: str) -> list[str]:
    return [p for p in path.replace("[", ".").replace("]", "").split(".") if p]


def load_rubric(path: str | Path) -> EvalRubric:
    """Load and validate one rubric pack file (YAML or JSON); warnings are dropped (see
    :func:`load_rubric_checked`).

    Raises:
        RubricError: the file is missing, is not YAML, holds more than one document, exceeds
            the limits of :mod:`rubric_engine.formats.safe_yaml` (size, nesting, alias expansion),
            or
            fails validation (all problems).
    """
    return load_rubric_checked(path)[0]


def load_rubric_checked(path: str | Path) -> tuple[EvalRubric, list[Problem]]:
    """Load and validate one pack file; return it with its warnings (``rubric validate``).

    Beyond :func:`parse_rubric`'s rules, a *file* must hold at least one requirement (a pack
    with none judges nothing: an error), and a ``status`` other than DRAFT in a file is a
    warning: a file is a draft until ``rubric publish`` freezes it in the store
    (docs/rubric-packs.md).

    Raises:
        RubricError: as :func:`load_rubric`.
    """
    path = Path(path)
    node, data = _read_pack(path)
    lines = _line_index(node) if node is not None else {}
    errors = _duplicate_keys(node) if node is not None else []
    warnings: list[Found] = []
    if isinstance(data, dict):
        errors += _file_problems(data, lines)
        warnings += _file_warnings(data, lines)
    return parse_rubric_checked(data, str(path), lines, errors, warnings)


def _file_problems(data: dict[str, Any], lines: LineIndex) -> list[Found]:
    raw = data.get("intents")
    intents: list[Any] = raw if isinstance(raw, list) else []
    counted = [data.get("commonRequirements")] + [
        i.get("requirements") for i in intents if isinstance(i, dict)
    ]
    if any(isinstance(reqs, list) and reqs for reqs in counted) or not intents:
        return []  # no intents at all is already a problem of its own
    return [
        (
            lines.get(("commonRequirements",)) or lines.get(("intents",)),
            "commonRequirements",
            "the pack has no requirements (none common, none in any intent): the judge would "
            "check nothing. Add commonRequirements or intents[].requirements",
        )
    ]


def _file_warnings(data: dict[str, Any], lines: LineIndex) -> list[Found]:
    status = data.get("status")
    if isinstance(status, str) and status != "DRAFT":
        return [
            (
                _line_for(("status",), lines),
                "status",
                f"a pack file says {status!r}, but a file is always a draft: only `rubric-eval "
                "rubric publish` (or `rubric retire`) sets a version's status, in the store. "
                "Write `status: DRAFT`",
            )
        ]
    return []


def _read_pack(path: Path) -> tuple[yaml.Node | None, Any]:
    """The composed node and data of a pack file (its single YAML document)."""
    if path.is_dir():
        raise RubricError(f"{path}: is a folder; pass a pack file such as rubrics/health_cs.yaml")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise RubricError(
            f"{path}: rubric file not found; pass a pack file such as rubrics/health_cs.yaml"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise RubricError(f"{path}: cannot read rubric file ({exc}); save it as UTF-8") from exc
    try:
        documents = load_documents(text, MAX_PACK_BYTES)
    except YamlLimitError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RubricError(f"{where}: rubric file refused: {exc.problem}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise RubricError(
            f"{where}: not valid YAML: {yaml_problem(exc)}; fix the syntax at that line"
        ) from exc
    if len(documents) > 1:
        raise RubricError(
            f"{path}:{documents[1][0].start_mark.line + 1}: a second YAML document (`---`); "
            "a pack file holds one pack: put each version in its own file"
        )
    return documents[0] if documents else (None, None)


def rubric_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the pack format, for editor validation
    (docs/rubric-packs.md)."""
    schema = EvalRubric.model_json_schema(by_alias=True)
    # the models accept `true`/`false` shorthands (see OutputParsing); say so to editors
    parsing = schema["$defs"]["OutputParsing"]["properties"]
    for name in ("thinkingMarkers", "questionsCard"):
        field = parsing[name]
        shorthand = {"type": "boolean", "description": "shorthand: true = the default markers"}
        parsing[name] = {
            "anyOf": [shorthand, {k: v for k, v in field.items() if k != "default"}],
            "default": field.get("default"),
        }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "rubric-eval rubric pack"
    return schema


def dump_json_schema() -> str:
    return json.dumps(rubric_json_schema(), indent=2, ensure_ascii=False) + "\n"
