"""The command line as a user meets it: messages, exit codes, nothing lost on bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from tests.conftest import CASES, CASSETTES, RUBRICS

runner = CliRunner()


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def score_demo(tmp_path: Path, store: Path, *extra: object) -> tuple[int, str]:
    """Score the health demo batch into ``tmp_path/out``."""
    return run(
        "score",
        CASES / "health_consult_zh.jsonl",
        "-r",
        RUBRICS / "health_cs.yaml",
        "--draft",
        "--store",
        store,
        "--out",
        tmp_path / "out",
        "--cassettes",
        CASSETTES,
        "--display",
        "none",
        *extra,
    )


def test_help_lists_the_commands() -> None:
    code, out = run("--help")
    assert code == 0
    for command in ("score", "report", "tasks", "rubric", "cassette", "prompt"):
        assert command in out


def test_score_then_report_rebuilds_the_same_json(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    code, out = score_demo(tmp_path, store)
    assert code == 0, out
    task_id = re.search(r"task id: (\S+)", out).group(1)  # type: ignore[union-attr]
    assert "MEDICAL_OVERREACH" in out
    code, rebuilt = run("report", task_id, "--store", store, "--format", "json")
    assert code == 0
    assert rebuilt == (tmp_path / "out" / "report.json").read_text(encoding="utf-8")
    code, listing = run("tasks", "--store", store)
    assert code == 0 and task_id in listing


def test_malformed_dataset_exits_2_and_scores_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"rowId": "a", "messages": [{"role": "assistant", "content": "x"}]}\n{oops\n',
        encoding="utf-8",
    )
    store = tmp_path / "s.sqlite"
    code, out = run("score", bad, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store", store)
    assert code == 2
    assert f"{bad}:2" in out and "not valid JSON" in out and "nothing was scored" in out
    assert not store.exists()


def test_broken_rubric_exits_2_with_lines(tmp_path: Path) -> None:
    pack = tmp_path / "p.yaml"
    pack.write_text(
        (RUBRICS / "airline_cs.yaml")
        .read_text(encoding="utf-8")
        .replace("redFlagType: POLICY_VIOLATION", "redFlagType: POLICY_VIOLATIONS", 1),
        encoding="utf-8",
    )
    code, out = run("rubric", "validate", pack)
    assert code == 2
    assert re.search(
        rf"{re.escape(str(pack))}:\d+: .*redFlagType: 'POLICY_VIOLATIONS' is not "
        r"declared in redFlags; valid: UNAUTHORIZED_ACTION, POLICY_VIOLATION",
        out,
    )
    code, out = run(
        "score",
        CASES / "airline_tau2_dev.json",
        "-r",
        pack,
        "--draft",
        "--store",
        tmp_path / "s.sqlite",
    )
    assert code == 2 and "POLICY_VIOLATIONS" in out


def test_replay_miss_exits_4_and_says_how_to_record(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, out = score_demo(tmp_path, tmp_path / "s.sqlite", "--cassettes", tmp_path / "empty")
    assert code == 4
    assert "26 row(s) had no cassette entry" in out
    assert "key sha256:" in out and "--mode record" in out
    rows = (tmp_path / "out" / "rows.jsonl").read_text(encoding="utf-8").splitlines()
    assert {json.loads(r)["error"]["kind"] for r in rows} == {"CASSETTE_MISS"}


def test_missing_cassette_folder_is_named_before_anything_runs(tmp_path: Path) -> None:
    code, out = score_demo(tmp_path, tmp_path / "s.sqlite", "--cassettes", tmp_path / "casettes")
    assert code == 2 and "cassette folder" in out and "not found" in out
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("quiet", ["-q", "--json"])
def test_a_wrong_display_is_refused_with_quiet_or_json_too(tmp_path: Path, quiet: str) -> None:
    """``--display foo -q`` scored the whole batch and exited 0 (-q and --json show no display,
    so the value was never looked at); a wrong value is refused before anything runs, as it
    is without -q."""
    code, out = score_demo(tmp_path, tmp_path / "s.sqlite", "--display", "foo", quiet)
    assert code == 2, out
    assert "--display 'foo' is not valid; use one of rich, plain, none" in out, out
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "out").exists()


def test_a_file_given_as_cassette_folder_is_named_as_a_file(tmp_path: Path) -> None:
    """``--cassettes FILE`` said "cassette folder FILE not found" of a file that is there;
    it now says it is a file and that --cassettes takes the folder (one cassette file of the
    shipped folder is the likely slip)."""
    one = tmp_path / "rows.jsonl"
    one.write_text("", encoding="utf-8")
    code, out = score_demo(tmp_path, tmp_path / "s.sqlite", "--cassettes", one)
    assert code == 2, out
    assert f"--cassettes {one} is a file, not a folder; pass the folder of cassettes" in out, out
    assert "not found" not in out
    assert not (tmp_path / "s.sqlite").exists()


def test_changed_model_miss_names_the_difference(tmp_path: Path) -> None:
    code, out = score_demo(tmp_path, tmp_path / "s.sqlite", "--model", "openai/gpt-4.1")
    assert code == 4 and "the model differs (cassette has 'openai/gpt-4o-mini'" in out
    assert "pass --model openai/gpt-4o-mini to replay it" in out


def test_bad_options_are_named(tmp_path: Path) -> None:
    code, out = run(
        "score",
        CASES / "health_consult_zh.jsonl",
        "-r",
        RUBRICS / "health_cs.yaml",
        "--mode",
        "dry",
        "--store",
        tmp_path / "s.sqlite",
    )
    assert code == 2 and "replay, record, live" in out
    code, out = run("report", "no-such-task", "--store", tmp_path / "missing.sqlite")
    assert code == 3 and "no task store here" in out


def test_unknown_task_is_named(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    score_demo(tmp_path, store)
    code, out = run("report", "nope", "--store", store)
    assert code == 2 and "task 'nope' not found" in out and "rubric-eval tasks" in out


def test_prompt_show_prints_both_messages() -> None:
    code, out = run(
        "prompt",
        "show",
        CASES / "airline_tau2_dev.json",
        "-r",
        RUBRICS / "airline_cs.yaml",
        "--row",
        "airline-3",
    )
    assert code == 0
    assert "===== system =====" in out and "rowId: airline-3" in out


def test_output_and_store_paths_are_checked_before_judging(tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    code, out = score_demo(tmp_path, tmp_path / "s.sqlite", "--out", a_file / "sub")
    assert code == 2 and "report folder" in out and "cannot be written" in out
    assert not (tmp_path / "s.sqlite").exists()
    code, out = score_demo(tmp_path, a_file / "store.sqlite")
    assert code == 3 and "cannot open task store" in out


def test_same_input_twice_is_refused(tmp_path: Path) -> None:
    data = CASES / "health_consult_zh.jsonl"
    code, out = run(
        "score",
        data,
        data,
        "-r",
        RUBRICS / "health_cs.yaml",
        "--draft",
        "--store",
        tmp_path / "s.sqlite",
    )
    assert code == 2 and "given more than once" in out


def test_cassette_check_lists_every_bad_line(tmp_path: Path) -> None:
    folder = tmp_path / "cass"
    folder.mkdir()
    good = (CASSETTES / "health_cs" / "health_consult_zh.jsonl").read_text(encoding="utf-8")
    first = json.loads(good.splitlines()[0])
    first.pop("provenance")
    (folder / "c.jsonl").write_text(
        good.splitlines()[1] + "\n{oops\n" + json.dumps(first) + "\n" + good.splitlines()[1] + "\n",
        encoding="utf-8",
    )
    code, out = run("cassette", "check", folder)
    assert code == 2
    assert "1 entries (1 older duplicate(s) ignored); 1 authored" in out
    assert "2 bad cassette line(s)" in out and "c.jsonl:2: not valid JSON" in out
    assert "c.jsonl:3: provenance.kind must be" in out and "cassette author" in out
    code, out = run("cassette", "check", tmp_path / "nope")
    assert code == 2 and "cassette folder not found" in out


def test_version_and_small_helps(tmp_path: Path) -> None:
    from rubric_engine import __version__

    code, out = run("--version")
    assert code == 0 and out.strip() == f"rubric-eval {__version__}"
    code, out = run(
        "prompt", "show", CASES / "airline_tau2_dev.json", "-r", RUBRICS / "airline_cs.yaml",
        "--row", "nope",
    )  # fmt: skip
    assert code == 2 and "no row with rowId 'nope'; rowIds here: airline-" in out
    code, out = run("gate", "x", "--store", tmp_path / "s.sqlite", "-t", "passRate>=90")
    assert code == 2 and "passRate is a share from 0 to 1" in out


def test_output_closed_early_ends_quietly(tmp_path: Path) -> None:
    import subprocess
    import sys

    command = (
        f"{sys.executable} -m rubric_engine.cli score {CASES / 'health_consult_zh.jsonl'} "
        f"-r {RUBRICS / 'health_cs.yaml'} --draft --cassettes {CASSETTES} "
        f"--store {tmp_path / 's.sqlite'} --out {tmp_path / 'o'} --display none | head -1"
    )
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert done.returncode in (0, 141)  # 141: SIGPIPE, as other Unix tools end
    assert (tmp_path / "o" / "report.json").is_file()  # the run's work was kept


def test_gate_on_stability_or_panel_of_a_task_without_says_what_to_do(tmp_path: Path) -> None:
    import re

    code, out = score_demo(tmp_path, tmp_path / "s.sqlite")
    assert code == 0, out
    task = re.search(r"task id: (\S+)", out).group(1)  # type: ignore[union-attr]
    code, out = run(
        "gate", task, "--store", tmp_path / "s.sqlite",
        "-t", "stability.unstableRate<=0.1", "-t", "panel.kappa>=0.6",
    )  # fmt: skip
    said = " ".join(out.split())
    assert code == 7, out
    assert (
        f"stability.unstableRate<=0.1: no value in this task, so it cannot pass (no row of task "
        f"{task} has samples to compare: it was scored without --samples, each row asked once "
        "(docs/stability.md); score it again with --samples K (K >= 2, e.g. --samples 3) to gate "
        "on stability.*)"
    ) in said, out
    assert f"task {task} was judged by one judge (docs/panels.md): score it again with --judge" in (
        said
    ), out


def test_a_store_that_cannot_be_opened_is_named_for_what_it_is(tmp_path: Path) -> None:
    """A path where no store file can be made is not called a broken file; a file that is no
    store is, and the advice names the store options of store migrate too."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a database\n" * 200, encoding="utf-8")
    code, out = run("store", "migrate", "--from", a_file, "--to", tmp_path / "t.sqlite")
    assert code == 3 and "cannot open task store" in out, out
    assert "move the broken file away" in out and "--from/--to" in out
    code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", tmp_path / "s")
    assert code == 0, out
    code, out = run("store", "migrate", "--from", tmp_path / "s", "--to", a_file / "t.sqlite")
    assert code == 3 and "no store file can be made there" in out, out
    assert "broken file" not in out
