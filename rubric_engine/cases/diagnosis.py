"""Diagnosis cases: a case file plus one trace fixture per case, no judge needed (docs/cases.md).

A case::

    {"id": "payment-timeout", "title": "Payment API timeout", "question": "…",
     "traceFixture": "payment-timeout-pass.json",
     "expectedRootCauseKeywords": ["支付", "超时", "连接池"], "minKeywordMatches": 2,
     "requiredEvidenceTools": ["lookup_knowledge", "query_logs", "query_metrics"],
     "allowedVerdicts": ["PASS", "LOW_CONFID"], "forbiddenAnswerKeywords": ["无证据确定"]}

The fixture is the agent's recorded run: ``session.answer``,
``session.totalDurationMs``, ``session.selfEvaluation.verifier_evaluation.{verdict,
tool_trace_summary[*].tool_name}``, ``toolInvocations[*].{toolName, success}``. It is looked
up, in order, in ``fixtures/`` beside the case file, in ``../fixtures/`` (the
``eval/cases`` + ``eval/fixtures`` layout) and beside the case file.

Each case field becomes one named rule check, so ``failedChecks`` names the field that
failed: ``expectedRootCauseKeywords`` (``must_contain`` with ``minKeywordMatches``, all
keywords when absent), ``requiredEvidenceTools`` (``required_tools``: a tool counts when it
was invoked or appears in the verifier's tool summary), ``allowedVerdicts``
(``allowed_verdicts``: the verdict must exist) and ``forbiddenAnswerKeywords``
(``must_not_contain``). ``expected`` adds any further checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt
from pydantic.alias_generators import to_camel

from rubric_engine.dialogue.errors import RowShapeError

FIXTURE_DIRS = ("fixtures", "../fixtures", ".")


class DiagnosisCase(BaseModel):
    """One ``diagnosis-cases.json`` entry. Unknown fields are rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    id: str = Field(min_length=1)
    title: str | None = None
    question: str = ""
    trace_fixture: str = Field(min_length=1)
    expected_root_cause_keywords: tuple[str, ...] | None = Field(default=None, min_length=1)
    min_keyword_matches: StrictInt | None = Field(default=None, ge=1)
    required_evidence_tools: tuple[str, ...] | None = Field(default=None, min_length=1)
    #: the verifier's verdicts a case accepts (not the judge's); ``allowedVerdicts`` in files
    allowed_verifier_verdicts: tuple[str, ...] | None = Field(
        default=None, min_length=1, alias="allowedVerdicts"
    )
    forbidden_answer_keywords: tuple[str, ...] = ()
    expected: tuple[Any, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)


def diagnosis_fields() -> str:
    """The field names a diagnosis case may have, as written in case files."""
    return ", ".join(f.alias or n for n, f in DiagnosisCase.model_fields.items())


def is_diagnosis_case(obj: Any) -> bool:
    return isinstance(obj, dict) and "traceFixture" in obj


def load_fixture(name: str, case_file: Path) -> dict[str, Any]:
    """Read a trace fixture for a case in ``case_file`` (I/O: the only one in this package).

    Raises:
        RowShapeError: not found (names every place looked), not JSON, or not an object.
    """
    tried = [(case_file.parent / folder / name).resolve() for folder in FIXTURE_DIRS]
    path = next((p for p in tried if p.is_file()), None)
    if path is None:
        places = ", ".join(str(Path(f) / name) for f in FIXTURE_DIRS)
        raise RowShapeError(
            "traceFixture",
            f"trace fixture {name!r} not found; looked in {places} (relative to the case "
            "file); put the fixture in a fixtures/ folder beside the case file",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RowShapeError("traceFixture", f"fixture {path.name} is not JSON ({exc})") from exc
    except RecursionError as exc:  # the JSON decoder recurses
        raise RowShapeError(
            "traceFixture", f"fixture {path.name} nests JSON too deeply to read; flatten it"
        ) from exc
    if not isinstance(data, dict):
        raise RowShapeError("traceFixture", f"fixture {path.name} must be a JSON object")
    return data


def _checks(case: DiagnosisCase) -> list[Any]:
    checks: list[Any] = []
    if case.expected_root_cause_keywords:
        keywords: dict[str, Any] = {
            "type": "must_contain",
            "name": "expectedRootCauseKeywords",
            "keywords": list(case.expected_root_cause_keywords),
        }
        if case.min_keyword_matches is not None:
            keywords["minKeywordMatches"] = case.min_keyword_matches
        checks.append(keywords)
    elif case.min_keyword_matches is not None:
        raise RowShapeError(
            "minKeywordMatches", "needs expectedRootCauseKeywords to count matches in"
        )
    if case.required_evidence_tools:
        checks.append(
            {
                "type": "required_tools",
                "name": "requiredEvidenceTools",
                "tools": list(case.required_evidence_tools),
            }
        )
    if case.allowed_verifier_verdicts:
        checks.append(
            {
                "type": "allowed_verdicts",
                "name": "allowedVerdicts",
                "verdicts": list(case.allowed_verifier_verdicts),
            }
        )
    if case.forbidden_answer_keywords:
        checks.append(
            {
                "type": "must_not_contain",
                "name": "forbiddenAnswerKeywords",
                "keywords": list(case.forbidden_answer_keywords),
            }
        )
    return [*checks, *case.expected]


def _messages(question: str, fixture: dict[str, Any]) -> list[dict[str, Any]]:
    """The run as a dialogue: the question, the tool calls with their outcome, the answer."""
    session: dict[str, Any] = fixture["session"] if isinstance(fixture.get("session"), dict) else {}
    answer = session.get("answer") if isinstance(session.get("answer"), str) else ""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question or "(no question)"}]
    for i, call in enumerate(fixture.get("toolInvocations") or []):
        if not isinstance(call, dict) or not isinstance(call.get("toolName"), str):
            continue
        call_id = f"fixture-call-{i}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call_id, "name": call["toolName"], "arguments": call.get("arguments")}
                ],
            }
        )
        outcome = call.get("output", call.get("result"))
        if outcome is None and isinstance(call.get("success"), bool):
            outcome = "success" if call["success"] else "failed"
        if outcome is not None:
            content = (
                outcome if isinstance(outcome, str) else json.dumps(outcome, ensure_ascii=False)
            )
            messages.append({"role": "tool", "content": content, "tool_call_id": call_id})
    messages.append({"role": "assistant", "content": answer})
    return messages


def diagnosis_row(obj: dict[str, Any], fixture: dict[str, Any]) -> dict[str, Any]:
    """Map a diagnosis case and its loaded fixture to a row object (pure).

    Raises:
        pydantic.ValidationError: a case field is unknown or has the wrong type.
        RowShapeError: ``minKeywordMatches`` without keywords.
    """
    case = DiagnosisCase.model_validate(obj)
    metadata = {
        "title": case.title,
        "question": case.question,
        "traceFixture": case.trace_fixture,
        **case.metadata,
    }
    return {
        "rowId": case.id,
        "messages": _messages(case.question, fixture),
        "trace": fixture,
        "expected": _checks(case),
        "metadata": {k: v for k, v in metadata.items() if v is not None},
    }
