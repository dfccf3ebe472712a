"""Dialogue input (docs/inputs.md): adapters, and broken rows reported with line numbers first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.errors import DatasetError
from tests.conftest import CASES


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows)
        + "\n",
        encoding="utf-8",
    )
    return path


def test_openai_messages_with_string_tool_arguments(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "chat.jsonl",
        [
            {
                "rowId": "o1",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Where is order 7?"}]},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": '{"order": 7}'},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
                    {"role": "assistant", "content": "It has shipped."},
                ],
                "scenario": "orders",
            }
        ],
    )
    source = DialogueSource(path)
    assert source.validate() == 1
    row = next(iter(source))
    assert row.messages[0].content == "Where is order 7?"
    call = row.messages[1].tool_calls[0]
    assert (call.name, call.arguments_text()) == ("lookup", '{"order": 7}')
    assert row.messages[2].tool_call_id == "c1"
    assert row.metadata == {"scenario": "orders"}


def test_sharegpt_conversations_with_function_calls(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "sg.jsonl",
        [
            {
                "conversations": [
                    {"from": "human", "value": "天气？"},
                    {
                        "from": "function_call",
                        "value": '{"name": "weather", "arguments": {"city": "京"}}',
                    },
                    {"from": "observation", "value": '{"temp": 3}'},
                    {"from": "gpt", "value": "3 度。"},
                ]
            }
        ],
    )
    row = next(iter(DialogueSource(path)))
    assert row.row_id == "sg-1"  # file stem + line when no id is given
    assert [m.role for m in row.messages] == ["user", "assistant", "tool", "assistant"]
    assert row.messages[1].tool_calls[0].name == "weather"


def test_tau2_simulations_use_each_simulations_own_criteria() -> None:
    source = DialogueSource(CASES / "airline_tau2_dev.json")
    assert source.validate() == 25
    rows = {r.row_id: r for r in source}
    first = rows["airline-0"]
    # the published file labels this HAT039-delay conversation with task 0 (a cancellation);
    # its own reward_info holds the assertions it was graded on
    assert first.expected_behavior[0].startswith("Agent confirms that flight HAT039")
    assert first.metadata["taskListDisagrees"] is True
    assert first.metadata["reward"] == 0.0
    wrapped = [
        m
        for r in rows.values()
        for m in r.messages
        if m.role == "assistant" and m.content and m.content.lstrip().startswith('{"message"')
    ]
    assert wrapped == []  # {"message": ...} wrappers are unwrapped


def test_malformed_rows_reported_with_lines_before_any_judge_call(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {
                "rowId": "ok",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello"},
                ],
            },
            "{not json",
            {"rowId": "x", "messages": [{"role": "user", "content": "only the user"}]},
            {
                "rowId": "y",
                "messages": [
                    {"role": "robot", "content": "?"},
                    {"role": "assistant", "content": "!"},
                ],
            },
            {"rowId": "ok", "messages": [{"role": "assistant", "content": "dup"}]},
            {"rowId": "z"},
        ],
    )
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    where = {p.where.rsplit(":", 1)[-1]: p for p in info.value.problems}
    assert set(where) == {"2", "3", "4", "5", "6"}
    assert "not valid JSON" in where["2"].message
    assert "no assistant turn" in where["3"].message
    assert where["4"].field == "messages[0].role"
    assert where["4"].message == "unknown role 'robot'; valid: system, user, assistant, tool"
    assert "duplicate rowId 'ok'" in where["5"].message
    assert "missing" in where["6"].message
    assert "nothing was scored" in str(info.value)


@pytest.mark.parametrize(
    ("row", "field", "why"),
    [
        ({"messages": "hello"}, "messages", "must be a list of turns, not str"),
        (
            {"rowId": {"a": 1}, "messages": [{"role": "assistant", "content": "x"}]},
            "rowId",
            'string or a whole number (e.g. "row-17" or 17), not an object',
        ),
        (
            {"messages": [{"role": "assistant", "content": "x"}], "metadata": [1]},
            "metadata",
            "mapping",
        ),
        (
            {"messages": [{"role": "assistant", "content": "x"}], "expectedBehavior": "be nice"},
            "expectedBehavior",
            "list of strings",
        ),
        (
            {"messages": [{"role": "assistant", "content": "x" * 400_001}]},
            "messages",
            "longer than any judge context holds",
        ),
    ],
)
def test_wrong_field_shapes_are_named(
    tmp_path: Path, row: dict[str, object], field: str, why: str
) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", [row])
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    (problem,) = info.value.problems
    assert problem.field == field and why in problem.message


def test_json_array_and_wrong_top_level(tmp_path: Path) -> None:
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"id": 1, "messages": [{"role": "assistant", "content": "a"}]}]))
    assert next(iter(DialogueSource(rows))).row_id == "1"
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"hello": 1}')
    with pytest.raises(DatasetError, match="array of rows or a tau2-bench results file"):
        DialogueSource(wrong).validate()


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DatasetError, match="no rows found"):
        DialogueSource(empty).validate()
    with pytest.raises(DatasetError, match="not found"):
        DialogueSource(tmp_path / "missing.jsonl").validate()


def test_demo_health_cases_are_real_questions() -> None:
    source = DialogueSource(CASES / "health_consult_zh.jsonl")
    assert source.validate() >= 20
    for row in source:
        assert row.metadata["source"].startswith("medicalgpt-zh")
        assert row.messages[0].role == "user"


def test_taubench_v1_trajectories_drop_the_policy_system_message(tmp_path: Path) -> None:
    path = tmp_path / "airline_trajectories.json"
    path.write_text(
        json.dumps(
            [
                {
                    "task_id": 3,
                    "trial": 1,
                    "reward": 1.0,
                    "info": {
                        "task": {
                            "user_id": "u1",
                            "actions": [
                                {"name": "cancel_reservation", "kwargs": {"reservation_id": "R1"}}
                            ],
                            "outputs": [],
                        }
                    },
                    "traj": [
                        {"role": "system", "content": "# Airline Agent Policy ..."},
                        {"role": "user", "content": "cancel R1"},
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "c",
                                    "type": "function",
                                    "function": {
                                        "name": "cancel_reservation",
                                        "arguments": '{"reservation_id": "R1"}',
                                    },
                                }
                            ],
                        },
                        {
                            "role": "tool",
                            "tool_call_id": "c",
                            "name": "cancel_reservation",
                            "content": "ok",
                        },
                        {"role": "assistant", "content": "Cancelled."},
                    ],
                }
            ]
        )
    )
    row = next(iter(DialogueSource(path)))
    assert row.row_id == "airline-3-t1"
    assert [m.role for m in row.messages] == ["user", "assistant", "tool", "assistant"]
    assert row.reference_output["expectedActions"][0]["name"] == "cancel_reservation"
    assert row.metadata["reward"] == 1.0


def test_taubench_v1_real_trajectories() -> None:
    # the first two elements of tau-bench's historical_trajectories/gpt-4o-airline.json (MIT)
    source = DialogueSource(Path(__file__).parent / "data" / "airline_trajectories_taubench_2.json")
    assert source.validate() == 2
    rows = list(source)
    assert [r.row_id for r in rows] == ["airline-0-t0", "airline-0-t1"]
    assert all(m.role != "system" for r in rows for m in r.messages)
    calls = [c for m in rows[0].messages for c in m.tool_calls]
    assert calls and isinstance(calls[0].arguments, str)  # v1 keeps arguments as JSON strings


def test_flattened_transcript(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "flat.jsonl",
        [
            {
                "messages_display": "user: my gift card balance?\nassistant: None\n"
                'tool: {"balance": 10}\nassistant: It is $10.\nIt never expires.'
            }
        ],
    )
    row = next(iter(DialogueSource(path)))
    assert [m.role for m in row.messages] == ["user", "assistant", "tool", "assistant"]
    assert row.messages[1].tool_calls[0].name == "(unrecorded tool call)"
    assert row.messages[3].content == "It is $10.\nIt never expires."


def test_csv_with_quoted_multiline_fields(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(
        "rowId,question,answer,scenario\n"
        'c1,"头疼三天了,\n怎么办？","请问还有别的症状吗？",triage\n'
        "c2,hi,,x\n",
        encoding="utf-8",
    )
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    assert [p.where for p in info.value.problems] == [f"{path}:4"]
    path.write_text(
        "rowId,question,answer,scenario\n"
        'c1,"头疼三天了,\n怎么办？","请问还有别的症状吗？",triage\n',
        encoding="utf-8",
    )
    row = next(iter(DialogueSource(path)))
    assert row.messages[0].content == "头疼三天了,\n怎么办？"
    assert row.metadata == {"scenario": "triage"}


def test_non_utf8_and_folder_inputs(tmp_path: Path) -> None:
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(
        '{"messages": [{"role": "assistant", "content": "caf\xe9"}]}\n'.encode("latin-1")
    )
    with pytest.raises(DatasetError, match=r"not UTF-8 text .* save the file as UTF-8"):
        DialogueSource(latin).validate()
    with pytest.raises(DatasetError, match="a folder, not a file"):
        DialogueSource(tmp_path).validate()


def test_csv_rows_may_carry_rule_checks_and_a_trace_as_json_columns(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text(
        "rowId,user,assistant,expected,trace\n"
        'c1,退款多久到账？,"退款将在７个工作日内到账。","[{""type"": ""must_contain"", '
        '""keywords"": [""7个工作日""]}]","{""totalDurationMs"": 1200}"\n'
        "c2,hi,hello,,\n",
        encoding="utf-8",
    )
    rows = list(DialogueSource(path))
    assert [c.type for c in rows[0].expected] == ["must_contain"]
    assert rows[0].trace == {"totalDurationMs": 1200}
    assert rows[1].expected == () and rows[1].trace is None


def test_csv_rows_with_too_few_or_too_many_fields_say_so(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text('rowId,question,answer\nr0,hi\nr1,"a, b",ok,extra\nr2,q,a\n', "utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    text = str(info.value)
    assert f"{path}:2: the row has fewer fields than the header (no value for answer)" in text
    assert f"{path}:3: the row has more fields than the header" in text


def test_a_broken_json_array_gets_the_json_hint_not_the_jsonl_one(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text('[{"rowId": "a", "messages": [\n', "utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    assert "must be one JSON array of rows" in str(info.value)
    assert "each line must be one JSON object" not in str(info.value)


def test_row_ids_are_trimmed_and_blank_ones_get_the_line_id(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path.write_text(
        "\n".join(json.dumps({"rowId": rid, "messages": turns}) for rid in ("  r1  ", "  ", 7))
        + "\n",
        "utf-8",
    )
    source = DialogueSource(path)
    source.validate()
    assert [row.row_id for row in source] == ["r1", "rows-2", "7"]


def test_csv_row_with_an_empty_answer_says_so(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("rowId,question,answer\nr1,hello,\n", "utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    assert f"{path}:2: answer: the `answer` column is empty on this row" in str(info.value)
