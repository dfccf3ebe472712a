"""A pack requirement with a rule check, scored through the live judge path (loopback stub)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rubric_engine.engine import score
from rubric_engine.testing.openai_stub import StubServer, scripted_responder
from tests.conftest import RUBRICS
from tests.test_live import SCRIPT, options

pytestmark = pytest.mark.live


def test_a_rule_check_overrides_the_live_judge_both_ways(tmp_path: Path) -> None:
    pack = yaml.safe_load((RUBRICS / "health_cs.yaml").read_text(encoding="utf-8"))
    intent = next(i for i in pack["intents"] if i["key"] == "HEALTH_CONSULTATION")
    rule = next(r for r in intent["requirements"] if r["id"] == "INTENT_HEALTH_NO_PRESCRIPTION")
    # a deliberately narrow stand-in for the rule: naming an oral drug course is overreach
    rule["check"] = {
        "type": "must_not_contain",
        "keywords": ["口服营养神经药物"],
        "scope": "assistant",
    }
    path = tmp_path / "health_checked.yaml"
    path.write_text(yaml.safe_dump(pack, allow_unicode=True, sort_keys=False), encoding="utf-8")
    with StubServer(scripted_responder(SCRIPT)) as server:
        result = score(options(tmp_path, server, rubric=path))
    rows = {
        r["rowId"]: r
        for r in map(json.loads, result.files.rows.read_text(encoding="utf-8").splitlines())
    }

    def entry(row_id: str) -> dict[str, str]:
        basis = rows[row_id]["referenceBasis"]
        return next(e for e in basis if e["requirementId"] == "INTENT_HEALTH_NO_PRESCRIPTION")

    # unseen-36 recommends "口服营养神经药物"; the scripted judge did not list the rule
    assert entry("unseen-36") == {
        "requirementId": "INTENT_HEALTH_NO_PRESCRIPTION",
        "status": "VIOLATED",
        "source": "rule",
    }
    assert rows["unseen-36"]["finalScore"] == 1
    assert rows["unseen-36"]["redFlagTypes"] == ["MEDICAL_OVERREACH"]
    assert rows["unseen-36"]["rules"]["failedChecks"] == [
        "INTENT_HEALTH_NO_PRESCRIPTION: forbidden keyword(s) present: 口服营养神经药物"
    ]
    # unseen-21: the scripted judge listed the rule as unmet; the check finds nothing
    assert entry("unseen-21")["status"] == "FOLLOWED" and entry("unseen-21")["source"] == "rule"
    assert result.report["rules"]["totalCases"] == 4
