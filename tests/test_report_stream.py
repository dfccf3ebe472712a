"""The report built as a stream equals the list-based build it replaced.

The oracle is main's list-based builder kept verbatim in ``tests/list_report.py``. Rows are the
demo tasks' real stored rows, varied by hypothesis (statuses, scores, red flags incl. orphans,
intents outside the pack, case-level requirements, rule summaries, metadata for slices and
router metrics, float latencies and costs whose sum depends on its order) and fed to the
accumulator in a drawn order, since a fresh run stores rows as they finish. A second test
checks the memory the accumulator holds: per passing row a few bytes, never the row.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.list_report as oracle
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.errors import ConfigurationError
from rubric_engine.report import load_task, task_section
from rubric_engine.report.accumulate import ReportAccumulator, WorstRows
from rubric_engine.report.render.json_md import json_chunks, render_json
from rubric_engine.report.rows import RowFacts, RowUsage
from rubric_engine.report.scratch_tables import ScratchTables
from rubric_engine.report.stored import StoredTask
from rubric_engine.results.model import (
    BasisEntry,
    BasisSource,
    JudgeError,
    JudgeErrorKind,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    RuleSummary,
    WarningCode,
)
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, RUBRICS

DEMOS = {
    "airline": ("airline_tau2_dev.json", "airline_cs.yaml"),
    "health": ("health_consult_zh.jsonl", "health_cs.yaml"),
}
Row = tuple[RowResult, RowUsage, RowFacts]


@pytest.fixture(scope="module")
def demo_tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StoredTask]:
    """Both demo tasks, replayed once and read back with every row."""
    folder = tmp_path_factory.mktemp("stream")
    tasks = {}
    for name, (cases, pack) in DEMOS.items():
        result = score(
            ScoreOptions(
                inputs=[CASES / cases],
                rubric=RUBRICS / pack,
                draft=True,
                store=folder / "s.sqlite",
                out=folder / name,
                cassettes=CASSETTES,
            )
        )
        with TaskStore(folder / "s.sqlite") as store:
            tasks[name] = load_task(store, result.task_id)
    return tasks


@st.composite
def varied_row(draw: st.DrawFn, task: StoredTask, index: int) -> Row:
    """One demo row, varied: what the report counts differently in each branch."""
    base = task.rows[draw(st.integers(0, len(task.rows) - 1))]
    scale = task.rubric.score_scale
    flags = [*task.rubric.red_flag_types, "ORPHAN_A", "ORPHAN_B"]
    result = base.result.model_copy(update={"row_id": f"{base.result.row_id}#{index}"})
    status = draw(st.sampled_from(["keep", "keep", "keep", "error", "checked"]))
    update: dict[str, Any] = {}
    if status == "error":
        kind = draw(st.sampled_from([JudgeErrorKind.INVALID_OUTPUT, JudgeErrorKind.TRANSPORT]))
        update |= {
            "status": RowStatus.JUDGE_ERROR,
            "error": draw(st.sampled_from([None, JudgeError(kind=kind, message=f"m{index}")])),
            "final_score": None,
            "reference_basis": (),
        }
    else:
        if status == "checked":
            update |= {"status": RowStatus.CHECKED, "final_score": None, "judge_score": None}
        else:
            # a SCORED row always has a final score (row_result.py; the list build's cluster
            # ranking could not compare a cluster without one)
            update["final_score"] = draw(st.integers(scale.min, scale.max))
        update["red_flag_types"] = tuple(draw(st.lists(st.sampled_from(flags), max_size=2)))
        update["intent_key"] = draw(st.sampled_from([result.intent_key, "NOT_IN_PACK", None]))
        basis = list(result.reference_basis)
        statuses = list(RequirementStatus)
        for i in draw(st.lists(st.integers(0, max(len(basis) - 1, 0)), max_size=3)):
            if basis:
                new = draw(st.sampled_from(statuses))
                basis[i] = basis[i].model_copy(update={"status": new})
        for case in draw(st.lists(st.sampled_from(["CASE_x", "CASE_y", "CASE_z"]), max_size=2)):
            status_of = draw(st.sampled_from(statuses))
            basis.append(
                BasisEntry(requirement_id=case, status=status_of, source=BasisSource.JUDGE)
            )
        update["reference_basis"] = tuple(draw(st.permutations(basis)))
        update["capped_by"] = tuple(draw(st.lists(st.sampled_from(["A", "B"]), max_size=1)))
    if draw(st.booleans()):
        update["rules"] = RuleSummary(
            case_id=f"c{index}",
            passed=draw(st.booleans()),
            verdict=draw(st.sampled_from([None, "PASS", "FAIL"])),
            tool_call_count=draw(st.integers(0, 3)),
            duration_ms=draw(st.sampled_from([None, 0.1, 7, 1e15])),
        )
    code = draw(st.sampled_from([None, *list(WarningCode)[:3]]))
    update["warnings"] = (ProtocolWarning(code=code),) if code else ()
    result = result.model_copy(update=update)
    floats = st.sampled_from([0.1, 0.2, 0.7, 3.3, 123.4, 1e15])
    usage = RowUsage(
        draw(st.integers(0, 3)),
        draw(st.integers(0, 9000)),
        draw(st.integers(0, 900)),
        draw(st.sampled_from([None, 1e-7, 0.0003, 0.1, 1e10])),
        draw(floats),
    )
    route = draw(st.sampled_from([None, "a", "b"]))
    metadata: dict[str, Any] = {
        k: v
        for k, v in {
            "scenario": draw(st.sampled_from([None, "s1", "s2", 3])),
            "tags": draw(st.lists(st.sampled_from(["t1", "t2"]), max_size=3)),
            "expectedRoute": route,
            "route": draw(st.sampled_from([None, "a", "b", "c"])) if route else None,
        }.items()
        if v is not None and draw(st.booleans())
    }
    case_texts = {
        c: f"{c} text {index}" for c in draw(st.lists(st.sampled_from(["CASE_x", "CASE_y"])))
    }
    facts = RowFacts(
        draw(st.integers(0, 4)), draw(st.sampled_from([None, 0.1, 2.5, 1e15])), metadata, case_texts
    )
    return result, usage, facts


@st.composite
def varied_task(draw: st.DrawFn, tasks: dict[str, StoredTask]) -> tuple[StoredTask, list[Row]]:
    task = tasks[draw(st.sampled_from(sorted(tasks)))]
    count = draw(st.integers(0, 40))
    return task, [draw(varied_row(task, i)) for i in range(count)]


def streamed(task: StoredTask, rows: list[Row], order: list[int], **options: Any) -> Any:
    """The accumulator's report with rows added in ``order`` (seq = the row's input position)."""
    built = ReportAccumulator(task.rubric, **options)
    for seq in order:
        built.add(seq, *rows[seq])
    return built.finish(task_section(task.record))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_streamed_report_equals_the_list_build_in_any_order(
    demo_tasks: dict[str, StoredTask], data: st.DataObject
) -> None:
    task, rows = data.draw(varied_task(demo_tasks))
    scale = task.rubric.score_scale
    options = {
        "pass_score": data.draw(st.sampled_from([None, *range(scale.min, scale.max + 1)])),
        "by": tuple(
            data.draw(
                st.lists(st.sampled_from(["intent", "category", "scenario", "tags"]), max_size=3)
            )
        ),
        "exact": data.draw(st.booleans()),
    }
    order = data.draw(st.permutations(range(len(rows))))
    section = task_section(task.record)
    try:
        expected = oracle.list_build_report(section, task.rubric, rows, **options)
    except ConfigurationError as error:  # a --by field no row has: the same message
        with pytest.raises(ConfigurationError) as raised:
            streamed(task, rows, order, **options)
        assert str(raised.value) == str(error)
        return
    got = streamed(task, rows, order, **options)
    assert got == expected
    assert render_json(got) == render_json(expected)
    # report.json is written from the RowIds views, never a list of str: the same text
    assert "".join(json_chunks(got)) == render_json(expected)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_drilldown_heap_picks_the_rows_the_sorted_list_picked(
    demo_tasks: dict[str, StoredTask], data: st.DataObject
) -> None:
    task, rows = data.draw(varied_task(demo_tasks))
    limit = data.draw(st.integers(1, 12))
    pass_score = data.draw(st.integers(task.rubric.score_scale.min, task.rubric.score_scale.max))
    order = data.draw(st.permutations(range(len(rows))))
    results = [r for r, _, _ in rows]
    worst = WorstRows(pass_score, limit)
    for seq in order:
        worst.add(seq, results[seq])
    kept, oracle.DRILLDOWN_ROWS = oracle.DRILLDOWN_ROWS, limit  # the oracle's limit
    try:
        expected = oracle.list_drilldown_rows(results, pass_score)
    finally:
        oracle.DRILLDOWN_ROWS = kept
    assert [r.row_id for r in worst.rows()] == [r.row_id for r in expected]


def test_demo_reports_equal_the_list_build_whatever_the_arrival_order(
    demo_tasks: dict[str, StoredTask],
) -> None:
    """The real demo rows as stored, shuffled as concurrency would: same bytes."""
    for task in demo_tasks.values():
        rows = [(r.result, r.usage, r.facts) for r in task.rows]
        expected = oracle.list_build_report(task_section(task.record), task.rubric, rows)
        for seed in range(5):
            order = list(range(len(rows)))
            random.Random(seed).shuffle(order)
            assert render_json(streamed(task, rows, order)) == render_json(expected)


@pytest.mark.parametrize("shapes", [0, 3])
def test_rows_past_the_counted_basis_shapes_are_counted_entry_by_entry(
    demo_tasks: dict[str, StoredTask], shapes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task with more referenceBasis shapes than are counted whole (case-level IDs differ
    per row) counts the rest entry by entry: the same report, in any order."""
    import rubric_engine.report.accumulate as accumulate

    monkeypatch.setattr(accumulate, "BASIS_SHAPES", shapes)
    for task in demo_tasks.values():
        rows = [(r.result, r.usage, r.facts) for r in task.rows]
        expected = oracle.list_build_report(task_section(task.record), task.rubric, rows)
        order = list(range(len(rows)))
        random.Random(shapes).shuffle(order)
        assert render_json(streamed(task, rows, order)) == render_json(expected)


@pytest.mark.parametrize("shapes", [0, 1, 3, 1024])
def test_rows_sharing_one_reference_basis_tuple_give_the_list_build(
    demo_tasks: dict[str, StoredTask], shapes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows the normalizer decided alike share one referenceBasis tuple, and the accumulator
    finds their shape by that tuple's identity: the same report as rows each with their own
    copy, within and past the counted shapes, in any order (a row's scores, flags and id
    still its own)."""
    import rubric_engine.report.accumulate as accumulate

    monkeypatch.setattr(accumulate, "BASIS_SHAPES", shapes)
    for task in demo_tasks.values():
        shared: dict[tuple[BasisEntry, ...], tuple[BasisEntry, ...]] = {}
        rows = []
        for copy in range(3):  # each basis three times over, by one tuple object
            for r in task.rows:
                basis = shared.setdefault(r.result.reference_basis, r.result.reference_basis)
                result = r.result.model_copy(
                    update={"row_id": f"{r.result.row_id}-{copy}", "reference_basis": basis}
                )
                rows.append((result, r.usage, r.facts))
        assert len({id(r.reference_basis) for r, _, _ in rows}) < len(rows)
        expected = oracle.list_build_report(task_section(task.record), task.rubric, rows)
        order = list(range(len(rows)))
        random.Random(shapes).shuffle(order)
        assert render_json(streamed(task, rows, order)) == render_json(expected)


def _held_bytes(task: StoredTask, count: int, low: bool, flagged: bool = False) -> int:
    """Bytes traced as allocated and still held after ``count`` rows went through an
    accumulator; each row is made, added and dropped, so only what the accumulator keeps
    stays (seqs shuffled in blocks, as a concurrent run stores them). What it writes to its
    temporary database is held by SQLite (its page cache, bounded), not traced: the test
    checks that those rows are there."""
    base = next(r for r in task.rows if r.result.status is RowStatus.SCORED)
    score_of = task.rubric.score_scale.min if low else task.rubric.score_scale.max
    gc.collect()  # garbage of earlier tests, collected when the collector's counters say
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        built = ReportAccumulator(task.rubric, storage=(storage := ScratchTables()))
        for start in range(0, count, 64):
            block = list(range(start, min(start + 64, count)))
            random.Random(start).shuffle(block)
            for seq in block:
                result = base.result.model_copy(
                    update={
                        "row_id": f"row-{seq:07d}",
                        "final_score": score_of,
                        "red_flag_types": task.rubric.red_flag_types[:2] if flagged else (),
                    }
                )
                built.add(seq, result, RowUsage(1, 6000, 300, None, 100.0 + seq % 7), RowFacts())
        gc.collect()  # so what is counted is what the accumulator holds, not uncollected cycles
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert built.rows == count
    on_disk = storage.db
    assert on_disk.execute("SELECT COUNT(*) FROM latencies").fetchone()[0] == count
    assert on_disk.execute("SELECT COUNT(*) FROM listed").fetchone()[0] == (count if low else 0)
    return held


def test_accumulator_memory_does_not_grow_with_passing_rows(
    demo_tasks: dict[str, StoredTask],
) -> None:
    """A passing row's latency (for the exact p95 and the input-order mean) goes to the
    accumulator's temporary database; the rows themselves (≈4.5 KB each in the list build)
    stay out, and nothing is held in memory per row. Memory structure, not time: 2,000 vs
    20,000 rows."""
    task = demo_tasks["health"]
    small, large = _held_bytes(task, 2_000, low=False), _held_bytes(task, 20_000, low=False)
    per_row = (large - small) / 18_000
    assert per_row < 1, f"{per_row:.1f} bytes held per added passing row"


def test_accumulator_keeps_low_rows_on_disk(demo_tasks: dict[str, StoredTask]) -> None:
    """A low row is listed in the issue clusters by its rowId: its seq, id and ID sets go to
    the temporary database, and memory holds only what each distinct set of violated IDs adds
    up (a few numbers and its five lowest rows), nothing per row."""
    task = demo_tasks["health"]
    small, large = _held_bytes(task, 2_000, low=True), _held_bytes(task, 20_000, low=True)
    per_row = (large - small) / 18_000
    assert per_row < 1, f"{per_row:.1f} bytes held per added low row"


def test_a_red_flagged_low_row_is_kept_once(demo_tasks: dict[str, StoredTask]) -> None:
    """A red-flagged row is listed under its cluster and under each of its flags; it is kept
    once for all of them (the flags are one interned set per row), and nothing per row in
    memory."""
    task = demo_tasks["health"]
    small = _held_bytes(task, 2_000, low=True, flagged=True)
    large = _held_bytes(task, 20_000, low=True, flagged=True)
    per_row = (large - small) / 18_000
    assert per_row < 1, f"{per_row:.1f} bytes held per added red-flagged low row"


def test_report_rows_pages_give_every_row_once_in_input_order(
    tmp_path: Path, store_at: str
) -> None:
    """``report_rows`` reads in pages (a PostgreSQL cursor holds its whole result): a page of
    3 rows gives what one page of every row gives."""
    from rubric_engine.store.location import parse_location

    where = parse_location(store_at)
    result = score(
        ScoreOptions(
            inputs=[CASES / "airline_tau2_dev.json"],
            rubric=RUBRICS / "airline_cs.yaml",
            draft=True,
            store=where,
            out=tmp_path / "out",
            cassettes=CASSETTES,
        )
    )
    with TaskStore(where) as store:
        paged = [r[0].row_id for r in store.report_rows(result.task_id, page=3)]
        whole = [r[0].row_id for r in store.report_rows(result.task_id, page=10_000)]
        stored = [row.result.row_id for row in store.rows(result.task_id)]
    assert paged == whole == stored and len(set(paged)) == 25


@settings(max_examples=200, deadline=None)
@given(seqs=st.lists(st.integers(0, 300), unique=True, max_size=120).flatmap(st.permutations))
def test_floats_give_values_in_seq_order_whatever_the_arrival(seqs: list[int]) -> None:
    """Values added in any order come back in seq order, with their count and every rank, in
    memory and in the temporary database."""
    from rubric_engine.report.per_row import InMemory

    for storage in (InMemory(), ScratchTables()):
        floats = storage.floats("latencies")
        for seq in seqs:
            floats.add(seq, seq * 0.1)
        assert list(floats.in_order()) == [s * 0.1 for s in sorted(seqs)]
        assert len(floats) == len(seqs)
        ranked = sorted(s * 0.1 for s in seqs)
        for index in range(len(seqs)):
            assert floats.at_rank(index) == ranked[index]


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.text(max_size=4)), max_size=40
    ).flatmap(st.permutations),
    column=st.sampled_from(["group", "flag_set"]),
    values=st.sets(st.integers(0, 3)),
)
def test_listed_rows_read_back_in_listing_order(
    rows: list[tuple[int, int, str]], column: Any, values: set[int]
) -> None:
    """The rows of some groups (or flag sets), low groups' rows in seq order then group 0's:
    the same from memory and from the temporary database, lone surrogates included."""
    from rubric_engine.report.per_row import InMemory

    seqs = random.Random(len(rows)).sample(range(1000), len(rows))
    every = [(seq, f"r{seq}\ud800{text}", group, flags)
             for seq, (group, flags, text) in zip(seqs, rows, strict=True)]  # fmt: skip
    at = 2 if column == "group" else 3
    in_order = sorted(every, key=lambda r: (r[2] == 0, r[0]))
    wanted = [(r[1], r[3]) for r in in_order if r[at] in values]
    for storage in (InMemory(), ScratchTables()):
        listed = storage.listed()
        for row in every:
            listed.add(*row)
        assert list(listed.read(column, tuple(values))) == wanted


def test_a_released_accumulator_refuses_more_rows(demo_tasks: dict[str, StoredTask]) -> None:
    task = demo_tasks["health"]
    built = ReportAccumulator(task.rubric)
    row = task.rows[0]
    built.add(0, row.result, row.usage, row.facts)
    built.finish(task_section(task.record))
    built.release()
    with pytest.raises(RuntimeError, match="released"):
        built.add(1, row.result, row.usage, row.facts)
    with pytest.raises(RuntimeError, match="released"):
        built.finish(task_section(task.record))
