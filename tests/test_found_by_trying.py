"""What a newcomer's hostile cases found, one test per failure; each failed before its fix."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.engine.options import MAX_CONCURRENCY, check_options
from rubric_engine.errors import ConfigurationError, RubricError
from rubric_engine.report.render.export import write_export
from rubric_engine.rubric.loader import load_rubric
from rubric_engine.rules.evaluate import evaluate_check
from rubric_engine.rules.evidence import evidence_from_row
from rubric_engine.rules.model import RegexCheck
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_labels import run

HEALTH = CASES / "health_consult_zh.jsonl"


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(tmp_path: Path) -> None:
    # OWASP's CSV-injection rule: a cell starting with = + - @ (or tab, CR) is a formula
    records = [
        {"rowId": '=HYPERLINK("http://x.example","click")', "scoreExplanation": "+1 extra",
         "n": -3, "m": "-3", "tag": "@SUM(A1)", "tab": "\tx", "ok": "plain"},
    ]  # fmt: skip
    out = tmp_path / "x.csv"
    write_export(records, "csv", out)
    (row,) = list(csv.DictReader(io.StringIO(out.read_text("utf-8"))))
    assert row["rowId"] == '\'=HYPERLINK("http://x.example","click")'
    assert row["scoreExplanation"] == "'+1 extra" and row["tag"] == "'@SUM(A1)"
    assert row["tab"] == "'\tx" and row["ok"] == "plain"
    assert row["n"] == "-3"  # a number is no formula


def test_report_md_escapes_row_ids(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    hostile = ["<img src=x onerror=alert(1)>", "a|b `c`", "<b>bold</b>"]
    message = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    rows.write_text("".join(json.dumps({"rowId": r, "messages": message}) + "\n" for r in hostile))
    result = score(
        ScoreOptions(
            inputs=[rows], rubric=RUBRICS / "health_cs.yaml", draft=True,
            cassettes=CASSETTES, store=tmp_path / "s.sqlite", out=tmp_path / "r",
        )
    )  # fmt: skip
    assert len(result.cassette_misses) == 3  # JUDGE_ERROR rows: listed by rowId in report.md
    text = result.files.markdown.read_text("utf-8")
    assert "<img" not in text and "<b>" not in text, text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text


def test_concurrency_and_scale_have_bounds(tmp_path: Path) -> None:
    # --concurrency 1000000 took 1.65 GB for 26 rows; a 1..1,000,000 scale published
    with pytest.raises(ConfigurationError, match=f"at most {MAX_CONCURRENCY}"):
        check_options(ScoreOptions(inputs=[HEALTH], rubric="x", concurrency=1_000_000))
    pack = (RUBRICS / "health_cs.yaml").read_text("utf-8")
    big = tmp_path / "big.yaml"
    big.write_text(pack.replace("version: 1", "version: 1\nscoreScale: {min: 1, max: 1000000}", 1))
    with pytest.raises(RubricError, match="scoreScale"):
        load_rubric(big)


def test_resume_refuses_another_prompt() -> None:
    # `score --resume T --prompt judge_v2` was accepted and judged with the task's prompt
    with pytest.raises(ConfigurationError, match="--prompt"):
        check_options(ScoreOptions(resume="20260101-000000-abcdef", prompt_version="judge_v2"))


def test_judge_when_on_a_field_no_row_has_is_refused(tmp_path: Path) -> None:
    # `--judge-when scenaro=x` (a typo) judged nothing, marked every row FAIL and exited 0
    code, out = run(
        "score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes", CASSETTES,
        "--judge-when", "scenaro=x", "--store", tmp_path / "s.sqlite", "--out", tmp_path / "r",
    )  # fmt: skip
    assert code == 2, out
    assert "no row has the metadata field 'scenaro'" in out and "scenario" in out, out
    assert not (tmp_path / "r").exists()


def test_a_catastrophic_regex_check_ends_within_its_time_limit() -> None:
    # `^(a+)+$` on 40 a's and a b backtracked for hours in `re` and hung the run
    from rubric_engine.dialogue.model import DialogueRow

    row = DialogueRow.model_validate(
        {"rowId": "r", "messages": [{"role": "assistant", "content": "a" * 60 + "b"}]}
    )
    evidence = evidence_from_row(row)
    started = time.monotonic()
    nested = RegexCheck.model_validate({"type": "regex", "pattern": "^(a+)+$"})
    assert str(evaluate_check(nested, evidence, "R1").status) == "VIOLATED"  # decided at once
    alternation = RegexCheck.model_validate({"type": "regex", "pattern": "(a|aa)+$"})
    result = evaluate_check(alternation, evidence, "R1")
    assert time.monotonic() - started < 30
    assert str(result.status) == "NOT_APPLICABLE"
    assert result.detail is not None and "time limit" in result.detail, result.detail


def test_the_pytest_assertion_fails_on_unjudged_rows(tmp_path: Path) -> None:
    # assert_rubric passed with a JUDGE_ERROR row (a cassette miss): thresholds are figures
    # of the rows that were judged
    from rubric_engine.testing.assertions import assert_rubric

    recorded = json.loads(HEALTH.read_text("utf-8").splitlines()[0])
    unrecorded = {**recorded, "rowId": "never-recorded"}
    rows = [recorded, unrecorded]
    with pytest.raises(AssertionError, match=r"1 of 2 row\(s\) were not judged"):
        assert_rubric(rows, ["passRate>=0"], rubric=RUBRICS / "health_cs.yaml", cassettes=CASSETTES)
    report = assert_rubric(
        rows, ["passRate>=0"], rubric=RUBRICS / "health_cs.yaml", cassettes=CASSETTES,
        allow_unjudged=True,
    )  # fmt: skip
    assert report.totals.judge_errors == 1


class _Breaks:
    def __str__(self) -> str:
        raise OSError(28, "No space left on device")


def test_an_export_that_fails_midway_leaves_the_old_file(tmp_path: Path) -> None:
    # `export --out F` on a full disk left a truncated F
    out = tmp_path / "x.csv"
    out.write_text("the previous export\n", "utf-8")
    records = [{"rowId": f"r{i}", "v": "x" * 100} for i in range(1000)] + [{"v": _Breaks()}]
    with pytest.raises(ConfigurationError, match="No space left on device"):
        write_export(records, "csv", out)
    assert out.read_text("utf-8") == "the previous export\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]  # no temporary file left


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("export", "T", "--out", "{tmp}/file.txt/x.csv"), "cannot write it"),
        (("labels", "export", "T", "--out", "{tmp}/missing/labels.jsonl"), "does not exist"),
        (("serve", "--port", "99999"), "65535"),
        (
            ("score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft", "--out", ""),
            "--out is empty",
        ),
    ],
)
def test_what_was_a_traceback_is_a_message(tmp_path: Path, args: tuple, said: str) -> None:
    store = tmp_path / "s.sqlite"
    (tmp_path / "file.txt").write_text("x", "utf-8")
    task = ""
    if args[0] in ("export", "labels"):
        result = score(
            ScoreOptions(inputs=[HEALTH], rubric=RUBRICS / "health_cs.yaml", draft=True,
                         cassettes=CASSETTES, store=store, out=tmp_path / "r")
        )  # fmt: skip
        task = result.task_id
    given = [str(a).replace("{tmp}", str(tmp_path)) if a != "T" else task for a in args]
    code, out = run(*given, "--store", store) if args[0] != "serve" else run(*given)
    assert code == 2, out
    assert said in out and "Traceback" not in out, out


def _slow_rule_check_run(tmp_path: Path) -> Any:
    """A ``score --judge none`` process whose six rows each run a rule check to its time
    limit, once its task exists (its rule checks started)."""
    import os
    import subprocess
    import sys

    slow = {"type": "regex", "pattern": "(a|aa)+$"}  # runs to its time limit on each row
    message = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "a" * 3000 + "b"},
    ]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"rowId": f"r{i}", "messages": message, "expected": [slow]}) + "\n"
            for i in range(6)
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "rubric_engine.cli", "score", rows, "--judge", "none",
         "--store", tmp_path / "s.sqlite", "--out", tmp_path / "r", "--display", "plain"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert process.stderr is not None
    assert b"scoring 6 row(s)" in process.stderr.readline()  # the task exists: checks started
    return process


def test_ctrl_c_twice_during_a_long_rule_check_ends_without_a_traceback(tmp_path: Path) -> None:
    # a second Ctrl-C during a rule check printed "Task exception was never retrieved" and a
    # traceback after the interrupt message
    import signal

    process = _slow_rule_check_run(tmp_path)
    time.sleep(1.5)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err.decode()
    assert b"interrupted: task" in err and b"Traceback" not in err, err.decode()[-3000:]


def test_ctrl_c_held_down_still_ends_with_the_advice_and_exit_130(tmp_path: Path) -> None:
    # a Ctrl-C arriving while the interrupt advice was read from the store and printed
    # killed the process by SIGINT (exit -2) mid-message; the suite saw it under load as a
    # second Ctrl-C 0.3 s after the first. Here Ctrl-C repeats every 20 ms until the exit.
    import signal

    process = _slow_rule_check_run(tmp_path)
    time.sleep(1.0)
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        process.send_signal(signal.SIGINT)
        time.sleep(0.02)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err.decode()[-3000:]
    assert b"interrupted: task" in err and b"finishes the task" in err, err.decode()[-3000:]
    assert b"Traceback" not in err, err.decode()[-3000:]


def test_red_flag_added_warnings_do_not_depend_on_rule_order(tmp_path: Path) -> None:
    # two violated red lines of one type, the flag unreported: only the rule first in the
    # pack was named in RED_FLAG_ADDED (scores were the same either way)
    from rubric_engine.results.normalize import normalize_verdict
    from tests.conftest import MINI_RUBRIC
    from tests.test_normalize_warnings import judge

    first = "      - {id: REFUND_NO_PROMISE, "
    second = "      - {id: REFUND_NO_PROMISE_AMOUNT, "
    lines = MINI_RUBRIC.splitlines(keepends=True)
    a = next(i for i, x in enumerate(lines) if x.startswith(first))
    b = next(i for i, x in enumerate(lines) if x.startswith(second))
    swapped = list(lines)
    swapped[a], swapped[b] = lines[b], lines[a]
    named = []
    for name, text in (("pack.yaml", MINI_RUBRIC), ("swapped.yaml", "".join(swapped))):
        path = tmp_path / name
        path.write_text(text, "utf-8")
        rubric = load_rubric(path)
        verdict = judge(
            rubric, unmetRequirementIds=["REFUND_NO_PROMISE", "REFUND_NO_PROMISE_AMOUNT"]
        )
        result = normalize_verdict(rubric, verdict, "r1")
        assert result.red_flag_types == ("FALSE_PROMISE",)
        named.append(
            sorted(w.requirement_id for w in result.warnings if w.code.value == "RED_FLAG_ADDED")
        )
    assert named[0] == named[1] == ["REFUND_NO_PROMISE", "REFUND_NO_PROMISE_AMOUNT"]
