"""A row's result as OTel GenAI ``gen_ai.evaluation.result`` events (names in :mod:`.semconv`).

One event per row: ``gen_ai.evaluation.name`` is the rubric key, the score value the final
score, the label the row's outcome (``PASS``, ``FAIL``, ``RED_FLAG``; ``CHECKED`` rows have an
outcome but no score), the explanation the judge's. A JUDGE_ERROR row is an event too — with
``error.type`` (the error kind), a ``JUDGE_ERROR`` label and no score value: a failure is never
sent as a score. ``per_requirement`` adds one event per referenceBasis entry, named by the
requirement id, labelled with its status and valued 1 (FOLLOWED) or 0 (PARTIAL, VIOLATED; the
compliance rule of docs/architecture.md), no value for NOT_APPLICABLE.

An event links to the span it judges when the row came from a trace (OTLP/JSON or OTel GenAI
input keeps ``metadata.traceId``/``spanId`` as hex, :func:`rubric_engine.dialogue.otlp.hex_id`).
Pure: the exporters in :mod:`.otlp_export` and :mod:`.phoenix` send what this builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.dialogue.otlp import SPAN_ID_BYTES, TRACE_ID_BYTES, hex_id
from rubric_engine.integrations import semconv as sc
from rubric_engine.report.outcome import row_outcome
from rubric_engine.results.model import RequirementStatus, RowResult

#: attribute values OTLP carries: text, numbers, booleans and arrays of text
AttrValue = str | int | float | bool | tuple[str, ...]


@dataclass(frozen=True)
class Rated:
    """What every event of a task shares: the rubric and the task."""

    rubric_key: str
    rubric_version: int
    rubric_hash: str
    task_id: str
    pass_score: int

    @property
    def rubric_ref(self) -> str:
        return f"{self.rubric_key}@{self.rubric_version}"


@dataclass(frozen=True)
class EvaluationEvent:
    """One ``gen_ai.evaluation.result`` event.

    Attributes:
        name: the evaluation's name (``gen_ai.evaluation.name``).
        row_id: the row it is about.
        trace_id, span_id: the judged span as hex (32 and 16 digits), or ``None`` when the row
            did not come from a trace.
        attributes: every attribute, the name included; no ``None`` values.
        score: the numeric score (``None`` for none), label: the label, explanation: the
            explanation, each also in ``attributes``.
    """

    name: str
    row_id: str
    trace_id: str | None
    span_id: str | None
    score: float | None
    label: str
    explanation: str | None
    attributes: dict[str, AttrValue] = field(default_factory=dict)


def span_of(metadata: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The ``(trace id, span id)`` a row came from, as hex, or ``(None, None)``."""
    trace = hex_id(metadata.get("traceId"), TRACE_ID_BYTES)
    span = hex_id(metadata.get("spanId"), SPAN_ID_BYTES)
    ok = (
        isinstance(trace, str)
        and len(trace) == 2 * TRACE_ID_BYTES
        and isinstance(span, str)
        and len(span) == 2 * SPAN_ID_BYTES
    )
    return (trace, span) if ok else (None, None)


def row_events(
    result: RowResult,
    metadata: Mapping[str, Any],
    rated: Rated,
    per_requirement: bool = False,
) -> list[EvaluationEvent]:
    """The row's event, then (``per_requirement``) one per referenceBasis entry in order."""
    trace, span = span_of(metadata)
    shared: dict[str, AttrValue] = {
        sc.RUBRIC: rated.rubric_ref,
        sc.RUBRIC_HASH: rated.rubric_hash,
        sc.TASK_ID: rated.task_id,
        sc.ROW_ID: result.row_id,
    }
    response = (metadata.get("otelAttributes") or {}).get(sc.RESPONSE_ID)
    if isinstance(response, str):
        shared[sc.RESPONSE_ID] = response
    unmet = tuple(
        e.requirement_id
        for e in result.reference_basis
        if e.status in (RequirementStatus.VIOLATED, RequirementStatus.PARTIAL)
    )
    row: dict[str, AttrValue] = {**shared, sc.RED_FLAGS: result.red_flag_types}
    row[sc.UNMET_REQUIREMENTS] = unmet
    if result.intent_key is not None:
        row[sc.INTENT] = result.intent_key
    if result.judge_score is not None:
        row[sc.JUDGE_SCORE] = result.judge_score
    if result.error is not None:
        row[sc.ERROR_TYPE] = str(result.error.kind)
    score = float(result.final_score) if result.final_score is not None else None
    explanation = result.score_explanation or (result.error.message if result.error else None)
    events = [
        _event(rated.rubric_key, result.row_id, trace, span, score,
               str(row_outcome(result, rated.pass_score)), explanation, row)
    ]  # fmt: skip
    if per_requirement:
        for entry in result.reference_basis:
            value = {RequirementStatus.FOLLOWED: 1.0, RequirementStatus.PARTIAL: 0.0,
                     RequirementStatus.VIOLATED: 0.0}.get(entry.status)  # fmt: skip
            extra: dict[str, AttrValue] = {**shared, sc.REQUIREMENT_ID: entry.requirement_id}
            extra[sc.REQUIREMENT_SOURCE] = str(entry.source)
            events.append(
                _event(entry.requirement_id, result.row_id, trace, span, value,
                       str(entry.status), None, extra)
            )  # fmt: skip
    return events


def _event(
    name: str,
    row_id: str,
    trace: str | None,
    span: str | None,
    score: float | None,
    label: str,
    explanation: str | None,
    extra: dict[str, AttrValue],
) -> EvaluationEvent:
    attributes: dict[str, AttrValue] = {sc.EVALUATION_NAME: name, sc.SCORE_LABEL: label}
    if score is not None:
        attributes[sc.SCORE_VALUE] = score
    if explanation:
        attributes[sc.EXPLANATION] = explanation
    attributes.update(extra)
    return EvaluationEvent(name, row_id, trace, span, score, label, explanation, attributes)
