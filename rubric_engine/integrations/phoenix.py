"""A task's results as Phoenix span annotations, through Phoenix's REST API.

``POST /v1/span_annotations?sync=true`` with ``{"data": [SpanAnnotationData…]}`` is the call
Phoenix documents and its own ``phoenix.client`` makes (``spans.log_span_annotations``); it is
sent here with the standard library, because importing ``phoenix`` where the Phoenix server is
installed loads the whole server (seconds of CPU per command), and no extra is needed.

Each row that came from a trace (its span id kept as hex, docs/integrations.md) becomes one
annotation on that span: ``name`` the rubric key, ``result`` the final score, the row's outcome
as label and the judge's explanation, ``metadata`` the rubric ``KEY@VERSION``, red flags, unmet
requirement ids and the task, and ``identifier`` the rubric ``KEY@VERSION``. Phoenix keeps one
annotation per (name, span, identifier): scoring again under the same version replaces the
result, and a new version's sits beside the old one. ``annotator_kind`` is ``LLM`` (an LLM
judge decided it; CHECKED rows, decided by rule checks alone, are ``CODE``). Rows without a
source span cannot be placed and are counted, not sent.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rubric_engine.errors import ConfigurationError
from rubric_engine.integrations import semconv as sc
from rubric_engine.integrations.events import EvaluationEvent, Rated
from rubric_engine.integrations.otlp_export import ExportFailed

#: annotations per request (Phoenix takes a list; a bounded body per call)
CHUNK = 500


@dataclass(frozen=True)
class SentAnnotations:
    annotations: int
    unlinked: int


def annotation(event: EvaluationEvent, rated: Rated) -> dict[str, Any]:
    """One ``SpanAnnotationData`` (Phoenix's REST shape) for an event with a span id."""
    result: dict[str, Any] = {"label": event.label}
    if event.score is not None:
        result["score"] = event.score
    if event.explanation:
        result["explanation"] = event.explanation
    skip = {sc.EVALUATION_NAME, sc.SCORE_LABEL, sc.SCORE_VALUE, sc.EXPLANATION}
    metadata = {k: list(v) if isinstance(v, tuple) else v
                for k, v in event.attributes.items() if k not in skip}  # fmt: skip
    checked = (
        event.score is None
        and event.label in ("PASS", "FAIL")
        and sc.ERROR_TYPE not in (event.attributes)
    )
    return {
        "name": event.name,
        "annotator_kind": "CODE" if checked else "LLM",
        "span_id": event.span_id,
        "result": result,
        "metadata": metadata,
        "identifier": rated.rubric_ref,
    }


def send_annotations(
    events: Iterable[EvaluationEvent],
    url: str,
    rated: Rated,
    headers: Mapping[str, str] | None = None,
) -> SentAnnotations:
    """Log the events that have a span as annotations in the Phoenix at ``url``.

    Raises:
        ConfigurationError: ``url`` has no scheme.
        ExportFailed: Phoenix refused a request (e.g. a span it does not hold: send the traces
            to Phoenix first) or could not be reached.
    """
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(
            f"--phoenix {url!r} needs a scheme: Phoenix's base URL, e.g. http://127.0.0.1:6006"
        )
    endpoint = url.rstrip("/") + "/v1/span_annotations?sync=true"
    sent = unlinked = 0
    chunk: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal sent
        if not chunk:
            return
        try:
            _post(endpoint, {"data": chunk}, headers or {})
        except (urllib.error.URLError, OSError) as exc:
            answer = _answer_of(exc)
            raise ExportFailed(
                f"{url} did not take {len(chunk)} span annotation(s) after {sent} sent: "
                f"{answer[:300]}. The spans must be in Phoenix first (send the traces there); "
                "then run `rubric-eval emit --phoenix` again (annotations already sent are "
                "replaced, not doubled)"
            ) from exc
        sent += len(chunk)
        chunk.clear()

    for event in events:
        if event.span_id is None:
            unlinked += 1
            continue
        chunk.append(annotation(event, rated))
        if len(chunk) >= CHUNK:
            flush()
    flush()
    return SentAnnotations(sent, unlinked)


def _post(url: str, body: dict[str, Any], headers: Mapping[str, str]) -> None:
    request = urllib.request.Request(
        url,
        data=json.dumps(body, ensure_ascii=False).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        answer.read()


def _answer_of(exc: Exception) -> str:
    """What Phoenix said (an HTTP error's body), else the connection error."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.read().decode(errors='replace')}"
    return str(getattr(exc, "reason", exc))
