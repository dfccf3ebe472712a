"""Labels: append-only storage, whole-file validation, supersede on edit, JSONL/CSV round trip
(docs/calibration.md)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.errors import InputError, StoreError
from rubric_engine.formats.csv_cells import FORMULA_STARTS, plain_cell, text_cell
from rubric_engine.labels.io import read_label_file, render_labels
from rubric_engine.labels.model import Label, LabelStatus
from rubric_engine.labels.store import append_labels, read_labels
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, RUBRICS

runner = CliRunner()


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def label(**fields: object) -> Label:
    base: dict[str, object] = {
        "rowId": "r1",
        "requirementId": "A",
        "status": "VIOLATED",
        "reviewer": "ann",
        "time": "2026-01-01T00:00:00Z",
    }
    return Label.model_validate({**base, **fields})


def test_the_database_refuses_to_update_or_delete_a_label(tmp_path: Path) -> None:
    """Guards 'nothing is updated or deleted': the triggers, not only our code, refuse it."""
    with TaskStore(tmp_path / "s.sqlite") as store:
        append_labels(store.backend, [label()])
        db = store.connection
        for statement in ("UPDATE labels SET status='FOLLOWED'", "DELETE FROM labels"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                db.execute(statement)
            db.rollback()
        assert [lab.status for lab in read_labels(store.backend)] == [LabelStatus.VIOLATED]


def test_an_edit_is_a_new_label_that_supersedes_the_old_one(tmp_path: Path) -> None:
    with TaskStore(tmp_path / "s.sqlite") as store:
        db = store.backend
        first = append_labels(db, [label()]).added[0]
        again = append_labels(db, [label()])  # same judgment: nothing new
        assert again.added == () and again.unchanged == 1
        edit = append_labels(db, [label(status="FOLLOWED", time="2026-01-02T00:00:00Z")]).added[0]
        assert edit.supersedes == first.label_id
        assert [lab.label_id for lab in read_labels(db)] == [edit.label_id]
        history = read_labels(db, include_superseded=True)
        assert [lab.label_id for lab in history] == [first.label_id, edit.label_id]


def test_no_red_flags_stated_is_kept_apart_from_not_stated(tmp_path: Path) -> None:
    """``"redFlagTypes": []`` says the row has none (a judge's red flag there is a false
    one); an absent field says nothing. Stored, read back, exported as JSONL or CSV and imported
    again, the empty list stays a list, and importing it again is a no-op."""
    with TaskStore(tmp_path / "s.sqlite") as store:
        db = store.backend
        none = label(requirementId=None, status=None, redFlagTypes=[], reviewer="bob")
        silent = label(requirementId=None, status=None, score=3, reviewer="cy")
        append_labels(db, [none, silent])
        again = append_labels(db, [none, silent])
        assert again.added == () and again.unchanged == 2
        by_reviewer = {lab.reviewer: lab for lab in read_labels(db)}
        assert by_reviewer["bob"].red_flag_types == ()
        assert by_reviewer["cy"].red_flag_types is None
        for fmt in ("jsonl", "csv"):
            path = tmp_path / f"back.{fmt}"
            path.write_text(render_labels(list(by_reviewer.values()), fmt), encoding="utf-8")
            back = {lab.reviewer: lab for lab in read_label_file(path)}
            assert back["bob"].red_flag_types == () and back["cy"].red_flag_types is None, fmt


def test_a_file_with_problems_reports_all_of_them_and_stores_nothing(tmp_path: Path) -> None:
    bad = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"rowId": "r1", "requirementId": "A", "status": "VIOLATED", "reviewer": "ann"},
            {"rowId": "r1", "requirementId": "B", "status": "BROKEN", "reviewer": "ann"},
            {"rowId": "r2", "requirementId": "A", "reviewer": "ann"},
            {"rowId": "r1", "requirementId": "A", "status": "FOLLOWED", "reviewer": "ann"},
            {
                "rowId": "r3",
                "requirementId": "A",
                "status": "FOLLOWED",
                "reviewer": "ann",
                "time": "yesterday",
            },
        ],
    )
    store = tmp_path / "s.sqlite"
    code, out = run("labels", "import", bad, "--store", store)
    assert code == 2
    assert "bad.jsonl:2: status" in out and "FOLLOWED" in out  # the valid statuses are listed
    assert "bad.jsonl:3" in out and "requirementId and status go together" in out
    assert "bad.jsonl:4: requirementId" in out and "line 1" in out
    assert "bad.jsonl:5: time" in out  # UTC ISO 8601 with Z, e.g. 2026-01-01T00:00:00Z
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []


def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path: Path) -> None:
    # csv.DictReader kept the second `status` (FOLLOWED) over the first (VIOLATED), exit 0
    bad = tmp_path / "twice.csv"
    bad.write_text(
        "rowId,requirementId,status,reviewer,status\nr1,A,VIOLATED,ann,FOLLOWED\n", "utf-8"
    )
    store = tmp_path / "s.sqlite"
    code, out = run("labels", "import", bad, "--store", store)
    assert code == 2 and "twice.csv:1: the header names column 'status' twice" in out, out
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []


def test_a_misspelt_field_is_named_beside_the_problem_it_causes(tmp_path: Path) -> None:
    """An unknown key is kept as the file's own field, so ``reviwer`` reads as a missing
    reviewer: the problem names the look-alike the line has."""
    bad = write_jsonl(
        tmp_path / "typo.jsonl",
        [
            {"rowId": "r1", "requirementId": "A", "stauts": "VIOLATED", "reviewer": "ann"},
            {"rowId": "r1", "requirementId": "A", "status": "VIOLATED", "reviwer": "ann"},
            {"rowId": "r2", "requirementId": "A", "status": "VIOLATED", "reviewer": "ann",
             "comment": "kept as the file's own field"},
        ],
    )  # fmt: skip
    code, out = run("labels", "import", bad, "--store", tmp_path / "s.sqlite")
    assert code == 2, out
    assert "typo.jsonl:1: requirementId and status go together" in out, out
    assert "the line has 'stauts': did you mean 'status'?" in out, out
    assert "typo.jsonl:2: reviewer: Field required (the line has 'reviwer': did you mean " in out
    assert "typo.jsonl:3" not in out and "comment" not in out, out


@pytest.mark.parametrize("command", ["import", "calibrate"])
def test_a_missing_label_file_or_a_folder_is_named_with_the_files_to_pass(
    tmp_path: Path, command: str
) -> None:
    """``labels import FOLDER`` said "cannot read the label file ([Errno 21] Is a directory:
    ...)"; a missing file "[Errno 2] No such file or directory". Each now says what it is
    and what to pass, as ``score`` does for its input files."""
    store, task = score_airline(tmp_path)
    for path, says in ((tmp_path, "is a folder, not a label file"), (tmp_path / "no.jsonl",
                        "label file not found")):  # fmt: skip
        args = ("labels", "import", path, "--task", task) if command == "import" else (
            "calibrate", task, "--labels", path)  # fmt: skip
        code, out = run(*args, "--store", store)
        assert code == 2, out
        assert f"{path}: {says}; pass a .jsonl, .json or .csv file of labels" in out, out
        assert "Errno" not in out


def test_a_label_line_that_is_not_json_is_placed_in_its_own_line(tmp_path: Path) -> None:
    """A cut-off JSONL line said "Expecting ',' delimiter: line 2 column 1" (json's count,
    which took the line's newline for a second line); it now says the column in the file's
    line and that the line ends early, as the dialogue readers do."""
    lines = tmp_path / "cut.jsonl"
    lines.write_text('{"rowId": "airline-5", "score": 2, "reviewer": "mia"\n', "utf-8")
    code, out = run("labels", "import", lines, "--store", tmp_path / "s.sqlite")
    assert code == 2, out
    assert (
        "cut.jsonl:1: not a valid label line (Expecting ',' delimiter at column 53: the line "
        "ends before the JSON is complete)" in out
    ), out


def test_json_nested_too_deep_to_read_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    # json's decoder recurses: 1500 levels raised RecursionError out of `labels import`
    deep = '{"a": ' * 1500 + "1" + "}" * 1500
    line = '{"rowId": "r1", "requirementId": "A", "status": "VIOLATED", "reviewer": "ann", '
    good = json.dumps(label().to_json_dict())
    lines = tmp_path / "deep.jsonl"
    lines.write_text(f'{good}\n{line}"metadata": {deep}}}\n', "utf-8")
    array = tmp_path / "deep.json"
    array.write_text(f'[{good}, {line}"metadata": {deep}}}]', "utf-8")
    store = tmp_path / "s.sqlite"
    code, out = run("labels", "import", lines, "--store", store)
    assert code == 2 and "deep.jsonl:2: not a valid label line (it nests too deep)" in out, out
    code, out = run("labels", "import", array, "--store", store)
    assert code == 2 and "deep.json: not a JSON array of labels (it nests too deep)" in out, out
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []


def test_a_lone_surrogate_is_a_problem_with_its_line_not_a_traceback(tmp_path: Path) -> None:
    # an escape like \ud800 decodes to half a character: the label's id hash raised
    # UnicodeEncodeError out of `labels import`
    good = json.dumps(label().to_json_dict())
    bad = '{"rowId": "r1", "requirementId": "B", "status": "VIOLATED", "reviewer": "ann", '
    lines = tmp_path / "half.jsonl"
    lines.write_text(f'{good}\n{bad}"reason": "x\\ud800y"}}\n', "utf-8")
    store = tmp_path / "s.sqlite"
    code, out = run("labels", "import", lines, "--store", store)
    assert code == 2 and "half.jsonl:2: not text: it holds a lone surrogate (U+D800" in out, out
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ('r1,A,VIOLATED,ann,"open\nr2,A,FOLLOWED,bob,fine\n', 2),  # was "reviewer: required"
        ('r1,A,VIOLATED,ann,ok\nr2,A,FOLLOWED,bob,"never closed\n', 3),  # was imported
    ],
)
def test_a_csv_quote_never_closed_is_refused_with_its_line(
    tmp_path: Path, body: str, line: int
) -> None:
    bad = tmp_path / "quote.csv"
    bad.write_text("rowId,requirementId,status,reviewer,reason\n" + body, "utf-8")
    store = tmp_path / "s.sqlite"
    code, out = run("labels", "import", bad, "--store", store)
    assert code == 2 and f"quote.csv:{line}: the record starting on this line is not" in out, out
    assert "every quoted field needs its closing quote" in out, out
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []


def test_a_csv_label_longer_than_the_csv_module_s_limit_imports_like_its_jsonl_twin(
    tmp_path: Path,
) -> None:
    # a 200,000-character reason was refused as "field larger than field limit (131072)"
    # with a hint about quoting, so a label CSV export could not be imported back
    long = label(reason="r" * 200_000)
    path = tmp_path / "long.csv"
    path.write_text(render_labels([long], "csv"), encoding="utf-8")
    (read,) = read_label_file(path)
    assert read.reason == long.reason


def test_a_label_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    # the bytes of a UTF-16 half (\xed\xa0\x80) gave "cannot read the label file" with no line
    good = json.dumps(label().to_json_dict()).encode()
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(good + b"\n" + good.replace(b'"ann"', b'"a\xed\xa0\x80n"') + b"\n")
    code, out = run("labels", "import", path, "--store", tmp_path / "s.sqlite")
    assert code == 2 and "bytes.jsonl:2: not UTF-8 text (" in out, out


def test_csv_and_jsonl_round_trip_to_the_same_labels(tmp_path: Path) -> None:
    labels = [
        label(
            redFlagTypes=["X", "Y"],
            evidenceTurns=[2, 5],
            score=2,
            sawJudgeVerdict=False,
            reason="said, with a comma",
        ),
        label(requirementId=None, status=None, rowId="r2", intentKey="REFUND"),
    ]
    for fmt, suffix in (("jsonl", ".jsonl"), ("csv", ".csv")):
        path = tmp_path / f"labels{suffix}"
        path.write_text(render_labels(labels, fmt), encoding="utf-8")
        assert read_label_file(path) == labels


def score_airline(tmp_path: Path) -> tuple[Path, str]:
    store = tmp_path / "store.sqlite"
    assert run("rubric", "publish", RUBRICS / "airline_cs.yaml", "--store", store)[0] == 0
    code, out = run(
        "score",
        CASES / "airline_tau2_dev.json",
        "--rubric",
        "airline_cs",
        "--store",
        store,
        "--cassettes",
        CASSETTES,
        "--out",
        tmp_path / "rep",
        "--display",
        "none",
    )
    assert code == 0, out
    return store, out.split("task id: ")[1].split()[0]


def test_import_against_a_task_names_unknown_rows_requirements_and_rubric(tmp_path: Path) -> None:
    store, task = score_airline(tmp_path)
    bad = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {
                "rowId": "airline-99",
                "requirementId": "COMMON_NO_FABRICATED_INFO",
                "status": "VIOLATED",
                "reviewer": "ann",
            },
            {
                "rowId": "airline-3",
                "requirementId": "INTENT_BOOK_INSURANCE_OFFER",
                "status": "VIOLATED",
                "reviewer": "ann",
            },
            {
                "rowId": "airline-3",
                "requirementId": "COMMON_NO_FABRICATED_INFO",
                "status": "VIOLATED",
                "reviewer": "ann",
                "rubricVersion": 2,
            },
            {"rowId": "airline-4", "intentKey": "REFUND", "reviewer": "ann"},
        ],
    )
    code, out = run("labels", "import", bad, "--task", task, "--store", store)
    assert code == 2, out
    assert "airline-99" in out and "valid: airline-0" in out
    assert "'INTENT_BOOK_INSURANCE_OFFER' is not applicable to row airline-3" in out
    assert "COMMON_NO_FABRICATED_INFO" in out.split("not applicable to row airline-3; valid:")[1]
    assert "rubricVersion: 2 but task" in out
    assert "'REFUND' is not an intent of airline_cs@1; valid: " in out
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []


def test_import_then_export_keeps_the_rubric_and_task_it_was_checked_against(
    tmp_path: Path,
) -> None:
    store, task = score_airline(tmp_path)
    good = write_jsonl(
        tmp_path / "good.jsonl",
        [
            {
                "rowId": "airline-3",
                "requirementId": "COMMON_NO_FABRICATED_INFO",
                "status": "VIOLATED",
                "reviewer": "ann",
                "reason": "invented a fare rule",
            }
        ],
    )
    code, out = run("labels", "import", good, "--task", task, "--store", store)
    assert code == 0 and "imported 1 label(s)" in out
    code, out = run("labels", "import", good, "--task", task, "--store", store)
    assert "imported 0 label(s)" in out and "1 unchanged" in out
    code, out = run("labels", "export", task, "--store", store, "--format", "csv")
    assert code == 0
    exported = tmp_path / "e.csv"
    exported.write_text(out, encoding="utf-8")
    (back,) = read_label_file(exported)
    assert back.rubric_key == "airline_cs" and back.rubric_version == 1 and back.task_id == task
    assert (
        back.rubric_hash and back.time and back.label_id and back.reason == "invented a fare rule"
    )


def test_labels_without_a_task_must_name_their_rubric(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "l.jsonl",
        [{"rowId": "r1", "requirementId": "A", "status": "FOLLOWED", "reviewer": "ann"}],
    )
    code, out = run("labels", "import", path, "--store", tmp_path / "s.sqlite")
    assert code == 2 and "name no rubricKey" in out and "--task TASK" in out
    # a label naming its rubric is checked against that stored rubric (so it is published)
    assert (
        run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", tmp_path / "s.sqlite")[0]
        == 0
    )
    pinned = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {
                "rowId": "r1",
                "requirementId": "COMMON_BACKEND_EXPOSURE",
                "status": "FOLLOWED",
                "reviewer": "ann",
                "rubricKey": "health_cs",
            }
        ],
    )
    code, out = run("labels", "import", pinned, "--store", tmp_path / "s.sqlite")
    assert code == 0 and "imported 1 label(s)" in out


def test_calibrate_a_task_against_a_label_file_checks_it_and_stores_no_label(
    tmp_path: Path,
) -> None:
    store, task = score_airline(tmp_path)
    path = write_jsonl(
        tmp_path / "l.jsonl",
        [
            {
                "rowId": "airline-17",
                "requirementId": "COMMON_NO_FABRICATED_INFO",
                "status": "VIOLATED",
                "reviewer": "ann",
                "intentKey": "MODIFY_RESERVATION",
                "score": 2,
            },
        ],
    )
    code, out = run(
        "calibrate", task, "--labels", path, "--store", store, "--format", "json", "--no-save"
    )
    assert code == 0, out
    result = json.loads(out)
    # the judge listed other rules of airline-17 as unmet, so the row is no omission
    assert (result["omission"]["rowsWithViolation"], result["omission"]["omitted"]) == (1, 0)
    flags = {t["type"]: t for t in result["redFlags"]["types"]}
    assert flags["FABRICATED_INFO"]["missedRows"] == ["airline-17"]
    assert result["intentAgreement"]["accuracy"] == 1.0
    assert result["scores"]["meanSignedBias"] == 1.0  # judge 3, reviewer 2: the judge is lenient
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []
    bad = write_jsonl(
        tmp_path / "b.jsonl",
        [{"rowId": "nope", "requirementId": "X", "status": "VIOLATED", "reviewer": "ann"}],
    )
    code, out = run("calibrate", task, "--labels", bad, "--store", store)
    assert code == 2 and "not a row of task" in out


def test_calibrate_for_a_reviewer_without_labels_names_the_reviewers_who_have_some(
    tmp_path: Path,
) -> None:
    """``calibrate TASK --reviewer nobody`` (a misspelt name) said "no label for the rows of
    task ... by nobody: import some", as if the task had no labels at all; it now names the
    reviewers whose labels there are, from the store or from --labels FILE."""
    store, task = score_airline(tmp_path)
    labels = CASES / "labels" / "airline_red_line_overrides.jsonl"
    assert run("labels", "import", labels, "--task", task, "--store", store)[0] == 0
    for extra in ((), ("--labels", labels)):
        code, out = run("calibrate", task, "--reviewer", "demo-scenari", *extra, "--store", store)
        assert code == 2, out
        assert f"no label for the rows of task {task} by demo-scenari" in out, out
        assert "reviewers with labels here: demo-scenario" in out, out


def test_status_spelling_from_other_tools_is_accepted_and_a_typo_is_not() -> None:
    assert label(status=" violated").status is LabelStatus.VIOLATED
    assert label(status="not applicable").status is LabelStatus.NOT_APPLICABLE
    with pytest.raises(ValueError, match="FOLLOWED"):
        label(status="violatd")


def test_files_made_elsewhere_keep_their_own_fields_numbered_rows_and_json_arrays(
    tmp_path: Path,
) -> None:
    path = tmp_path / "public.json"
    path.write_text(
        json.dumps(
            [
                {
                    "rowId": 17,
                    "requirementId": "A",
                    "status": "violated",
                    "reviewer": "r1",
                    "explanation": "missed the dose",
                    "dataset": "x",
                },
            ]
        ),
        encoding="utf-8",
    )
    (lab,) = read_label_file(path)
    assert lab.row_id == "17" and lab.status is LabelStatus.VIOLATED
    assert lab.metadata == {"explanation": "missed the dose", "dataset": "x"}
    code, out = run("labels", "import", path, "--store", tmp_path / "s.sqlite")
    assert code == 2 and "name no rubricKey" in out  # unknown fields are not the problem
    csv_path = tmp_path / "l.csv"
    csv_path.write_text(render_labels([lab], "csv"), encoding="utf-8")
    assert read_label_file(csv_path) == [lab]


def test_times_are_stored_in_utc() -> None:
    assert label(time="2026-03-01T10:00:00+02:00").time == "2026-03-01T08:00:00Z"
    with pytest.raises(ValueError, match="not a time with a zone"):
        label(time="2026-03-01T10:00:00")  # no zone: which UTC time it is cannot be known


def test_labels_are_append_only_and_superseded_on_both_backends(store_at: str) -> None:
    """The PostgreSQL store keeps the SQLite one's label semantics: the
    migration's triggers refuse UPDATE and DELETE, an edit supersedes, a repeat adds nothing."""
    from rubric_engine.store.backend import driver_errors

    with TaskStore(store_at) as store:
        db = store.backend
        first = append_labels(db, [label()]).added[0]
        assert append_labels(db, [label()]).unchanged == 1
        edit = append_labels(db, [label(status="FOLLOWED", time="2026-01-02T00:00:00Z")]).added[0]
        for statement in ("UPDATE labels SET status='FOLLOWED'", "DELETE FROM labels"):
            with pytest.raises(driver_errors(db), match="append-only"):
                db.execute(statement)
            db.rollback()
        assert edit.supersedes == first.label_id
        assert [lab.label_id for lab in read_labels(db)] == [edit.label_id]
        history = read_labels(db, include_superseded=True)
        assert [lab.label_id for lab in history] == [first.label_id, edit.label_id]


def test_a_score_between_the_points_of_the_scale_is_refused_with_its_line(
    tmp_path: Path,
) -> None:
    store, task = score_airline(tmp_path)
    path = write_jsonl(
        tmp_path / "l.jsonl",
        [
            {"rowId": "airline-3", "score": 4, "reviewer": "ann"},
            {"rowId": "airline-4", "score": 2.5, "reviewer": "ann"},
        ],
    )
    code, out = run("labels", "import", path, "--task", task, "--store", store)
    assert code == 2, out
    # refused as the file is read, in every mode (with or without a task or a rubric)
    assert "l.jsonl:2: score: 2.5 is not a whole point" in " ".join(out.split())
    assert "round an averaged score" in out
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []  # nothing imported, the good line neither
    # the same check without a task, against the stored rubric the labels name
    pinned = write_jsonl(
        tmp_path / "p.jsonl",
        [{"rowId": "r1", "score": 3.0, "reviewer": "ann", "rubricKey": "airline_cs"},
         {"rowId": "r2", "score": 4.25, "reviewer": "ann", "rubricKey": "airline_cs"}],
    )  # fmt: skip
    code, out = run("labels", "import", pinned, "--store", store)
    assert code == 2 and "1 problem(s)" in out, out
    assert "p.jsonl:2: score: 4.25 is not a whole" in " ".join(out.split())
    assert "p.jsonl:1" not in out  # 3.0 is a point of the scale


def test_a_score_that_is_no_number_and_turns_outside_the_dialogue_are_refused(
    tmp_path: Path,
) -> None:
    # `"score": true` was stored as 1.0 and "3" as 3.0; evidence turn 99 of a row of a few
    # messages was imported
    store, task = score_airline(tmp_path)
    with TaskStore(store) as opened:
        (dialogue,) = [d for r, d in opened.result_texts(task) if '"airline-3"' in r]
    messages = len(json.loads(dialogue)["messages"])
    path = write_jsonl(
        tmp_path / "l.jsonl",
        [
            {"rowId": "airline-3", "score": True, "reviewer": "ann"},
            {"rowId": "airline-3", "score": "3", "reviewer": "bob"},
            {"rowId": "airline-3", "score": float("nan"), "reviewer": "cy"},
        ],
    )
    code, out = run("labels", "import", path, "--task", task, "--store", store)
    assert code == 2, out
    assert f"{path}:1: score: true is not a number" in out
    assert f"{path}:2: score: '3' is not a number" in out
    assert f"{path}:3: score: nan is not a finite number" in out
    turns = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"rowId": "airline-3", "requirementId": "COMMON_NO_FABRICATED_INFO",
             "status": "VIOLATED", "reviewer": "ann", "evidenceTurns": [0, messages - 1]},
            {"rowId": "airline-3", "requirementId": "COMMON_NO_FABRICATED_INFO",
             "status": "VIOLATED", "reviewer": "bob", "evidenceTurns": [1, messages, 99]},
        ],
    )  # fmt: skip
    code, out = run("labels", "import", turns, "--task", task, "--store", store)
    assert code == 2 and "1 problem(s)" in out, out
    assert (
        f"{turns}:2 (row airline-3): evidenceTurns: {messages}, 99 not in row airline-3, whose "
        f"{messages} message(s) are turns 0..{messages - 1} (0-based)"
    ) in out
    with TaskStore(store) as opened:
        assert read_labels(opened.backend) == []


def test_a_csv_line_with_more_fields_than_its_header_is_refused(tmp_path: Path) -> None:
    """An unquoted comma in a reason made two cells of it: csv.DictReader put the second under
    no column and the label was stored with the reason cut at the comma."""
    comma = tmp_path / "comma.csv"
    comma.write_text(
        "rowId,requirementId,status,reviewer,reason\n"
        "medgpt-8,INTENT_HEALTH_TRIAGE,VIOLATED,bob,no triage, no referral to a doctor\n"
        'medgpt-9,INTENT_HEALTH_TRIAGE,VIOLATED,bob,"no triage, no referral to a doctor"\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError) as refused:
        read_label_file(comma)
    text = str(refused.value) + "".join(str(p) for p in refused.value.problems)
    assert "comma.csv:2" in text and "more fields than the header" in text
    assert "quote fields that contain commas" in text and "comma.csv:3" not in text


def test_labels_export_as_csv_escapes_formulas_and_reads_them_back(tmp_path: Path) -> None:
    """A reason a spreadsheet would run as a formula gets a leading ' (as `export` writes
    cells), and importing the file gives the reason back as it was."""
    reasons = ["=looks fine", "+1 to the judge", "-", "@mia agrees", "'=quoted already", "'plain"]
    labels = [label(rowId=f"r{k}", reason=reason) for k, reason in enumerate(reasons)]
    text = render_labels(labels, "csv")
    cells = [row["reason"] for row in csv.DictReader(io.StringIO(text))]
    assert cells == ["'=looks fine", "'+1 to the judge", "'-", "'@mia agrees", "''=quoted already",
                     "'plain"]  # fmt: skip
    path = tmp_path / "back.csv"
    path.write_text(text, encoding="utf-8")
    assert read_label_file(path) == labels


@given(st.text(alphabet=st.sampled_from("'=+-@\t\rab ,\""), max_size=6))
def test_a_csv_cell_escaped_for_spreadsheets_reads_back_as_its_text(text: str) -> None:
    cell = text_cell(text)
    assert not cell.startswith(FORMULA_STARTS) and plain_cell(cell) == text


def test_a_reviewer_with_white_space_around_the_name_is_refused(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "spaced.jsonl",
        [{"rowId": "r1", "requirementId": "A", "status": "VIOLATED", "reviewer": "Bob "}],
    )
    with pytest.raises(InputError) as refused:
        read_label_file(path)
    (problem,) = refused.value.problems
    assert str(problem).startswith(f"{path}:1: reviewer")
    assert "'Bob ' starts or ends with white space; write 'Bob'" in str(problem)


def test_a_reviewer_differing_only_by_case_from_a_stored_one_is_refused(
    store_at: str, tmp_path: Path
) -> None:
    assert run("rubric", "publish", RUBRICS / "airline_cs.yaml", "--store", store_at)[0] == 0
    base = {"rowId": "airline-3", "requirementId": "COMMON_NO_FABRICATED_INFO",
            "status": "VIOLATED", "rubricKey": "airline_cs"}  # fmt: skip
    first = write_jsonl(tmp_path / "first.jsonl", [{**base, "reviewer": "Bob"}])
    assert run("labels", "import", first, "--store", store_at)[0] == 0
    again = write_jsonl(tmp_path / "again.jsonl", [{**base, "reviewer": "bob"}])
    code, out = run("labels", "import", again, "--store", store_at)
    assert code == 2 and "nothing was imported" in out, out
    assert "'bob' differs only by case from 'Bob' (already stored for rubric airline_cs)" in out
    both = write_jsonl(
        tmp_path / "both.jsonl",
        [{**base, "reviewer": "Ann"}, {**base, "rowId": "airline-4", "reviewer": "ann"}],
    )
    code, out = run("labels", "import", both, "--store", store_at)
    assert code == 2 and "'ann' differs only by case from 'Ann' (also in this file)" in out, out
    with TaskStore(store_at) as opened:
        assert [lab.reviewer for lab in read_labels(opened.backend)] == ["Bob"]
        # a store from before the check holds both spellings: each goes on under its own
        append_labels(
            opened.backend, [label(rowId="airline-9", reviewer="bob", rubricKey="airline_cs")]
        )
    code, out = run("labels", "import", again, "--store", store_at)
    assert code == 0 and "imported 1 label(s)" in out, out


def test_a_label_edited_in_the_store_is_refused_where_labels_are_read(store_at: str) -> None:
    """labelId is a hash of the label's content: a label edited in place (its trigger dropped
    first) no longer hashes to it, and a column edited alone no longer says what the JSON
    says; every reader refuses the store, naming the labels and the fix."""
    from rubric_engine.labels.store import current_labels_by_row

    with TaskStore(store_at) as store:
        db = store.backend
        kept, edited = append_labels(
            db, [label(rubricKey="k"), label(rubricKey="k", rowId="r2")]
        ).added
        db.commit()
        sqlite = db.dialect != "postgres"
        db.execute(
            "DROP TRIGGER labels_no_update" if sqlite else "DROP TRIGGER labels_no_change ON labels"
        )
        db.execute(
            "UPDATE labels SET label=replace(label, '\"VIOLATED\"', '\"FOLLOWED\"'), "
            "status='FOLLOWED' WHERE label_id=?",
            (edited.label_id,),
        )
        db.commit()
        for read in (
            lambda: read_labels(db),
            lambda: list(current_labels_by_row(db, "k")),
        ):
            with pytest.raises(StoreError) as refused:
                read()
            message = str(refused.value)
            assert (
                f"{edited.label_id} (row r2, ann: its content does not hash to its labelId)"
                in message
            )
            assert kept.label_id not in message and "restore it from a backup" in message
        back = (
            "UPDATE labels SET label=replace(label, '\"FOLLOWED\"', '\"VIOLATED\"') "
            "WHERE label_id=?"
        )
        db.execute(back, (edited.label_id,))
        db.commit()
        with pytest.raises(StoreError, match=r"column\(s\) status differ from its JSON"):
            read_labels(db)


def test_labels_export_all_says_how_to_import_it(tmp_path: Path) -> None:
    store, task = score_airline(tmp_path)
    line = {"rowId": "airline-3", "requirementId": "COMMON_NO_FABRICATED_INFO", "reviewer": "ann"}
    for status in ("VIOLATED", "FOLLOWED"):
        path = write_jsonl(tmp_path / f"{status}.jsonl", [{**line, "status": status}])
        assert run("labels", "import", path, "--task", task, "--store", store)[0] == 0
    code, out = run("labels", "export", task, "--all", "--store", store)
    history = write_jsonl(tmp_path / "history.jsonl", [json.loads(x) for x in out.splitlines()])
    code, out = run("labels", "import", history, "--task", task, "--store", store)
    assert code == 2 and "history.jsonl:2: requirementId" in out
    assert "a `labels export --all` file holds each label's history" in out
    assert "import an export made without --all" in out


def test_an_interrupted_import_says_nothing_was_stored(
    store_at: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the labels are written: the transaction is rolled back and the command
    says so (it printed nothing, exit 130)."""
    from rubric_engine.labels import import_file

    real = import_file.store_labels

    def interrupted(db: object, labels: object) -> object:
        real(db, labels)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(import_file, "store_labels", interrupted)
    assert run("rubric", "publish", RUBRICS / "airline_cs.yaml", "--store", store_at)[0] == 0
    path = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"rowId": "airline-3", "requirementId": "COMMON_NO_FABRICATED_INFO",
          "status": "VIOLATED", "reviewer": "ann", "rubricKey": "airline_cs"}],
    )  # fmt: skip
    code, out = run("labels", "import", path, "--store", store_at)
    assert code == 130 and f"interrupted: nothing of {path} was stored" in out, out
    with TaskStore(store_at) as opened:
        assert read_labels(opened.backend) == []
