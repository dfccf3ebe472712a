"""Run a row's rule checks: the pack's ``check:`` requirements and the case's ``expected:``.

SPEC §5 step 6 / §7: a rule decides its requirement without the judge and overrides whatever
the judge said about it; the referenceBasis records source ``rule``. Case checks
(``expected:``) become case-level requirements with IDs derived from the check's canonical
JSON, ``CASE_RULE_<8 hex>``, so the same check on many rows is counted as one rule. They are
decided by the rule alone and are not shown to the judge. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.normalize import normalize_verdict
from rubric_engine.results import (
    BasisEntry,
    BasisSource,
    CheckResult,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    RuleSummary,
)
from rubric_engine.rubric.case_level import CASE_CATEGORY
from rubric_engine.rubric.loader import parse_rubric
from rubric_engine.rubric.model import EvalRubric, HardRequirement
from rubric_engine.rules.evaluate import CheckOutcome, evaluate_check
from rubric_engine.rules.evidence import Evidence, evidence_from_row
from rubric_engine.rules.model import Check
from rubric_engine.verdict import VerdictBase

S = RequirementStatus


def check_json(check: Check) -> dict[str, object]:
    """The check as written in YAML/JSON (camelCase, defaults omitted)."""
    return check.model_dump(mode="json", by_alias=True, exclude_defaults=True) | {
        "type": check.type
    }


def case_rule_id(check: Check) -> str:
    """``CASE_RULE_<8 hex>`` from the check's canonical JSON (stable across rows and order)."""
    canonical = json.dumps(check_json(check), sort_keys=True, ensure_ascii=False)
    return "CASE_RULE_" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:8].upper()


def case_rule_requirements(checks: Iterable[Check]) -> tuple[HardRequirement, ...]:
    """One requirement per distinct case check, in order (category ``CASE``, source ``rule``)."""
    found: dict[str, HardRequirement] = {}
    for check in checks:
        config = {k: v for k, v in check_json(check).items() if k not in ("type", "name")}
        text = f"rule {check.label}: {json.dumps(config, ensure_ascii=False)}"
        rid = case_rule_id(check)
        found.setdefault(
            rid,
            HardRequirement(id=rid, category=CASE_CATEGORY, text=text[:2000], source="rule"),
        )
    return tuple(found.values())


@dataclass(frozen=True)
class RuleRun:
    """A row's checks, run once.

    Attributes:
        evidence: what the checks read.
        case_requirements: the case checks as requirements (see :func:`case_rule_requirements`).
        outcomes: requirement ID → (check, outcome) for every checked requirement of the pack
            (every intent) and of the case, pack first, in declaration order.
    """

    evidence: Evidence
    case_requirements: tuple[HardRequirement, ...]
    outcomes: Mapping[str, tuple[Check, CheckOutcome]]

    def statuses(self, applicable: Iterable[str]) -> dict[str, RequirementStatus]:
        """Rule status by requirement ID, for the applicable requirements that have a check."""
        return {rid: self.outcomes[rid][1].status for rid in applicable if rid in self.outcomes}


#: the evidence of a row that nothing checks: never read (no check, no rule summary)
_UNREAD = Evidence(final_answer="", assistant_texts=(), user_texts=(), tool_calls=())


def run_rules(rubric: EvalRubric, row: DialogueRow) -> RuleRun:
    """Evaluate every check the pack and the row carry for this row."""
    checked = [req for req in rubric.requirements_by_id.values() if req.check is not None]
    if not checked and not row.expected:
        return RuleRun(_UNREAD, (), {})  # most judged rows: skip reading the evidence
    evidence = evidence_from_row(row, rubric.output_parsing)
    outcomes: dict[str, tuple[Check, CheckOutcome]] = {}
    for req in checked:
        if req.check is not None:
            outcomes[req.id] = (req.check, evaluate_check(req.check, evidence))
    for check in row.expected:
        outcomes.setdefault(case_rule_id(check), (check, evaluate_check(check, evidence)))
    return RuleRun(evidence, case_rule_requirements(row.expected), outcomes)


def _as_recorded(value: float | None) -> int | float | None:
    """Milliseconds as the trace wrote them: ``8420``, not ``8420.0``."""
    return int(value) if value is not None and value.is_integer() else value


def rule_summary(row: DialogueRow, run: RuleRun, applicable: Iterable[str]) -> RuleSummary | None:
    """The seed-001 per-case result over the applicable checked requirements; ``None`` if none.

    ``passed`` is true when no check is VIOLATED (NOT_APPLICABLE does not fail a case). Each
    ``failedChecks`` line starts with the check's ``name``, else the pack requirement's ID, else
    the check type.
    """
    ids = [rid for rid in dict.fromkeys(applicable) if rid in run.outcomes]
    if not ids:
        return None
    results, failed = [], []
    matched = required = 0
    coverage: dict[str, bool] = {}
    case_ids = {r.id for r in run.case_requirements}
    for rid in ids:
        check, outcome = run.outcomes[rid]
        # a pack requirement's check is known by the requirement's ID unless it is named
        label = check.name or (check.type if rid in case_ids else rid)
        results.append(
            CheckResult(
                requirement_id=rid,
                type=check.type,
                name=label,
                status=outcome.status,
                detail=outcome.detail,
            )
        )
        if outcome.status is S.VIOLATED:
            failed.append(f"{label}: {outcome.detail}")
        matched += outcome.measures.get("matchedKeywordCount", 0)
        required += outcome.measures.get("requiredKeywordCount", 0)
        for tool, seen in outcome.measures.get("evidenceCoverage", {}).items():
            coverage[tool] = coverage.get(tool, True) and seen
    title = row.metadata.get("title")
    return RuleSummary(
        case_id=row.row_id,
        title=title if isinstance(title, str) else None,
        passed=not failed,
        failed_checks=tuple(failed),
        verdict=run.evidence.verifier_verdict,
        matched_keyword_count=matched,
        required_keyword_count=required,
        evidence_coverage=coverage,
        tool_call_count=len(run.evidence.tool_calls),
        duration_ms=_as_recorded(run.evidence.duration_ms),
        checks=tuple(results),
    )


def judged_result(
    rubric: EvalRubric,
    row: DialogueRow,
    verdict: VerdictBase,
    judge_case_requirements: Sequence[HardRequirement],
    run: RuleRun,
    warnings: Sequence[ProtocolWarning] = (),
) -> RowResult:
    """Normalize a verdict with the row's rule results merged in (SPEC §5 step 6).

    The applicable set is the chosen intent's plus every case-level requirement (the
    behaviours the judge saw, then the case's rule checks); each checked requirement among
    them takes its rule's status (source ``rule``). The row's seed-001 summary is attached.
    """
    case_reqs = (*judge_case_requirements, *run.case_requirements)
    applicable = [r.id for r in rubric.applicable_requirements(verdict.intent_key)]
    applicable += [r.id for r in case_reqs]
    result = normalize_verdict(
        rubric, verdict, row.row_id, case_reqs, warnings, run.statuses(applicable)
    )
    summary = rule_summary(row, run, applicable)
    return result if summary is None else result.model_copy(update={"rules": summary})


def checked_result(rubric: EvalRubric, row: DialogueRow, run: RuleRun) -> RowResult:
    """A ``--judge none`` row: status CHECKED, decided by its rule checks alone.

    No intent is chosen, so the applicable checks are the pack's common requirements that
    have one and the case's own checks; the referenceBasis lists exactly those (source
    ``rule``). A VIOLATED critical requirement raises its red flag. There is no score.
    """
    ids = [r.id for r in rubric.common_requirements if r.check is not None]
    ids += [r.id for r in run.case_requirements]
    statuses = run.statuses(ids)
    by_id = rubric.requirements_by_id
    flags = {
        by_id[rid].red_flag_type
        for rid, status in statuses.items()
        if status is S.VIOLATED and rid in by_id and by_id[rid].critical
    }
    order = {t: i for i, t in enumerate(rubric.red_flag_types)}
    return RowResult(
        row_id=row.row_id,
        status=RowStatus.CHECKED,
        red_flag_types=tuple(sorted((f for f in flags if f), key=lambda t: order.get(t, 0))),
        reference_basis=tuple(
            BasisEntry(requirement_id=rid, status=status, source=BasisSource.RULE)
            for rid, status in statuses.items()
        ),
        rules=rule_summary(row, run, ids),
    )


def rules_only_rubric() -> EvalRubric:
    """The pack a ``--judge none`` task records when no ``--rubric`` is given: no requirements.

    The task store keeps a snapshot of every task's pack (SPEC §3); with rules alone there is
    none, so this placeholder says so. Its only intent exists because every pack needs one.
    """
    return parse_rubric(
        {
            "key": "rules_only",
            "name": "Rule checks only (no rubric pack)",
            "version": 1,
            "status": "DRAFT",
            "language": "und",
            "description": "placeholder for --judge none without --rubric: the rows' own "
            "rule checks (expected:) decide everything",
            "intents": [
                {"key": "RULES_ONLY", "name": "Rule checks only", "triggerHints": "every row"}
            ],
            # the user never saw <think> sections (SPEC §6): checks must not read them either
            "outputParsing": {"thinkingMarkers": True},
        },
        source="<rules only>",
    )
