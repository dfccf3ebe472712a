"""``score --dry-run``: what a run would cost, with no judge call and nothing stored
(docs/judge-replies.md). There was no dry run: the first figure a user saw was the bill."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from rubric_engine.testing.openai_stub import ServerQuirks, StubServer, row_id_of
from tests.conftest import CASES, CASSETTES, RUBRICS
from tests.test_cli import run
from tests.test_live import UNSEEN, verdict
from tests.test_self_hosted_fit import _rows

HEALTH = CASES / "health_consult_zh.jsonl"


def test_a_dry_run_of_a_replay_counts_rows_and_calls_and_stores_nothing(tmp_path: Path) -> None:
    store, out = tmp_path / "s.sqlite", tmp_path / "out"
    code, text = run("score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft",
                     "--store", store, "--out", out, "--cassettes", CASSETTES,
                     "--dry-run")  # fmt: skip
    assert code == 0, text
    assert "dry run: no judge call was made and no task was stored" in text
    assert "rows: 26 (26 to judge)" in text and "judge calls: 26 (at most 78" in text, text
    assert "cost: none: a replay answers from cassettes" in text
    assert not store.exists() and not out.exists()


def test_judge_when_leaves_rows_to_the_rule_checks(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in UNSEEN.read_text("utf-8").splitlines()]
    for n, row in enumerate(rows):
        row.setdefault("metadata", {})["tier"] = "gold" if n < 3 else "bulk"
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    code, text = run("score", path, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store",
                     tmp_path / "s.sqlite", "--judge-when", "tier=gold", "--dry-run")  # fmt: skip
    assert code == 0, text
    assert f"rows: {len(rows)} (3 to judge, {len(rows) - 3} decided by their rule checks" in text


@pytest.mark.live
def test_a_dry_run_of_a_self_hosted_judge_makes_no_call_and_checks_the_context(
    tmp_path: Path,
) -> None:
    quirks = ServerQuirks(chars_per_token=1, tokenize=True)
    with StubServer(lambda body: verdict(row_id_of(body) or ""), quirks=quirks) as server:
        code, text = run("score", _rows(tmp_path), "-r", RUBRICS / "health_cs.yaml", "--draft",
                         "--mode", "live", "--model", "openai/stub-judge", "--api-base",
                         server.base_url, "--store", tmp_path / "s.sqlite", "--max-context",
                         "16000", "--dry-run")  # fmt: skip
        chat_calls, counted = len(server.requests), server.tokenize_calls
    assert code == 0, text
    assert chat_calls == 0 and counted >= 2, (chat_calls, counted)
    assert "rows: 2 (2 to judge)" in text and "counted by the server's /tokenize" in text
    assert "context: 1 row(s) will not fit 16000 tokens" in text and "long-row" in text, text
    assert "cost: not known: litellm has no price for openai/stub-judge" in text
    assert "judge server" not in text  # it answered
    assert not (tmp_path / "s.sqlite").exists()


def test_a_dry_run_says_when_the_judge_server_cannot_be_reached(tmp_path: Path) -> None:
    """Newcomer finding: a dry run against a port nothing listens on printed its counts and
    no word of it; the real run then waited about 70 s and exited 5. The dry run now says the
    server is not reachable (one TCP connection, nothing sent)."""
    with socket.socket() as held:  # a free loopback port, closed before the run
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
    code, text = run("score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store",
                     tmp_path / "s.sqlite", "--mode", "live", "--model", "openai/stub-judge",
                     "--api-base", f"http://127.0.0.1:{port}/v1", "--dry-run")  # fmt: skip
    assert code == 0, text
    assert f"judge server: not reachable at http://127.0.0.1:{port}/v1 (" in text, text
    assert "start it, or check --api-base" in text


def test_a_dry_run_prices_a_known_model_as_an_upper_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRY_RUN_TEST_KEY", "sk-test")
    code, text = run("score", HEALTH, "-r", RUBRICS / "health_cs.yaml", "--draft", "--store",
                     tmp_path / "s.sqlite", "--mode", "live", "--model", "openai/gpt-4o-mini",
                     "--api-key-env", "DRY_RUN_TEST_KEY", "--dry-run")  # fmt: skip
    assert code == 0, text
    assert "cost: at most" in text and "USD at live rates" in text, text
    assert "context: every prompt fits" in text, text


def test_a_dry_run_refuses_resume(tmp_path: Path) -> None:
    code, text = run("score", "--resume", "20261204-170957-2624d2", "--store",
                     tmp_path / "s.sqlite", "--dry-run")  # fmt: skip
    assert code == 2 and "--dry-run" in text, text
