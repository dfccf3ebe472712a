"""``score --mode batch --samples K`` (docs/stability.md "Batch mode and workers"): K requests
per judged row, the sample in each request's ``custom_id``; each answer stored as the row's
sample the moment it is in, the row their aggregate by the live rules; adaptive sampling in
follow-up batches; ``--batch-record`` writes each sample under its live cassette key; a kill -9
mid-batch and ``--resume`` ask no stored sample again.

Real sockets and real litellm against :mod:`rubric_engine.testing.batch_stub`, whose
answers count each row's requests (:class:`tests.test_samples.Counting`): a row's n-th request
is its sample n+1 in a batch file as in a live run, which asks a row's samples in order.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.batch.lines import parse_custom_id
from rubric_engine.batch.mode import BatchSettings
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.store.location import parse_location
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.batch_stub import BatchStub, Delays
from rubric_engine.testing.openai_stub import StubReply, StubServer, row_id_of
from tests.conftest import RUBRICS
from tests.test_batch import FAST, report_core, rows_of
from tests.test_cli import run
from tests.test_samples import Counting, as_compared, per_sample, reference, subset

pytestmark = pytest.mark.live


def sampled(rows: Path, tmp: Path, name: str, mode: str, **extra: Any) -> ScoreOptions:
    extra.setdefault("samples", 3)
    return ScoreOptions(
        inputs=[rows], rubric=RUBRICS / "health_cs.yaml", draft=True, mode=mode,  # type: ignore[arg-type]
        model="openai/gpt-4o-mini", store=tmp / f"{name}.sqlite", out=tmp / name,
        cassettes=tmp / "cassettes", retry=FAST, concurrency=3, **extra,
    )  # fmt: skip


def in_batch(rows: Path, stub: BatchStub, tmp: Path, name: str, **extra: Any) -> ScoreOptions:
    settings = BatchSettings(poll_interval_s=0.02, **extra.pop("batch", {}))
    return sampled(rows, tmp, name, "batch", api_base=stub.base_url, batch=settings, **extra)


def submitted(stub: BatchStub) -> list[list[tuple[int, int, int]]]:
    """Each batch's requests as ``(row seq, sample, attempt)``."""
    out = []
    for s in stub.submissions:
        ids = [parse_custom_id(c) for c in s["customIds"]]
        out.append([(c.seq, c.sample, c.attempt) for c in ids if c is not None])
    return out


def test_custom_ids_carry_the_sample_from_two_on() -> None:
    from rubric_engine.batch.lines import custom_id

    task = "20261204-170957-2624d2"
    first = custom_id(12, 0, "medgpt-7", task)
    assert first == custom_id(12, 0, "medgpt-7", task, sample=1)  # a single ask's id
    assert ".s" not in first
    ids = {custom_id(12, 0, "medgpt-7", task, sample=k) for k in (1, 2, 3)}
    assert len(ids) == 3
    parsed = parse_custom_id(custom_id(12, 1, "medgpt-7", task, sample=3))
    assert parsed is not None and (parsed.seq, parsed.sample, parsed.attempt) == (12, 3, 1)
    assert parsed.matches("medgpt-7")
    assert parse_custom_id(first).sample == 1  # type: ignore[union-attr]


def test_k3_in_batch_asks_k_requests_per_row_and_equals_live(tmp_path: Path) -> None:
    rows = subset(tmp_path, 8)
    with StubServer(Counting()) as server:
        score(sampled(rows, tmp_path, "live", "live", api_base=server.base_url))
    judge = Counting()
    with BatchStub(judge) as stub:
        result = score(in_batch(rows, stub, tmp_path, "batch"))
    assert sum(judge.asked.values()) == 24
    (only,) = submitted(stub)  # one batch: every sample of every row
    assert sorted(only) == sorted((seq, k, 0) for seq in range(8) for k in (1, 2, 3))
    assert stub.duplicate_custom_ids() == []
    assert rows_of(tmp_path / "batch") == rows_of(tmp_path / "live")
    assert report_core(tmp_path / "batch") == report_core(tmp_path / "live")
    assert result.report["stability"]["samples"] == 24
    with TaskStore(tmp_path / "batch.sqlite") as store:
        stored = list(store.rows(result.task_id))
    for row in stored:
        assert [s.sample for s in row.samples] == [1, 2, 3] and row.calls == 3
        assert as_compared(row.result) == reference([s.result for s in row.samples])
    assert any(not reference([s.result for s in r.samples])["stable"] for r in stored)
    code, out = run("verify", result.task_id, "--store", tmp_path / "batch.sqlite")
    assert code == 0 and "8 of 8 row(s) re-derived" in out, out


def test_batch_record_writes_each_sample_under_its_live_key_and_replays_byte_for_byte(
    tmp_path: Path,
) -> None:
    rows = subset(tmp_path, 8)
    with BatchStub(Counting()) as stub:
        recorded = score(in_batch(rows, stub, tmp_path, "rec", batch={"record": True}))
    entries = [
        json.loads(line)
        for line in (tmp_path / "cassettes" / "health_cs" / "rows.jsonl")
        .read_text("utf-8")
        .splitlines()
    ]
    samples = Counter(e["keyParts"].get("sample", "1") for e in entries)
    assert samples == {"1": 8, "2": 8, "3": 8}, samples
    assert {e["provenance"]["kind"] for e in entries} == {"recorded"}
    replay = sampled(rows, tmp_path, "replay", "replay")
    replayed = score(replace(replay, store=tmp_path / "rec.sqlite"))
    assert (tmp_path / "replay" / "rows.jsonl").read_bytes() == (
        tmp_path / "rec" / "rows.jsonl"
    ).read_bytes()
    assert report_core(tmp_path / "replay") == report_core(tmp_path / "rec")
    with TaskStore(tmp_path / "rec.sqlite") as store:
        by_batch = {r.result.row_id: r for r in store.rows(recorded.task_id)}
        by_replay = {r.result.row_id: r for r in store.rows(replayed.task_id)}
    for row_id, row in by_batch.items():  # each sample under the key a live record gives it
        again = by_replay[row_id]
        assert [s.cassette_key for s in row.samples] == [s.cassette_key for s in again.samples]
        assert len({s.cassette_key for s in row.samples}) == 3


def test_adaptive_sampling_in_batch_asks_follow_up_batches_for_the_unsure_rows_as_live(
    tmp_path: Path,
) -> None:
    rows = subset(tmp_path, 26)
    with StubServer(Counting()) as server:
        live = score(
            sampled(rows, tmp_path, "live", "live", api_base=server.base_url, samples_when="unsure")
        )
    judge = Counting()
    with BatchStub(judge) as stub:
        batch = score(in_batch(rows, stub, tmp_path, "batch", samples_when="unsure"))
    assert live.sampling_note is not None and batch.sampling_note == live.sampling_note
    assert rows_of(tmp_path / "batch") == rows_of(tmp_path / "live")
    assert report_core(tmp_path / "batch") == report_core(tmp_path / "live")
    first, second, third = submitted(stub)  # one request a row, then the unsure rows' extras
    assert sorted(first) == [(seq, 1, 0) for seq in range(26)]
    assert {k for _, k, _ in second} == {2} and {k for _, k, _ in third} == {3}
    unsure = {seq for seq, _, _ in second}
    assert 0 < len(unsure) < 26 and {seq for seq, _, _ in third} <= unsure
    extra = len(second) + len(third)
    assert sum(judge.asked.values()) == 26 + extra
    assert f"made {extra}" in batch.sampling_note, batch.sampling_note
    code, out = run("score", "--resume", batch.task_id, "--store", tmp_path / "batch.sqlite")
    assert code == 0 and "already complete" in out.lower(), out


class SecondFailsThirdReasked(Counting):
    """:class:`Counting`'s answers, but each row's second request (its sample 2's line) is
    answered with HTTP 500, so it goes live (``--batch-fallback live``), and its third (sample
    3's line) with prose, so sample 3 is re-asked in a follow-up batch."""

    def __call__(self, body: dict[str, Any]) -> StubReply:
        row = row_id_of(body) or ""
        with self.lock:
            n = self.asked[row]
            self.asked[row] += 1
        if n == 1:
            return StubReply(status=500, content="overloaded")
        if n == 2:
            return StubReply(content="I think this reply is fine overall.")
        return per_sample(body, n)


def test_kill_9_mid_batch_then_resume_asks_no_stored_sample_again(
    tmp_path: Path, store_at: str
) -> None:
    """Each row's sample 1 is answered by the first batch, sample 2 (its line errored) live,
    and sample 3 re-asked in a second batch, during which the run is killed. The resumed run
    adopts that batch, asks nothing live and submits nothing again: every stored sample,
    batch- or live-answered, is kept."""
    rows = subset(tmp_path, 8)
    judge = SecondFailsThirdReasked()
    env = {**os.environ, "NO_COLOR": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "OPENAI_API_KEY": "sk-test"}  # fmt: skip
    with BatchStub(judge, delays=Delays(in_progress_s=2.0)) as stub:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "rubric_engine.cli", "score", str(rows),
                "-r", str(RUBRICS / "health_cs.yaml"), "--draft", "--mode", "batch",
                "--api-base", stub.base_url, "--model", "openai/gpt-4o-mini",
                "--samples", "3", "--batch-fallback", "live", "--batch-poll-interval", "0.02",
                "--store", store_at, "--out", str(tmp_path / "out"), "--display", "none",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while len(stub.submissions) < 2:
                assert time.monotonic() < deadline, "no second batch in 90 s"
                assert process.poll() is None, process.communicate()[1]
                time.sleep(0.01)
            time.sleep(0.3)
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
        live_before = sum(1 for m, p in stub.requests if p.endswith("/chat/completions"))
        asked_before = sum(judge.asked.values())
        with TaskStore(parse_location(store_at)) as opened:
            (task,) = [t.id for t in opened.tasks()]
            assert not list(opened.rows(task))
            held = opened.unfinished_samples(task, ())
        assert live_before == 8  # each row's sample 2
        assert sorted([s.sample for s in h] for h in held.values()) == [[1, 2]] * 8, held
        code, out = run("score", "--resume", task, "--store", store_at, "--display", "none")
        assert code == 0, out
        live_after = sum(1 for m, p in stub.requests if p.endswith("/chat/completions"))
    # nothing asked but the adopted batch's 8 re-asks, which the fake answers as it ends
    assert live_after == live_before and sum(judge.asked.values()) == asked_before + 8
    assert len(stub.submissions) == 2 and stub.duplicate_custom_ids() == []
    first, second = submitted(stub)
    assert len(first) == 24 and sorted(second) == [(seq, 3, 1) for seq in range(8)]
    with TaskStore(parse_location(store_at)) as opened:
        stored = list(opened.rows(task))
        assert opened.task(task).state == "COMPLETED"
    assert len(stored) == 8 and all([s.sample for s in r.samples] == [1, 2, 3] for r in stored)
    for row in stored:
        assert [s.calls for s in row.samples] == [1, 2, 2]  # the errored line, then live
        assert row.samples[1].raw_attempts[0]["error"].startswith("batch request failed")
        assert as_compared(row.result) == reference([s.result for s in row.samples])
    code, out = run("verify", task, "--store", store_at)
    assert code == 0, out


def test_a_failed_sample_ends_the_row_as_its_error_and_stops_its_other_asks(
    tmp_path: Path,
) -> None:
    """Without a live fallback an errored sample is sent again in follow-up batches up to the
    retry policy's attempts, then the row is that sample's TRANSPORT error; a refused sample
    ends its row at once, and the re-ask its sample 3 needed is never sent. The samples asked
    with it (a batch asks a row's samples together) stay with the row."""
    rows = subset(tmp_path, 6)
    verdict_rows = [json.loads(line)["rowId"] for line in rows.read_text("utf-8").splitlines()]
    refused, errored = verdict_rows[1], verdict_rows[4]
    judge = Counting()

    def respond(body: dict[str, Any]) -> StubReply:
        row = row_id_of(body) or ""
        n = judge.asked[row]
        if row == refused and n == 1:
            judge.asked[row] += 1
            return StubReply(content=None, refusal="I can't help with that.")
        if row == refused and n == 2:
            judge.asked[row] += 1
            return StubReply(content="I think this reply is fine overall.")
        if row == errored and n not in (0, 2):
            judge.asked[row] += 1
            return StubReply(status=500, content="overloaded")
        return judge(body)

    with BatchStub(respond) as stub:
        result = score(in_batch(rows, stub, tmp_path, "f"))
    asked = [r for batch in submitted(stub) for r in batch]
    assert stub.duplicate_custom_ids() == []
    assert sorted(a for s, k, a in asked if s == 4 and k == 2) == list(range(FAST.max_attempts))
    assert [(k, a) for s, k, a in asked if s == 1] == [(1, 0), (2, 0), (3, 0)]  # no re-ask
    with TaskStore(tmp_path / "f.sqlite") as store:
        stored = {r.result.row_id: r for r in store.rows(result.task_id)}
    assert stored[refused].result.error is not None
    assert stored[refused].result.error.kind == "REFUSED"
    assert [s.sample for s in stored[refused].samples] == [1, 2]
    assert stored[errored].result.error is not None
    assert stored[errored].result.error.kind == "TRANSPORT"
    assert [s.sample for s in stored[errored].samples] == [1, 2, 3]
    assert stored[errored].samples[1].calls == FAST.max_attempts
    for row_id, row in stored.items():
        if row_id not in (refused, errored):
            assert row.result.status == "SCORED"
            assert as_compared(row.result) == reference([s.result for s in row.samples])
    assert result.report["totals"]["scored"] == 4
    code, out = run("verify", result.task_id, "--store", tmp_path / "f.sqlite")
    assert code == 0, out
