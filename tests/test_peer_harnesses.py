"""The engine inside peers' harnesses, end to end and offline: a real ``inspect eval`` with the
scorer over the demo rows (Inspect's ``mockllm/model`` as the agent, the judge replayed), a
DeepEval ``evaluate`` with the conversational metric, and promptfoo's documented ``python``
assertion contract. Each scores the 26 health rows exactly as ``rubric-eval score`` does.

Inspect and DeepEval run where only loopback exists (``unshare -n`` with ``lo`` up) when the
machine allows it, so their telemetry and downloads cannot leave it; promptfoo itself (an npm
package of 1.4 GB that looks up its telemetry host on every run) is not installed: its
assertion is called as promptfoo calls it (``get_assert(output, context)``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from rubric_engine import ScoreOptions, score
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS

HEALTH = CASES / "health_consult_zh.jsonl"
BIN = Path(sys.executable).parent
OFFLINE = {"DEEPEVAL_TELEMETRY_OPT_OUT": "YES", "INSPECT_DISPLAY": "none", "NO_COLOR": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}  # fmt: skip


@cache
def loopback_only() -> list[str]:
    """The prefix that runs a command in a new network namespace with only ``lo`` up, or
    ``[]`` where this machine cannot make one (then the command runs as it is)."""
    prefix = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    if shutil.which("unshare") and shutil.which("ip"):
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return prefix
    assert os.environ.get("CI") != "true", "CI runs the peers where only loopback exists"
    return []


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``rubric-eval score``'s rows of the health demo, by rowId."""
    folder = tmp_path_factory.mktemp("score")
    result = score(ScoreOptions(inputs=[HEALTH], rubric=RUBRICS / "health_cs.yaml", draft=True,
                                cassettes=CASSETTES, store=folder / "s.sqlite",
                                out=folder / "out"))  # fmt: skip
    lines = result.files.rows.read_text("utf-8").splitlines()
    return {json.loads(x)["rowId"]: json.loads(x) for x in lines}


def statuses(row: dict[str, Any]) -> dict[str, str]:
    return {e["requirementId"]: e["status"] for e in row["referenceBasis"]}


def test_inspect_eval_with_the_scorer_equals_rubric_eval_score(
    scored: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    done = subprocess.run(
        [*loopback_only(), str(BIN / "inspect"), "eval", "examples/inspect_health.py",
         "--model", "mockllm/model", "--log-dir", str(logs), "--log-format", "json",
         "--display", "none"],  # inspect takes the task file relative to the working folder
        capture_output=True, text=True, timeout=600, cwd=ROOT, env={**os.environ, **OFFLINE},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [path] = logs.glob("*.json")
    log = json.loads(path.read_text("utf-8"))
    assert log["status"] == "success"
    samples = {s["id"]: s["scores"]["rubric_scorer"] for s in log["samples"]}
    assert sorted(samples) == sorted(scored)
    for row_id, got in samples.items():
        row = scored[row_id]
        assert got["value"] == row["finalScore"], row_id
        assert got["explanation"] == row["scoreExplanation"]
        assert got["metadata"]["requirements"] == statuses(row)
        assert got["metadata"]["redFlagTypes"] == row["redFlagTypes"]
    # the samples of the eval were batched, not one engine run each
    assert len({s["metadata"]["taskId"] for s in samples.values()}) <= 3
    [metrics] = log["results"]["scores"]
    values = [r["finalScore"] for r in scored.values()]
    assert metrics["metrics"]["mean"]["value"] == pytest.approx(sum(values) / len(values))
    assert metrics["scored_samples"] == 26 and metrics["unscored_samples"] == 0


DEEPEVAL_RUN = """
import json, sys
from deepeval import evaluate
from deepeval.test_case import ConversationalTestCase, Turn
from rubric_engine.integrations.deepeval import ConversationalRubricMetric
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
cases = [ConversationalTestCase(name=r["rowId"], turns=[Turn(role=m["role"], content=m["content"])
         for m in r["messages"]], additional_metadata=r["metadata"]) for r in rows]
metric = ConversationalRubricMetric(rubric=sys.argv[2], cassettes=sys.argv[3])
result = evaluate(test_cases=cases, metrics=[metric])
print(json.dumps({"runs": metric.batcher.runs, "cases": {
    t.name: {"score": t.metrics_data[0].score, "success": t.metrics_data[0].success,
             "reason": t.metrics_data[0].reason} for t in result.test_results}}))
"""


def test_deepeval_evaluate_with_the_metric_equals_rubric_eval_score(
    scored: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    done = subprocess.run(
        [*loopback_only(), sys.executable, "-c", DEEPEVAL_RUN, str(HEALTH),
         str(RUBRICS / "health_cs.yaml"), str(CASSETTES)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, **OFFLINE, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["runs"] <= 3 and sorted(got["cases"]) == sorted(scored)
    for row_id, case in got["cases"].items():
        row = scored[row_id]
        assert case["score"] == pytest.approx((row["finalScore"] - 1) / 4), row_id
        passed = row["finalScore"] >= 4 and not row["redFlagTypes"]
        assert case["success"] is passed
        assert case["reason"].endswith(row["scoreExplanation"])


def test_the_promptfoo_assertion_follows_its_python_contract(
    scored: dict[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rubric_engine.errors import ConfigurationError
    from rubric_engine.integrations.promptfoo import get_assert

    monkeypatch.chdir(tmp_path)
    rows = [json.loads(line) for line in HEALTH.read_text("utf-8").splitlines()]
    config = {"rubric": str(RUBRICS / "health_cs.yaml"), "cassettes": str(CASSETTES)}
    for row in (rows[0], rows[2]):
        user, reply = row["messages"]
        # what promptfoo passes: the output text; the rendered prompt, vars and the
        # assertion's config in context
        context = {"prompt": user["content"], "vars": {"rowId": row["rowId"]},
                   "test": {}, "config": config}  # fmt: skip
        graded = get_assert(reply["content"], context)
        expected = scored[row["rowId"]]
        assert graded["score"] == (expected["finalScore"] - 1) / 4
        assert graded["pass"] is False  # both are below the pass score
        assert graded["namedScores"]["finalScore"] == expected["finalScore"]
        assert {c["reason"] for c in graded["componentResults"]} == {
            f"{k}: {v}" for k, v in statuses(expected).items()
        }
        assert json.loads(json.dumps(graded)) == graded  # promptfoo reads it as JSON
    unseen = get_assert("多喝水", {"prompt": "头疼怎么办", "vars": {}, "config": config})
    assert unseen["pass"] is False and unseen["reason"].startswith("JUDGE_ERROR (not a score)")
    with pytest.raises(ConfigurationError, match=r"config\.rubric"):
        get_assert("x", {"prompt": "y", "vars": {}})
    assert list(tmp_path.iterdir()) == []  # nothing stored in the working folder
