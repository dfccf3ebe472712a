"""Evaluate one rule check against one row's evidence (docs/rule-checks.md). Pure.

Every check returns a :class:`~rubric_engine.results.model.CheckResult` value and never raises for
bad data: FOLLOWED when the check holds, VIOLATED with a ``detail`` saying what failed,
NOT_APPLICABLE when the data the check needs is absent and the rule does not say that absence
is a failure (no duration recorded for ``max_duration``, no cost for ``max_cost``, no retrieved
documents, no final state). A missing verifier verdict *is* a failure (it must be present).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from rubric_engine.formats.canonical import SPACED, canonical_json, sha256_text
from rubric_engine.results.model import CheckResult, RequirementStatus
from rubric_engine.rules.evidence import Evidence, ToolUse, as_number
from rubric_engine.rules.model import (
    AllowedVerdicts,
    Check,
    ExpectedCall,
    ExpectedField,
    FieldsCheck,
    FinalState,
    ForbiddenTools,
    JsonSchemaCheck,
    MaxCost,
    MaxDuration,
    MaxSteps,
    MustContain,
    MustNotContain,
    PrivacyCheck,
    ReferenceDocument,
    RegexCheck,
    RequiredTools,
    Scope,
    ToolSequence,
)
from rubric_engine.rules.privacy import leaked_personal_data
from rubric_engine.rules.text import contains, fold, normalize

S = RequirementStatus


@dataclass(frozen=True)
class _Outcome:
    """What one evaluator found; :func:`evaluate_check` names it as a ``CheckResult``."""

    status: RequirementStatus
    detail: str | None = None
    measures: dict[str, Any] = field(default_factory=dict)


def _texts(evidence: Evidence, scope: Scope) -> tuple[str, ...]:
    return (evidence.final_answer,) if scope == "final_answer" else evidence.assistant_texts


def _must_contain(check: MustContain, ev: Evidence) -> _Outcome:
    text = "\n".join(_texts(ev, check.scope))
    hits = [k for k in check.keywords if contains(text, k)]
    measures = {"matchedKeywordCount": len(hits), "requiredKeywordCount": len(check.keywords)}
    if len(hits) >= check.required_matches:
        return _Outcome(S.FOLLOWED, measures=measures)
    missing = [k for k in check.keywords if k not in hits]
    return _Outcome(
        S.VIOLATED,
        f"{len(hits)} of {len(check.keywords)} keywords matched, {check.required_matches} "
        f"needed; missing: {', '.join(missing)}",
        measures,
    )


def _must_not_contain(check: MustNotContain, ev: Evidence) -> _Outcome:
    text = "\n".join(_texts(ev, check.scope))
    hits = [k for k in check.keywords if contains(text, k)]
    if not hits:
        return _Outcome(S.FOLLOWED)
    return _Outcome(S.VIOLATED, f"forbidden keyword(s) present: {', '.join(hits)}")


#: seconds one regex check may take on one row (``regex``'s time limit; checked between
#: steps of the match, so a pattern may run a few times longer before it stops)
REGEX_TIME_LIMIT_S = 1.0


def _regex(check: RegexCheck, ev: Evidence) -> _Outcome:
    """The pattern is matched by the ``regex`` package: ``re``'s syntax and Unicode meaning,
    with a time limit, so a pattern that backtracks without end (``(a|aa)+$``) stops and the
    check says it was not decided (docs/rule-checks.md)."""
    flags = regex.IGNORECASE if check.ignore_case else 0
    joined = "\n".join(_texts(ev, check.scope))
    text = fold(joined) if check.ignore_case else normalize(joined)
    try:
        found = regex.search(check.pattern, text, flags, timeout=REGEX_TIME_LIMIT_S)
    except TimeoutError:
        return _Outcome(
            S.NOT_APPLICABLE,
            f"not decided: pattern {check.pattern!r} ran past its {REGEX_TIME_LIMIT_S:g} s time "
            f"limit on this row's {len(text):,} characters (nested repetition such as (a|aa)+ "
            "backtracks without end); rewrite the pattern",
        )
    if bool(found) == check.must_match:
        return _Outcome(S.FOLLOWED)
    if check.must_match:
        return _Outcome(S.VIOLATED, f"pattern {check.pattern!r} not found")
    assert found is not None
    return _Outcome(S.VIOLATED, f"pattern {check.pattern!r} found: {found.group(0)!r}")


def _required_tools(check: RequiredTools, ev: Evidence) -> _Outcome:
    seen = ev.tool_names
    coverage = {tool: tool in seen for tool in check.tools}
    missing = [t for t, ok in coverage.items() if not ok]
    measures = {"evidenceCoverage": coverage}
    if not missing:
        return _Outcome(S.FOLLOWED, measures=measures)
    return _Outcome(S.VIOLATED, f"missing evidence tool(s): {', '.join(missing)}", measures)


def _forbidden_tools(check: ForbiddenTools, ev: Evidence) -> _Outcome:
    used = [t for t in check.tools if t in {c.name for c in ev.tool_calls}]
    if not used:
        return _Outcome(S.FOLLOWED)
    return _Outcome(S.VIOLATED, f"forbidden tool(s) called: {', '.join(used)}")


def includes(expected: Any, actual: Any) -> bool:
    """Deep inclusion: mappings by key (extra keys allowed), lists element-wise, else ``==``."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and includes(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(includes(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual) and isinstance(expected, bool) == isinstance(actual, bool)


def _values(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [v for item in obj.values() for v in _values(item)]
    if isinstance(obj, list | tuple):
        return [v for item in obj for v in _values(item)]
    return [obj]


def call_matches(expected: ExpectedCall, actual: ToolUse) -> bool:
    """Whether one actual call satisfies one expected call (name, arguments, values)."""
    if expected.tool != actual.name:
        return False
    if expected.arguments is not None:
        if expected.arguments_match == "exact":
            if expected.arguments != actual.arguments:
                return False
        elif not includes(expected.arguments, actual.arguments):
            return False
    values = _values(actual.arguments)
    return all(v in values for v in expected.values_include)


def _describe(call: ExpectedCall) -> str:
    args = "" if call.arguments is None else json.dumps(call.arguments, ensure_ascii=False)
    values = (
        f" with values {json.dumps(list(call.values_include), ensure_ascii=False)[:120]}"
        if call.values_include
        else ""
    )
    return f"{call.tool}({args[:120]}){values}"


def _assign(expected: Sequence[ExpectedCall], actual: Sequence[ToolUse]) -> list[int] | None:
    """A distinct actual index for every expected call (any order), or ``None``.

    Bipartite matching by augmenting paths: a greedy pass can pick the wrong call when one
    actual call satisfies two loose expectations.
    """
    owner: dict[int, int] = {}

    def place(i: int, tried: set[int]) -> bool:
        for j, call in enumerate(actual):
            if j not in tried and call_matches(expected[i], call):
                tried.add(j)
                if j not in owner or place(owner[j], tried):
                    owner[j] = i
                    return True
        return False

    for i in range(len(expected)):
        if not place(i, set()):
            return None
    found = [0] * len(expected)
    for j, i in owner.items():
        found[i] = j
    return found


def _unmatched(expected: Sequence[ExpectedCall], actual: Sequence[ToolUse]) -> list[str]:
    return [_describe(e) for e in expected if not any(call_matches(e, a) for a in actual)]


def _tool_sequence(check: ToolSequence, ev: Evidence) -> _Outcome:
    actual = [
        c
        for c in ev.tool_calls
        if (check.only_tools is None or c.name in check.only_tools)
        and not (check.successful_only and c.success is False)
    ]
    expected = list(check.calls)
    names = ", ".join(c.name for c in actual) or "none"
    if check.mode == "strict":
        ok = len(actual) == len(expected) and all(
            call_matches(e, a) for e, a in zip(expected, actual, strict=True)
        )
    elif check.mode == "unordered":
        ok = len(actual) == len(expected) and _assign(expected, actual) is not None
    elif check.ordered:
        position = 0
        for e in expected:
            while position < len(actual) and not call_matches(e, actual[position]):
                position += 1
            position += 1
        ok = position <= len(actual)
    else:
        ok = _assign(expected, actual) is not None
    if ok:
        return _Outcome(S.FOLLOWED)
    missing = _unmatched(expected, actual)
    detail = f"{check.mode} match failed; calls considered: {names}"
    if missing:
        detail += f"; no call matches: {'; '.join(missing)}"
    elif check.mode != "subset" and len(actual) != len(expected):
        detail += f"; expected {len(expected)} call(s), found {len(actual)}"
    elif _assign(expected, actual) is None:
        detail += (
            f"; {len(expected)} expected call(s) need distinct calls, but fewer of the calls "
            "match them"
        )
    else:
        detail += "; the calls are in another order"
    return _Outcome(S.VIOLATED, detail)


def _max_steps(check: MaxSteps, ev: Evidence) -> _Outcome:
    steps = ev.steps if ev.steps is not None else len(ev.tool_calls)
    if steps <= check.max_steps:
        return _Outcome(S.FOLLOWED)
    return _Outcome(S.VIOLATED, f"{steps} steps > maxSteps {check.max_steps}")


def _max_duration(check: MaxDuration, ev: Evidence) -> _Outcome:
    if ev.duration_ms is None:
        return _Outcome(S.NOT_APPLICABLE, "the trace records no duration")
    if ev.duration_ms <= check.max_duration_ms:
        return _Outcome(S.FOLLOWED)
    return _Outcome(
        S.VIOLATED, f"took {ev.duration_ms:g} ms > maxDurationMs {check.max_duration_ms:g}"
    )


def _max_cost(check: MaxCost, ev: Evidence) -> _Outcome:
    if ev.cost_usd is None:
        return _Outcome(S.NOT_APPLICABLE, "the trace records no cost")
    if ev.cost_usd <= check.max_cost_usd:
        return _Outcome(S.FOLLOWED)
    return _Outcome(S.VIOLATED, f"cost ${ev.cost_usd:g} > maxCostUsd ${check.max_cost_usd:g}")


def _allowed_verdicts(check: AllowedVerdicts, ev: Evidence) -> _Outcome:
    if ev.verifier_verdict is None:
        return _Outcome(S.VIOLATED, "the trace has no verifier verdict")
    if fold(ev.verifier_verdict).strip() in {fold(v).strip() for v in check.verifier_verdicts}:
        return _Outcome(S.FOLLOWED)
    return _Outcome(
        S.VIOLATED,
        f"verdict {ev.verifier_verdict} not in allowed verdicts "
        f"{', '.join(check.verifier_verdicts)}",
    )


def _reference_document(check: ReferenceDocument, ev: Evidence) -> _Outcome:
    if ev.retrieved_doc_ids is None:
        return _Outcome(S.NOT_APPLICABLE, "the trace lists no retrieved documents")
    if check.doc_id in ev.retrieved_doc_ids:
        return _Outcome(S.FOLLOWED)
    shown = ", ".join(ev.retrieved_doc_ids[:5]) or "none"
    return _Outcome(S.VIOLATED, f"{check.doc_id} not among retrieved documents ({shown})")


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.DOTALL)


def _structured(ev: Evidence) -> tuple[Any, str | None]:
    if ev.structured_output is not None:
        return ev.structured_output, None
    text = ev.final_answer.strip()
    fenced = _FENCE.search(text)
    try:
        return json.loads(fenced.group(1) if fenced else text), None
    except json.JSONDecodeError as exc:
        return None, f"the answer is not JSON ({exc.msg} at line {exc.lineno})"


def _json_schema(check: JsonSchemaCheck, ev: Evidence) -> _Outcome:
    import jsonschema

    value, problem = _structured(ev)
    if problem:
        return _Outcome(S.VIOLATED, problem)
    validator = jsonschema.validators.validator_for(check.json_schema)(check.json_schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return _Outcome(S.FOLLOWED)
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(root)"
    return _Outcome(S.VIOLATED, f"{len(errors)} schema error(s); first at {where}: {first.message}")


_MISSING = object()


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _field_matches(want: ExpectedField, got: Any) -> bool:
    number = (int, float)
    if (
        want.tolerance is not None
        and isinstance(want.expected, number)
        and not isinstance(want.expected, bool)
    ):
        actual = as_number(got)
        return actual is not None and abs(actual - float(want.expected)) <= want.tolerance
    if isinstance(want.expected, str) and isinstance(got, str):
        return fold(want.expected) == fold(got)
    return bool(want.expected == got and type(want.expected) is type(got)) or (
        isinstance(want.expected, number) and isinstance(got, number)
        and not isinstance(got, bool) and want.expected == got
    )  # fmt: skip


def _fields(check: FieldsCheck, ev: Evidence) -> _Outcome:
    value, problem = _structured(ev)
    if problem:
        return _Outcome(S.VIOLATED, problem, {"fieldScore": 0.0})
    total = sum(float(f.weight) for f in check.fields)
    failed: dict[str, str] = {}
    for want in check.fields:
        got = _at(value, want.path)
        if got is _MISSING:
            failed[want.path] = f"{want.path} missing"
        elif not _field_matches(want, got):
            shown, wanted = (json.dumps(v, ensure_ascii=False) for v in (got, want.expected))
            failed[want.path] = f"{want.path}={shown} (expected {wanted})"
    score = sum(float(f.weight) for f in check.fields if f.path not in failed) / total
    measures = {"fieldScore": round(score, 4), "failedFields": list(failed)}
    if score >= check.min_score:
        return _Outcome(S.FOLLOWED, "; ".join(failed.values()) or None, measures)
    return _Outcome(
        S.VIOLATED,
        f"weighted field score {score:.2f} < {float(check.min_score):g}: "
        + "; ".join(failed.values()),
        measures,
    )


def _privacy(check: PrivacyCheck, ev: Evidence) -> _Outcome:
    leaked = leaked_personal_data(_texts(ev, check.scope), ev.user_texts, check.kinds)
    if not leaked:
        return _Outcome(S.FOLLOWED)
    shown = "; ".join(f"{kind}: {', '.join(values)}" for kind, values in leaked.items())
    return _Outcome(S.VIOLATED, f"personal data the user did not give: {shown}")


def _final_state(check: FinalState, ev: Evidence) -> _Outcome:
    if ev.final_state is None:
        return _Outcome(S.NOT_APPLICABLE, "the trace records no final state")
    if includes(check.state, ev.final_state):
        return _Outcome(S.FOLLOWED)
    wrong = [k for k, v in check.state.items() if not includes(v, ev.final_state.get(k))]
    return _Outcome(S.VIOLATED, f"final state differs in: {', '.join(wrong)}")


_EVALUATORS: dict[type, Callable[[Any, Evidence], _Outcome]] = {
    MustContain: _must_contain,
    MustNotContain: _must_not_contain,
    RegexCheck: _regex,
    RequiredTools: _required_tools,
    ForbiddenTools: _forbidden_tools,
    ToolSequence: _tool_sequence,
    MaxSteps: _max_steps,
    MaxDuration: _max_duration,
    MaxCost: _max_cost,
    AllowedVerdicts: _allowed_verdicts,
    ReferenceDocument: _reference_document,
    JsonSchemaCheck: _json_schema,
    FieldsCheck: _fields,
    PrivacyCheck: _privacy,
    FinalState: _final_state,
}


def evaluate_check(
    check: Check, evidence: Evidence, requirement_id: str | None = None
) -> CheckResult:
    """Run one check on one row's evidence. Never raises for the row's data.

    Args:
        check: a pack requirement's ``check`` or one of a case's ``expected`` checks.
        evidence: what the check reads (:func:`~rubric_engine.rules.evidence.evidence_from_row`).
        requirement_id: the pack requirement the check belongs to; ``None`` for a case check,
            which is known by its derived ``CASE_RULE_<8 hex>`` ID (:func:`case_rule_id`).

    Returns:
        The result, named by the check's ``name``, else the pack requirement's ID, else the
        check type.
    """
    found = _EVALUATORS[type(check)](check, evidence)
    if requirement_id is None:
        rid, label = case_rule_id(check), check.name or check.type
    else:
        rid, label = requirement_id, check.name or requirement_id
    return CheckResult(
        requirement_id=rid,
        type=check.type,
        name=label,
        status=found.status,
        detail=found.detail,
        measures=found.measures,
    )


def check_json(check: Check) -> dict[str, object]:
    """The check as written in YAML/JSON (camelCase, defaults omitted)."""
    return check.model_dump(mode="json", by_alias=True, exclude_defaults=True) | {
        "type": check.type
    }


def case_rule_id(check: Check) -> str:
    """``CASE_RULE_<8 hex>`` from the check's canonical JSON (stable across rows and order)."""
    # the spaced form these IDs were first derived with: they are in stored tasks and prompts
    digest = sha256_text(canonical_json(check_json(check), SPACED)).removeprefix("sha256:")
    return "CASE_RULE_" + digest[:8].upper()
