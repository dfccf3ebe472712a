"""Provider settings: ``--judge-param`` reaches the provider (sampling options also the task and
the cassette key, transport options only the call), the key check applies to a hosted
``--api-base`` but not to a local server, and ``--display plain`` prints progress lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.cli.progress import PlainProgress
from rubric_engine.engine import score
from rubric_engine.engine.options import parse_judge_params
from rubric_engine.engine.preflight import is_local
from rubric_engine.errors import ConfigurationError
from rubric_engine.testing.openai_stub import StubServer, scripted_responder
from tests.conftest import CASES, CASSETTES
from tests.test_live import SCRIPT, options

runner = CliRunner()


@pytest.mark.live
def test_judge_params_reach_the_provider_and_only_sampling_ones_are_stored(
    tmp_path: Path,
) -> None:
    params = parse_judge_params(["seed=7", "api_version=2024-10-21",
                                 'extra_headers={"X-Team": "qa"}'])  # fmt: skip
    assert params == {"seed": 7, "api_version": "2024-10-21", "extra_headers": {"X-Team": "qa"}}
    with StubServer(scripted_responder(SCRIPT)) as server:
        result = score(options(tmp_path, server, judge_params=params, mode="record"))
    assert {r["body"].get("seed") for r in server.requests} == {7}
    assert {r["headers"].get("x-team") for r in server.requests} == {"qa"}
    assert result.report["task"]["judgeParams"]["seed"] == 7
    assert "api_version" not in result.report["task"]["judgeParams"]
    assert "extra_headers" not in json.dumps(result.report["task"])
    cassette = next((tmp_path / "cassettes").rglob("*.jsonl")).read_text("utf-8")
    assert "X-Team" not in cassette and "2024-10-21" not in cassette
    # the seed is part of the cassette key: a replay with it hits, with another seed misses
    again = score(options(tmp_path, None, judge_params={"seed": 7}, out=tmp_path / "r1"))
    assert again.cassette_misses == []
    other = score(options(tmp_path, None, judge_params={"seed": 8}, out=tmp_path / "r2"))
    assert len(other.cassette_misses) == 4


def test_judge_params_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not KEY=VALUE"):
        parse_judge_params(["seed"])
    with pytest.raises(ConfigurationError, match=r"temperature \(set by --temperature\)"):
        score(options(tmp_path, None, judge_params={"temperature": 1}))
    result = runner.invoke(app, ["score", str(CASES / "health_consult_zh.jsonl"), "-r", "x",
                                 "--judge-param", "api_key=sk-1"])  # fmt: skip
    assert result.exit_code == 2 and "--api-key-env" in result.output


def test_a_hosted_api_base_needs_its_key_a_local_one_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match=r"at https://api\.together\.xyz/v1 needs OPENAI"):
        score(options(tmp_path, None, mode="live", api_base="https://api.together.xyz/v1"))
    with pytest.raises(ConfigurationError, match="AZURE_API_KEY"):
        score(options(tmp_path, None, mode="live", model="azure/gpt-4o",
                      api_base="https://team.openai.azure.com"))  # fmt: skip
    assert not (tmp_path / "store.sqlite").exists()  # refused before anything was stored
    assert is_local("http://127.0.0.1:8000/v1") and is_local("http://localhost:11434/v1")
    assert is_local("http://192.168.1.20/v1") and is_local("http://gpu-box.local/v1")
    assert not is_local("https://api.openai.com/v1") and not is_local("https://8.8.8.8/v1")


def test_plain_progress_prints_a_line_per_n_rows_or_per_interval() -> None:
    lines: list[str] = []
    now = [0.0]
    progress = PlainProgress(lines.append, interval_s=5.0, every=3, clock=lambda: now[0])
    progress.start("t1", 7)
    for i in range(7):
        now[0] += 1.0 if i != 4 else 10.0  # the fifth row takes 10 s
        progress.row(judge_error=i == 1)
    assert lines[0] == "task t1: scoring 7 row(s)"
    assert [line.split(": ")[1].split(" rows")[0] for line in lines[1:]] == ["3/7", "5/7", "6/7",
                                                                             "7/7"]  # fmt: skip
    assert lines[1] == "task t1: 3/7 rows (43%), 1.0 rows/s, 1 JUDGE_ERROR, ETA 4 s"
    assert lines[-1].endswith("1 JUDGE_ERROR, done")


def test_display_plain_is_the_default_off_a_terminal(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    pack = Path(__file__).parents[1] / "rubrics" / "health_cs.yaml"
    args = [
        *("score", str(CASES / "health_consult_zh.jsonl"), "-r", str(pack), "--draft"),
        *("--store", str(store), "--cassettes", str(CASSETTES), "--out", str(tmp_path / "o")),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "26/26 rows (100%)" in result.output and "0 JUDGE_ERROR, done" in result.output
    result = runner.invoke(app, [*args, "--display", "none"])
    assert result.exit_code == 0 and "26/26 rows" not in result.output
    result = runner.invoke(app, [*args, "--display", "fancy"])
    assert result.exit_code == 2 and "rich, plain, none" in result.output
