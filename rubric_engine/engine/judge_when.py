"""``--judge-when``: call the LLM judge only on the rows worth its cost (the LLM judge is the
most expensive check, kept for the key cases; docs/judges.md); rule checks run on every row.

A condition reads one row metadata field: ``FIELD=VALUE``, ``FIELD!=VALUE`` or
``FIELD in A,B,C`` (``risk_level=high``, ``tier in golden,adversarial``). A list value (``tags``)
matches when any item does; a missing field never equals a value (so ``!=`` holds). Values are
compared as text. Rows the condition leaves out are decided by their rule checks alone (status
CHECKED, as with ``--judge none``), so the task mixes SCORED and CHECKED rows; the report counts
both in the pass rate and says how many were CHECKED. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.errors import ConfigurationError

_CONDITION = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*(!=|=|\s+in\s+)\s*(.+?)\s*$")


def parse_judge_when(text: str) -> Callable[[dict[str, Any]], bool]:
    """The predicate over a row's metadata that ``text`` describes.

    Raises:
        ConfigurationError: not ``FIELD=VALUE``, ``FIELD!=VALUE`` or ``FIELD in A,B``.
    """
    found = _CONDITION.match(text)
    if found is None:
        raise ConfigurationError(
            f"--judge-when {text!r} is not FIELD=VALUE, FIELD!=VALUE or 'FIELD in A,B' over a row "
            "metadata field, e.g. risk_level=high or 'tier in golden,adversarial'"
        )
    field, op, raw = found.group(1), found.group(2).strip(), found.group(3)
    wanted = {v.strip() for v in raw.split(",")} if op == "in" else {raw}

    def matches(metadata: dict[str, Any]) -> bool:
        value = metadata.get(field)
        values = value if isinstance(value, list) else [] if value is None else [value]
        hit = any(str(v) in wanted for v in values)
        return not hit if op == "!=" else hit

    return matches


def condition_field(text: str) -> str:
    """The metadata field a condition reads (``risk_level`` of ``risk_level=high``).

    Raises:
        ConfigurationError: see :func:`parse_judge_when`.
    """
    parse_judge_when(text)
    found = _CONDITION.match(text)
    assert found is not None
    return found.group(1)


def check_field_seen(text: str, seen: set[str]) -> None:
    """A condition on a field no row has selects nothing (every row would go unjudged): a typo
    (``scenaro=x``) is refused, naming the fields the rows have.

    Raises:
        ConfigurationError: no row's metadata has the condition's field.
    """
    field = condition_field(text)
    if field in seen:
        return
    names = sorted(seen)
    shown = ", ".join(names[:30]) + (f" and {len(names) - 30} more" if len(names) > 30 else "")
    raise ConfigurationError(
        f"--judge-when {text!r}: no row has the metadata field {field!r}, so the condition "
        f"would judge no row; the rows' metadata fields are: {shown or 'none'}"
    )


def judge_if_for(condition: str | None) -> Callable[[DialogueRow], bool] | None:
    """``--judge-when`` as a predicate over a row (its metadata), or ``None``: every row is
    judged (shared by ``score`` and the workers of ``rubric-eval work``).

    Raises:
        ConfigurationError: see :func:`parse_judge_when`.
    """
    if condition is None:
        return None
    matches = parse_judge_when(condition)
    return lambda row: matches(row.metadata)
