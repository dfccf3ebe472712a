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
import sqlite3
import subprocess
import sys
import threading
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
from rubric_engine.testing.batch_stub import BatchStub, Delays, Fate
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
