"""Run a row's rule checks: the pack's ``check:`` requirements and the case's ``expected:``.

docs/protocol.md §10: a rule decides its requirement without the judge. This module only runs
the checks and returns their :class:`~rubric_engine.results.model.CheckResult` values; merging them
into a row result is :mod:`rubric_engine.results.row_result`'s job. Case checks (``expected:``) are
known by IDs derived from the check's canonical JSON, ``CASE_RULE_<8 hex>``
(:func:`~rubric_engine.rules.evaluate.case_rule_id`), so the same check on many rows is
counted as one rule. Pure: a leaf of the core that imports neither the normalizer nor the
rubric loader.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.results.model import CheckResult, RequirementStatus
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rules.evaluate import case_rule_id, check_json, evaluate_check
from rubric_engine.rules.evidence import Evidence, evidence_from_row

__all__ = ["RuleRun", "case_rule_id", "check_json", "run_rules"]


@dataclass(frozen=True)
class RuleRun:
    """A row's checks, run once.

    Attributes:
        evidence: what the checks read (the row summary also reports some of it: the
            verifier's verdict, the tool-call count, the duration).
        results: requirement ID → result, for every checked requirement of the pack (every
            intent, not only the one the judge will choose) and of the case; pack first, in
            declaration order, then the case's checks in row order (a repeated check once).
    """

    evidence: Evidence
    results: Mapping[str, CheckResult]

    def statuses(self, applicable: Iterable[str]) -> dict[str, RequirementStatus]:
        """Rule status by requirement ID, for the applicable requirements that have a check.

        Ordered like ``applicable``; IDs without a check are left out.
        """
        return {rid: self.results[rid].status for rid in applicable if rid in self.results}


#: the evidence of a row that nothing checks: never read (no check, no rule summary)
_UNREAD = Evidence(final_answer="", assistant_texts=(), user_texts=(), tool_calls=())


def run_rules(rubric: CompiledRubric, row: DialogueRow) -> RuleRun:
    """Evaluate every check the pack (:attr:`CompiledRubric.checked`) and the row carry."""
    if not rubric.checked and not row.expected:
        return RuleRun(_UNREAD, {})  # most judged rows: skip reading the evidence
    evidence = evidence_from_row(row, rubric.rubric.output_parsing)
    results: dict[str, CheckResult] = {}
    for req in rubric.checked:
        if req.check is not None:
            results[req.id] = evaluate_check(req.check, evidence, req.id)
    for check in row.expected:
        rid = case_rule_id(check)
        if rid not in results:
            results[rid] = evaluate_check(check, evidence)
    return RuleRun(evidence, results)


def __getattr__(name: str) -> Any:
    # ``case_rule_requirements`` moved to rubric.case_level (requirements are the rubric's
    # concept, not the checks'); report/aggregate.py imports it from here until it switches
    # to ``rubric.case_level.row_case_requirements``
    if name == "case_rule_requirements":
        from rubric_engine.rubric.case_level import case_rule_requirements

        return case_rule_requirements
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
