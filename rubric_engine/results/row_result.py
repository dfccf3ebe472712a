"""One home for row → result: a row's verdict and/or rule checks become its :class:`RowResult`.

Every producer of row results calls :func:`row_result`: live, replay and record runs (through
:func:`rubric_engine.engine.pipeline.row_result`), ``--judge none`` runs, ``renormalize`` and the
batch mode to come. It decides the row's status from what it is given:

* a validated verdict → ``SCORED``: normalized (docs/protocol.md), with the rule checks merged in
  (docs/protocol.md §10: a checked requirement takes its rule's status, source ``rule``);
* a judge error → ``JUDGE_ERROR``: never a score; the rule checks are summarized;
* neither → ``CHECKED`` (``--judge none``, docs/rule-checks.md): decided by the rule checks alone.

The applicable set is worked out once per row (:meth:`CompiledRubric.applicable`) and serves
the normalizer, the rule statuses and the diagnosis rule summary. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.results.agent_output import thinking_warnings
from rubric_engine.results.model import (
    BasisEntry,
    BasisSource,
    JudgeError,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    RuleSummary,
)
from rubric_engine.results.normalize import normalize_applicable
from rubric_engine.rubric.case_level import CaseRequirements
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rules.run import RuleRun
from rubric_engine.verdict.model import VerdictBase

__all__ = ["row_result", "rule_summary"]

S = RequirementStatus


def row_result(
    rubric: CompiledRubric,
    row: DialogueRow,
    case: CaseRequirements,
    rules: RuleRun,
    verdict: VerdictBase | None = None,
    error: JudgeError | None = None,
    warnings: Sequence[ProtocolWarning] = (),
) -> RowResult:
    """The row's result from its judge answer (if any) and its rule checks.

    Args:
        rubric: the task's snapshot (the version the row is normalized under), compiled.
        row: the row; its ``rowId``, metadata title and trace feed the result.
        case: the row's case-level requirements
            (:func:`~rubric_engine.rubric.case_level.row_case_requirements`).
        rules: the row's rule checks, already run (:func:`~rubric_engine.rules.run.run_rules`).
        verdict: the judge's validated answer; ``None`` when there is none.
        error: why the judge gave no answer; ignored when ``verdict`` is given.
        warnings: raised before this step (re-asks, the judge's clean-ups of its values);
            kept on a SCORED or JUDGE_ERROR row. A CHECKED row has no judge, so none.
            Every row starts with its malformed thinking markers (docs/protocol.md §12),
            worked out here.

    Returns:
        ``SCORED`` with a verdict, ``JUDGE_ERROR`` with only an error, ``CHECKED`` with neither.
    """
    marks = thinking_warnings(row, rubric.rubric.output_parsing)
    warnings = (*marks, *warnings)
    if verdict is not None:
        applicable = rubric.applicable(verdict.intent_key, case.all)
        if not rules.results:  # most judged rows: no rule checks to merge or summarize
            return normalize_applicable(rubric, verdict, row.row_id, applicable, warnings)
        ids = [r.id for r in applicable]
        result = normalize_applicable(
            rubric, verdict, row.row_id, applicable, warnings, rules.statuses(ids)
        )
        summary = rule_summary(row, rules, ids)
        return result if summary is None else result.model_copy(update={"rules": summary})
    ids = [r.id for r in rubric.applicable(None, case.all)]
    if error is not None:
        return RowResult(
            row_id=row.row_id,
            status=RowStatus.JUDGE_ERROR,
            warnings=tuple(warnings),
            error=error,
            rules=rule_summary(row, rules, ids),
        )
    return _checked(rubric, row, rules, ids).with_warnings(marks)


def _checked(rubric: CompiledRubric, row: DialogueRow, rules: RuleRun, ids: list[str]) -> RowResult:
    """A ``--judge none`` row: no intent is chosen, so only the common and case checks count.

    The referenceBasis lists exactly the applicable requirements that have a check (source
    ``rule``). A VIOLATED critical requirement raises its red flag. There is no score.
    """
    statuses = rules.statuses(ids)
    by_id = rubric.rubric.requirements_by_id
    flags = {
        by_id[rid].red_flag_type
        for rid, status in statuses.items()
        if status is S.VIOLATED and rid in by_id and by_id[rid].critical
    }
    order = rubric.flag_order
    return RowResult(
        row_id=row.row_id,
        status=RowStatus.CHECKED,
        red_flag_types=tuple(sorted((f for f in flags if f), key=lambda t: order.get(t, 0))),
        reference_basis=tuple(
            BasisEntry(requirement_id=rid, status=status, source=BasisSource.RULE)
            for rid, status in statuses.items()
        ),
        rules=rule_summary(row, rules, ids),
    )


def _as_recorded(value: float | None) -> int | float | None:
    """Milliseconds as the trace wrote them: ``8420``, not ``8420.0``."""
    return int(value) if value is not None and value.is_integer() else value


def rule_summary(row: DialogueRow, rules: RuleRun, applicable: Sequence[str]) -> RuleSummary | None:
    """The diagnosis per-case result over the applicable checked requirements; ``None`` if none.

    ``passed`` is true when no check is VIOLATED (NOT_APPLICABLE does not fail a case). Each
    ``failedChecks`` line starts with the check's name (see
    :attr:`~rubric_engine.results.model.CheckResult.name`).
    """
    checks = tuple(rules.results[rid] for rid in dict.fromkeys(applicable) if rid in rules.results)
    if not checks:
        return None
    failed = [f"{c.name}: {c.detail}" for c in checks if c.status is S.VIOLATED]
    matched = sum(c.measures.get("matchedKeywordCount", 0) for c in checks)
    required = sum(c.measures.get("requiredKeywordCount", 0) for c in checks)
    coverage: dict[str, bool] = {}
    for check in checks:
        for tool, seen in check.measures.get("evidenceCoverage", {}).items():
            coverage[tool] = coverage.get(tool, True) and seen
    title = row.metadata.get("title")
    evidence = rules.evidence
    return RuleSummary(
        case_id=row.row_id,
        title=title if isinstance(title, str) else None,
        passed=not failed,
        failed_checks=tuple(failed),
        verifier_verdict=evidence.verifier_verdict,
        matched_keyword_count=matched,
        required_keyword_count=required,
        evidence_coverage=coverage,
        tool_call_count=len(evidence.tool_calls),
        duration_ms=_as_recorded(evidence.duration_ms),
        checks=checks,
    )
