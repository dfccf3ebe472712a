"""Dialogue rows: the conversations under evaluation (SPEC §8).

One canonical shape, whatever the input format: a row has a ``rowId``, the ``messages`` in
order (roles ``system``, ``user``, ``assistant``, ``tool``), and optional reference output,
trace, case-level requirements and metadata. Adapters in :mod:`rubric_engine.dialogue.readers`
turn OpenAI chat messages, tau2-bench simulations and ShareGPT conversations into this shape.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
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


class DialogueRow(_RowModel):
    """One dialogue to score.

    Attributes:
        row_id: unique within the batch; rows are reported under this ID.
        messages: the conversation in order; at least one assistant turn.
        reference_output: never a standard answer, only a source of hard constraints (seed 003
            §五); shown to the judge in its own data block.
        trace: optional tool/timing/cost trace (used by deterministic checks).
        expected_behavior: case-level requirements the agent must meet (seed 000 §12.3).
        negative_behavior: case-level behaviours the agent must avoid (seed 000 §12.3).
        expected: deterministic rule checks of this case (SPEC §7; seed 001/004); each
            decides its own case-level requirement ``CASE_RULE_<hash>`` without the judge.
        metadata: free-form (scenario, risk_level, tags, dataset_id, case_id, source …).
    """

    row_id: str = Field(min_length=1)
    messages: tuple[Message, ...] = Field(min_length=1)
    reference_output: Any = None
    trace: dict[str, Any] | None = None
    expected_behavior: tuple[str, ...] = ()
    negative_behavior: tuple[str, ...] = ()
    expected: tuple[Check, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
