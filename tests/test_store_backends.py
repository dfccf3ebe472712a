"""Both store backends: migrations, the same reports from SQLite and PostgreSQL, and
``store migrate`` of the demo store."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from rubric_engine.errors import StoreError
from rubric_engine.rubric.versions import RubricRegistry
from rubric_engine.store.backend import Backend
from rubric_engine.store.location import PostgresUrl, parse_location
from rubric_engine.store.migrations import MIGRATIONS, SCHEMA_VERSION, raw_attempts_text
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS
from tests.test_cli import run

DEMOS = (("health_consult_zh.jsonl", "health_cs"), ("airline_tau2_dev.json", "airline_cs"))
FILES = ("report.json", "report.md", "report.html", "rows.jsonl")


def score_demo(store: object, cases: str, key: str, out: Path) -> str:
    code, output = run("rubric", "publish", RUBRICS / f"{key}.yaml", "--store", store)
    assert code == 0, output
    code, output = run(
        "score", CASES / cases, "-r", key, "--store", store, "--cassettes", CASSETTES,
        "--out", out, "--display", "none",
    )  # fmt: skip
    assert code == 0, output
    return output.rsplit("task id: ", 1)[1].split()[0]


def read_files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in FILES if (folder / name).exists()}


# -- migrations --------------------------------------------------------------------------------


def test_a_new_store_records_every_migration_in_order(store_at: str) -> None:
    with TaskStore(store_at) as opened:
        names = [n for (n,) in opened.backend.execute("SELECT name FROM migrations")]
        (schema,) = opened.backend.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
    assert sorted(names) == sorted(m.__name__ for m in MIGRATIONS)
    assert int(schema) == SCHEMA_VERSION == len(MIGRATIONS)


@pytest.mark.parametrize("edit", ["schema", "unknown migration"])
def test_a_store_from_a_newer_engine_is_refused(store_at: str, edit: str) -> None:
    TaskStore(store_at).close()
    with TaskStore(store_at) as opened:
        if edit == "schema":
            sql, args = "UPDATE meta SET value=? WHERE name='schema'", (str(SCHEMA_VERSION + 1),)
        else:
            sql, args = "INSERT INTO migrations VALUES (?, ?)", ("m999_from_the_future", "now")
        opened.backend.execute(sql, args)
        opened.backend.commit()
    with pytest.raises(StoreError, match="is newer than this rubric-eval understands"):
        TaskStore(store_at)


def test_a_schema_2_sqlite_store_opens_and_its_published_versions_still_verify(
    tmp_path: Path,
) -> None:
    store = tmp_path / "v2.sqlite"
    run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store)
    db = sqlite3.connect(store)  # back to what schema 2 wrote: no work items, no record
    db.execute("DROP TABLE work_items")
    db.execute("DROP TABLE migrations")
    db.execute("UPDATE meta SET value='2' WHERE name='schema'")
    db.commit()
    db.close()
    with TaskStore(store) as opened:
        assert RubricRegistry(opened).resolve("health_cs").rubric().version == 1
        assert "work_items" in opened.backend.tables()
        names = {n for (n,) in opened.backend.execute("SELECT name FROM migrations")}
    assert names == {m.__name__ for m in MIGRATIONS}


def test_an_unreachable_postgres_store_says_what_to_check(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://nobody:secret@/nodb?host={tmp_path}&port=1"
    code, out = run("tasks", "--store", url)
    assert code == 3 and "cannot open the PostgreSQL store" in out
    assert "secret" not in out and "nobody:***@" in out  # the password is never printed


def test_store_urls_keep_their_slashes_and_hide_passwords() -> None:
    found = parse_location("postgresql://u:pw@db.example/rubric")
    assert isinstance(found, PostgresUrl) and found.url == "postgresql://u:pw@db.example/rubric"
    assert str(found) == "postgresql://u:***@db.example/rubric"
    assert parse_location("sqlite:some/store.sqlite") == Path("some/store.sqlite")


# -- the same reports from either backend ------------------------------------------------------


def _mask(data: bytes, task: str) -> bytes:
    data = data.replace(task.encode(), b"<task>")
    data = re.sub(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", b"<time>", data)
    data = re.sub(rb'("latencyMs\w*": )[0-9.]+', rb"\1<ms>", data)
    return re.sub(rb"Latency per row: [^\n<]*", b"Latency per row: <ms>", data)


def test_the_same_task_on_sqlite_and_postgres_gives_the_same_report_files(
    tmp_path: Path, pg_url: str
) -> None:
    outs = {}
    for name, store in (("sqlite", tmp_path / "s.sqlite"), ("postgres", pg_url)):
        task = score_demo(store, *DEMOS[0], tmp_path / name)
        files = read_files(tmp_path / name)
        files.pop("report.html")  # the three files; the HTML shows latencies in places
        assert set(files) == {"report.json", "report.md", "rows.jsonl"}
        # what two runs may differ in: the task id, clock times and measured latencies
        outs[name] = {f: _mask(data, task) for f, data in files.items()}
    assert outs["sqlite"] == outs["postgres"]


def test_store_migrate_of_the_demo_store_rebuilds_every_report_byte_for_byte(
    tmp_path: Path, pg_url: str
) -> None:
    demo = tmp_path / "demo.sqlite"
    tasks = {score_demo(demo, cases, key, tmp_path / key): key for cases, key in DEMOS}
    run("rubric", "retire", "airline_cs@1", "--store", demo)  # a retired version is copied too
    code, out = run("store", "migrate", "--from", f"sqlite:{demo}", "--to", pg_url)
    assert code == 0, out
    assert "2 tasks" in out and "51 rows" in out and "2 rubric_versions" in out
    for task, key in tasks.items():
        code, out = run("report", task, "--store", pg_url, "--out", tmp_path / "pg" / key)
        assert code == 0, out
        original = read_files(tmp_path / key)
        assert len(original) >= 3 and read_files(tmp_path / "pg" / key) == original
    code, out = run("rubric", "list", "--store", pg_url)
    assert "airline_cs" in out and "RETIRED" in out and "health_cs" in out
    # a second copy would duplicate tasks: refused, nothing written
    code, out = run("store", "migrate", "--from", str(demo), "--to", pg_url)
    assert code == 3 and "task(s) already in the target" in out and "nothing was copied" in out
    with TaskStore(pg_url) as opened:
        assert len(opened.tasks()) == 2


def test_store_migrate_copies_the_labels(tmp_path: Path, pg_url: str) -> None:
    """Labels are a table of the migration list (m004), so ``store migrate`` copies them with
    their ids, order and supersedes links; the copy is append-only like the original."""
    from rubric_engine.labels.model import Label
    from rubric_engine.labels.store import append_labels, read_labels

    demo = tmp_path / "demo.sqlite"
    task = score_demo(demo, *DEMOS[0], tmp_path / "out")
    base = {
        "rowId": "medgpt-1",
        "requirementId": "COMMON_BACKEND_EXPOSURE",
        "reviewer": "ann",
        "rubricKey": "health_cs",
        "taskId": task,
    }
    with TaskStore(demo) as opened:
        append_labels(opened.backend, [Label.model_validate({**base, "status": "VIOLATED"})])
        append_labels(opened.backend, [Label.model_validate({**base, "status": "FOLLOWED"})])
        before = read_labels(opened.backend, include_superseded=True)
    code, out = run("store", "migrate", "--from", demo, "--to", pg_url)
    assert code == 0 and "2 labels" in out, out
    with TaskStore(pg_url) as opened:
        assert read_labels(opened.backend, include_superseded=True) == before
        assert [lab.status for lab in read_labels(opened.backend)] == [before[1].status]


def test_store_migrate_refuses_a_table_the_target_does_not_know(
    tmp_path: Path, pg_url: str
) -> None:
    demo = tmp_path / "demo.sqlite"
    with TaskStore(demo) as opened:
        opened.backend.execute("CREATE TABLE notes (text TEXT)")
        opened.backend.execute("INSERT INTO notes VALUES ('x')")
        opened.backend.commit()
    code, out = run("store", "migrate", "--from", demo, "--to", pg_url)
    assert code == 3 and "table 'notes' has rows but the target has no such table" in out


def test_the_store_url_may_come_from_the_environment(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = score_demo(pg_url, *DEMOS[0], tmp_path / "out")
    monkeypatch.setenv("RUBRIC_EVAL_STORE", pg_url)
    code, out = run("tasks")
    assert code == 0 and task in out and "26/26" in out


@pytest.mark.parametrize("round_", range(3))
def test_two_processes_publishing_the_same_file_at_once_one_wins_one_is_a_no_op(
    store_at: str, round_: int
) -> None:
    import multiprocessing

    from tests.test_lifecycle import _publish_after

    TaskStore(store_at).close()
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    pack = str(RUBRICS / "health_cs.yaml")
    workers = [
        ctx.Process(target=_publish_after, args=(barrier, store_at, pack, results))
        for _ in range(2)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    outcomes = sorted(results.get(timeout=5) for _ in workers)
    assert outcomes == [("ok", False), ("ok", True)]  # created once; the other: "nothing changed"
    with TaskStore(store_at) as opened:
        assert [v.ref for v in RubricRegistry(opened).versions()] == ["health_cs@1"]


def test_a_task_runs_in_one_process_at_a_time_on_either_backend(store_at: str) -> None:
    from rubric_engine.engine import task_lock

    where = parse_location(store_at)
    TaskStore(where).close()
    with task_lock(where, "T1"), pytest.raises(StoreError, match="being run by another"):  # noqa: SIM117
        with task_lock(where, "T1"):
            pass
    with task_lock(where, "T1"), task_lock(where, "T2"):  # released; other tasks are free
        pass


def test_store_migrate_also_copies_postgres_back_into_a_sqlite_file(
    tmp_path: Path, pg_url: str
) -> None:
    task = score_demo(pg_url, *DEMOS[1], tmp_path / "pg")
    back = tmp_path / "back.sqlite"
    code, out = run("store", "migrate", "--from", pg_url, "--to", back)
    assert code == 0 and "1 tasks" in out and "25 rows" in out, out
    code, out = run("report", task, "--store", back, "--out", tmp_path / "sqlite")
    assert code == 0, out
    assert read_files(tmp_path / "sqlite") == read_files(tmp_path / "pg")


def _labelled_airline_store(store: object, out: Path) -> str:
    """The airline demo scored into ``store`` and the demo override labels imported on it."""
    task = score_demo(store, *DEMOS[1], out)
    labels = CASES / "labels" / "airline_red_line_overrides.jsonl"
    code, output = run("labels", "import", labels, "--task", task, "--store", store)
    assert code == 0 and "imported 8 label(s)" in output, output
    return task


def test_store_migrate_into_a_store_with_labels_and_review_events_of_its_own(
    tmp_path: Path, store_at: str
) -> None:
    """A team store that already holds labels and review events takes another store's: their
    ``seq`` is only the order they were stored in, so the copies are numbered after the
    target's own (the copy used to stop on "UNIQUE constraint failed: labels.seq" with a
    traceback), and calibrating the copied task there gives what it gave in its own store."""
    from rubric_engine.review.rows import _insert_event

    demo = tmp_path / "demo.sqlite"
    task = _labelled_airline_store(demo, tmp_path / "demo")
    mine = _labelled_airline_store(store_at, tmp_path / "mine")
    for where, of in ((demo, task), (store_at, mine)):
        with TaskStore(where) as opened:
            _insert_event(opened, of, "airline-3", "settle", "mia", None)
            opened.backend.commit()
    code, before = run("calibrate", task, "--no-save", "--store", demo)
    assert code == 0, before
    code, out = run("store", "migrate", "--from", demo, "--to", store_at)
    assert code == 0 and "8 labels" in out and "1 review_events" in out, out
    code, after = run("calibrate", task, "--no-save", "--store", store_at)
    assert code == 0 and after == before
    with TaskStore(store_at) as opened:
        events = opened.backend.execute(
            "SELECT seq, task_id FROM review_events ORDER BY seq"
        ).fetchall()
        labels = opened.backend.execute("SELECT task_id FROM labels ORDER BY seq").fetchall()
    assert [tuple(e) for e in events] == [(1, mine), (2, task)]
    assert [t for (t,) in labels] == [mine] * 8 + [task] * 8  # the target's first, in order


def test_store_migrate_names_a_reviewer_account_the_target_has_and_copies_nothing(
    tmp_path: Path, store_at: str
) -> None:
    """Two stores that each made an account of the same name: the copy is refused before
    anything is written, naming the account (it used to stop inside the copy on "UNIQUE
    constraint failed: reviewers.name" with a traceback and "a bug in rubric-eval")."""
    demo = tmp_path / "demo.sqlite"
    score_demo(demo, *DEMOS[0], tmp_path / "demo")
    TaskStore(parse_location(store_at)).close()
    for where in (demo, store_at):
        for name in ("mia", "noah") if where == demo else ("mia",):
            code, out = run("reviewers", "add", name, "--store", where)
            assert code == 0, out
    code, out = run("store", "migrate", "--from", demo, "--to", store_at)
    assert code == 3, out
    assert "nothing was copied" in out and "reviewer account(s) already in the target: mia\n" in out
    assert "Traceback" not in out
    with TaskStore(store_at) as opened:
        assert opened.tasks() == []


def test_an_interrupted_store_migrate_says_nothing_was_copied(
    tmp_path: Path, store_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the middle of the copy: the target's transaction is rolled back and the
    command says so (it ended with exit 130 and printed nothing), and the same command run
    again copies everything."""
    from rubric_engine.store import copy

    demo = tmp_path / "demo.sqlite"
    score_demo(demo, *DEMOS[0], tmp_path / "demo")
    real = copy._copy_table

    def interrupted(a: Backend, b: Backend, table: str, same: set[tuple[str, int]]) -> int:
        count = real(a, b, table, same)
        if table == "rows":
            raise KeyboardInterrupt
        return count

    monkeypatch.setattr(copy, "_copy_table", interrupted)
    code, out = run("store", "migrate", "--from", demo, "--to", store_at)
    assert code == 130, out
    assert f"interrupted: nothing was copied into {parse_location(store_at)}" in out, out
    with TaskStore(store_at) as opened:
        assert opened.tasks() == []
    monkeypatch.setattr(copy, "_copy_table", real)
    code, out = run("store", "migrate", "--from", demo, "--to", store_at)
    assert code == 0 and "1 tasks" in out and "26 rows" in out, out


def test_store_migrate_from_a_store_that_is_not_there_names_from(tmp_path: Path) -> None:
    """``--from`` a path with no store said "no task store here; pass --store PATH, or start
    one: rubric-eval rubric publish ...", an option migrate does not have and advice for
    someone starting out; it now names --from and what it takes, and makes no target."""
    source, target = tmp_path / "nosuch.sqlite", tmp_path / "target.sqlite"
    code, out = run("store", "migrate", "--from", source, "--to", target)
    assert code == 3, out
    assert f"--from {source}: no task store here, so nothing to copy" in out, out
    assert "--store" not in out and "publish" not in out
    assert not target.exists()


def test_store_migrate_counts_every_task_already_in_the_target(tmp_path: Path) -> None:
    """The refusal names ten task ids and says how many there are in all (it listed ten and
    no more, so a store with 500 clashes read like one with ten), and its advice is one a
    user can follow: rubric-eval has no command that deletes a task."""
    demo, target = tmp_path / "demo.sqlite", tmp_path / "target.sqlite"
    score_demo(demo, *DEMOS[0], tmp_path / "demo")
    with TaskStore(demo) as opened:
        cursor = opened.backend.execute("SELECT * FROM tasks")
        names, (first,) = [d[0] for d in cursor.description], cursor.fetchall()
        marks = ", ".join("?" * len(names))
        for n in range(11):
            values = [f"T{n:02}" if c == "id" else v for c, v in zip(names, first, strict=True)]
            opened.backend.execute(f"INSERT INTO tasks VALUES ({marks})", values)
        opened.backend.commit()
    code, out = run("store", "migrate", "--from", demo, "--to", target)
    assert code == 0, out
    code, out = run("store", "migrate", "--from", demo, "--to", target)
    assert code == 3 and ", T00, T01, T02, T03, T04, T05, T06, T07, T08, … (12 in all)" in out
    assert "a new SQLite file, or a new PostgreSQL database" in out and "remove" not in out


def test_store_migrate_keeps_a_label_the_target_holds_already_and_copies_the_rest(
    tmp_path: Path, store_at: str
) -> None:
    """The same label file (labels naming their rubric, with their times) imported into two
    stores gives the same labels, ids and all: the copy keeps the target's and copies the
    others, as it keeps a rubric version with the same content (it used to stop on the
    label's id with a traceback)."""
    line = {
        "rowId": "medgpt-1", "requirementId": "COMMON_BACKEND_EXPOSURE", "status": "VIOLATED",
        "reviewer": "ann", "rubricKey": "health_cs", "rubricVersion": 1,
        "time": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    both, other = tmp_path / "both.jsonl", tmp_path / "other.jsonl"
    both.write_text(json.dumps(line) + "\n", encoding="utf-8")
    other.write_text(json.dumps({**line, "reviewer": "bea"}) + "\n", encoding="utf-8")
    demo = tmp_path / "demo.sqlite"
    for where, files in ((demo, (both, other)), (store_at, (both,))):
        code, out = run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", where)
        assert code == 0, out
        for file in files:
            code, out = run("labels", "import", file, "--store", where)
            assert code == 0 and "imported 1 label(s)" in out, out
    code, out = run("store", "migrate", "--from", demo, "--to", store_at)
    assert code == 0 and "1 labels" in out, out
    with TaskStore(store_at) as opened:
        found = opened.backend.execute("SELECT reviewer FROM labels ORDER BY seq").fetchall()
    assert [r for (r,) in found] == ["ann", "bea"]


def test_store_migrate_of_a_row_the_target_refuses_names_the_table_and_copies_nothing(
    tmp_path: Path, store_at: str
) -> None:
    """A row the target's constraints refuse, of a kind not checked before the copy (here a
    calibration id that both stores hold), stops the copy with its table and the database's
    words and nothing written, instead of a traceback and "a bug in rubric-eval"."""
    demo = tmp_path / "demo.sqlite"
    score_demo(demo, *DEMOS[0], tmp_path / "demo")
    TaskStore(parse_location(store_at)).close()
    for where in (demo, store_at):
        with TaskStore(parse_location(str(where))) as opened:
            opened.backend.execute(
                "INSERT INTO calibrations VALUES ('C1', 't', 'T', 'k', 1, 'h', 'p', 'ph', 'm', "
                "'{}', '[]', '{}', '{}')"
            )
            opened.backend.commit()
    code, out = run("store", "migrate", "--from", demo, "--to", store_at)
    assert code == 3, out
    assert "nothing was copied" in out and "table calibrations:" in out and "Traceback" not in out
    with TaskStore(store_at) as opened:
        assert opened.tasks() == []


@pytest.mark.parametrize("command", ["score", "report", "publish"])
def test_a_folder_given_as_store_is_named_as_a_folder_with_a_file_to_use(
    tmp_path: Path, command: str
) -> None:
    """``--store FOLDER`` says it is a folder and names a store file inside it, whichever
    command reads the store first (score used to say "no store here, publish first")."""
    args = {
        "score": ("score", CASES / "health_consult_zh.jsonl", "--rubric", "health_cs",
                  "--out", tmp_path / "out"),
        "report": ("report", "t-unknown"),
        "publish": ("rubric", "publish", RUBRICS / "health_cs.yaml"),
    }[command]  # fmt: skip
    code, out = run(*args, "--store", tmp_path)
    assert code != 0
    assert f"{tmp_path} is a folder; --store takes the path of a store file" in out, out
    assert "publish first" not in out
    assert list(tmp_path.iterdir()) == []  # nothing written into the folder


@pytest.mark.parametrize("send_every", [1, 1000])
def test_rows_wait_for_their_commit_and_the_store_reads_what_it_wrote(
    store_at: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, send_every: int
) -> None:
    """Rows are sent in executemany runs (SQLite: every SEND_EVERY_ROWS rows and at the
    commit; PostgreSQL: at the commit): another connection sees none of a commit
    window before its commit, sent or not, and all of it after; the writing store's own reads
    see its rows at once."""
    import dataclasses

    import rubric_engine.store.task_store

    monkeypatch.setattr(
        rubric_engine.store.task_store, "COMMIT_INTERVAL_S", 3600.0
    )  # by count only
    monkeypatch.setattr(rubric_engine.store.task_store, "SEND_EVERY_ROWS", send_every)
    source = score_demo(store_at, *DEMOS[0], tmp_path / "out")
    with TaskStore(store_at) as writer, TaskStore(store_at) as reader:
        task = writer.task(source)
        target = task.id + "-copy"
        writer.create_task(dataclasses.replace(task, id=target, state="RUNNING"))
        rows = list(writer.rows(source))[:5]
        for row in rows[:2]:
            writer.add_row(target, row, commit_every=3)
        assert reader.finished_rows().get(target) is None  # not committed yet
        assert writer.finished_rows()[target] == 2  # sent before this store reads
        writer.add_row(target, rows[2], commit_every=3)  # the third row commits
        writer.add_row(target, rows[3], commit_every=3)
        assert reader.finished_rows()[target] == 3
        assert [r.result for r in writer.rows(target)] == [r.result for r in rows[:4]]
    with TaskStore(store_at) as again:  # closing the writer committed its last row
        assert again.finished_rows()[target] == 4


def stored_before_digests(db: Backend, task_id: str) -> None:
    """Make a task look as an engine before row digests stored it (docs/verify.md)."""
    (extra,) = db.execute("SELECT extra FROM tasks WHERE id = ?", (task_id,)).fetchone()
    extra = {k: v for k, v in json.loads(extra).items() if k != "rowDigests"}
    db.execute("UPDATE tasks SET extra = ? WHERE id = ?", (json.dumps(extra), task_id))
    db.execute("UPDATE rows SET digest = NULL WHERE task_id = ?", (task_id,))
    # and the store took digests after the task was created, as an upgraded store did
    db.execute(
        "UPDATE migrations SET applied_at = '2100-01-01T00:00:00Z' "
        "WHERE name = 'm011_samples_and_digests'"
    )


def test_raw_attempts_stored_in_another_spelling_are_rewritten_canonical(
    store_at: str, tmp_path: Path
) -> None:
    """A store whose ``raw_attempts`` columns hold the attempts spelled another way (spaced,
    keys in another order, a lone surrogate escaped: what engines of one period stored for a
    replayed reply) is rewritten to the canonical text when it opens; the values read back
    are the same, and the report files of the task are unchanged. (Such stores predate row
    digests: the task is made to look like one of theirs, without digests.)"""
    task = score_demo(store_at, *DEMOS[0], tmp_path / "before")
    with TaskStore(store_at) as opened:
        db = opened.backend
        stored_before_digests(db, task)
        rows = db.execute("SELECT row_id, raw_attempts FROM rows WHERE task_id = ?", (task,))
        canonical = dict(rows.fetchall())
        spelled = {}
        for n, (row_id, text) in enumerate(canonical.items()):
            attempts = json.loads(text)
            if n == 0:  # a reply holding half a UTF-16 pair, escaped as the column holds it
                attempts[0]["response"]["note"] = "\udfff"
            attempts = [dict(reversed(a.items())) for a in attempts]
            spelled[row_id] = json.dumps(attempts, ensure_ascii=n == 0)
            if n == 0:
                canonical[row_id] = raw_attempts_text(json.loads(spelled[row_id]))
        for row_id, text in spelled.items():
            db.execute(
                "UPDATE rows SET raw_attempts = ? WHERE task_id = ? AND row_id = ?",
                (text, task, row_id),
            )
        db.execute("DELETE FROM migrations WHERE name = 'm009_canonical_raw_attempts'")
        db.commit()
    with TaskStore(store_at) as opened:
        rows = opened.backend.execute(
            "SELECT row_id, raw_attempts FROM rows WHERE task_id = ?", (task,)
        )
        after = dict(rows.fetchall())
        assert after == canonical
        assert all(after[k] != spelled[k] for k in after)
        assert "\\udfff" in after[next(iter(canonical))]  # the row given the surrogate (n == 0)
        run("report", task, "--store", store_at, "--out", tmp_path / "after")
    before, again = read_files(tmp_path / "before"), read_files(tmp_path / "after")
    assert {n: _mask(b, task) for n, b in before.items()} == {
        n: _mask(b, task) for n, b in again.items()
    }


def test_docs_stores_names_every_migration() -> None:
    """docs/stores.md lists the migrations by name; it said m001–m008 while the store recorded
    m001–m013 (newcomer finding): a migration added without its line fails here."""
    text = (ROOT / "docs" / "stores.md").read_text(encoding="utf-8")
    missing = [m.__name__ for m in MIGRATIONS if f"`{m.__name__}`" not in text]
    assert not missing, f"docs/stores.md does not name {missing}"
