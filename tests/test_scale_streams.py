"""Commands that read a whole task do it a page of rows at a time (docs/scale.md): export in
chunks and Parquet row groups, diff as a rowId merge with a capped list, labels export,
store migrate. Here the pages and chunks are made tiny, so the small demo tasks cross many of
them, and each streamed output is compared with what the whole task in memory gives.
Memory itself is measured by ``benchmarks/run.py scale``, not here."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.errors import ConfigurationError, StoreError
from rubric_engine.report.diff import diff_tasks
from rubric_engine.report.diff_stream import stream_diff
from rubric_engine.report.render import export as export_module
from rubric_engine.report.render.json_md import render_diff_markdown
from rubric_engine.report.stored import diff_side, load_task
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, ROOT, RUBRICS

runner = CliRunner()
HEALTH = CASES / "health_consult_zh.jsonl"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The health demo scored twice (its cassettes and the worse ones), and 22 of its rows in
    reverse order (a partial task whose input order is not its rowId order)."""
    tmp = tmp_path_factory.mktemp("scale")
    store = tmp / "s.sqlite"
    rows = HEALTH.read_text("utf-8").splitlines()
    subset = tmp / "subset.jsonl"
    subset.write_text("\n".join(reversed(rows[4:])) + "\n", encoding="utf-8")
    made = {}
    for name, cassettes, inputs in (
        ("demo", ROOT / "cassettes", HEALTH),
        ("worse", ROOT / "cassettes-worse", HEALTH),
        ("subset", ROOT / "cassettes-worse", subset),
    ):
        made[name] = _scored(store, tmp / name, cassettes, name, inputs=[inputs])
    return store, made


@pytest.fixture
def tiny_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every paged store read takes 3 rows a query."""
    monkeypatch.setattr(TaskStore.select_rows, "__kwdefaults__", {"page": 3})
    monkeypatch.setattr(TaskStore.checked_rows, "__defaults__", (3, False, None, "seq"))
    monkeypatch.setattr(TaskStore.report_rows, "__defaults__", (3,))


def invoke(*args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


# -- export ------------------------------------------------------------------------------------


@pytest.mark.parametrize("long", [False, True])
def test_export_in_chunks_writes_what_one_chunk_writes(
    tasks: tuple[Path, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tiny_pages: None,
    long: bool,
) -> None:
    import pyarrow.parquet as pq

    store, made = tasks
    flag = ["--long"] if long else []
    whole = {}
    for fmt in ("csv", "jsonl", "parquet"):
        whole[fmt] = tmp_path / f"whole.{fmt}"
        invoke(
            "export", made["subset"], "--store", store, "--format", fmt, "--out", whole[fmt], *flag
        )
    monkeypatch.setattr(export_module, "CHUNK", 5)
    for fmt in ("csv", "jsonl"):
        out = tmp_path / f"chunked.{fmt}"
        invoke("export", made["subset"], "--store", store, "--format", fmt, "--out", out, *flag)
        assert out.read_bytes() == whole[fmt].read_bytes()
    out = tmp_path / "chunked.parquet"
    said = invoke(
        "export", made["subset"], "--store", store, "--format", "parquet", "--out", out, *flag
    )
    chunked, one = pq.read_table(out), pq.read_table(whole["parquet"])
    assert chunked.equals(one) and chunked.schema == one.schema
    records = one.num_rows
    assert f"{records} row(s)" in said and (records == 22 or long)
    assert pq.ParquetFile(out).num_row_groups == -(-records // 5)
    assert pq.ParquetFile(whole["parquet"]).num_row_groups == 1


def _rows_with_metadata(values: list[object]) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in HEALTH.read_text("utf-8").splitlines()]
    out = []
    for row, value in zip(rows, values, strict=False):
        metadata = {"scenario": "s"} if value is None else {"scenario": "s", "late": value}
        out.append({**row, "metadata": metadata})
    return out


def _scored(store: Path, out: Path, cassettes: Path, name: str, **given: object) -> str:
    options = ScoreOptions(
        rubric=RUBRICS / "health_cs.yaml", draft=True, store=store, out=out, cassettes=cassettes,
        name=name, **given,  # type: ignore[arg-type]
    )  # fmt: skip
    return score(options).task_id


def _rules_only(store: Path, rows: list[dict[str, object]], name: str) -> str:
    """Demo rows with other metadata, replayed (metadata is not in the judge's request)."""
    return _scored(store, store.parent / name, ROOT / "cassettes", name, rows=rows)


def test_a_metadata_field_first_seen_in_a_later_row_group_keeps_its_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = tmp_path / "s.sqlite"
    task = _rules_only(store, _rows_with_metadata([None] * 12 + [7, 8, None, 9]), "late")
    monkeypatch.setattr(export_module, "CHUNK", 4)
    out = tmp_path / "late.parquet"
    invoke("export", task, "--store", store, "--format", "parquet", "--out", out)
    table = pq.read_table(out)
    assert table.schema.field("metadata.late").type == pa.int64()
    assert table.column("metadata.late").to_pylist() == [None] * 12 + [7, 8, None, 9]
    with pq.ParquetFile(out) as opened:
        assert opened.num_row_groups == 4


def test_values_of_two_kinds_in_one_column_are_refused_for_parquet_only(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    task = _rules_only(store, _rows_with_metadata([1, "one", 2]), "mixed")
    result = runner.invoke(
        app, ["export", task, "--store", str(store), "--format", "parquet",
              "--out", str(tmp_path / "m.parquet")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "'metadata.late'" in result.output and "--format csv or jsonl" in result.output
    assert not (tmp_path / "m.parquet").exists() and not list(tmp_path.glob(".m.parquet*"))
    invoke("export", task, "--store", store, "--out", tmp_path / "m.csv")
    rows = list(csv.DictReader((tmp_path / "m.csv").open(encoding="utf-8")))
    assert [r["metadata.late"] for r in rows] == ["1", "one", "2"]


# -- diff --------------------------------------------------------------------------------------

PAIRS = [("demo", "worse"), ("worse", "demo"), ("demo", "subset"), ("subset", "demo")]


@pytest.mark.parametrize(("base", "cur"), PAIRS)
def test_the_merged_diff_is_the_diff_of_the_tasks_in_memory(
    tasks: tuple[Path, dict[str, str]], tiny_pages: None, base: str, cur: str
) -> None:
    store, made = tasks
    with TaskStore(store) as opened:
        in_memory = diff_tasks(
            diff_side(load_task(opened, made[base])), diff_side(load_task(opened, made[cur]))
        )
        merged = stream_diff(opened, made[base], opened, made[cur], max_items=None)
    assert merged.to_json() == in_memory.to_json()
    assert merged.capped is None and "capped" not in merged.to_json()


def test_a_capped_diff_counts_every_item_lists_the_most_important_and_writes_all(
    tasks: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    store, made = tasks
    with TaskStore(store) as opened:
        full = stream_diff(opened, made["demo"], opened, made["subset"], max_items=None)
        items = tmp_path / "all.jsonl"
        capped = stream_diff(
            opened, made["demo"], opened, made["subset"], max_items=3, items_file=items
        )
    counts = ("regression_count", "improvement_count", "changed_count", "has_regression")
    assert [getattr(capped, c) for c in counts] == [getattr(full, c) for c in counts]
    case = [i for i in full.items if i.scope == "case"]
    listed = [i for i in capped.items if i.scope == "case"]
    assert capped.capped is not None and capped.capped.case_items == len(case) > 3
    assert capped.capped.listed == len(listed) == 3
    assert capped.capped.items_file == str(items)
    # the most important: regressions of a missing row first, listed in row order
    assert all(i.type == "REGRESSION" and i.metric == "presence" for i in listed)
    assert listed == [i for i in case if i in listed]
    written = items.read_text("utf-8").splitlines()
    assert sorted(written) == sorted(
        json.dumps(i.to_json_dict(), ensure_ascii=False) for i in full.items
    )
    text = render_diff_markdown(capped)
    assert f"the 3 most important of {len(case)} case items" in text
    assert f"every item is in {items}" in text
    regressions = full.regression_count
    shown = sum(1 for i in capped.items if i.type == "REGRESSION")
    assert f"## Regressions ({regressions}; {shown} listed)" in text


def test_the_cli_writes_every_item_beside_out_only_when_some_are_not_listed(
    tasks: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    store, made = tasks
    out = tmp_path / "d.md"
    said = invoke("diff", made["demo"], made["subset"], "--store", store, "--out", out)
    assert not (tmp_path / "d.items.jsonl").exists() and "every item" not in said
    said = invoke("diff", made["demo"], made["subset"], "--store", store, "--out", out,
                  "--max-items", "2")  # fmt: skip
    assert (tmp_path / "d.items.jsonl").exists() and "wrote" in said and "d.items.jsonl" in said
    assert "- Listed: the 2 most important" in out.read_text("utf-8")
    html = tmp_path / "d.html"
    invoke("diff", made["demo"], made["subset"], "--store", store, "--format", "html",
           "--out", html, "--max-items", "2", "--items", tmp_path / "every.jsonl")  # fmt: skip
    assert "Listed: the 2 most important" in html.read_text("utf-8")
    assert (tmp_path / "every.jsonl").exists()


def test_the_cli_default_cap_is_the_library_s() -> None:
    from rubric_engine.cli.gate_cmd import MAX_ITEMS as SHOWN
    from rubric_engine.report.diff_list import MAX_ITEMS

    assert SHOWN == MAX_ITEMS


def test_a_store_that_returns_rows_out_of_rowid_order_is_refused(
    tasks: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, made = tasks
    original = TaskStore.checked_rows

    def shuffled(self: TaskStore, task_id: str, *args: object, **kw: object):  # type: ignore[no-untyped-def]
        found = list(original(self, task_id, *args, **kw))  # type: ignore[arg-type]
        if kw.get("by") != "row_id":  # the report's pass reads in input order
            return iter(found)
        return iter(found[1:2] + found[:1] + found[2:])

    monkeypatch.setattr(TaskStore, "checked_rows", shuffled)
    with TaskStore(store) as opened, pytest.raises(StoreError, match=r"rowId \(code point\)"):
        stream_diff(opened, made["demo"], opened, made["worse"])


def test_a_diff_across_two_stores_merges_them(
    tasks: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    store, made = tasks
    other = tmp_path / "other.sqlite"
    invoke("store", "migrate", "--from", store, "--to", other)
    with TaskStore(store) as one, TaskStore(other) as two:
        across = stream_diff(two, made["demo"], one, made["subset"])
        within = stream_diff(one, made["demo"], one, made["subset"])
    assert across.to_json() == within.to_json()


def test_tasks_with_nothing_in_common_are_still_refused(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    health = _rules_only(store, _rows_with_metadata([None] * 3), "h")
    airline = ScoreOptions(
        inputs=[CASES / "airline_tau2_dev.json"], rubric=RUBRICS / "airline_cs.yaml",
        draft=True, store=store, out=tmp_path / "a", cassettes=ROOT / "cassettes",
    )  # fmt: skip
    other = score(airline).task_id
    with TaskStore(store) as opened, pytest.raises(ConfigurationError, match="nothing comparable"):
        stream_diff(opened, health, opened, other)


# -- labels export, store migrate, paged reads --------------------------------------------------


def test_labels_export_reads_a_page_at_a_time_and_keeps_the_stored_order(
    tasks: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rubric_engine.labels import store as label_store
    from rubric_engine.labels.io import render_labels
    from rubric_engine.labels.store import read_labels

    store, made = tasks
    first = tmp_path / "first.jsonl"
    rows = [json.loads(line)["rowId"] for line in HEALTH.read_text("utf-8").splitlines()]
    lines = [{"rowId": r, "requirementId": "COMMON_BACKEND_EXPOSURE", "status": "FOLLOWED",
              "reviewer": who} for r in rows for who in ("ann", "bo")]  # fmt: skip
    first.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    invoke("labels", "import", first, "--task", made["demo"], "--store", store)
    edits = tmp_path / "edits.jsonl"
    changed = [{**x, "status": "VIOLATED"} for x in lines[::3]]
    edits.write_text("".join(json.dumps(x) + "\n" for x in changed), encoding="utf-8")
    invoke("labels", "import", edits, "--task", made["demo"], "--store", store)
    original = label_store.labels_on_task_rows
    monkeypatch.setattr(
        label_store,
        "labels_on_task_rows",
        lambda *a, **kw: original(*a, **{**kw, "page": 4}),
    )
    subset_rows = set(rows[4:])
    for every, flag in ((False, []), (True, ["--all"])):
        with TaskStore(store) as opened:
            expected = [
                lab
                for lab in read_labels(
                    opened.backend, rubric_key="health_cs", include_superseded=every
                )
                if lab.row_id in subset_rows
            ]
        for fmt in ("jsonl", "csv"):
            out = tmp_path / f"labels-{every}.{fmt}"
            said = invoke("labels", "export", made["subset"], "--store", store,
                          "--format", fmt, "--out", out, *flag)  # fmt: skip
            assert out.read_text("utf-8") == render_labels(expected, fmt)
            assert f"wrote {len(expected)} label(s)" in said
    assert len(expected) == 2 * 22 + len(changed) - sum(
        1 for x in changed if x["rowId"] not in subset_rows
    )


def test_store_migrate_in_small_batches_copies_every_row(
    tasks: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rubric_engine.store import copy

    store, made = tasks
    monkeypatch.setattr(copy, "_BATCH", 4)
    target = tmp_path / "copy.sqlite"
    said = invoke("store", "migrate", "--from", store, "--to", target)
    assert "74 rows" in said, said
    for name, task in made.items():
        invoke("report", task, "--store", target, "--out", tmp_path / name)
        for file in ("report.json", "rows.jsonl", "report.md"):
            copied = (tmp_path / name / file).read_text("utf-8")
            assert copied == (store.parent / name / file).read_text("utf-8"), (name, file)


def _schema(path: Path) -> list[tuple[str, str, str]]:
    import sqlite3

    with sqlite3.connect(path) as db:
        query = "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
        return db.execute(query).fetchall()


def test_store_migrate_into_sqlite_keeps_every_index(
    tasks: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """A SQLite target builds its secondary indexes after a table's rows are in (docs/scale.md):
    afterwards it has the same tables and indexes as a store the engine made."""
    store, _ = tasks
    target = tmp_path / "copy.sqlite"
    invoke("store", "migrate", "--from", store, "--to", target)
    assert any(name == "rows_by_seq" for _, name, _ in _schema(target))
    assert _schema(target) == _schema(store)


def test_a_failed_store_migrate_leaves_the_sqlite_target_with_its_indexes(
    tasks: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The indexes dropped for the copy come back with the rollback when a copy fails."""
    from rubric_engine.store import copy

    store, _ = tasks
    target = tmp_path / "copy.sqlite"
    TaskStore(target).close()  # an empty store with the engine's schema
    before = _schema(target)
    monkeypatch.setattr(copy, "_BATCH", 4)
    real, calls = copy._select, []

    def failing(db: object, table: str, columns: list[str]):  # type: ignore[no-untyped-def]
        for n, row in enumerate(real(db, table, columns)):  # type: ignore[arg-type]
            if table == "rows" and n == 10:
                calls.append(table)
                raise StoreError("the source went away")
            yield row

    monkeypatch.setattr(copy, "_select", failing)
    result = runner.invoke(app, ["store", "migrate", "--from", str(store), "--to", str(target)])
    assert result.exit_code != 0 and "the source went away" in result.output, result.output
    assert calls == ["rows"]
    assert _schema(target) == before
    with TaskStore(target) as opened:
        assert opened.backend.execute("SELECT COUNT(*) FROM rows").fetchone()[0] == 0


def test_store_migrate_from_postgresql_in_small_batches(
    tasks: tuple[Path, dict[str, str]], tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rubric_engine.store import copy

    store, made = tasks
    monkeypatch.setattr(copy, "_BATCH", 4)
    invoke("store", "migrate", "--from", store, "--to", pg_url)
    back = tmp_path / "back.sqlite"
    said = invoke("store", "migrate", "--from", pg_url, "--to", back)
    assert "74 rows" in said, said
    invoke("report", made["subset"], "--store", back, "--out", tmp_path / "r")
    for file in ("report.json", "rows.jsonl"):
        assert (tmp_path / "r" / file).read_text("utf-8") == (
            store.parent / "subset" / file
        ).read_text("utf-8")


@pytest.mark.parametrize("by", ["seq", "row_id"])
def test_paged_reads_give_every_row_once_in_order(
    tasks: tuple[Path, dict[str, str]], by: str
) -> None:
    store, made = tasks
    with TaskStore(store) as opened:
        whole = [row for row, _ in opened.checked_rows(made["subset"], 10_000, by=by)]
        paged = [row for row, _ in opened.checked_rows(made["subset"], 2, by=by)]
        seqs = list(opened.select_rows(made["subset"], "final_score", page=2))
    assert paged == whole and len(whole) == 22
    key = 1 if by == "seq" else 2
    assert [r[key] for r in whole] == sorted(r[key] for r in whole)
    assert seqs == [(r[1], r[2], r[4]) for r in sorted(whole)]


def test_a_gate_on_a_capped_diff_fails_on_every_regression_and_says_how_many_are_unlisted(
    tasks: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools

    from rubric_engine.report import run as report_run
    from rubric_engine.report.run import run_gate

    store, made = tasks
    full = run_gate(store, made["subset"], baseline=made["demo"], no_regression=True,
                    allow_partial=True)  # fmt: skip
    monkeypatch.setattr(report_run, "run_diff", functools.partial(report_run.run_diff, max_items=2))
    capped = run_gate(store, made["subset"], baseline=made["demo"], no_regression=True,
                      allow_partial=True)  # fmt: skip
    assert not full.passed and not capped.passed
    names = [c.name for c in capped.checks]
    assert names[-1] == "noRegression: more" and len(names) < len(full.checks)
    listed = sum(1 for c in capped.checks[:-1] if c.name.startswith("noRegression"))
    shown = capped.checks[-1].message.split()[0]
    assert listed + int(shown) == sum(1 for c in full.checks if c.name.startswith("noRegression"))


# -- labels import ------------------------------------------------------------------------------


def _label_lines(count: int, **changed: object) -> list[str]:
    base = {"requirementId": "COMMON_TRANSFER_PATH", "status": "FOLLOWED", "reviewer": "r",
            "rubricKey": "health_cs", "rubricVersion": 1}  # fmt: skip
    return [json.dumps({**base, "rowId": f"row-{k}", **changed}) for k in range(count)]


@pytest.fixture
def published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with the health pack published; labels stored 2 at a time."""
    from rubric_engine.labels import import_file

    store = tmp_path / "labels.sqlite"
    invoke("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store)
    monkeypatch.setattr(import_file, "CHUNK", 2)
    return store


def _stored(store: Path) -> list[str]:
    from rubric_engine.labels.store import read_labels

    with TaskStore(store) as opened:
        return [f"{lab.row_id} {lab.status}" for lab in read_labels(opened.backend)]


def test_labels_import_stores_a_file_in_chunks_as_one(published: Path, tmp_path: Path) -> None:
    file = tmp_path / "labels.jsonl"
    file.write_text("\n".join(_label_lines(7)) + "\n", "utf-8")
    said = invoke("labels", "import", file, "--store", published)
    assert "imported 7 label(s)" in said and "0 superseding" in said, said
    assert _stored(published) == [f"row-{k} FOLLOWED" for k in range(7)]
    edits = tmp_path / "edits.jsonl"
    edits.write_text("\n".join(_label_lines(5) + _label_lines(7, status="VIOLATED")[5:]), "utf-8")
    said = invoke("labels", "import", edits, "--store", published)
    assert "imported 2 label(s)" in said and "2 superseding" in said and "5 unchanged" in said


@pytest.mark.parametrize(
    ("last", "says"),
    [
        (_label_lines(1)[0], "already labelled on line 1"),
        (_label_lines(1, requirementId="NOT_A_REQUIREMENT")[0], "is not in health_cs@1"),
        (_label_lines(1, rubricKey=None, rowId="row-9")[0], "name no rubricKey"),
        ("{not json", "not a valid label line"),
    ],
)
def test_a_bad_last_line_stores_nothing(
    published: Path, tmp_path: Path, last: str, says: str
) -> None:
    file = tmp_path / "labels.jsonl"
    file.write_text("\n".join([*_label_lines(7), last]) + "\n", "utf-8")
    result = runner.invoke(app, ["labels", "import", str(file), "--store", str(published)])
    assert result.exit_code != 0 and says in result.output, result.output
    assert _stored(published) == []


def test_a_file_that_reads_otherwise_the_second_time_stores_nothing(
    published: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second pass stores chunks as it reads; a problem found only then (the file was
    changed between the passes) rolls every chunk back."""
    from rubric_engine.errors import Problem
    from rubric_engine.labels import import_file

    file = tmp_path / "labels.jsonl"
    file.write_text("\n".join(_label_lines(7)) + "\n", "utf-8")
    original, passes = import_file.label_stream, []

    def changed(path: Path, problems: list[Problem]):  # type: ignore[no-untyped-def]
        passes.append(path)
        yield from original(path, problems)
        if len(passes) == 2:
            problems.append(Problem(f"{path}:8", "", "a line added after the first pass"))

    monkeypatch.setattr(import_file, "label_stream", changed)
    result = runner.invoke(app, ["labels", "import", str(file), "--store", str(published)])
    assert result.exit_code != 0 and "a line added after the first pass" in result.output
    assert len(passes) == 2 and _stored(published) == []


def test_calibrate_reads_the_current_labels_a_page_at_a_time_by_row(
    published: Path, tmp_path: Path
) -> None:
    """``current_labels_by_row`` (calibrate's reader) gives each row's current labels in rowId
    order, pages of 3 as one read, and finds a superseded label through its index: no page
    lists every superseding label of the rubric (that list grew with the labels, every page)."""
    from rubric_engine.labels.store import current_labels_by_row, read_labels

    file, edits = tmp_path / "labels.jsonl", tmp_path / "edits.jsonl"
    other = _label_lines(7, reviewer="s", requirementId="COMMON_NO_COMPETITOR")
    file.write_text("\n".join(_label_lines(7) + other) + "\n", "utf-8")
    invoke("labels", "import", file, "--store", published)
    edits.write_text("\n".join(_label_lines(7, status="VIOLATED")[1::2]) + "\n", "utf-8")
    assert "3 superseding" in invoke("labels", "import", edits, "--store", published)
    with TaskStore(published) as opened:
        current = read_labels(opened.backend, rubric_key="health_cs")
        expected = [(row, [lab for lab in current if lab.row_id == row])
                    for row in sorted({lab.row_id for lab in current})]  # fmt: skip
        ran: list[str] = []
        opened.backend.connection.set_trace_callback(ran.append)
        for page in (3, 2000):
            assert list(current_labels_by_row(opened.backend, "health_cs", page=page)) == expected
        opened.backend.connection.set_trace_callback(None)
        plans = [
            [str(step[3]) for step in opened.backend.execute("EXPLAIN QUERY PLAN " + sql)]
            for sql in ran
            if sql.startswith("SELECT row_id, seq, label_id,") and " FROM labels WHERE " in sql
        ]
    assert len(current) == 14 and [lab.status for lab in dict(expected)["row-3"]] == [
        "FOLLOWED",
        "VIOLATED",
    ]
    assert len(plans) == 6, ran
    for plan in plans:
        assert any("labels_by_supersedes" in step for step in plan), plan
        assert not any("LIST SUBQUERY" in step for step in plan), plan
