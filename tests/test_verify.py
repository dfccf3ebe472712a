"""Verifiable rows (docs/verify.md): a digest per stored row, checked by every command that reads
results, and ``rubric-eval verify`` re-deriving every row from its stored replies.

Each edit a person with database access could make is tried on a scored task: the readers refuse
it (exit 3, the row named) and ``verify`` fails on it; untouched tasks of every mode verify.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.store.digest import SIGNING_KEY_ENV, RowDigests
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.openai_stub import (
    Responder,
    StubReply,
    StubServer,
    load_verdicts,
    row_id_of,
    verdicts_responder,
)
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run

HEALTH = CASES / "health_consult_zh.jsonl"
VERDICTS = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
FAST = RetryPolicy(max_attempts=3, base_s=0.01, max_wait_s=0.02)


def scored(store: Path, out: Path, *extra: object) -> str:
    """The health demo replayed into ``store``; the task id."""
    code, output = run(
        "score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store", store,
        "--cassettes", CASSETTES, "--out", out, "--display", "none", *extra,
    )  # fmt: skip
    assert code == 0, output
    return output.rsplit("task id: ", 1)[1].split()[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One replayed task, copied by each test that edits it."""
    folder = tmp_path_factory.mktemp("demo")
    return folder / "s.sqlite", scored(folder / "s.sqlite", folder / "out")


@pytest.fixture()
def copy(demo: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    store, task = demo
    shutil.copy(store, tmp_path / "s.sqlite")
    return tmp_path / "s.sqlite", task


def sql(store: Path, statement: str, *args: object) -> None:
    with sqlite3.connect(store) as db:
        db.execute(statement, args)


def verified(store: object, task: str) -> tuple[int, str]:
    return run("verify", task, "--store", store)


# -- untouched tasks of every mode verify ------------------------------------------------------


def test_a_replayed_task_verifies(demo: tuple[Path, str]) -> None:
    code, out = verified(*demo)
    assert code == 0, out
    assert "26 of 26 row(s) re-derived byte for byte" in out and "(sha256)" in out


def hostile(verdicts: dict[str, dict[str, Any]]) -> Responder:
    """Answers that take every path of the judge's loop, statelessly (a live, record and batch
    run get the same): medgpt-2's first answer names an unknown intent (re-asked), medgpt-7's
    first is cut off at max_tokens (asked again with a larger budget), medgpt-17 never gets an
    answer (HTTP 500: a TRANSPORT row), medgpt-22's reply wraps the verdict in prose."""
    answer = verdicts_responder(verdicts)

    def respond(body: dict[str, Any]) -> StubReply:
        row = row_id_of(body)
        first = len(body["messages"]) == 2
        if row == "medgpt-2" and first:
            return StubReply(content='{"intentKey": "HEALTH", "score": 3}')
        if row == "medgpt-7" and body.get("max_tokens") == 1024:
            return StubReply(
                content='{"rowId": "medgpt-7", "intentKey": "HEAL', finish_reason="length"
            )
        if row == "medgpt-17":
            return StubReply(status=500, content="upstream exploded")
        if row == "medgpt-22":
            return StubReply(content="Here is my verdict:\n" + json.dumps(verdicts[row]))
        return answer(body)

    return respond


def live_options(tmp_path: Path, server: StubServer, mode: str, **extra: Any) -> ScoreOptions:
    return ScoreOptions(
        inputs=[HEALTH],
        rubric=RUBRICS / "health_cs.yaml",
        draft=True,
        mode=mode,  # type: ignore[arg-type]
        model="openai/gpt-4o-mini",
        api_base=server.base_url,
        store=tmp_path / "s.sqlite",
        out=tmp_path / mode,
        cassettes=tmp_path / "cassettes",
        concurrency=4,
        retry=FAST,
        **extra,
    )


@pytest.mark.live
def test_live_record_and_the_replay_of_the_recording_verify(tmp_path: Path) -> None:
    with StubServer(hostile(VERDICTS)) as server:
        live = score(live_options(tmp_path, server, "live")).task_id
        record = score(live_options(tmp_path, server, "record")).task_id
    replay = score(
        ScoreOptions(
            inputs=[HEALTH],
            rubric=RUBRICS / "health_cs.yaml",
            draft=True,
            store=tmp_path / "s.sqlite",
            out=tmp_path / "replay",
            cassettes=tmp_path / "cassettes",
        )
    ).task_id
    with TaskStore(tmp_path / "s.sqlite") as store:
        rows = {r.result.row_id: r for r in store.rows(live)}
    assert rows["medgpt-2"].calls == 2 and rows["medgpt-7"].calls == 2  # re-asked, re-budgeted
    assert rows["medgpt-17"].result.error is not None  # failed in transport
    for task in (live, record, replay):
        code, out = verified(tmp_path / "s.sqlite", task)
        assert code == 0 and "26 of 26 row(s) re-derived" in out, out


@pytest.mark.live
def test_a_batch_task_verifies(tmp_path: Path) -> None:
    from rubric_engine.batch.settings import BatchSettings
    from rubric_engine.testing.batch_stub import BatchStub

    with BatchStub(hostile(VERDICTS)) as stub:
        options = ScoreOptions(
            inputs=[HEALTH], rubric=RUBRICS / "health_cs.yaml", draft=True, mode="batch",
            api_base=stub.base_url, store=tmp_path / "s.sqlite", out=tmp_path / "b",
            retry=FAST, batch=BatchSettings(poll_interval_s=0.02),
        )  # fmt: skip
        task = score(options).task_id
    code, out = verified(tmp_path / "s.sqlite", task)
    assert code == 0 and "26 of 26 row(s) re-derived" in out, out


def judged_by_workers(store: str, rows: Path, pack: str, out: Path, *extra: object) -> str:
    """``rows`` scored with ``--workers-only`` under the shipped pack ``pack`` (published
    first) and judged by ``rubric-eval work`` from the shipped cassettes; the task id."""
    code, said = run("rubric", "publish", RUBRICS / f"{pack}.yaml", "--store", store)
    assert code == 0, said
    code, said = run(
        "score", rows, "-r", pack, "--store", store, "--workers-only", "--cassettes", CASSETTES,
        "--out", out, *extra,
    )  # fmt: skip
    assert code == 0, said
    task = said.rsplit("task id: ", 1)[1].split()[0]
    code, said = run("work", task, "--store", store, "--cassettes", CASSETTES)
    assert code == 0, said
    return task


def test_a_task_judged_by_workers_verifies(tmp_path: Path, pg_url: str) -> None:
    task = judged_by_workers(pg_url, HEALTH, "health_cs", tmp_path / "o")
    code, out = verified(pg_url, task)
    assert code == 0 and "26 of 26 row(s) re-derived" in out, out


AIRLINE = CASES / "airline_tau2_dev.json"


def test_a_tau_bench_task_of_cassette_misses_verifies(tmp_path: Path) -> None:
    """A cassette miss stores the request's key; verify renders the prompt again from the
    stored row, so the row must come back in its key order (a tau-bench reference lists
    ``expectedActions`` first): sorted, every prompt's block tag changed and 25 untouched rows
    read as edited."""
    store = tmp_path / "s.sqlite"
    code, out = run(
        "score", AIRLINE, "-r", RUBRICS / "airline_cs.yaml", "--draft", "--store", store,
        "--cassettes", CASSETTES, "--model", "openai/not-recorded", "--out", tmp_path / "o",
        "--display", "none",
    )  # fmt: skip
    assert code == 4 and "25 row(s) had no cassette entry" in out, out
    code, out = verified(store, out.rsplit("task id: ", 1)[1].split()[0])
    assert code == 0 and "25 of 25 row(s) re-derived" in out, out


def test_workers_replay_a_tau_bench_task_from_the_cassette_a_direct_run_replays(
    tmp_path: Path, pg_url: str
) -> None:
    """Workers render each prompt from the row the work queue holds: the same bytes as a run
    reading the file, so the shipped cassette answers every row."""
    task = judged_by_workers(pg_url, AIRLINE, "airline_cs", tmp_path / "o")
    code, out = run("report", task, "--store", pg_url, "--out", tmp_path / "r")
    assert code == 0, out
    report = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    assert report["totals"]["scored"] == 25, report["totals"]


def test_judge_none_judge_when_evidence_and_renormalized_tasks_verify(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    tasks = [
        scored(store, tmp_path / "when", "--judge-when", "sourceLine in 1,2,3"),
        scored(store, tmp_path / "v3", "--prompt", "judge_v3", "--cassettes", ROOT_V3),
    ]
    checked = tmp_path / "checked.jsonl"
    checked.write_text(
        "".join(
            json.dumps(
                {
                    "rowId": f"c-{i}",
                    "messages": [
                        {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": text},
                    ],
                    "expected": [{"type": "must_not_contain", "keywords": ["refund"]}],
                }
            )
            + "\n"
            for i, text in enumerate(["hello", "no refund for you"])
        ),
        encoding="utf-8",
    )
    code, out = run(
        "score",
        checked,
        "--judge",
        "none",
        "--store",
        store,
        "--out",
        tmp_path / "none",
        "--display",
        "none",
    )
    assert code == 0, out
    tasks.append(out.rsplit("task id: ", 1)[1].split()[0])
    code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store)
    source = scored(store, tmp_path / "src")
    code, out = run(
        "renormalize", source, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store", store,
        "--out", tmp_path / "renorm",
    )  # fmt: skip
    assert code == 0, out
    tasks.append(out.rsplit("task id: ", 1)[1].split()[0])
    for task in tasks:
        code, out = verified(store, task)
        assert code == 0, (task, out)


ROOT_V3 = CASSETTES.parent / "cassettes-v3"


# -- every kind of edit is caught ---------------------------------------------------------------

EDITS = {
    "result": "UPDATE rows SET result=json_set(result,'$.finalScore',5) WHERE row_id='medgpt-7'",
    "reply": "UPDATE rows SET raw_attempts=replace(raw_attempts,'INTENT_HEALTH_TRIAGE',"
    "'INTENT_HEALTH_ON_TOPIC') WHERE row_id='medgpt-7'",
    "dialogue": "UPDATE rows SET dialogue=replace(dialogue,'medgpt-7','medgpt-7 ') "
    "WHERE row_id='medgpt-7'",
    "usage": "UPDATE rows SET calls=calls+5, cost_usd=1.5 WHERE row_id='medgpt-7'",
    "digest": "UPDATE rows SET digest=NULL WHERE row_id='medgpt-7'",
    "status": "UPDATE rows SET final_score=5 WHERE row_id='medgpt-7'",
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_row_makes_report_exit_3_naming_it_and_verify_fail(
    copy: tuple[Path, str], edit: str, tmp_path: Path
) -> None:
    store, task = copy
    sql(store, EDITS[edit])
    code, out = run("report", task, "--store", store, "--out", tmp_path / "r")
    assert code == 3 and "medgpt-7" in out and "digest" in out, out
    assert not (tmp_path / "r" / "report.json").exists()
    code, out = verified(store, task)
    assert code == 3 and "medgpt-7: digest" in out, out
    if edit in ("result", "reply"):
        assert "medgpt-7: re-derived" in out, out


def test_every_reader_refuses_an_edited_row(copy: tuple[Path, str], tmp_path: Path) -> None:
    store, task = copy
    baseline = scored(store, tmp_path / "base")
    sql(store, EDITS["result"])
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps(
            {
                "rowId": "medgpt-1",
                "requirementId": "INTENT_HEALTH_TRIAGE",
                "status": "VIOLATED",
                "reviewer": "expert-1",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    for args in (
        ("gate", task, "--threshold", "meanScore>=1"),
        ("export", task, "--out", tmp_path / "x.csv"),
        ("diff", baseline, task),
        ("calibrate", task, "--labels", labels),
    ):
        code, out = run(*args, "--store", store)
        assert code == 3 and "medgpt-7" in out and "digest" in out, (args, out)
    assert not (tmp_path / "x.csv").exists()


def test_calibrate_against_stored_labels_refuses_an_edited_row(
    copy: tuple[Path, str], tmp_path: Path
) -> None:
    """Labels imported into the store: calibrate reads the judge's results by rowId to join
    them, and those reads check digests too."""
    store, task = copy
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        json.dumps(
            {
                "rowId": "medgpt-7",
                "requirementId": "INTENT_HEALTH_TRIAGE",
                "status": "VIOLATED",
                "reviewer": "expert-1",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    code, out = run("labels", "import", labels, "--task", task, "--store", store)
    assert code == 0, out
    assert run("calibrate", task, "--no-save", "--store", store)[0] == 0
    sql(store, EDITS["result"])
    code, out = run("calibrate", task, "--no-save", "--store", store)
    assert code == 3 and "medgpt-7" in out and "digest" in out, out


def test_a_recomputed_plain_digest_passes_the_readers_but_not_verify(
    copy: tuple[Path, str],
) -> None:
    """Anyone can recompute a plain SHA-256 digest (docs/verify.md's table): the readers then
    accept the edit, and verify catches it by re-deriving the row from its replies."""
    store, task = copy
    sql(store, EDITS["result"])
    with TaskStore(store) as opened:
        digests = RowDigests.for_task(opened.task(task))
        assert digests is not None
    with sqlite3.connect(store) as db:  # the columns as stored, hashed by the public recipe
        (row,) = db.execute("SELECT * FROM rows WHERE row_id='medgpt-7' AND task_id=?", (task,))
        db.execute("UPDATE rows SET digest=? WHERE row_id='medgpt-7'", (digests.of(row[:16]),))
    assert run("report", task, "--store", store, "--format", "json")[0] == 0
    code, out = verified(store, task)
    assert code == 3 and "medgpt-7: re-derived: finalScore differ" in out, out
    assert "impossible: finalScore 5 is above judgeScore" in out, out


def test_a_row_copied_from_another_task_does_not_match(
    copy: tuple[Path, str], tmp_path: Path
) -> None:
    store, task = copy
    other = scored(store, tmp_path / "other")
    sql(store, "DELETE FROM rows WHERE task_id=? AND row_id='medgpt-7'", task)
    sql(
        store,
        "INSERT INTO rows SELECT ?, seq, row_id, status, final_score, result, dialogue, "
        "raw_attempts, calls, prompt_tokens, completion_tokens, cost_usd, latency_ms, "
        "cassette_key, cache_read_tokens, cache_creation_tokens, digest FROM rows "
        "WHERE task_id=? AND row_id='medgpt-7'",
        task,
        other,
    )
    code, out = run("report", task, "--store", store, "--format", "json")
    assert code == 3 and "medgpt-7" in out, out


def test_verify_fails_on_a_completed_task_missing_a_row(copy: tuple[Path, str]) -> None:
    store, task = copy
    sql(store, "DELETE FROM rows WHERE task_id=? AND row_id='medgpt-7'", task)
    code, out = verified(store, task)
    assert code == 3 and "task: 25 rows stored, 26 planned for a COMPLETED task" in out, out


def test_a_deleted_row_is_caught_after_the_row_count_is_edited(
    store_at: str, tmp_path: Path
) -> None:
    """Rows keep their input position (in the digest): with a middle row deleted and the task's
    row count edited to match, the last row stands beyond the planned rows, and every checked
    read refuses the task."""
    task = scored(store_at, tmp_path / "out")  # type: ignore[arg-type]
    with TaskStore(store_at) as opened:
        db = opened.backend
        db.execute("DELETE FROM rows WHERE task_id=? AND row_id='medgpt-7'", (task,))
        db.execute("UPDATE tasks SET row_count=25 WHERE id=?", (task,))
        (last,) = db.execute("SELECT row_id FROM rows WHERE task_id=? AND seq=25", (task,))
        db.commit()
    for args in (
        ("report", task, "--format", "json"),
        ("gate", task, "--threshold", "meanScore>=1"),
        ("export", task, "--out", tmp_path / "x.csv"),
    ):
        code, out = run(*args, "--store", store_at)
        assert code == 3 and f"{last[0]} (position 25)" in out, (args, out)
        assert "beyond the task's 25 planned row(s)" in out, out
    code, out = verified(store_at, task)
    assert code == 3 and f"{last[0]}: position: input position 25 is beyond" in out, out


def test_the_last_row_deleted_and_the_row_count_edited_is_caught_by_the_digests(
    copy: tuple[Path, str],
) -> None:
    """No position gives the last row's deletion away; the row count is in every row's digest
    (for tasks made since it is, docs/verify.md), so editing it fails every row."""
    store, task = copy
    sql(store, "DELETE FROM rows WHERE task_id=? AND seq=25", task)
    sql(store, "UPDATE tasks SET row_count=25 WHERE id=?", task)
    code, out = run("report", task, "--store", store, "--format", "json")
    assert code == 3 and "25 stored row(s) do not match their digest" in out, out
    code, out = verified(store, task)
    assert code == 3 and "medgpt-1: digest: does not match" in out, out


def test_a_task_whose_digests_do_not_cover_the_row_count_still_verifies(
    copy: tuple[Path, str],
) -> None:
    """Tasks made before row digests covered the row count keep reading and verifying: their
    digests are checked without it (here made so: the entry removed, the digests recomputed the
    way those engines computed them). Removing the entry from a task that has it fails every row."""
    store, task = copy
    with sqlite3.connect(store) as db:
        (extra,) = db.execute("SELECT extra FROM tasks WHERE id=?", (task,)).fetchone()
        older = {k: v for k, v in json.loads(extra).items() if k != "rowDigestsCover"}
        db.execute("UPDATE tasks SET extra=? WHERE id=?", (json.dumps(older), task))
    assert run("report", task, "--store", store, "--format", "json")[0] == 3  # every row fails
    with TaskStore(store) as opened:
        digests = RowDigests.for_task(opened.task(task))
        assert digests is not None
    with sqlite3.connect(store) as db:
        for row in db.execute("SELECT * FROM rows WHERE task_id=?", (task,)).fetchall():
            db.execute(
                "UPDATE rows SET digest=? WHERE task_id=? AND row_id=?",
                (digests.of(row[:16]), task, row[2]),
            )
    assert run("report", task, "--store", store, "--format", "json")[0] == 0
    code, out = verified(store, task)
    assert code == 0 and "26 of 26 row(s) re-derived" in out, out


def test_verify_names_the_column_that_disagrees_with_the_result(copy: tuple[Path, str]) -> None:
    store, task = copy
    sql(store, EDITS["status"])
    code, out = verified(store, task)
    assert code == 3, out
    assert "medgpt-7: digest: does not match (final_score column 5 but finalScore" in out, out
    code, out = run("report", task, "--store", store, "--format", "json")
    assert code == 3 and "medgpt-7 (final_score column disagrees with its result)" in out, out


# -- signing ------------------------------------------------------------------------------------


def test_signed_rows_need_their_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "k" * 40
    monkeypatch.setenv(SIGNING_KEY_ENV, key)
    store = tmp_path / "s.sqlite"
    task = scored(store, tmp_path / "out")
    with TaskStore(store) as opened:
        mark = opened.task(task).extra["rowDigests"]
        assert mark.startswith("hmac-sha256:")
        digest = opened.backend.execute("SELECT digest FROM rows LIMIT 1").fetchone()[0]
        assert digest.startswith(mark + ":")
    assert verified(store, task)[0] == 0
    monkeypatch.setenv(SIGNING_KEY_ENV, "x" * 40)
    code, out = run("report", task, "--store", store, "--format", "json")
    assert code == 3 and SIGNING_KEY_ENV in out and mark.split(":")[1] in out, out
    monkeypatch.delenv(SIGNING_KEY_ENV)
    code, out = run("report", task, "--store", store, "--format", "json")
    assert code == 3 and "no key is set" in out, out
    monkeypatch.setenv(SIGNING_KEY_ENV, "short")
    code, out = run("report", task, "--store", store, "--format", "json")
    assert code == 2 and "at least 32" in out, out  # a bad setting, not a damaged store


def test_with_the_key_set_an_unsigned_task_fails_verify(
    demo: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SIGNING_KEY_ENV, "k" * 40)
    code, out = verified(*demo)
    assert code == 3 and "not signed" in out, out


# -- stores written before digests -------------------------------------------------------------


def forge_score(store: object, task: str, row_id: str, score: int) -> None:
    """Set a row's ``finalScore`` in its stored result, on either backend."""
    with TaskStore(store) as opened:  # type: ignore[arg-type]
        db = opened.backend
        query = "SELECT result FROM rows WHERE task_id=? AND row_id=?"
        (text,) = db.execute(query, (task, row_id)).fetchone()
        db.execute(
            "UPDATE rows SET result=? WHERE task_id=? AND row_id=?",
            (json.dumps({**json.loads(text), "finalScore": score}), task, row_id),
        )
        db.commit()


def without_mark(store: object, task: str) -> None:
    """Remove the task record's digest mark (``extra.rowDigests``), on either backend."""
    with TaskStore(store) as opened:  # type: ignore[arg-type]
        db = opened.backend
        (extra,) = db.execute("SELECT extra FROM tasks WHERE id=?", (task,)).fetchone()
        extra = {k: v for k, v in json.loads(extra).items() if k != "rowDigests"}
        db.execute("UPDATE tasks SET extra=? WHERE id=?", (json.dumps(extra), task))
        db.commit()


def stored_before_digests(store: Path, task: str) -> None:
    """Make a task look as an engine before digests stored it, in a store upgraded since: no
    mark, no row digest, and the store took digests (migration m011) after the task was made."""
    without_mark(store, task)
    sql(store, "UPDATE rows SET digest=NULL")
    sql(
        store,
        "UPDATE migrations SET applied_at='2100-01-01T00:00:00Z' "
        "WHERE name='m011_samples_and_digests'",
    )


def test_rows_stored_before_digests_read_and_are_still_re_derived(copy: tuple[Path, str]) -> None:
    store, task = copy
    stored_before_digests(store, task)
    assert run("report", task, "--store", store, "--format", "json")[0] == 0
    code, out = verified(store, task)
    assert code == 0 and "26 row(s) not verifiable by digest: stored before digests" in out, out
    sql(store, EDITS["result"])
    code, out = verified(store, task)
    assert code == 3 and "medgpt-7: re-derived" in out, out


def test_with_the_key_set_a_task_stored_before_digests_verifies_as_not_verifiable(
    copy: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task scored before digests has nothing to sign: with the key set verify re-derives
    its rows and says so, rather than calling it tampered."""
    store, task = copy
    stored_before_digests(store, task)
    monkeypatch.setenv(SIGNING_KEY_ENV, "k" * 40)
    code, out = verified(store, task)
    assert code == 0, out
    assert "26 row(s) not verifiable by digest: stored before digests (unsigned" in out, out


REFUSED_MARK = "names no row digest scheme"


@pytest.mark.parametrize("signed", [False, True], ids=["plain", "signed"])
def test_a_task_record_without_its_digest_mark_is_refused(
    store_at: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signed: bool
) -> None:
    """Removing ``extra.rowDigests`` does not turn the digest check off: the task was made after
    the store took digests, so every reader and verify refuse it (exit 3); made to look older
    (the store's digest migration moved after it), its rows still carry digests, and each is
    refused as it is read."""
    if signed:
        monkeypatch.setenv(SIGNING_KEY_ENV, "k" * 40)
    task = scored(store_at, tmp_path / "out")  # type: ignore[arg-type]
    forge_score(store_at, task, "medgpt-7", 5)
    without_mark(store_at, task)
    for args in (
        ("report", task, "--format", "json"),
        ("export", task, "--out", tmp_path / "x.csv"),
        ("gate", task, "--threshold", "meanScore>=1"),
        ("verify", task),
    ):
        code, out = run(*args, "--store", store_at)
        assert code == 3 and REFUSED_MARK in out and "after the store took digests" in out, (
            args,
            out,
        )
        assert f"task {task}" in out and "task record was edited" in out, out
    assert not (tmp_path / "x.csv").exists()
    with TaskStore(store_at) as opened:
        opened.backend.execute(
            "UPDATE migrations SET applied_at='2100-01-01T00:00:00Z' "
            "WHERE name='m011_samples_and_digests'"
        )
        opened.backend.commit()
    code, out = run("report", task, "--format", "json", "--store", store_at)
    assert code == 3 and "26 stored row(s) do not match their digest" in out, out
    assert "medgpt-7 (a digest, in a task whose record names no scheme)" in out, out
    code, out = verified(store_at, task)
    assert code == 3 and "medgpt-7: digest: present, but the task record names no" in out, out


def test_verify_of_a_stopped_task_says_how_many_planned_rows_it_holds(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    code, out = run(
        "score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store", store,
        "--cassettes", CASSETTES, "--out", tmp_path / "out", "--display", "none",
        "--max-calls", "5", "--concurrency", "1",
    )  # fmt: skip
    assert code != 0 and "task id: " in out, out
    task = out.rsplit("task id: ", 1)[1].split()[0]
    code, out = verified(store, task)
    assert code == 0, out
    assert "5 of 5 row(s) re-derived byte for byte" in out
    assert "the task is STOPPED: 5 of 26 planned rows are stored and were verified" in out
    assert f"score --resume {task}" in out
