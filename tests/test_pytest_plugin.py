"""The pytest plugin as a user meets it: the three-line example of docs/pytest.md runs (offline,
replayed) and passes, and fails with a readable message when a threshold is raised."""

from __future__ import annotations

import re
import shutil

import pytest

from rubric_engine.testing import assert_rubric
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS

pytest_plugins = ["pytester"]

#: a pytester project has no pyproject: leave out the slow plugins ours does (pyproject.toml)
QUIET_PLUGINS = ("-p", "no:cacheprovider", "-p", "no:phoenix", "-p", "no:deepeval",
                 "-p", "no:asyncio")  # fmt: skip


def doc_example() -> str:
    text = (ROOT / "docs" / "pytest.md").read_text("utf-8")
    found = re.search(r"```python\n(.*?)```", text, re.S)
    assert found is not None
    return found.group(1)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "cases").mkdir()
    shutil.copy(CASES / "health_consult_zh.jsonl", pytester.path / "cases")
    shutil.copytree(RUBRICS, pytester.path / "rubrics")
    shutil.copytree(CASSETTES, pytester.path / "cassettes")
    return pytester


def test_the_documented_example_is_three_lines_and_passes(project: pytest.Pytester) -> None:
    example = doc_example()
    assert len(example.strip().splitlines()) == 3
    project.makepyfile(test_health_quality=example)
    result = project.runpytest_subprocess(*QUIET_PLUGINS)
    result.assert_outcomes(passed=1)


def test_a_raised_threshold_fails_readably(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_health_quality=doc_example().replace("meanScore>=1.65", "meanScore>=2.5")
    )
    result = project.runpytest_subprocess(*QUIET_PLUGINS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*rubric thresholds failed on task * (26 rows):",
        "*✗ meanScore>=2.5 fails: meanScore = 1.69231, needs >= 2.5",
        "*least-followed requirements:",
        "*lowest rows:",
    ])  # fmt: skip


def test_a_report_or_rows_can_be_asserted_directly() -> None:
    import json

    lines = (CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines()
    rows = [json.loads(line) for line in lines[:3]]
    health = RUBRICS / "health_cs.yaml"
    assert assert_rubric(rows, ["rows==3"], rubric=health, cassettes=CASSETTES).totals.rows == 3
    # a row the cassettes never saw is a JUDGE_ERROR: a threshold on it fails, it never passes
    unseen = {
        "rowId": "new",
        "messages": [
            {"role": "user", "content": "头疼怎么办"},
            {"role": "assistant", "content": "多喝水"},
        ],
    }
    with pytest.raises(AssertionError, match=r"judgeErrors==0 fails: judgeErrors = 1"):
        assert_rubric([*rows, unseen], ["judgeErrors==0"], rubric=health, cassettes=CASSETTES)
    report = assert_rubric(CASES / "health_consult_zh.jsonl", ["judgeErrors==0"],
                           rubric=RUBRICS / "health_cs.yaml", cassettes=CASSETTES)  # fmt: skip
    assert report.totals.rows == 26
    assert assert_rubric(report, ["rows==26"]) is report
    with pytest.raises(AssertionError, match=r"redFlags\.SAFETY_OMISSION==0 fails"):
        assert_rubric(report, ["redFlags.SAFETY_OMISSION==0"])


def test_the_judge_options_reach_the_judge(project: pytest.Pytester) -> None:
    """--rubric-mode live with --rubric-model and --rubric-api-base calls that model at that
    server (a loopback stub answering the demo's authored verdicts); the test's own model=
    argument wins over --rubric-model."""
    from rubric_engine.testing.openai_stub import StubServer, load_verdicts, verdicts_responder

    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    project.makepyfile(test_health_quality=doc_example() + (
        "\n\ndef test_own_model_wins(assert_rubric):\n"
        "    assert_rubric('cases/health_consult_zh.jsonl', rubric='rubrics/health_cs.yaml',\n"
        "                  thresholds=['rows==26'], model='openai/other-judge')\n"
    ))  # fmt: skip
    with StubServer(verdicts_responder(verdicts)) as server:
        result = project.runpytest_subprocess(
            *QUIET_PLUGINS, "--rubric-mode", "live", "--rubric-model", "openai/stub-judge",
            "--rubric-api-base", server.base_url,
        )  # fmt: skip
        models = [r["body"]["model"] for r in server.requests]
    result.assert_outcomes(passed=2)
    assert models.count("stub-judge") == 26 and models.count("other-judge") == 26
