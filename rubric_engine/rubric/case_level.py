"""Case-level requirements: a row's ``expectedBehavior`` / ``negativeBehavior`` as rules.

Seed 000 §12.3 gives each eval case its own expected and forbidden behaviours; SPEC §5 step 1
adds them to the applicable set next to the pack's rules. Each becomes a
:class:`HardRequirement` with a *derived* ID that depends only on the text (NFKC, trimmed),
so it stays the same when lines are reordered and is shared by rows that state the same rule,
which lets reports count it across rows: ``CASE_EXPECTED_<8 hex>`` / ``CASE_NEGATIVE_<8 hex>``.
Pure.
"""

from __future__ import annotations

import hashlib
import unicodedata

from rubric_engine.rubric.model import HardRequirement

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
