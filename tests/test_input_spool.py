"""The run's input rows are parsed once, checked whole, and not held in memory.

``read_inputs`` checks every row of every file before the first judge call (a broken last row
stops the run before anything is judged) and keeps the checked rows in a spool file, read back
one at a time; only rows given in memory stay in a list.
"""

from __future__ import annotations

import datetime
import gc
from pathlib import Path

import pytest

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.engine import ScoreOptions
from rubric_engine.engine.preflight import read_inputs
from rubric_engine.errors import DatasetError
from tests.conftest import CASES
from tests.test_cases import SEED_000_YAML

DATA = Path(__file__).resolve().parent / "data"


def _alive_rows() -> int:
    gc.collect()
    return sum(isinstance(o, DialogueRow) for o in gc.get_objects())


def test_rows_come_back_equal_in_order_from_every_format(tmp_path: Path) -> None:
    """JSONL, JSON (tau2), OTel spans, a YAML case with a date, then rows in memory: the
    stream gives each file's rows as its reader parses them, then the memory rows."""
    yaml_case = tmp_path / "case.yaml"
    yaml_case.write_text(
        SEED_000_YAML
        + "---\nrowId: y-1\nmetadata: {reviewed_on: 2026-01-02}\n"
        + "messages: [{role: user, content: hi}, {role: assistant, content: hello}]\n",
        encoding="utf-8",
    )
    files = [
        CASES / "health_consult_zh.jsonl",
        CASES / "airline_tau2_dev.json",
        DATA / "otel_genai_spans.jsonl",
        yaml_case,
    ]
    memory = [{"rowId": "mem-1", "messages": [{"role": "assistant", "content": "hi"}]}]
    inputs = read_inputs(ScoreOptions(inputs=files, rows=memory))
    expected = [row for f in files for row in DialogueSource(f).read()]
    expected += [DialogueRow.model_validate(memory[0])]
    assert inputs.total == len(expected) and inputs.from_memory == 1
    assert list(inputs.stream()) == expected
    (dated,) = [r for r in inputs.stream() if r.row_id == "y-1"]
    assert dated.metadata["reviewed_on"] == datetime.date(2026, 1, 2)  # a date, not its text


def test_two_readings_of_the_rows_do_not_disturb_each_other() -> None:
    """Batch mode reads the rows once per pass: each reading keeps its own place."""
    inputs = read_inputs(ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"]))
    first, second = inputs.stream(), inputs.stream()
    pairs = [(next(first).row_id, next(second).row_id) for _ in range(3)]
    assert pairs == [(a, a) for a, _ in pairs]
    assert [r.row_id for r in first] == [r.row_id for r in inputs.stream()][3:]


def test_the_checked_rows_are_not_held_in_memory(tmp_path: Path) -> None:
    """After the check no DialogueRow of the file is alive; the stream makes one at a time."""
    lines = (CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines()
    big = tmp_path / "big.jsonl"
    big.write_text(
        "".join(
            line.replace('"rowId": "', f'"rowId": "c{n}-', 1) + "\n"
            for n in range(20)
            for line in lines
        ),
        encoding="utf-8",
    )
    before = _alive_rows()
    inputs = read_inputs(ScoreOptions(inputs=[big]))
    assert inputs.total == 20 * len(lines)
    assert _alive_rows() == before
    seen = 0
    for row in inputs.stream():
        seen += 1
        del row
    assert seen == inputs.total


def test_a_broken_last_row_stops_the_run_before_any_row_is_taken(tmp_path: Path) -> None:
    lines = (CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([*lines, '{"rowId": "x", "messages": 3}']) + "\n", "utf-8")
    with pytest.raises(DatasetError) as raised:
        read_inputs(ScoreOptions(inputs=[broken]))
    assert f"{broken}:{len(lines) + 1}" in str(raised.value.problems[0])
