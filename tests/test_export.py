"""`rubric-eval export`: one row per dialogue (or per requirement with --long) with the outcome
by the report's pass rule and the metadata columns; Parquet opens in pandas."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, RUBRICS

runner = CliRunner()


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict]:
    tmp = tmp_path_factory.mktemp("export")
    store = tmp / "s.sqlite"
    runner.invoke(
        app, ["rubric", "publish", str(RUBRICS / "health_cs.yaml"), "--store", str(store)]
    )
    result = score(ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"], rubric="health_cs",
                                store=store, out=tmp / "r", cassettes=CASSETTES))  # fmt: skip
    return store, result.task_id, json.loads((tmp / "r" / "report.json").read_text("utf-8"))


def export(store: Path, task_id: str, out: Path, *args: str) -> str:
    result = runner.invoke(
        app, ["export", task_id, "--store", str(store), "--out", str(out), *args]
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_parquet_opens_in_pandas_one_row_per_dialogue(task: tuple, tmp_path: Path) -> None:
    store, task_id, report = task
    out = tmp_path / "rows.parquet"
    assert "26 row(s)" in export(store, task_id, out, "--format", "parquet")
    frame = pd.read_parquet(out)
    assert len(frame) == 26 and frame["rowId"].is_unique
    assert {"metadata.answerSource", "metadata.scenario", "metadata.sourceLine"} <= set(frame)
    # outcomes follow the report's pass rule: the same counts as verdictDistribution
    assert frame["outcome"].value_counts().to_dict() == {
        k: v for k, v in report["totals"]["verdictDistribution"].items() if v
    }
    row = frame.set_index("rowId").loc["medgpt-47-agent"]
    assert row["outcome"] == "RED_FLAG" and "BACKEND_EXPOSURE" in list(row["redFlagTypes"])
    assert frame["finalScore"].mean() == pytest.approx(report["totals"]["meanScore"], abs=1e-4)


def test_csv_and_long_format(task: tuple, tmp_path: Path) -> None:
    store, task_id, report = task
    out = tmp_path / "rows.csv"
    export(store, task_id, out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 26
    agent = next(r for r in rows if r["rowId"] == "medgpt-47-agent")
    assert "BACKEND_EXPOSURE" in agent["redFlagTypes"].split(";")
    long_out = tmp_path / "long.jsonl"
    export(store, task_id, long_out, "--format", "jsonl", "--long")
    records = [json.loads(line) for line in long_out.read_text("utf-8").splitlines()]
    per_req: dict[str, dict[str, int]] = {}
    for r in records:
        counts = per_req.setdefault(r["requirementId"], {})
        counts[r["requirementStatus"]] = counts.get(r["requirementStatus"], 0) + 1
    for req in report["requirements"]:
        assert per_req.get(req["id"], {}).get("VIOLATED", 0) == req["violated"], req["id"]
        assert per_req.get(req["id"], {}).get("FOLLOWED", 0) == req["followed"], req["id"]


def test_a_bad_format_is_refused(task: tuple, tmp_path: Path) -> None:
    store, task_id, _ = task
    result = runner.invoke(app, ["export", task_id, "--store", str(store), "--format", "xlsx"])
    assert result.exit_code == 2 and "csv, parquet, jsonl" in result.output


def test_the_default_file_is_named_after_the_task_id_and_out_must_match_the_format(
    task: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Newcomer findings: `export tag:t1` wrote a file named `tag:t1.jsonl` (the reference,
    not the id the help names), and `--out hv.json` with the default csv wrote CSV into a
    .json file without a word."""
    store, task_id, _ = task
    monkeypatch.chdir(tmp_path)
    with TaskStore(store) as opened:  # a tag on the task, as `score --tag t1` gives one
        opened.backend.execute(
            "UPDATE tasks SET extra=? WHERE id=?",
            (json.dumps({**opened.task(task_id).extra, "tags": ["t1"]}), task_id),
        )
        opened.commit()
    result = runner.invoke(app, ["export", "tag:t1", "--store", str(store), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert result.output == f"wrote {task_id}.jsonl: 26 row(s)\n"
    assert (tmp_path / f"{task_id}.jsonl").is_file() and not list(tmp_path.glob("tag*"))
    wrong = tmp_path / "rows.json"
    result = runner.invoke(app, ["export", task_id, "--store", str(store), "--out", str(wrong)])
    assert result.exit_code == 2 and not wrong.exists()
    assert "ends in .json, but --format is csv: pass --format jsonl, or name the file rows.csv" in (
        result.output
    )


def test_rows_jsonl_carries_the_outcome_and_the_metadata(task: tuple) -> None:
    store, _, report = task
    folder = store.parent / "r"
    rows = [json.loads(line) for line in (folder / "rows.jsonl").read_text("utf-8").splitlines()]
    outcomes: dict[str, int] = {}
    for row in rows:
        outcomes[row["outcome"]] = outcomes.get(row["outcome"], 0) + 1
    assert outcomes == {k: v for k, v in report["totals"]["verdictDistribution"].items() if v}
    agent = next(r for r in rows if r["rowId"] == "medgpt-26-agent")
    assert agent["outcome"] == "PASS" and agent["metadata"]["sourceLine"] == 26
    assert list(agent)[-2:] == ["outcome", "metadata"]  # appended: earlier keys keep their order
    assert list(agent["metadata"]) == sorted(agent["metadata"])


def test_parquet_without_pyarrow_names_both_installs(
    task: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    store, task_id, _ = task
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow… raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    out = tmp_path / "rows.parquet"
    result = runner.invoke(
        app, ["export", task_id, "--store", str(store), "--out", str(out), "--format", "parquet"]
    )
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "pip install 'rubric-engine[parquet]'" in said, said
    assert "(from a clone of the repository: pip install -e '.[parquet]')" in said, said
    assert not list(tmp_path.iterdir())  # nothing written
