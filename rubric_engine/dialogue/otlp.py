"""OTLP/JSON trace exports as dialogue rows: one row per LLM-call span.

An OpenTelemetry exporter (the Collector's ``file`` exporter, ``otlp-json`` file exporters, a
backend's "download trace") writes ``ExportTraceServiceRequest`` objects in OTLP's JSON
encoding (``opentelemetry-proto``, ``trace/v1/trace.proto``)::

    {"resourceSpans": [{"resource": {"attributes": [KeyValue…]},
                        "scopeSpans": [{"scope": {"name": …},
                                        "spans": [{"traceId", "spanId", "name",
                                                   "startTimeUnixNano", "endTimeUnixNano",
                                                   "attributes": [KeyValue…],
                                                   "events": [{"name", "attributes"}…]}…]}]}]}

A ``KeyValue`` is ``{key, value: AnyValue}`` and an ``AnyValue`` one of ``stringValue``,
``boolValue``, ``intValue`` (a decimal *string* in OTLP/JSON, int64), ``doubleValue``,
``arrayValue {values}``, ``kvlistValue {values: [KeyValue…]}``, ``bytesValue`` (base64).

A span is a row when it carries GenAI messages (``gen_ai.input.messages`` /
``gen_ai.output.messages`` / ``gen_ai.system_instructions``), on the span or, when content
capture writes them there, on one of its events; the messages are then read by
:mod:`rubric_engine.dialogue.otel`. Other spans (``execute_tool``, ``invoke_agent``, HTTP …)
are skipped. ``rowId`` is the span id; the trace and span ids, span name, service name and the
span's other attributes go to metadata, and the span's duration to ``trace.durationMs``. A file
with no such span is an error that says what was found and how to export message content.

Trace and span ids are stored as lowercase hex, the spelling OTLP/JSON specifies and every
backend shows; a protobuf JSON dump of the same request (``json_format.MessageToJson``) writes
them base64, and those are read and turned into hex (:func:`hex_id`), so a result emitted back
(``rubric-eval emit``, docs/integrations.md) finds its span either way. Pure.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from typing import Any

from rubric_engine.dialogue.errors import RowShapeError
from rubric_engine.dialogue.otel import OTEL_KEYS
from rubric_engine.dialogue.storable import MAX_ROW_DEPTH

#: the AnyValue fields that hold a scalar, and how to read each
_SCALARS = ("stringValue", "boolValue", "doubleValue", "bytesValue")


#: bytes in a trace id and a span id (OTLP ``trace.proto``)
TRACE_ID_BYTES, SPAN_ID_BYTES = 16, 8
_HEX = re.compile(r"^[0-9a-fA-F]+$")


def hex_id(value: Any, size: int) -> Any:
    """A trace or span id of ``size`` bytes as lowercase hex: hex (OTLP/JSON) as it is, base64
    (protobuf's JSON mapping) decoded. Anything else (an empty or odd id) is returned unchanged,
    for the row to keep what the file said."""
    if not isinstance(value, str):
        return value
    if len(value) == 2 * size and _HEX.match(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    return raw.hex() if len(raw) == size else value


def is_otlp_export(obj: Any) -> bool:
    """Whether ``obj`` is an OTLP/JSON ``ExportTraceServiceRequest`` (``{resourceSpans}``)."""
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans"), list)


def any_value(value: Any, depth: int = 0) -> Any:
    """An OTLP ``AnyValue`` as plain JSON: arrays → lists, kvlists → dicts, int64 → int.

    Raises:
        RowShapeError: nested deeper than a row may be
            (:data:`~rubric_engine.dialogue.storable.MAX_ROW_DEPTH`).
    """
    if depth > MAX_ROW_DEPTH:
        raise RowShapeError("", f"attribute value nested more than {MAX_ROW_DEPTH} levels deep")
    if not isinstance(value, dict):
        return value
    for field in _SCALARS:
        if field in value:
            return value[field]
    if "intValue" in value:
        raw = value["intValue"]
        try:
            return int(raw)
        except (TypeError, ValueError):
            return raw
    if "arrayValue" in value:
        return [any_value(v, depth + 1) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return attributes_of((value["kvlistValue"] or {}).get("values"), depth + 1)
    return None  # an empty AnyValue: OTLP's "no value"


def attributes_of(key_values: Any, depth: int = 0) -> dict[str, Any]:
    """``[{key, value: AnyValue}…]`` as ``{key: value}`` (later keys win, as in the SDKs)."""
    found: dict[str, Any] = {}
    for item in key_values or []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            found[item["key"]] = any_value(item.get("value"), depth)
    return found


def _duration_ms(span: dict[str, Any]) -> float | None:
    try:
        start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
    except (KeyError, TypeError, ValueError):
        return None
    return (end - start) / 1e6 if end >= start > 0 else None


def _message_attributes(span: dict[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    """The span's GenAI message attributes, else those of its first event that has them."""
    found = {k: attributes[k] for k in OTEL_KEYS if k in attributes}
    if found:
        return found
    for event in span.get("events") or []:
        if isinstance(event, dict):
            event_attributes = attributes_of(event.get("attributes"))
            found = {k: event_attributes[k] for k in OTEL_KEYS if k in event_attributes}
            if found:
                return found
    return {}


def _row(span: dict[str, Any], service: Any) -> dict[str, Any] | None:
    attributes = attributes_of(span.get("attributes"))
    messages = _message_attributes(span, attributes)
    if not messages:
        return None
    others = {k: v for k, v in attributes.items() if k not in OTEL_KEYS}
    metadata: dict[str, Any] = {
        "source": "otlp",
        "traceId": hex_id(span.get("traceId"), TRACE_ID_BYTES),
        "spanId": hex_id(span.get("spanId"), SPAN_ID_BYTES),
        "spanName": span.get("name"),
        **({"service": service} if service is not None else {}),
        **({"otelAttributes": others} if others else {}),
    }
    row: dict[str, Any] = {"attributes": messages, "metadata": metadata}
    if metadata["spanId"]:
        row["rowId"] = str(metadata["spanId"])
    duration = _duration_ms(span)
    if duration is not None:
        row["trace"] = {"durationMs": duration}
    return row


def otlp_rows(data: dict[str, Any]) -> Iterator[tuple[str, Any, str | None]]:
    """Yield ``(where, row object or RowShapeError, span id)`` per LLM-call span, in order.

    ``where`` is the span's path in the export (``resourceSpans[0].scopeSpans[1].spans[2]``).
    When no span carries GenAI messages, one :class:`RowShapeError` says what the file holds.
    """
    spans = rows = 0
    for r, resource_spans in enumerate(data.get("resourceSpans") or []):
        if not isinstance(resource_spans, dict):
            continue
        try:
            resource = attributes_of((resource_spans.get("resource") or {}).get("attributes"))
        except RowShapeError as exc:
            yield f"resourceSpans[{r}].resource", exc, None
            continue
        for s, scope_spans in enumerate(resource_spans.get("scopeSpans") or []):
            if not isinstance(scope_spans, dict):
                continue
            for i, span in enumerate(scope_spans.get("spans") or []):
                if not isinstance(span, dict):
                    continue
                spans += 1
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                try:
                    row = _row(span, resource.get("service.name"))
                except RowShapeError as exc:
                    yield where, exc, None
                    continue
                if row is not None:
                    rows += 1
                    yield where, row, row.get("rowId")
    if rows == 0:
        yield (
            "",
            RowShapeError(
                "resourceSpans",
                f"an OTLP/JSON trace export with {spans} span(s), none carrying GenAI messages "
                f"({', '.join(OTEL_KEYS)}) on the span or its events; export the LLM-call spans "
                "with message content captured (for OpenTelemetry instrumentations: "
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)",
            ),
            None,
        )
