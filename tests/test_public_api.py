"""The library API: typed top-level names, ``score_async`` inside a running
event loop, and rows passed in memory."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rubric_engine
from rubric_engine import DialogueRow, ScoreOptions, ScoreResult, score, score_async
from rubric_engine.errors import ConfigurationError, DatasetError
from tests.conftest import CASES, CASSETTES, RUBRICS

HEALTH = CASES / "health_consult_zh.jsonl"


def _options(tmp_path: Path, name: str, **changes: Any) -> ScoreOptions:
    base: dict[str, Any] = {
        "inputs": [HEALTH],
        "rubric": RUBRICS / "health_cs.yaml",
        "draft": True,
        "store": tmp_path / "s.sqlite",
        "out": tmp_path / name,
        "cassettes": CASSETTES,
    }
    return ScoreOptions(**(base | changes))


def _rows(result: ScoreResult) -> list[str]:
    return result.files.rows.read_text(encoding="utf-8").splitlines()


def test_every_public_name_resolves_and_all_lists_exactly_them() -> None:
    assert set(rubric_engine.__all__) == {"DEFAULT_STORE", "__version__", *rubric_engine._API}
    for name in rubric_engine.__all__:
        assert getattr(rubric_engine, name) is not None


def test_score_async_runs_inside_a_running_event_loop(tmp_path: Path) -> None:
    # a notebook cell or an async app: the loop is already running when scoring starts
    async def app() -> ScoreResult:
        asyncio.get_running_loop()  # really inside a loop
        return await score_async(_options(tmp_path, "async"))

    inside = asyncio.run(app())
    outside = score(_options(tmp_path, "sync"))
    assert inside.report["totals"]["rows"] == 26 and inside.report["totals"]["judgeErrors"] == 0
    assert _rows(inside) == _rows(outside)


def test_score_inside_a_running_loop_says_to_use_score_async(tmp_path: Path) -> None:
    async def app() -> None:
        score(_options(tmp_path, "x"))

    with pytest.raises(ConfigurationError, match=r"await score_async\(options\)"):
        asyncio.run(app())
    assert not (tmp_path / "s.sqlite").exists()  # refused before anything was created


def test_rows_in_memory_score_exactly_like_the_file(tmp_path: Path) -> None:
    lines = HEALTH.read_text(encoding="utf-8").splitlines()
    objects = [json.loads(line) for line in lines if line.strip()]
    from_file = score(_options(tmp_path, "file"))
    as_dicts = score(_options(tmp_path, "dicts", inputs=(), rows=objects))
    as_rows = score(
        _options(tmp_path, "rows", inputs=(), rows=[DialogueRow.model_validate(o) for o in objects])
    )
    assert _rows(as_dicts) == _rows(from_file) == _rows(as_rows)
    assert as_dicts.report["totals"] == from_file.report["totals"]


def test_a_task_scored_from_memory_is_not_resumed_and_says_why(tmp_path: Path) -> None:
    objects = [json.loads(x) for x in HEALTH.read_text(encoding="utf-8").splitlines()[:2]]
    done = score(_options(tmp_path, "m", inputs=(), rows=objects, max_calls=1))
    assert done.stopped is not None
    resume = ScoreOptions(resume=done.task_id, store=tmp_path / "s.sqlite")
    with pytest.raises(ConfigurationError, match="rows given in memory"):
        score(resume)


def test_a_bad_row_in_memory_is_named_by_its_index(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [
        {"rowId": "ok", "messages": [{"role": "assistant", "content": "hi"}]},
        {"rowId": "bad", "messages": "not a list"},
    ]
    with pytest.raises(DatasetError) as caught:
        score(_options(tmp_path, "bad", inputs=(), rows=rows))
    assert any(p.where == "rows[1]" for p in caught.value.problems)


def _mypy_strict(tmp_path: Path, sources: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` over user scripts, in one run (each run reads the package and pydantic
    afresh: about a minute of the suite's CPU apiece)."""
    # outside the repository, as a user's script sees the installed package
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    files = [f"{name}.py" for name in sources]
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_user_script_type_checks_under_mypy_strict_with_real_types(tmp_path: Path) -> None:
    checked = _mypy_strict(
        tmp_path,
        {
            "good": "import asyncio\n"
            "from rubric_engine import ScoreOptions, ScoreResult, score, score_async\n\n"
            "async def run(options: ScoreOptions) -> str:\n"
            "    result: ScoreResult = await score_async(options)\n"
            "    return result.task_id\n\n"
            "def run_sync(options: ScoreOptions) -> str | None:\n"
            "    return score(options).stopped\n\n"
            "print(asyncio.run(run(ScoreOptions(rows=[{'messages': []}], judge='none'))))\n",
            "reading": "from pathlib import Path\n"
            "from rubric_engine import EvalRubric, Report, load_rubric, read_report, run_gate\n\n"
            "def mean(task: str) -> float | None:\n"
            "    report: Report = read_report(task, Path('s.sqlite'), by=['intent'])\n"
            "    return report.totals.mean_score\n\n"
            "def passed(task: str) -> bool:\n"
            "    return run_gate(Path('s.sqlite'), task, ['passRate>=0.9']).passed\n\n"
            "pack: EvalRubric = load_rubric(Path('p.yaml'))\n",
            # were the names Any, a wrong use would pass as well: it must not
            "bad": "from rubric_engine import score, score_async\n"
            "wrong: int = score\n"
            "also_wrong: str = score_async\n",
        },
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert [e.split(":")[0] for e in errors] == ["bad.py", "bad.py"], checked.stdout
    assert all("Incompatible types in assignment" in e for e in errors), checked.stdout
