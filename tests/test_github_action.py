"""The composite GitHub Action (action.yml), its steps run locally with the environment GitHub
gives a step: ``$GITHUB_STEP_SUMMARY``, ``$GITHUB_OUTPUT``, ``${{ inputs.* }}``, ``runner.temp``
and ``github.action_path``. The ``uses:`` steps (setup-python, upload-artifact) are GitHub's own
and only checked for what they are given; the install step is the one pip command it names."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT

BIN = Path(sys.executable).parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))


def expand(text: str, values: dict[str, str]) -> str:
    """GitHub's ``${{ … }}`` substitution for the expressions the action uses."""
    return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", lambda m: values[m.group(1)], text)


def run_action(work: Path, inputs: dict[str, str]) -> tuple[dict[str, str], Path, list[str]]:
    """Run the action's shell steps in ``work``; returns its outputs, the step summary file and
    the names of the steps run."""
    given = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()} | inputs
    temp = work / "runner-temp"
    temp.mkdir()
    summary, output = work / "step-summary.md", work / "github-output"
    summary.touch()
    outputs: dict[str, str] = {}
    ran = []
    for step in ACTION["runs"]["steps"]:
        values = {f"inputs.{k}": v for k, v in given.items()}
        values |= {"runner.temp": str(temp), "github.action_path": str(ROOT)}
        values |= {f"steps.suite.outputs.{k}": v for k, v in outputs.items()}
        condition = step.get("if")
        if condition and condition != "always()":
            # the one condition the action has: steps.suite.outputs.exit-code != '0'
            assert condition == "steps.suite.outputs.exit-code != '0'"
            if outputs.get("exit-code") == "0":
                continue
        if "uses" in step:
            assert step["uses"] in ("actions/setup-python@v5", "actions/upload-artifact@v4")
            continue
        env = {k: expand(str(v), values) for k, v in step.get("env", {}).items()}
        script = step["run"]
        if step["name"] == "Install rubric-eval":  # this checkout is installed in the venv
            assert script == 'python -m pip install -q "${PACKAGE:-$ACTION_PATH}"'
            assert env["ACTION_PATH"] == str(ROOT) and env["PACKAGE"] == ""
            continue
        done = subprocess.run(
            ["bash", "-e", "-c", script], cwd=work, capture_output=True, text=True, timeout=600,
            env={**os.environ, **env, "GITHUB_STEP_SUMMARY": str(summary),
                 "GITHUB_OUTPUT": str(output), "PATH": f"{BIN}:{os.environ['PATH']}"},
        )  # fmt: skip
        ran.append(step["name"])
        if step["name"] == "Fail when the suite failed":
            assert done.returncode != 0 and "the checklist is in the step summary" in done.stderr
            break
        assert done.returncode == 0, done.stderr
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return outputs, summary, ran


def project(tmp_path: Path) -> Path:
    for folder in ("examples", "cases", "rubrics", "cassettes"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    return tmp_path


def test_a_passing_suite_writes_the_summary_the_comment_and_the_outputs(tmp_path: Path) -> None:
    work = project(tmp_path)
    outputs, summary, ran = run_action(work, {"suite": "examples/rubric-eval.yaml"})
    assert ran == ["Run the suite"]
    assert outputs["exit-code"] == "0" and outputs["passed"] == "true"
    text = summary.read_text("utf-8")
    assert text.startswith("## rubric-eval ci: demo-suite passed\n\n20 of 20 check(s) hold.")
    comment = Path(outputs["comment-file"]).read_text("utf-8")
    assert comment == "<!-- rubric-eval ci -->\n" + text
    assert '"passed":true' in Path(outputs["summary-json"]).read_text("utf-8")
    # the artifact step keeps the suite's HTML reports
    [upload] = [s for s in ACTION["runs"]["steps"] if s.get("uses", "").startswith("actions/upl")]
    assert upload["with"]["path"] == "${{ inputs.reports }}" and upload["if"] == "always()"
    assert (work / "reports" / "ci" / "health-golden" / "report.html").is_file()


def test_a_failing_suite_fails_the_job_after_writing_the_summary(tmp_path: Path) -> None:
    work = project(tmp_path)
    # the deliberately worse health verdicts, and no airline cassettes: checks fail (exit 7)
    worse = {"suite": "examples/rubric-eval.yaml",
             "args": f"--cassettes {ROOT / 'cassettes-worse'}"}  # fmt: skip
    outputs, summary, ran = run_action(work, worse)
    assert ran == ["Run the suite", "Fail when the suite failed"]
    assert (outputs["passed"], outputs["exit-code"]) == ("false", "7")
    text = summary.read_text("utf-8")
    assert text.startswith("## rubric-eval ci: demo-suite failed")
    assert "| ✗ | airline-adversarial: judgeErrors==0 | 25 | == 0 |" in text
