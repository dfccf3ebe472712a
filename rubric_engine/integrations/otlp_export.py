"""Send evaluation events to an OTLP/HTTP endpoint through the OpenTelemetry SDK (extra ``otel``).

Each :class:`~rubric_engine.integrations.events.EvaluationEvent` becomes one log record with
event name ``gen_ai.evaluation.result``, its attributes, and — when the row came from a trace —
the judged span's trace and span ids (the record's context), which is how OTel links an
evaluation to the operation it evaluates. Records go through the SDK's
``BatchLogRecordProcessor`` and ``OTLPLogExporter`` (protobuf over HTTP, ``POST …/v1/logs``);
the exporter is wrapped only to count what the endpoint refused, so a failed export is an
error that says so instead of a silent loss. The resource says ``service.name=rubric-eval``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rubric_engine.errors import ConfigurationError, ExitCode, RubricEvalError
from rubric_engine.integrations.events import EvaluationEvent
from rubric_engine.integrations.semconv import EVALUATION_EVENT

#: the OTLP/HTTP logs path, added to a bare endpoint (``http://collector:4318``)
LOGS_PATH = "/v1/logs"


class ExportFailed(RubricEvalError):
    """The endpoint did not accept every event (nothing, or not everything, sent): the exit
    code of a judge that could not be reached, the one table's 5."""

    exit_code = ExitCode.NOTHING_SCORED


@dataclass(frozen=True)
class Sent:
    """What an export did: events handed to the SDK, and the linked ones among them."""

    events: int
    linked: int
    endpoint: str


def logs_endpoint(url: str) -> str:
    """``url`` with ``/v1/logs`` added unless it already ends so.

    Raises:
        ConfigurationError: not an http(s) URL.
    """
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(
            f"--otlp {url!r} needs a scheme: the OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318"
        )
    url = url.rstrip("/")
    return url if url.endswith(LOGS_PATH) else url + LOGS_PATH


def send_events(
    events: Iterable[EvaluationEvent],
    url: str,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
) -> Sent:
    """Export ``events`` as OTLP log records to ``url`` and wait until they are sent.

    Raises:
        ConfigurationError: the ``otel`` extra is not installed, or a bad URL.
        ExportFailed: the endpoint refused or could not be reached (how many were lost).
    """
    endpoint = logs_endpoint(url)
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogExporter
        from opentelemetry.sdk.resources import Resource
    except ImportError as exc:
        raise ConfigurationError(
            f"sending OTLP needs the OpenTelemetry SDK ({exc.name} is missing): "
            "pip install 'rubric-engine[otel]'"
        ) from exc

    class Counted(LogExporter):
        """The OTLP exporter, counting the records the endpoint did not take."""

        def __init__(self) -> None:
            self.inner = OTLPLogExporter(
                endpoint=endpoint, headers=dict(headers or {}), timeout=timeout_s
            )
            self.lost = 0

        def export(self, batch: Any) -> Any:
            result = self.inner.export(batch)
            # by name: SDK 1.39+ returns LogRecordExportResult, earlier ones LogExportResult
            if getattr(result, "name", None) != "SUCCESS":
                self.lost += len(batch)
            return result

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True  # export() returns only once the endpoint answered

        def shutdown(self) -> None:
            self.inner.shutdown()  # type: ignore[no-untyped-call]

    exporter = Counted()
    provider = LoggerProvider(resource=Resource.create({"service.name": "rubric-eval"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    logger = provider.get_logger("rubric-eval")
    count = linked = 0
    for event in events:
        context = None
        if event.trace_id and event.span_id:
            span = trace.NonRecordingSpan(
                trace.SpanContext(
                    int(event.trace_id, 16), int(event.span_id, 16), is_remote=True,
                    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
                )
            )  # fmt: skip
            context = trace.set_span_in_context(span)
            linked += 1
        logger.emit(
            event_name=EVALUATION_EVENT, attributes=_otel_attributes(event), context=context
        )
        count += 1
    provider.force_flush()
    provider.shutdown()
    if exporter.lost:
        raise ExportFailed(
            f"{endpoint} did not accept {exporter.lost} of {count} evaluation event(s) (see the "
            "warning above for its answer); check the URL (an OTLP/HTTP endpoint that takes "
            "logs) and that the collector is up, then run `rubric-eval emit` again"
        )
    return Sent(count, linked, endpoint)


def _otel_attributes(event: EvaluationEvent) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in event.attributes.items()}
