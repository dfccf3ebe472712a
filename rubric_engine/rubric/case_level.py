"""The requirements that apply to a row, worked out in this one place (docs/protocol.md §6).

Case-level requirements: a row's ``expectedBehavior`` / ``negativeBehavior`` as rules, and its
rule checks (``expected:``) as requirements decided by the rule alone.

An eval case may carry its own expected and forbidden behaviours; docs/protocol.md §6 adds
them to the applicable set next to the pack's rules. Each becomes a
:class:`HardRequirement` with a *derived* ID that depends only on the text (NFKC, trimmed),
so it stays the same when lines are reordered and is shared by rows that state the same rule,
which lets reports count it across rows: ``CASE_EXPECTED_<8 hex>`` / ``CASE_NEGATIVE_<8 hex>``.
Case checks become ``CASE_RULE_<8 hex>`` requirements (see
:func:`~rubric_engine.rules.evaluate.case_rule_id`); they are not shown to the judge.
Pure.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rubric_engine.rubric.model import HardRequirement
from rubric_engine.rules.evaluate import case_rule_id, check_json
from rubric_engine.rules.model import Check

if TYPE_CHECKING:
    from rubric_engine.dialogue.model import DialogueRow

CASE_CATEGORY = "CASE"


def _derived_id(prefix: str, text: str) -> str:
    canonical = unicodedata.normalize("NFKC", text).strip()
    return f"{prefix}_{hashlib.sha256(canonical.encode('utf-8')).hexdigest()[:8].upper()}"


def case_requirements(
    expected_behavior: tuple[str, ...], negative_behavior: tuple[str, ...]
) -> tuple[HardRequirement, ...]:
    """Turn a case's behaviour lists into requirements, expected first, duplicates dropped.

    Args:
        expected_behavior: what the agent must do; blank entries are skipped.
        negative_behavior: what the agent must not do; the rule text says "must NOT".

    Returns:
        Requirements with category ``CASE``, not critical, observable, no cap.
    """
    found: dict[str, HardRequirement] = {}
    for prefix, texts, template in (
        ("CASE_EXPECTED", expected_behavior, "{}"),
        ("CASE_NEGATIVE", negative_behavior, "The agent must NOT do this: {}"),
    ):
        for text in texts:
            if not text or not text.strip():
                continue
            rid = _derived_id(prefix, text)
            found.setdefault(
                rid,
                HardRequirement(
                    id=rid,
                    category=CASE_CATEGORY,
                    text=template.format(text.strip()),
                    source="case",
                ),
            )
    return tuple(found.values())


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
class CaseRequirements:
    """A row's case-level requirements, derived once per row.

    Attributes:
        behaviours: ``expectedBehavior`` then ``negativeBehavior`` (see
            :func:`case_requirements`); the judge sees and decides these.
        rules: the row's ``expected:`` checks (see :func:`case_rule_requirements`); decided by
            the rule alone, never shown to the judge.
    """

    behaviours: tuple[HardRequirement, ...] = ()
    rules: tuple[HardRequirement, ...] = ()

    @property
    def all(self) -> tuple[HardRequirement, ...]:
        """Behaviours first, then rule checks: their order in the referenceBasis."""
        return self.behaviours + self.rules


_NO_CASE = CaseRequirements()


def row_case_requirements(row: DialogueRow) -> CaseRequirements:
    """Every case-level requirement of ``row``."""
    if not (row.expected_behavior or row.negative_behavior or row.expected):
        return _NO_CASE  # most rows: nothing case-level
    return CaseRequirements(
        behaviours=case_requirements(row.expected_behavior, row.negative_behavior),
        rules=case_rule_requirements(row.expected),
    )
