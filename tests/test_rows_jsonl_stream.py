"""``rows.jsonl`` is read from the store row by row: each line is the stored result with
``outcome`` and ``metadata`` added, the bytes a fresh run's rows give, and a store written
before (results in the canonical sorted form) still gives the same lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.formats.canonical import canonical_json
from rubric_engine.report.stored import load_task, rows_jsonl_line, rows_line
from rubric_engine.store.task_store import TaskStore, result_json
from tests.conftest import CASES, CASSETTES, RUBRICS


@pytest.mark.parametrize(
    ("cases", "pack"),
    [
        ("airline_tau2_dev.json", "airline_cs.yaml"),
        ("health_consult_zh.jsonl", "health_cs.yaml"),
        ("diagnosis/cases/diagnosis-cases.json", None),  # rule checks only: CHECKED rows
    ],
)
def test_rows_jsonl_is_the_stored_result_bytes_plus_outcome_and_metadata(
    tmp_path: Path, cases: str, pack: str | None
) -> None:
    store_path = tmp_path / "store.sqlite"
    result = score(
        ScoreOptions(
            inputs=[CASES / cases],
            rubric=RUBRICS / pack if pack else None,
            judge="llm" if pack else "none",
            draft=True,
            store=store_path,
            out=tmp_path / "out",
            cassettes=CASSETTES,
        )
    )
    written = result.files.rows.read_text(encoding="utf-8").splitlines(keepends=True)
    pass_score = result.report["totals"]["passScore"]
    with TaskStore(store_path) as store:
        task = load_task(store, result.task_id)
        texts = list(store.result_texts(result.task_id))
        # the line as the writer before this change made it, from the validated row
        before = [
            json.dumps(rows_line(r, pass_score), ensure_ascii=False) + "\n" for r in task.rows
        ]
        assert written == before
        for (stored_result, dialogue), row, line in zip(texts, task.rows, written, strict=True):
            assert stored_result == result_json(row.result)
            assert line.startswith(stored_result[:-1] + ", ")
            assert rows_jsonl_line(stored_result, dialogue, pass_score) == line
            # a store from before this change keeps results in the canonical form
            old = canonical_json(row.result.to_json_dict())
            assert old != stored_result
            assert rows_jsonl_line(old, dialogue, pass_score) == line


@pytest.mark.parametrize(
    "fields",
    [
        {"status": "SCORED", "finalScore": 5, "judgeScore": 5},
        {"status": "SCORED", "finalScore": 3, "judgeScore": 4, "cappedBy": ["A", "B"]},
        {"status": "SCORED", "finalScore": 5, "redFlagTypes": ["MEDICAL_OVERREACH"]},
        {"status": "SCORED", "finalScore": None},
        {"status": "JUDGE_ERROR", "error": {"kind": "TRANSPORT", "message": "x"}},
        {"status": "CHECKED", "redFlagTypes": ["X"]},
    ],
)
@pytest.mark.parametrize(
    # a rowId may hold quotes and the very text the line's outcome is read by
    "row_id",
    ["r-1", 'we"ird, "status": "CHECKED", "finalScore": 1, "redFlagTypes": []', "行-1\\"],
)
def test_the_outcome_read_from_the_result_head_is_the_pass_rule(
    fields: dict[str, object], row_id: str
) -> None:
    """rows.jsonl reads status, finalScore and red flags from the head of the stored result
    instead of decoding it: every status, a null score, red flags, and rowIds that quote the
    field names give the line the validated row gives."""
    from rubric_engine.report.rows import RowUsage, row_facts
    from rubric_engine.report.stored import ReportRow
    from rubric_engine.results.model import RowResult

    result = RowResult.model_validate({"rowId": row_id, **fields})
    dialogue = {"rowId": row_id, "messages": [], "metadata": {"b": 1, "a": "é"}}
    row = ReportRow(result, RowUsage(1, 0, 0, None, 0.0), row_facts(dialogue))
    for pass_score in (3, 4):
        line = json.dumps(rows_line(row, pass_score), ensure_ascii=False) + "\n"
        assert rows_jsonl_line(result_json(result), canonical_json(dialogue), pass_score) == line


def test_the_metadata_of_a_line_is_the_rows_own() -> None:
    """rows.jsonl takes the row's top-level ``metadata``: ``metadata`` keys nested in
    tool-call arguments (even followed by the row's last field names), the reference output
    and the trace are not taken for it."""
    from rubric_engine.dialogue.model import DialogueRow
    from rubric_engine.report.rows import RowUsage, row_facts
    from rubric_engine.report.stored import ReportRow
    from rubric_engine.results.model import RowResult

    decoy = {"a": 0, "metadata": {"decoy": 1}, "negativeBehavior": [], "referenceOutput": None}
    decoy |= {"rowId": "q", "trace": None}
    row = DialogueRow.model_validate(
        {
            "rowId": "r-1",
            "messages": [
                {"role": "user", "content": ',"metadata":{"no":1}'},
                {
                    "role": "assistant",
                    "tool_calls": [{"name": "t", "arguments": decoy}],
                },
            ],
            "reference_output": {"a": 0, "metadata": {"decoy": 2}},
            "trace": {"a": 0, "metadata": {"decoy": 3}, "z": [decoy]},
            "metadata": {"real": "是", "a": [1, 2.5, None]},
        }
    )
    dialogue = canonical_json(row.model_dump(mode="json", by_alias=True))
    assert dialogue.count(',"metadata":{') == 5
    bare = canonical_json(row.model_copy(update={"metadata": {}}).model_dump(by_alias=True))
    spaced = json.dumps(row.model_dump(mode="json", by_alias=True), sort_keys=True)
    result = RowResult.model_validate({"rowId": "r-1", "status": "SCORED", "finalScore": 4})
    for text in (dialogue, bare, spaced):
        facts = row_facts(json.loads(text))
        report_row = ReportRow(result, RowUsage(1, 0, 0, None, 0.0), facts)
        line = json.dumps(rows_line(report_row, 4), ensure_ascii=False) + "\n"
        assert rows_jsonl_line(result_json(result), text, 4) == line
        assert json.loads(line)["metadata"] == json.loads(text)["metadata"]
