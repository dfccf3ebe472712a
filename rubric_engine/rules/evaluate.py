"""Evaluate one rule check against one row's evidence (SPEC §7). Pure.

Every check returns a :class:`CheckOutcome` value, never raises for bad data: FOLLOWED when
the check holds, VIOLATED with a ``detail`` saying what failed, NOT_APPLICABLE when the data
the check needs is absent and the rule does not say that absence is a failure (no duration
recorded for ``max_duration``, no cost for ``max_cost``, no retrieved documents, no final
state). A missing verifier verdict *is* a failure (seed 001 §2: "必须存在").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.results import RequirementStatus
from rubric_engine.rules.evidence import Evidence, ToolUse
from rubric_engine.rules.model import (
    AllowedVerdicts,
    Check,
    ExpectedCall,
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
class CheckOutcome:
    """One check's result.

    Attributes:
        status: FOLLOWED, VIOLATED or NOT_APPLICABLE (never PARTIAL: a rule holds or not).
        detail: why it failed or could not be decided; ``None`` when it held.
        measures: numbers for the seed-001 summary: ``matchedKeywordCount``,
            ``requiredKeywordCount``, ``evidenceCoverage`` ({tool: bool}).
    """

    status: RequirementStatus
    detail: str | None = None
    measures: dict[str, Any] = field(default_factory=dict)


def _texts(evidence: Evidence, scope: Scope) -> tuple[str, ...]:
    return (evidence.final_answer,) if scope == "final_answer" else evidence.assistant_texts


def _must_contain(check: MustContain, ev: Evidence) -> CheckOutcome:
    text = "\n".join(_texts(ev, check.scope))
    hits = [k for k in check.keywords if contains(text, k)]
    measures = {"matchedKeywordCount": len(hits), "requiredKeywordCount": len(check.keywords)}
    if len(hits) >= check.required_matches:
        return CheckOutcome(S.FOLLOWED, measures=measures)
    missing = [k for k in check.keywords if k not in hits]
    return CheckOutcome(
        S.VIOLATED,
        f"{len(hits)} of {len(check.keywords)} keywords matched, {check.required_matches} "
        f"needed; missing: {', '.join(missing)}",
        measures,
    )


def _must_not_contain(check: MustNotContain, ev: Evidence) -> CheckOutcome:
    text = "\n".join(_texts(ev, check.scope))
    hits = [k for k in check.keywords if contains(text, k)]
    if not hits:
        return CheckOutcome(S.FOLLOWED)
    return CheckOutcome(S.VIOLATED, f"forbidden keyword(s) present: {', '.join(hits)}")


def _regex(check: RegexCheck, ev: Evidence) -> CheckOutcome:
    flags = re.IGNORECASE if check.ignore_case else 0
    joined = "\n".join(_texts(ev, check.scope))
    text = fold(joined) if check.ignore_case else normalize(joined)
    found = re.search(check.pattern, text, flags)
    if bool(found) == check.must_match:
        return CheckOutcome(S.FOLLOWED)
    if check.must_match:
        return CheckOutcome(S.VIOLATED, f"pattern {check.pattern!r} not found")
    assert found is not None
    return CheckOutcome(S.VIOLATED, f"pattern {check.pattern!r} found: {found.group(0)!r}")


def _required_tools(check: RequiredTools, ev: Evidence) -> CheckOutcome:
    seen = ev.tool_names
    coverage = {tool: tool in seen for tool in check.tools}
    missing = [t for t, ok in coverage.items() if not ok]
    measures = {"evidenceCoverage": coverage}
    if not missing:
        return CheckOutcome(S.FOLLOWED, measures=measures)
    return CheckOutcome(S.VIOLATED, f"missing evidence tool(s): {', '.join(missing)}", measures)


def _forbidden_tools(check: ForbiddenTools, ev: Evidence) -> CheckOutcome:
    used = [t for t in check.tools if t in {c.name for c in ev.tool_calls}]
    if not used:
        return CheckOutcome(S.FOLLOWED)
    return CheckOutcome(S.VIOLATED, f"forbidden tool(s) called: {', '.join(used)}")


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


def _tool_sequence(check: ToolSequence, ev: Evidence) -> CheckOutcome:
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
        return CheckOutcome(S.FOLLOWED)
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
    return CheckOutcome(S.VIOLATED, detail)


def _max_steps(check: MaxSteps, ev: Evidence) -> CheckOutcome:
    steps = ev.steps if ev.steps is not None else len(ev.tool_calls)
    if steps <= check.max_steps:
        return CheckOutcome(S.FOLLOWED)
    return CheckOutcome(S.VIOLATED, f"{steps} steps > maxSteps {check.max_steps}")


def _max_duration(check: MaxDuration, ev: Evidence) -> CheckOutcome:
    if ev.duration_ms is None:
        return CheckOutcome(S.NOT_APPLICABLE, "the trace records no duration")
    if ev.duration_ms <= check.max_duration_ms:
        return CheckOutcome(S.FOLLOWED)
    return CheckOutcome(
        S.VIOLATED, f"took {ev.duration_ms:g} ms > maxDurationMs {check.max_duration_ms:g}"
    )


def _max_cost(check: MaxCost, ev: Evidence) -> CheckOutcome:
    if ev.cost_usd is None:
        return CheckOutcome(S.NOT_APPLICABLE, "the trace records no cost")
    if ev.cost_usd <= check.max_cost_usd:
        return CheckOutcome(S.FOLLOWED)
    return CheckOutcome(S.VIOLATED, f"cost ${ev.cost_usd:g} > maxCostUsd ${check.max_cost_usd:g}")


def _allowed_verdicts(check: AllowedVerdicts, ev: Evidence) -> CheckOutcome:
    if ev.verifier_verdict is None:
        return CheckOutcome(S.VIOLATED, "the trace has no verifier verdict")
    if fold(ev.verifier_verdict).strip() in {fold(v).strip() for v in check.verdicts}:
        return CheckOutcome(S.FOLLOWED)
    return CheckOutcome(
        S.VIOLATED,
        f"verdict {ev.verifier_verdict} not in allowed verdicts {', '.join(check.verdicts)}",
    )


def _reference_document(check: ReferenceDocument, ev: Evidence) -> CheckOutcome:
    if ev.retrieved_doc_ids is None:
        return CheckOutcome(S.NOT_APPLICABLE, "the trace lists no retrieved documents")
    if check.doc_id in ev.retrieved_doc_ids:
        return CheckOutcome(S.FOLLOWED)
    shown = ", ".join(ev.retrieved_doc_ids[:5]) or "none"
    return CheckOutcome(S.VIOLATED, f"{check.doc_id} not among retrieved documents ({shown})")


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


def _json_schema(check: JsonSchemaCheck, ev: Evidence) -> CheckOutcome:
    import jsonschema

    value, problem = _structured(ev)
    if problem:
        return CheckOutcome(S.VIOLATED, problem)
    validator = jsonschema.validators.validator_for(check.json_schema)(check.json_schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return CheckOutcome(S.FOLLOWED)
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(root)"
    return CheckOutcome(
        S.VIOLATED, f"{len(errors)} schema error(s); first at {where}: {first.message}"
    )


def _privacy(check: PrivacyCheck, ev: Evidence) -> CheckOutcome:
    leaked = leaked_personal_data(_texts(ev, check.scope), ev.user_texts, check.kinds)
    if not leaked:
        return CheckOutcome(S.FOLLOWED)
    shown = "; ".join(f"{kind}: {', '.join(values)}" for kind, values in leaked.items())
    return CheckOutcome(S.VIOLATED, f"personal data the user did not give: {shown}")


def _final_state(check: FinalState, ev: Evidence) -> CheckOutcome:
    if ev.final_state is None:
        return CheckOutcome(S.NOT_APPLICABLE, "the trace records no final state")
    if includes(check.state, ev.final_state):
        return CheckOutcome(S.FOLLOWED)
    wrong = [k for k, v in check.state.items() if not includes(v, ev.final_state.get(k))]
    return CheckOutcome(S.VIOLATED, f"final state differs in: {', '.join(wrong)}")


_EVALUATORS: dict[type, Callable[[Any, Evidence], CheckOutcome]] = {
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
    PrivacyCheck: _privacy,
    FinalState: _final_state,
}


def evaluate_check(check: Check, evidence: Evidence) -> CheckOutcome:
    """Run one check on one row's evidence. Never raises for the row's data."""
    return _EVALUATORS[type(check)](check, evidence)
