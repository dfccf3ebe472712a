"""Task names and tags: `score --name … --tag …`, then the name or
``tag:TAG`` is taken wherever a task id is (report, diff, gate, calibrate, labels export)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.errors import ConfigurationError, TaskNotFoundError
from rubric_engine.store.task_ref import check_name_and_tags, resolve_task
from tests.serve_helpers import WORSE, publish, score_demo

runner = CliRunner()


def cli(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    tmp = tmp_path_factory.mktemp("names")
    store = tmp / "s.sqlite"
    publish(store, "health_cs.yaml")
    code, out = cli(
        "score",
        ROOT_CASES / "health_consult_zh.jsonl",
        "-r",
        "health_cs",
        "--store",
        store,
        "--out",
        tmp / "base",
        "--name",
        "health-base",
        "--tag",
        "accepted",
        "--tag",
        "v1",
        "--display",
        "none",
    )
    assert code == 0, out
    base = out.rsplit("task id: ", 1)[1].split()[0]
    worse = score_demo(
        store,
        "health_consult_zh.jsonl",
        "health_cs",
        tmp / "worse",
        cassettes=WORSE,
        name="health-nightly",
        tags=("nightly",),
    )
    return store, base, worse


from tests.conftest import CASES as ROOT_CASES  # noqa: E402


def test_report_diff_and_gate_take_names_and_tags(named: tuple[Path, str, str]) -> None:
    store, base, worse = named
    by_id = cli("report", base, "--format", "json", "--store", store)
    by_name = cli("report", "health-base", "--format", "json", "--store", store)
    by_tag = cli("report", "tag:accepted", "--format", "json", "--store", store)
    assert by_id[0] == 0 and by_id == by_name == by_tag
    assert json.loads(by_name[1])["task"]["id"] == base
    code, out = cli("diff", "tag:accepted", "health-nightly", "--store", store, "--format", "json")
    assert code == 0, out
    diff = json.loads(out)
    assert (diff["baselineTaskId"], diff["currentTaskId"]) == (base, worse)
    code, out = cli(
        "gate", "health-nightly", "--baseline", "health-base", "--no-regression", "--store", store
    )
    assert code == 7, out  # the worse run regresses against the accepted one


def test_an_unknown_name_lists_the_known_names_and_tags(named: tuple[Path, str, str]) -> None:
    store = named[0]
    code, out = cli("report", "health-bsae", "--store", store)
    assert code == 2
    assert "health-base" in out and "tag:nightly" in out


def test_the_newest_task_of_a_name_wins() -> None:
    tasks = [
        SimpleNamespace(
            id="a", created_at="2026-01-01T00:00:00Z", extra={"name": "n", "tags": ["t"]}
        ),
        SimpleNamespace(id="b", created_at="2026-01-02T00:00:00Z", extra={"name": "n"}),
        SimpleNamespace(id="c", created_at="2026-01-03T00:00:00Z", extra={"tags": ["t"]}),
    ]
    assert resolve_task(tasks, "n") == "b"
    assert resolve_task(tasks, "tag:t") == "c"
    assert resolve_task(tasks, "a") == "a"
    with pytest.raises(TaskNotFoundError, match=r"task 'm' not found .*names: n; tags: tag:t"):
        resolve_task(tasks, "m")


@pytest.mark.parametrize("bad", ["", " lead", "tag:x", "a" * 81, "semi;colon"])
def test_bad_names_are_refused_with_the_rule(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="1-80 letters"):
        check_name_and_tags(bad, ())
    with pytest.raises(ConfigurationError, match="--tag"):
        check_name_and_tags(None, ("ok", bad))
    assert check_name_and_tags("ok", ("x", "x", "y")) == {"name": "ok", "tags": ["x", "y"]}


def test_calibrate_and_labels_export_take_a_name(named: tuple[Path, str, str]) -> None:
    store, base, _ = named
    code, out = cli("labels", "export", "health-base", "--store", store)
    assert code == 0, out
    # no labels yet: the message names the task the name resolved to (not "not found")
    code, out = cli("calibrate", "tag:v1", "--store", store)
    assert code == 2 and f"no label for the rows of task {base}" in out


def test_score_resume_takes_a_name_or_tag(tmp_path: Path) -> None:
    from tests.conftest import CASSETTES, RUBRICS

    store = tmp_path / "s.sqlite"
    code, out = cli(
        "score", ROOT_CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml",
        "--draft", "--cassettes", CASSETTES, "--store", store, "--out", tmp_path / "o",
        "--name", "halfway", "--tag", "t1", "--max-calls", "3", "--display", "none",
    )  # fmt: skip
    assert code == 6 and "3 of 26 row(s) have a result" in out, out
    task = out.rsplit("task id: ", 1)[1].split()[0]
    code, out = cli("score", "--resume", "halfway", "--store", store, "--display", "none")
    assert code == 0 and f"task id: {task}" in out, out
    report = json.loads((tmp_path / "o" / "report.json").read_text("utf-8"))
    assert report["task"]["id"] == task and report["totals"]["scored"] == 26
    code, out = cli("score", "--resume", "tag:t1", "--store", store, "--display", "none")
    assert code == 0 and f"task {task} was already complete" in " ".join(out.split()), out
    code, out = cli("score", "--resume", "halfwya", "--store", store, "--display", "none")
    assert code == 2 and "names: halfway; tags: tag:t1" in out, out
