"""Dialogue rows: the conversations under evaluation (docs/inputs.md).

One canonical shape, whatever the input format: a row has a ``rowId``, the ``messages`` in
order (roles ``system``, ``user``, ``assistant``, ``tool``), and optional reference output,
trace, case-level requirements and metadata. Adapters in :mod:`rubric_engine.dialogue.readers`
turn OpenAI chat messages, tau2-bench simulations and ShareGPT conversations into this shape.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from rubric_engine.rules.model import Check

Role = Literal["system", "user", "assistant", "tool"]


class _RowModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class ToolCall(_RowModel):
    """One tool invocation requested by the assistant.

    ``arguments`` keeps what the source gave: a mapping (tau2) or a JSON string (OpenAI).
    """

    id: str | None = None
    name: str = Field(min_length=1)
    arguments: Any = None

    def arguments_text(self) -> str:
        """Arguments as compact JSON text, the way the judge reads them."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))


class Message(_RowModel):
    """One turn. ``content`` may be ``None`` for an assistant turn that only calls tools."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


def _case_text(value: str) -> str:
    _plain_line(value, "a case-level requirement", "the requirement")
    return value


#: a case-level requirement's text: one plain line, as the judge's prompt shows it
CaseText = Annotated[str, AfterValidator(_case_text)]


class DialogueRow(_RowModel):
    """One dialogue to score.

    Attributes:
        row_id: unique within the batch; rows are reported under this ID.
        messages: the conversation in order; at least one assistant turn.
        reference_output: never a standard answer, only a source of hard constraints
            (docs/protocol.md §3); shown to the judge in its own data block.
        trace: optional tool/timing/cost trace (used by deterministic checks).
        expected_behavior: case-level requirements the agent must meet (docs/protocol.md §6).
        negative_behavior: case-level behaviours the agent must avoid (docs/protocol.md §6).
        expected: deterministic rule checks of this case (docs/rule-checks.md); each
            decides its own case-level requirement ``CASE_RULE_<hash>`` without the judge.
        metadata: free-form (scenario, risk_level, tags, dataset_id, case_id, source …).
    """

    row_id: str = Field(min_length=1)
    messages: tuple[Message, ...] = Field(min_length=1)
    reference_output: Any = None
    trace: dict[str, Any] | None = None
    expected_behavior: tuple[CaseText, ...] = ()
    negative_behavior: tuple[CaseText, ...] = ()
    expected: tuple[Check, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("row_id")
    @classmethod
    def _row_id_is_one_plain_line(cls, value: str) -> str:
        return check_row_id(value)


def _plain_line(value: str, what: str, where: str) -> None:
    """Refuse in ``value`` what could end its line in the judge's prompt or imitate a data-block
    marker: control characters (line breaks, tabs, NUL), format characters (bidi overrides,
    zero-width), line/paragraph separators, ``<<<`` and ``>>>``.

    Raises:
        ValueError: naming the first offending character (as ``U+XXXX``) and the fix.
    """
    # an ASCII character in those categories is a control character (Cc), which is exactly
    # what str.isprintable refuses in ASCII: printable ASCII needs no walk
    plain = value.isascii() and value.isprintable()
    for char in () if plain else value:
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            name = unicodedata.name(char, "a control character")
            raise ValueError(
                f"{value[:40]!r} holds U+{ord(char):04X} ({name.lower()}); {what} is shown to "
                "the judge outside the dialogue's data block, so line breaks, control and "
                f"invisible format characters are refused: remove it from {where}"
            )
    for marker in ("<<<", ">>>"):
        if marker in value:
            raise ValueError(
                f"{value[:40]!r} holds {marker!r}, the judge prompt's data-block marker, and "
                f"{what} is shown outside the data block: write {where} without it"
            )


#: the longest rowId accepted (characters)
MAX_ROW_ID_CHARS = 256


def check_row_id(value: str) -> str:
    """A rowId as the judge's prompt may show it: one line of printable text.

    The rowId is written into the user message outside the dialogue's data block (``rowId:
    …`` and the closing request), so it must not be able to start a line of its own or
    imitate a block marker: control characters (line breaks, tabs, NUL), format characters
    (bidi overrides, zero-width), line/paragraph separators and the block markers ``<<<`` /
    ``>>>`` are refused, and so is a rowId longer than :data:`MAX_ROW_ID_CHARS`.

    Raises:
        ValueError: naming the first offending character (as ``U+XXXX``) and the fix.
    """
    _plain_line(value, "a rowId", "the rowId")
    if len(value) > MAX_ROW_ID_CHARS:
        raise ValueError(
            f"rowId is {len(value):,} characters long (limit {MAX_ROW_ID_CHARS}): use a "
            "shorter id and keep the long text in metadata"
        )
    return value
