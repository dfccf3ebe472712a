"""Repeated judging (docs/stability.md): ``score --samples K`` keeps every sample, the row's
result is their aggregate by the documented rules, a recorded K = 3 run replays byte for byte,
``verify`` re-derives through the aggregate, and a SIGKILL mid-sampling loses no stored sample.

The aggregate is checked against an independent reference aggregator written here from the
rules' text, on hypothesis-made samples and on samples a loopback judge answered differently.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.results.model import RowResult, RowStatus, WarningCode
from rubric_engine.results.normalize import normalize_verdict
from rubric_engine.results.samples import Sample, aggregate_samples
from rubric_engine.rubric import load_rubric
from rubric_engine.store.task_store import COMMIT_INTERVAL_S, TaskStore
from rubric_engine.testing.openai_stub import StubReply, StubServer, load_verdicts, row_id_of
from rubric_engine.verdict.model import verdict_model
from tests.conftest import CASES, RUBRICS
from tests.test_cli import run

RUBRIC = load_rubric(RUBRICS / "health_cs.yaml")
REQS = RUBRIC.requirements_by_id
ORDER = {flag: n for n, flag in enumerate(RUBRIC.red_flag_types)}
STRICT = ["NOT_APPLICABLE", "FOLLOWED", "PARTIAL", "VIOLATED"]
VERDICTS = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
FAST = RetryPolicy(max_attempts=3, base_s=0.01, max_wait_s=0.02)


# -- the reference aggregator: docs/stability.md's rules, written again without the engine ---


def reference(results: list[RowResult], reqs: Any = REQS) -> dict[str, Any]:
    """What the rules say the aggregate of ``results`` is (the fields compared), under the
    pack whose requirements are ``reqs``."""
    failed = [r for r in results if r.status is not RowStatus.SCORED]
    if failed:
        return {"status": failed[0].status, "error": failed[0].error}
    n = len(results)
    intents = [r.intent_key for r in results]
    intent = sorted(set(intents), key=lambda i: (-intents.count(i), intents.index(i)))[0]
    voters = [r for r in results if r.intent_key == intent]
    statuses: dict[str, str] = {}
    votes: dict[str, list[str]] = {}
    for entry in voters[0].reference_basis:
        rid = entry.requirement_id
        votes[rid] = [
            str(e.status) for v in voters for e in v.reference_basis if e.requirement_id == rid
        ]
        best = max(votes[rid].count(s) for s in STRICT)
        statuses[rid] = [s for s in STRICT if votes[rid].count(s) == best][-1]
    raised = Counter(f for r in results for f in r.red_flag_types)
    flags = {f for f in raised if raised[f] * 2 >= n}
    flags |= {
        reqs[rid].red_flag_type
        for rid, s in statuses.items()
        if s == "VIOLATED" and rid in reqs and reqs[rid].critical
    }
    for flag in sorted(flags):
        lines = [
            rid for rid in statuses
            if rid in reqs and reqs[rid].critical and reqs[rid].red_flag_type == flag
            and reqs[rid].observable_in_data
        ]  # fmt: skip
        if lines and not any(statuses[rid] == "VIOLATED" for rid in lines):
            most = max(votes[rid].count("VIOLATED") for rid in lines)
            statuses[next(rid for rid in lines if votes[rid].count("VIOLATED") == most)] = (
                "VIOLATED"
            )
    judges = sorted(r.judge_score for r in results)
    finals = sorted(r.final_score for r in results)
    caps = [
        reqs[rid].violation_score
        for rid, s in statuses.items()
        if s == "VIOLATED" and rid in reqs and reqs[rid].violation_score is not None
    ]
    shapes = {
        (
            r.intent_key,
            r.red_flag_types,
            r.final_score,
            tuple((e.requirement_id, e.status) for e in r.reference_basis),
        )
        for r in results
    }
    return {
        "status": RowStatus.SCORED,
        "intent": intent,
        "judgeScore": judges[(n - 1) // 2],
        "finalScore": min([finals[(n - 1) // 2], *caps]),
        "redFlags": sorted(flags, key=ORDER.__getitem__),
        "statuses": statuses,
        "split": sorted(set(raised) - flags),
        "stable": len(shapes) == 1,
    }


def as_compared(result: RowResult) -> dict[str, Any]:
    if result.status is not RowStatus.SCORED:
        return {"status": result.status, "error": result.error}
    assert result.stability is not None
    return {
        "status": result.status,
        "intent": result.intent_key,
        "judgeScore": result.judge_score,
        "finalScore": result.final_score,
        "redFlags": list(result.red_flag_types),
        "statuses": {e.requirement_id: str(e.status) for e in result.reference_basis},
        "split": sorted(
            w.red_flag_type for w in result.warnings if w.code is WarningCode.RED_FLAG_SPLIT
        ),
        "stable": result.stability.stable,
    }


INTENTS = ["HEALTH_CONSULTATION", "PRODUCT_RECOMMENDATION"]


@st.composite
def sample_verdicts(draw: Any) -> list[dict[str, Any]]:
    ids = [r.id for r in RUBRIC.applicable_requirements(INTENTS[0])][:8]
    pick = st.lists(st.sampled_from(ids), max_size=4)
    out = []
    for _ in range(draw(st.integers(1, 5))):
        out.append(
            {
                "rowId": "r",
                "intentKey": draw(
                    st.sampled_from(INTENTS) if draw(st.booleans()) else st.just(INTENTS[0])
                ),
                "score": draw(st.integers(1, 5)),
                "redFlagTypes": draw(
                    st.lists(st.sampled_from(list(RUBRIC.red_flag_types)[:4]), max_size=2)
                ),
                "unmetRequirementIds": draw(pick),
                "partialRequirementIds": draw(pick),
            }
        )
    return out


def judged(fields: dict[str, Any]) -> RowResult:
    verdict = verdict_model(RUBRIC).model_validate(fields, context={"row_id": "r"})
    return normalize_verdict(RUBRIC, verdict, "r")


@settings(max_examples=300, deadline=None)
@given(sample_verdicts())
def test_the_aggregate_is_the_reference_aggregators(verdicts: list[dict[str, Any]]) -> None:
    results = [judged(v) for v in verdicts]
    got = aggregate_samples([Sample(1, n, r) for n, r in enumerate(results, 1)], REQS, ORDER)
    assert as_compared(got) == reference(results)
    # a red flag some sample raised is kept or warned about: never dropped silently
    raised = {f for r in results for f in r.red_flag_types}
    warned = {w.red_flag_type for w in got.warnings if w.code is WarningCode.RED_FLAG_SPLIT}
    assert raised <= set(got.red_flag_types) | warned
    assert got.final_score is not None and got.judge_score is not None
    assert got.final_score <= got.judge_score


def test_a_red_flag_raised_by_one_sample_of_three_is_warned_about() -> None:
    clean = {"rowId": "r", "intentKey": INTENTS[0], "score": 4, "redFlagTypes": []}
    flagged = {**clean, "score": 1, "redFlagTypes": ["MEDICAL_OVERREACH"]}
    results = [judged(clean), judged(flagged), judged(clean)]
    got = aggregate_samples([Sample(1, n, r) for n, r in enumerate(results, 1)], REQS, ORDER)
    assert got.red_flag_types == () and got.final_score == 4
    (split,) = [w for w in got.warnings if w.code is WarningCode.RED_FLAG_SPLIT]
    assert split.red_flag_type == "MEDICAL_OVERREACH" and "raised by 1 of 3" in (split.detail or "")
    assert got.stability is not None and not got.stability.stable
    assert set(got.stability.reasons) >= {"redFlags", "score"}


# -- through the loopback judge ----------------------------------------------------------------


def subset(tmp_path: Path, rows: int) -> Path:
    lines = (CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines()[:rows]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def per_sample(body: dict[str, Any], n: int) -> StubReply:
    """The n-th answer (from 0) for a row: sample 2 drops a point and raises no red flag, so
    rows split on their score and, where the first sample raised one, on a red flag."""
    verdict = dict(VERDICTS[row_id_of(body) or ""])
    if n % 3 == 1:
        verdict["score"] = max(1, verdict["score"] - 1) if verdict["score"] > 1 else 2
        verdict["redFlagTypes"] = []
    return StubReply(content=json.dumps(verdict, ensure_ascii=False))


class Counting:
    """Answers by :func:`per_sample`; counts the requests of each row; while ``hold`` is set,
    keeps the third request of a row hanging (a slow provider, for the SIGKILL)."""

    def __init__(self, hold: bool = False) -> None:
        self.asked: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.release = threading.Event()
        if not hold:
            self.release.set()

    def __call__(self, body: dict[str, Any]) -> StubReply:
        row = row_id_of(body) or ""
        with self.lock:
            n = self.asked[row]
            self.asked[row] += 1
        if n % 3 == 2:
            self.release.wait(60)
        return per_sample(body, n)


def options(tmp_path: Path, rows: Path, mode: str, **extra: Any) -> ScoreOptions:
    extra.setdefault("concurrency", 3)
    return ScoreOptions(
        inputs=[rows], rubric=RUBRICS / "health_cs.yaml", draft=True, mode=mode,  # type: ignore[arg-type]
        model="openai/gpt-4o-mini", store=tmp_path / "s.sqlite", out=tmp_path / mode,
        cassettes=tmp_path / "cassettes", retry=FAST, samples=3, **extra,
    )  # fmt: skip


@pytest.mark.live
def test_a_recorded_k3_run_replays_byte_for_byte_and_verifies(tmp_path: Path) -> None:
    rows = subset(tmp_path, 8)
    judge = Counting()
    with StubServer(judge) as server:
        recorded = score(options(tmp_path, rows, "record", api_base=server.base_url)).task_id
    assert sum(judge.asked.values()) == 24  # K calls per row
    replayed = score(options(tmp_path, rows, "replay")).task_id
    record_rows = (tmp_path / "record" / "rows.jsonl").read_bytes()
    assert record_rows == (tmp_path / "replay" / "rows.jsonl").read_bytes()
    report = json.loads((tmp_path / "replay" / "report.json").read_text("utf-8"))
    assert report["stability"]["sampledRows"] == 8 and report["stability"]["samples"] == 24
    assert "## Stability" in (tmp_path / "replay" / "report.md").read_text("utf-8")
    with TaskStore(tmp_path / "s.sqlite") as store:
        stored = list(store.rows(replayed))
    for row in stored:  # each sample kept, the aggregate the reference's
        assert [s.sample for s in row.samples] == [1, 2, 3]
        assert as_compared(row.result) == reference([s.result for s in row.samples])
        assert row.calls == 3 and row.raw_attempts == []
    unstable = [r for r in stored if not reference([s.result for s in r.samples])["stable"]]
    assert 0 < len(unstable) == report["stability"]["unstableRows"]
    flagged = [r for r in stored if r.samples[0].result.red_flag_types]
    assert flagged and all(
        any(w.code is WarningCode.RED_FLAG_SPLIT for w in r.result.warnings) is False
        for r in flagged
    )  # raised by 2 of 3: kept, not split
    for task in (recorded, replayed):
        code, out = run("verify", task, "--store", tmp_path / "s.sqlite")
        assert code == 0 and "8 of 8 row(s) re-derived" in out, out
    code, out = run(
        "gate",
        replayed,
        "--store",
        tmp_path / "s.sqlite",
        "--threshold",
        "stability.unstableRate<=0.2",
    )
    assert code == 7 and "stability.unstableRate" in out, out

    # an edited sample: the readers refuse the row, verify names it
    row_id = stored[0].result.row_id
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        db.execute(
            "UPDATE row_samples SET result=json_set(result,'$.finalScore',5) "
            "WHERE task_id=? AND row_id=? AND sample=2",
            (replayed, row_id),
        )
    code, out = run("report", replayed, "--store", tmp_path / "s.sqlite")
    assert code == 3 and row_id in out, out
    code, out = run("verify", replayed, "--store", tmp_path / "s.sqlite")
    assert code == 3 and row_id in out, out


@pytest.mark.live
def test_sigkill_mid_sampling_then_resume_asks_no_stored_sample_again(tmp_path: Path) -> None:
    rows = subset(tmp_path, 6)
    store = tmp_path / "s.sqlite"
    judge = Counting(hold=True)
    with StubServer(judge) as server:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "rubric_engine.cli", "score", str(rows),
                "-r", str(RUBRICS / "health_cs.yaml"), "--draft", "--mode", "live",
                "--api-base", server.base_url, "--model", "openai/stub-judge",
                "--store", str(store), "--out", str(tmp_path / "out"),
                "--concurrency", "3", "--samples", "3",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "NO_COLOR": "1", "OPENAI_API_KEY": "sk-test"},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while sum(judge.asked.values()) < 9:  # 3 rows: samples 1, 2 answered, 3 hanging
                assert time.monotonic() < deadline
                assert process.poll() is None, process.communicate()[1]
                time.sleep(0.01)
            time.sleep(COMMIT_INTERVAL_S + 1.5)  # the answered samples reach the store
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
        with sqlite3.connect(store) as db:
            (task,) = db.execute("SELECT id FROM tasks").fetchone()
            kept = db.execute("SELECT row_id, sample FROM row_samples").fetchall()
            finished = db.execute("SELECT COUNT(*) FROM rows").fetchone()[0]
        assert finished == 0 and len(kept) == 6, kept  # 3 rows in flight, 2 samples each
        judge.release.set()
        time.sleep(0.2)  # the killed run's hung requests finish on their own
        before = Counter(judge.asked)
        code, out = run("score", "--resume", task, "--store", store, "--out", tmp_path / "resumed")
        assert code == 0, out
        resumed = judge.asked - before
    in_flight = {row for row, _ in kept}
    assert sum(resumed.values()) == 18 - len(kept), resumed
    assert all(resumed[row] == 1 for row in in_flight), resumed  # only sample 3
    with TaskStore(store) as opened:
        done = list(opened.rows(task))
    assert len(done) == 6 and all(len(r.samples) == 3 for r in done)
    code, out = run("verify", task, "--store", store)
    assert code == 0, out


def test_authored_second_and_third_opinions_replay_as_samples_2_and_3(tmp_path: Path) -> None:
    import shutil

    from tests.conftest import CASSETTES

    folder = tmp_path / "cassettes"
    shutil.copytree(CASSETTES, folder)
    rows = CASES / "health_consult_zh.jsonl"
    for sample in (2, 3):
        code, out = run(
            "cassette", "author", rows, "-r", RUBRICS / "health_cs.yaml",
            "--verdicts", CASES / "verdicts" / "health_cs.jsonl", "--author", "test",
            "--method", "the first opinion again", "--sample", sample,
            "--out", folder / f"sample{sample}.jsonl",
        )  # fmt: skip
        assert code == 0, out
    code, out = run(
        "score", rows, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes", folder,
        "--samples", "3", "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o", "-q",
    )  # fmt: skip
    assert code == 0, out
    report = json.loads((tmp_path / "o" / "report.json").read_text("utf-8"))
    assert report["stability"]["samples"] == 78 and report["totals"]["judgeErrors"] == 0
    code, out = run(
        "score", rows, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes", CASSETTES,
        "--samples", "2", "--store", tmp_path / "s.sqlite", "--out", tmp_path / "miss", "-q",
    )  # fmt: skip
    assert code != 0 and "sample 2" in out, out


def test_workers_judge_a_rows_samples_as_a_direct_run_does(tmp_path: Path, pg_url: str) -> None:
    """``--workers-only`` then ``rubric-eval work`` on PostgreSQL: each claimed row's three
    samples are asked and stored with the row, the aggregate and the stability section are the
    direct run's, and verify re-derives every sample."""
    from tests.conftest import CASSETTES
    from tests.test_verify import judged_by_workers

    ambiguous = CASES / "health_ambiguous_zh.jsonl"
    task = judged_by_workers(pg_url, ambiguous, "health_cs", tmp_path / "w", "--samples", "3")
    code, out = run(
        "score", ambiguous, "-r", "health_cs", "--cassettes", CASSETTES, "--samples", "3",
        "--store", pg_url, "--out", tmp_path / "direct", "-q",
    )  # fmt: skip
    assert code == 0, out
    code, out = run("report", task, "--store", pg_url, "--out", tmp_path / "workers")
    assert code == 0, out
    direct, workers = (
        json.loads((tmp_path / name / "report.json").read_text("utf-8"))
        for name in ("direct", "workers")
    )
    assert workers["stability"] == direct["stability"] and workers["stability"]["samples"] == 27
    assert workers["totals"] == direct["totals"]
    code, out = run("verify", task, "--store", pg_url)
    assert code == 0 and "9 of 9 row(s) re-derived" in out, out


class ReaskThenHang:
    """Answers a row's first call with prose (the judge re-asks) and, while held, keeps the
    re-ask hanging; counts each row's requests."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> StubReply:
        row = row_id_of(body) or ""
        with self.lock:
            n = self.asked[row]
            self.asked[row] += 1
        if n == 0:
            return StubReply(content="I think this reply is fine overall.")
        self.release.wait(60)
        return StubReply(content=json.dumps(VERDICTS[row], ensure_ascii=False))


@pytest.mark.live
def test_sigkill_between_a_reask_and_its_answer_resume_pays_the_first_answer_once(
    tmp_path: Path,
) -> None:
    rows = subset(tmp_path, 6)
    store = tmp_path / "s.sqlite"
    judge = ReaskThenHang()
    with StubServer(judge) as server:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "rubric_engine.cli", "score", str(rows),
                "-r", str(RUBRICS / "health_cs.yaml"), "--draft", "--mode", "live",
                "--api-base", server.base_url, "--model", "openai/stub-judge",
                "--store", str(store), "--out", str(tmp_path / "out"), "--concurrency", "3",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "NO_COLOR": "1", "OPENAI_API_KEY": "sk-test"},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while sum(judge.asked.values()) < 6:  # 3 rows: answered once, re-ask hanging
                assert time.monotonic() < deadline
                assert process.poll() is None, process.communicate()[1]
                time.sleep(0.01)
            time.sleep(COMMIT_INTERVAL_S + 1.5)
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
        with sqlite3.connect(store) as db:
            (task,) = db.execute("SELECT id FROM tasks").fetchone()
            kept = {row for (row,) in db.execute("SELECT row_id FROM row_attempts")}
        assert len(kept) == 3, kept
        judge.release.set()
        time.sleep(0.2)
        before = Counter(judge.asked)
        code, out = run("score", "--resume", task, "--store", store, "--out", tmp_path / "resumed")
        assert code == 0, out
        resumed = judge.asked - before
    assert all(resumed[row] == 1 for row in kept), resumed  # only the re-ask
    assert sum(resumed.values()) == 3 + 3 * 2, resumed
    with TaskStore(store) as opened:
        done = {r.result.row_id: r for r in opened.rows(task)}
        assert opened.kept_answers(task) == {}  # dropped once the rows were stored
    assert all(done[row].calls == 2 and done[row].result.final_score is not None for row in kept)
    code, out = run("verify", task, "--store", store)
    assert code == 0, out


def test_the_html_report_shows_the_stability_section_escaped(tmp_path: Path) -> None:
    code, out = run(
        "score", CASES / "health_ambiguous_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--samples", "3", "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o", "-q",
    )  # fmt: skip
    assert code == 0, out
    html = (tmp_path / "o" / "report.html").read_text("utf-8")
    assert 'id="stability"' in html and "9 of 9 sampled row(s) unstable" in html
    single = json.loads((tmp_path / "o" / "report.json").read_text("utf-8"))
    assert single["stability"]["redFlagSplits"] == 2


def test_the_unstable_first_queue_lists_the_unstable_rows_first(
    tmp_path: Path, store_at: str
) -> None:
    """The health demo with the ambiguous rows' shipped opinions and, for every other row,
    the first opinion given again: 9 unstable rows of 26 head the queue."""
    import shutil

    from tests.conftest import CASSETTES

    folder = tmp_path / "cassettes"
    shutil.copytree(CASSETTES, folder)
    ambiguous = {
        json.loads(line)["rowId"]
        for line in (CASES / "health_ambiguous_zh.jsonl").read_text("utf-8").splitlines()
    }
    verdicts = (CASES / "verdicts" / "health_cs.jsonl").read_text("utf-8").splitlines()
    clear = tmp_path / "clear.jsonl"
    clear.write_text(
        "".join(v + "\n" for v in verdicts if json.loads(v)["rowId"] not in ambiguous), "utf-8"
    )
    rows = CASES / "health_consult_zh.jsonl"
    clear_rows = tmp_path / "clear_rows.jsonl"
    clear_rows.write_text(
        "".join(
            line + "\n"
            for line in rows.read_text("utf-8").splitlines()
            if json.loads(line)["rowId"] not in ambiguous
        ),
        "utf-8",
    )
    for sample in (2, 3):
        code, out = run(
            "cassette", "author", clear_rows, "-r", RUBRICS / "health_cs.yaml", "--verdicts", clear,
            "--author", "test", "--method", "the first opinion again", "--sample", sample,
            "--out", folder / f"clear{sample}.jsonl",
        )  # fmt: skip
        assert code == 0, out
    store = store_at
    code, out = run(
        "score", rows, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes", folder,
        "--samples", "3", "--store", store, "--name", "mixed", "--out", tmp_path / "o", "-q",
    )  # fmt: skip
    assert code == 0, out
    code, out = run("queue", "create", "mixed", "--strategy", "unstable-first", "--store", store)
    assert code == 0 and "26 row(s) (unstable-first)" in out, out
    code, out = run("queue", "rows", "mixed", "--limit", "26", "--store", store)
    assert code == 0, out
    listed = [line.split() for line in out.splitlines()[1:]]
    assert {line[1] for line in listed[:9]} == ambiguous, out
    assert all("unstable:" in " ".join(line) for line in listed[:9]), out
    assert all(line[-1] == "stable" for line in listed[9:]), out
    counts = [int(" ".join(line).split("unstable: ")[1].split()[0]) for line in listed[:9]]
    assert counts == sorted(counts, reverse=True), out  # the most disagreements first

    # asked adaptively, a row clear after one sample was never compared: not called stable
    code, out = run(
        "score", CASES / "health_ambiguous_zh.jsonl", "-r", RUBRICS / "health_cs.yaml",
        "--draft", "--cassettes", folder, "--samples", "3", "--samples-when", "unsure",
        "--store", store, "--name", "unsure", "--out", tmp_path / "unsure", "-q",
    )  # fmt: skip
    assert code == 0, out
    code, out = run("queue", "create", "unsure", "--strategy", "unstable-first", "--store", store)
    assert code == 0, out
    code, out = run("queue", "rows", "unsure", "--store", store)
    header, *lines = out.splitlines()
    at = header.index("samples")  # the last column, aligned under its header
    notes = {line.split()[1]: line[at:].strip() for line in lines}
    once = {row for row, note in notes.items() if note == "1 sample (clear after one)"}
    # the three whose first answer scored 2 with no red flag: far from the pass line (4)
    assert once == {"medgpt-22", "medgpt-35", "medgpt-50"}, out

    code, out = run(
        "score", rows, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store", store,
        "--name", "once", "--out", tmp_path / "once", "-q",
    )  # fmt: skip
    assert code == 0, out
    code, out = run("queue", "create", "once", "--strategy", "unstable-first", "--store", store)
    assert code != 0 and "--samples" in out and "random" in out, out


@pytest.mark.live
def test_samples_2_to_k_read_the_static_prefix_from_the_prompt_cache(tmp_path: Path) -> None:
    rows = subset(tmp_path, 2)
    with StubServer(Counting(), prompt_cache=True) as server:
        task = score(
            options(tmp_path, rows, "live", api_base=server.base_url, concurrency=1)
        ).task_id
    with TaskStore(tmp_path / "s.sqlite") as store:
        stored = list(store.rows(task))
    first = stored[0].samples
    assert first[0].cache_read_tokens == 0  # the first request of the run writes the prefix
    assert all(s.cache_read_tokens > 0 for r in stored for s in r.samples[1:])
    for row in stored:  # the row's usage adds up its samples'
        assert row.cache_read_tokens == sum(s.cache_read_tokens for s in row.samples)
        assert row.prompt_tokens == sum(s.prompt_tokens for s in row.samples)
    report = json.loads((tmp_path / "live" / "report.json").read_text("utf-8"))
    assert report["usage"]["cacheReadTokens"] == sum(r.cache_read_tokens for r in stored)


def _unmet(status: str) -> bool | None:
    return {"VIOLATED": True, "PARTIAL": True, "FOLLOWED": False}.get(status)


def test_calibrate_shows_the_aggregate_beside_sample_one(tmp_path: Path) -> None:
    """The ambiguous demo scored 3 times; a reviewer whose labels are the broad reading
    (sample 2): both sides' accuracy are computed here from the stored samples."""
    store, out = tmp_path / "s.sqlite", tmp_path / "o"
    code, text = run(
        "score", CASES / "health_ambiguous_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--samples", "3", "--store", store, "--name", "amb", "--out", out, "--display", "none",
    )  # fmt: skip
    assert code == 0, text
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text("utf-8").splitlines()]
    labels, pairs = [], {"aggregate": [], "sample1": []}
    for row in rows:
        result = row.get("result", row)
        by = {(s["judge"], s["sample"]): s for s in result["samples"]}
        broad, first = by[(1, 2)], by[(1, 1)]
        aggregate = {b["requirementId"]: b["status"] for b in result["referenceBasis"]}
        for rid, status in broad["statuses"].items():
            if _unmet(status) is None:
                continue
            labels.append(
                {"rowId": result["rowId"], "reviewer": "rev", "requirementId": rid,
                 "status": status}
            )  # fmt: skip
            for side, theirs in (
                ("aggregate", aggregate.get(rid)),
                ("sample1", first["statuses"].get(rid)),
            ):
                if theirs is not None and _unmet(theirs) is not None:
                    pairs[side].append(_unmet(theirs) == _unmet(status))
    file = tmp_path / "labels.jsonl"
    file.write_text("".join(json.dumps(lab) + "\n" for lab in labels), "utf-8")
    code, text = run("calibrate", "amb", "--labels", file, "--format", "json", "--store", store,
                     "--no-save")  # fmt: skip
    assert code == 0, text
    result = json.loads(text)
    sampling = result["sampling"]
    assert sampling["sampledRows"] == 9
    figures = {fig["name"]: fig for fig in sampling["figures"]}
    accuracy = figures["requirement accuracy"]
    assert accuracy["aggregate"] == pytest.approx(sum(pairs["aggregate"]) / len(pairs["aggregate"]))
    assert accuracy["sample1"] == pytest.approx(sum(pairs["sample1"]) / len(pairs["sample1"]))
    assert accuracy["aggregate"] == pytest.approx(result["overall"]["accuracy"])
    assert accuracy["aggregate"] != accuracy["sample1"]  # the readings part on these rows
    code, text = run("calibrate", "amb", "--labels", file, "--store", store, "--no-save")
    assert code == 0 and "does sampling buy agreement?" in text, text
    assert f"requirement accuracy  {accuracy['aggregate']:.3f} vs {accuracy['sample1']:.3f}" in text
    code, text = run("calibrate", "amb", "--labels", file, "--format", "md", "--store", store,
                     "--no-save")  # fmt: skip
    assert code == 0 and "## Does sampling buy agreement?" in text, text
    assert "| requirement accuracy |" in text

    once = tmp_path / "once.sqlite"
    code, text = run(
        "score", CASES / "health_ambiguous_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--store", once, "--name", "one", "--out", tmp_path / "one", "--display", "none",
    )  # fmt: skip
    assert code == 0, text
    code, text = run("calibrate", "one", "--labels", file, "--format", "json", "--store", once,
                     "--no-save")  # fmt: skip
    assert code == 0 and "sampling" not in json.loads(text), text


def test_renormalize_re_aggregates_a_sampled_tasks_samples_and_verifies(tmp_path: Path) -> None:
    """The ambiguous demo scored 3 times, then renormalized under a version where a verbose
    reply caps at 1 and a wrong fact is a red line: every sample is normalized again, the
    row is their aggregate by the reference aggregator's rules, nothing is asked."""
    import yaml

    store, out = tmp_path / "s.sqlite", tmp_path / "o"
    code, text = run(
        "score", CASES / "health_ambiguous_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--samples", "3", "--store", store, "--name", "amb", "--out", out, "--display", "none",
    )  # fmt: skip
    assert code == 0, text
    data = yaml.safe_load((RUBRICS / "health_cs.yaml").read_text("utf-8"))
    for req in data["commonRequirements"]:
        if req["id"] == "COMMON_CONCISE_NATURAL":
            req["violationScore"] = 1
        if req["id"] == "COMMON_KNOWLEDGE_ACCURACY":
            req.update(critical=True, redFlagType="SAFETY_OMISSION")
    v2 = tmp_path / "health_v2.yaml"
    v2.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), "utf-8")
    code, text = run(
        "renormalize", "amb", "-r", v2, "--draft", "--store", store, "--out", tmp_path / "rn"
    )
    assert code == 0, text
    with TaskStore(store) as opened:
        tasks = {t.id: t for t in opened.tasks()}
        (new_task,) = [t for t in tasks if tasks[t].judge_mode == "renormalize"]
        before = {r.result.row_id: r for r in opened.rows(next(t for t in tasks if t != new_task))}
        after = {r.result.row_id: r for r in opened.rows(new_task)}
    reqs = load_rubric(v2).requirements_by_id
    changed = 0
    for row_id, row in after.items():
        assert len(row.samples) == 3 and row.calls == 0 and all(s.calls == 0 for s in row.samples)
        results = [s.result for s in row.samples]
        for sample, old in zip(results, before[row_id].samples, strict=True):
            statuses = {e.requirement_id: str(e.status) for e in sample.reference_basis}
            assert sample.judge_score == old.result.judge_score  # the judge's own answer
            if statuses.get("COMMON_CONCISE_NATURAL") == "VIOLATED":
                assert sample.final_score == 1
            if statuses.get("COMMON_KNOWLEDGE_ACCURACY") == "VIOLATED":
                assert "SAFETY_OMISSION" in sample.red_flag_types
        assert as_compared(row.result) == reference(results, reqs), row_id
        changed += row.result.final_score != before[row_id].result.final_score
    assert changed > 0
    report = json.loads((tmp_path / "rn" / "report.json").read_text("utf-8"))
    assert report["stability"]["samples"] == 27
    code, text = run("verify", new_task, "--store", store)
    assert code == 0, text


class HangAfter:
    """Answers every call with fixed usage (20,000 prompt, 10 completion tokens: more than
    the rubric, which the judge checks arrived): a row's first
    call with prose (the judge re-asks) when ``reask``, else with its verdict; each row's call
    number ``hang_at`` (from 0) hangs until released. Counts the requests received and the
    answers sent while the client still waited (a call begun before the release is not one)."""

    def __init__(self, hang_at: int, reask: bool) -> None:
        self.hang_at, self.reask = hang_at, reask
        self.asked: Counter[str] = Counter()
        self.answered = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> StubReply:
        row = row_id_of(body) or ""
        with self.lock:
            n = self.asked[row]
            self.asked[row] += 1
            held = n == self.hang_at and not self.release.is_set()
            self.answered += not held
        if held:
            self.release.wait(60)
        usage = {"prompt_tokens": 20000, "completion_tokens": 10}
        if self.reask and n == 0:
            return StubReply(content="I think this reply is fine overall.", usage=usage)
        return StubReply(content=json.dumps(VERDICTS[row], ensure_ascii=False), usage=usage)


@pytest.mark.live
@pytest.mark.parametrize(
    ("samples", "reask"), [(1, True), (3, False)], ids=["kept-answer", "stored-sample"]
)
def test_ctrl_c_then_resume_counts_every_answer_and_request_once(
    tmp_path: Path, store_at: str, samples: int, reask: bool
) -> None:
    """Ctrl-C with 3 rows in flight, each holding an answered call (a re-ask's first answer,
    or a finished sample 1) and a hanging one; the resumed run reuses what was answered. The
    report's usage is every answer the client received, once, and every request sent."""
    rows = subset(tmp_path, 6)
    store = store_at
    judge = HangAfter(1, reask)
    with StubServer(judge) as server:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "rubric_engine.cli", "score", str(rows),
                "-r", str(RUBRICS / "health_cs.yaml"), "--draft", "--mode", "live",
                "--api-base", server.base_url, "--model", "openai/stub-judge",
                "--store", str(store), "--out", str(tmp_path / "out"), "--concurrency", "3",
                "--samples", str(samples),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "NO_COLOR": "1", "OPENAI_API_KEY": "sk-test"},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while sum(judge.asked.values()) < 6:  # 3 rows: answered once, then hanging
                assert time.monotonic() < deadline
                assert process.poll() is None, process.communicate()[1]
                time.sleep(0.01)
            time.sleep(0.3)
            process.send_signal(signal.SIGINT)
            process.wait(60)
        finally:
            if process.poll() is None:
                process.kill()
        with TaskStore(store) as opened:
            (task,) = [t.id for t in opened.tasks()]
            assert not list(opened.rows(task))  # 3 rows in flight, none stored
        judge.release.set()
        time.sleep(0.2)
        code, out = run("score", "--resume", task, "--store", store, "--out", tmp_path / "resumed")
        assert code == 0, out
    usage = json.loads((tmp_path / "resumed" / "report.json").read_text("utf-8"))["usage"]
    received = sum(judge.asked.values())
    assert received == (6 + 9 if reask else 6 + 18 - 3), judge.asked
    assert usage["promptTokens"] == 20000 * judge.answered, (usage, judge.answered)
    assert usage["completionTokens"] == 10 * judge.answered, (usage, judge.answered)
    assert usage["calls"] == received, (usage, received)
    code, out = run("verify", task, "--store", store)
    assert code == 0, out


@pytest.mark.parametrize("value", ["0", "-1", "1000"])
def test_samples_out_of_range_is_refused_echoing_the_value(tmp_path: Path, value: str) -> None:
    code, out = run(
        "score", CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--store", tmp_path / "s.sqlite", "--samples", value,
    )  # fmt: skip
    assert code == 2 and f"--samples must be between 1 and 25, not {value}" in out, out
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("samples", [[], ["--samples", "1"]])
def test_samples_when_unsure_with_one_sample_is_refused_naming_the_fix(
    tmp_path: Path, samples: list[str]
) -> None:
    code, out = run(
        "score", CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--store", tmp_path / "s.sqlite", "--samples-when", "unsure", *samples,
    )  # fmt: skip
    assert code == 2 and "--samples-when unsure" in out and "K is 1" in out, out
    assert "add --samples K with K >= 2" in out, out
    assert not (tmp_path / "s.sqlite").exists()


def test_the_summary_of_a_sampled_replay_counts_every_answer_and_shows_stability(
    tmp_path: Path,
) -> None:
    from tests.conftest import CASSETTES

    code, out = run(
        "score", CASES / "health_ambiguous_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--samples", "3", "--cassettes", CASSETTES, "--store", tmp_path / "s.sqlite",
        "--out", tmp_path / "o", "--display", "none",
    )  # fmt: skip
    said = " ".join(out.split())
    assert code == 0, out
    assert "answers from 27 authored cassette entries" in said, out  # 9 rows × 3 samples
    assert "stability: sampled rows 9 (27 samples) · unstable 9 (100.00%)" in said, out
    report = json.loads((tmp_path / "o" / "report.json").read_text("utf-8"))
    assert report["task"]["cassettes"] == {"authored": 27}
    assert sum(s["rows"] for s in report["task"]["answerSources"]) == 9  # by rows
    # one ask per row: no stability line, the rows' entries
    code, out = run(
        "score", CASES / "health_ambiguous_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--cassettes", CASSETTES, "--store", tmp_path / "s.sqlite", "--out", tmp_path / "one",
        "--display", "none",
    )  # fmt: skip
    assert code == 0 and "answers from 9 authored" in " ".join(out.split()), out
    assert "stability:" not in out, out
