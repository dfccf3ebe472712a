"""No credential in anything rubric-eval writes or prints.

Sentinel secrets are placed where users put keys: the query string and the ``user:password@``
part of ``--api-base``, the variable named by ``--api-key-env`` (sent in the
``Authorization`` header) and a provider's usual variable in the environment. The loopback
provider quotes the URL and the header back in its errors, as real providers do. After a
record run, a live run, a failed run and its resume, no file under the run's folder (store,
reports, cassettes) and no byte of stdout or stderr holds any of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.openai_stub import (
    StubReply,
    StubServer,
    load_verdicts,
    row_id_of,
    verdicts_responder,
)
from tests.conftest import CASES, RUBRICS

pytestmark = pytest.mark.live
ROWS = CASES / "health_consult_zh.jsonl"
VERDICTS = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
IN_QUERY = "qsentinel4f1c9e2b7a"
IN_USERINFO = "psentinel88d2c4e1f0"
IN_HEADER = "hsentinel5b7e0a9c31"
IN_ENV = "esentinel0d6f2b8a47"
SENTINELS = (IN_QUERY, IN_USERINFO, IN_HEADER, IN_ENV)


def responder(failing: dict[str, int]) -> Any:
    answer = verdicts_responder(VERDICTS)

    def respond(body: dict[str, Any]) -> StubReply:
        status = failing.get(row_id_of(body) or "", failing.get("*", 200))
        if status != 200:
            return StubReply(status=status, content="Incorrect API key provided", echo_request=True)
        return answer(body)

    return respond


def rubric_eval(*args: object) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "NO_COLOR": "1",
        "JUDGE_CRED": IN_HEADER,  # a name that does not look like a credential's
        "OPENAI_API_KEY": IN_ENV,
        "LITELLM_LOG": "DEBUG",  # litellm's own logging must not leak them either
    }
    return subprocess.run(
        [sys.executable, "-m", "rubric_engine.cli", *map(str, args)],
        capture_output=True,
        env=env,
        timeout=240,
    )


def test_sentinel_keys_reach_the_provider_but_nothing_rubric_eval_writes_or_prints(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    store = work / "s.sqlite"
    failing = {"medgpt-22": 400, "medgpt-24": 503}
    outputs: list[bytes] = []
    with StubServer(responder(failing)) as server:
        host = server.base_url.split("//", 1)[1]

        def score(mode: str, out: str, api_base: str) -> subprocess.CompletedProcess[bytes]:
            done = rubric_eval(
                "score", ROWS, "-r", RUBRICS / "health_cs.yaml", "--draft", "--mode", mode,
                "--api-base", api_base, "--api-key-env", "JUDGE_CRED", "--model",
                "openai/stub-judge", "--store", store, "--out", work / out,
                "--cassettes", work / "cassettes", "--display", "none",
            )  # fmt: skip
            outputs.extend((done.stdout, done.stderr))
            return done

        # record and live: the key in a header; two rows fail with the provider quoting it
        recorded = score("record", "record", server.base_url)
        assert recorded.returncode == 0, recorded.stderr.decode()
        live = score("live", "live", server.base_url)
        assert live.returncode == 0, live.stderr.decode()
        # failed runs: a key in the URL's query (the provider quotes the path it was sent to)
        # and in its user:password@ part
        failing["*"] = 404
        in_query = score("live", "failed", f"{server.base_url}?key={IN_QUERY}&api-version=1")
        assert in_query.returncode == 5, in_query.stderr.decode()
        # user:password@ is HTTP Basic: refused beside the key of --api-key-env, saying why
        in_userinfo = score("live", "failed2", f"http://judge:{IN_USERINFO}@{host}")
        assert in_userinfo.returncode == 2, in_userinfo.stderr.decode()
        assert b"one Authorization header carries one credential" in in_userinfo.stderr
        with TaskStore(store) as opened:
            failed_task = opened.tasks()[-1].id
        failing.clear()
        refused = rubric_eval("score", "--resume", failed_task, "--store", store)
        outputs.extend((refused.stdout, refused.stderr))
        assert refused.returncode == 2 and b"pass --api-base again" in refused.stderr
        resumed = rubric_eval(
            "score", "--resume", failed_task, "--store", store, "--api-base", server.base_url
        )
        outputs.extend((resumed.stdout, resumed.stderr))
        assert resumed.returncode == 0, resumed.stderr.decode()
        seen = list(server.requests)
    # the sentinels did reach the provider: the test is not vacuous
    assert any(IN_QUERY in r["path"] for r in seen)
    bearer = hashlib.sha256(f"Bearer {IN_HEADER}".encode()).hexdigest()
    assert all(r["authSha256"] == bearer for r in seen)
    # the rows that failed carry the provider's message, redacted
    rows = (work / "live" / "rows.jsonl").read_text("utf-8").splitlines()
    errors = {json.loads(r)["rowId"]: json.loads(r)["error"] for r in rows}
    assert "Incorrect API key provided" in errors["medgpt-22"]["message"]
    assert "[redacted]" in errors["medgpt-22"]["message"]
    with TaskStore(store) as opened:
        bases = [t.extra["run"]["apiBase"] for t in opened.tasks()]
    assert bases[2:] == [f"{server.base_url}?key=[redacted]&api-version=[redacted]"]
    written = [p for p in work.rglob("*") if p.is_file()]
    assert {"s.sqlite", "report.json", "rows.jsonl"} <= {p.name for p in written}
    assert any(p.suffix == ".jsonl" and "cassettes" in p.parts for p in written)
    for secret in SENTINELS:
        for path in written:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path.name}"
        for text in outputs:
            assert secret.encode() not in text, f"{secret} printed: {text[-2000:]!r}"


def test_a_base_url_is_stored_without_its_credentials() -> None:
    from rubric_engine.judge.secrets import masked_url, redact, url_secrets

    url = "https://u:p4ssw0rd@llm.example/v1?api-version=2024-06-01&api_key=k3y-value&sig=abc"
    assert masked_url(url) == (
        "https://llm.example/v1?api-version=[redacted]&api_key=[redacted]&sig=[redacted]",
        True,
    )
    assert masked_url("http://127.0.0.1:8000/v1") == ("http://127.0.0.1:8000/v1", False)
    # every query value is a secret: ?code= is as much a key as ?key=
    assert set(url_secrets(url)) == {"u", "p4ssw0rd", "2024-06-01", "k3y-value", "abc"}
    # shapes are redacted even when the value was never known to rubric-eval
    assert redact(f"failed at {url}") == (
        "failed at https://[redacted]@llm.example/v1?api-version=2024-06-01"
        "&api_key=[redacted]&sig=[redacted]"
    )
