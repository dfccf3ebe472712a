"""Rubric packs: the shipped packs load; broken files report every problem with file:line."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from rubric_engine.errors import RubricError
from rubric_engine.rubric import load_rubric, rubric_json_schema
from tests.conftest import RUBRICS

SEED_RED_FLAGS = [
    "MEDICAL_OVERREACH",
    "SAFETY_OMISSION",
    "COMPETITOR_MENTION",
    "PRICE_DISCLOSURE",
    "BACKEND_EXPOSURE",
    "FUNCTIONAL_MISLEAD",
    "BRAND_TERM_VIOLATION",
    "CARD_VIOLATION",
]


def test_health_pack_has_the_seed_structure() -> None:
    pack = load_rubric(RUBRICS / "health_cs.yaml")
    assert pack.language == "zh"
    assert [i.key for i in pack.intents] == [
        "HEALTH_CONSULTATION",
        "PRODUCT_RECOMMENDATION",
        "AFTER_SALES_QUALITY",
        "CHIT_CHAT",
    ]
    assert list(pack.red_flag_types) == SEED_RED_FLAGS
    reqs = pack.requirements_by_id.values()
    assert {r.violation_score for r in reqs} >= {1, 2, 3}
    assert any(not r.observable_in_data for r in reqs)
    assert pack.output_parsing.thinking_markers and pack.output_parsing.questions_card.enabled
    assert {"INTENT_HEALTH_FOLLOWUP", "INTENT_HEALTH_TRIAGE", "COMMON_BACKEND_EXPOSURE"} <= set(
        pack.requirements_by_id
    )
    flagged = {r.red_flag_type for r in reqs if r.critical and r.observable_in_data}
    assert flagged == set(SEED_RED_FLAGS)  # every red-flag type is reachable


def test_airline_pack_loads() -> None:
    pack = load_rubric(RUBRICS / "airline_cs.yaml")
    assert pack.language == "en" and len(pack.intents) >= 4
    texts = " ".join(r.text for r in pack.requirements_by_id.values())
    assert "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON." in texts


def test_shipped_schema_file_is_current_and_validates_the_packs() -> None:
    shipped = json.loads((RUBRICS / "rubric.schema.json").read_text(encoding="utf-8"))
    assert shipped == rubric_json_schema(), (
        "run `rubric-eval rubric schema --out rubrics/rubric.schema.json`"
    )
    for name in ("health_cs.yaml", "airline_cs.yaml"):
        jsonschema.validate(yaml.safe_load((RUBRICS / name).read_text(encoding="utf-8")), shipped)


BROKEN = """\
key: Bad Key
name: broken
version: 0
language: en
scoreScale: {min: 5, max: 1}
commonRequirements:
  - id: COMMON_A
    category: SAFETY
    text: one
    critical: true
    violationScore: 9
    colour: red
  - id: COMMON_A
    category: MYSTERY
    text: two
    redFlagType: NOT_DECLARED
intents:
  - key: CHAT
    name: chat
    triggerHints: hi
  - key: CHAT
    name: again
    triggerHints: hello
redFlags:
  - {type: LEAK, text: leak}
"""


def test_every_problem_reported_at_once_with_lines(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN, encoding="utf-8")
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    found = {(p.where.rsplit(":", 1)[-1], p.field) for p in info.value.problems}
    assert ("1", "key") in found
    assert ("3", "version") in found
    assert ("5", "scoreScale") in found
    assert ("10", "commonRequirements[0].critical") not in found
    assert ("11", "commonRequirements[0].redFlagType") in found or (
        "7",
        "commonRequirements[0].redFlagType",
    ) in found
    assert ("11", "commonRequirements[0].violationScore") in found
    assert ("12", "commonRequirements[0].colour") in found
    assert ("13", "commonRequirements[1].id") in found
    assert ("14", "commonRequirements[1].category") in found
    assert ("16", "commonRequirements[1].redFlagType") in found
    assert ("21", "intents[1].key") in found
    messages = " ".join(p.message for p in info.value.problems)
    assert "valid fields here: id, category, text" in messages
    assert "valid: LEAK" in messages
    assert "add your own under the pack's `categories`" in messages


def test_duplicate_keys_strict_numbers_and_flag_rules(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "key: p\nname: p\nversion: 1.0\nlanguage: en\n"
        "commonRequirements:\n"
        "  - {id: A, category: SAFETY, text: t, critical: true, critical: false, "
        "redFlagType: X, violationScore: true}\n"
        "  - {id: B, category: TONE, text: t, redFlagType: X}\n"
        "  - {id: C, category: SAFETY, text: t, critical: true, redFlagType: X, "
        "observableInData: false}\n"
        "intents:\n  - {key: I, name: i, triggerHints: h}\n"
        "intents:\n  - {key: J, name: j, triggerHints: h, requirements: }\n"
        "redFlags: [{type: X, text: x}]\n",
        encoding="utf-8",
    )
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    text = str(info.value)
    assert "p.yaml:6: commonRequirements[0].critical: key 'critical' appears twice" in text
    assert (
        "p.yaml:11: intents: key 'intents' appears twice in this mapping (first at line 9)" in text
    )
    assert "version: Input should be a valid integer" in text
    assert "commonRequirements[0].violationScore: Input should be a valid integer" in text
    assert (
        "commonRequirements[1].redFlagType: only a critical requirement raises a red flag" in text
    )
    assert (
        "commonRequirements[2].observableInData: a critical requirement must be observable" in text
    )
    assert "intents[0].requirements: must be a list" in text


def test_a_flag_that_is_not_true_or_false_is_one_problem_with_the_choices(tmp_path: Path) -> None:
    """``critical: yes-please`` said "Input should be a valid boolean (got 'yes-please')" and,
    for the same requirement, "only a critical requirement raises a red flag; set `critical:
    true`": one typo read as two problems, the second a wrong fix. Now one problem naming the
    choices; a requirement that is plainly not critical still gets the red-flag problem."""
    path = tmp_path / "p.yaml"
    path.write_text(
        "key: p\nname: p\nversion: 1\nlanguage: en\n"
        "commonRequirements:\n"
        "  - {id: A, category: SAFETY, text: t, critical: yes-please, redFlagType: X}\n"
        "  - {id: B, category: TONE, text: t, redFlagType: X}\n"
        "intents: [{key: I, name: i, triggerHints: h}]\n"
        "redFlags: [{type: X, text: x}]\n",
        encoding="utf-8",
    )
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    text = str(info.value)
    assert (
        "p.yaml:6: commonRequirements[0].critical: must be true or false (got 'yes-please')" in text
    ), text
    assert "commonRequirements[0].redFlagType" not in text
    assert "commonRequirements[1].redFlagType: only a critical requirement raises" in text


@pytest.mark.parametrize(
    ("content", "why"), [("", "the file is empty"), ("- a\n- b\n", "a list, not a mapping")]
)
def test_empty_or_non_mapping_file(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RubricError, match=why):
        load_rubric(path)


def test_bom_is_accepted_and_folder_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + (RUBRICS / "airline_cs.yaml").read_bytes())
    assert load_rubric(path).key == "airline_cs"
    with pytest.raises(RubricError, match="is a folder"):
        load_rubric(tmp_path)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "syntax.yaml"
    path.write_text("key: a\nname: [unclosed\nversion: 1\n", encoding="utf-8")
    with pytest.raises(RubricError, match=r"syntax\.yaml:\d+: not valid YAML"):
        load_rubric(path)


def test_missing_file_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match="rubric file not found"):
        load_rubric(tmp_path / "nope.yaml")


def test_content_hash_ignores_status_only(mini_rubric_path: Path) -> None:
    a = load_rubric(mini_rubric_path)
    text = mini_rubric_path.read_text(encoding="utf-8")
    mini_rubric_path.write_text(text.replace("status: DRAFT", "status: RETIRED"), encoding="utf-8")
    b = load_rubric(mini_rubric_path)
    mini_rubric_path.write_text(text.replace("Be concise", "Be brief"), encoding="utf-8")
    c = load_rubric(mini_rubric_path)
    assert a.content_hash() == b.content_hash() != c.content_hash()
