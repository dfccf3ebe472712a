"""The sentinel sweep: no credential a run knows reaches anything rubric-eval writes or prints.

A sentinel value sits in every channel a credential reaches rubric-eval through: a provider's
usual environment variable (``AZURE_API_KEY``, ``OPENAI_API_KEY``), the variable named by
``--api-key-env``, the ``user:password@`` part of ``--api-base`` and every one of its query
values (``?code=`` is no credential-shaped name), and a header value of
``--judge-param extra_headers``. The loopback provider echoes the request (its path and every
header) in 200 replies (inside the verdict's explanation), in 400, 401 and 500 errors, and in the
errors of batch steps. Runs in record, live and batch mode; then the whole output tree (store
file, reports, cassettes, batch files) and every byte printed are searched for each sentinel.
See docs/security.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.batch_stub import BatchStub
from rubric_engine.testing.openai_stub import (
    ECHO,
    StubReply,
    StubServer,
    load_verdicts,
    row_id_of,
)
from tests.conftest import CASES, RUBRICS

pytestmark = pytest.mark.live
ROWS = CASES / "health_consult_zh.jsonl"
VERDICTS = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
KEY = "sentinelKEY7b2e91c4"  # in $JUDGE_CRED, named by --api-key-env
AZURE = "sentinelAZU3f8d02aa"  # the provider's usual variable, sent by an azure/ route
OPENAI = "sentinelOAI5c1d7e9b"  # a provider key that is in the environment, never sent here
PASSWORD = "sentinelPWD9e4b6c13"  # user:password@ of --api-base
USER = "sentinelUSRa1f03d57"
CODE = "sentinelCOD2d9a8f61"  # ?code= of --api-base
REGION = "sentinelREG6b0e4c28"  # a second query value, no credential-shaped name
HEADER = "sentinelHDR8c3f5a90"  # a value of --judge-param extra_headers
SENTINELS = (KEY, AZURE, OPENAI, PASSWORD, USER, CODE, REGION, HEADER)
HEADERS = f'extra_headers={{"X-Route": "{HEADER}"}}'


def echoing(plan: dict[str, list[int]]) -> Any:
    """Answer each row by its plan (statuses in order, the last repeating): 200 gives the row's
    verdict with the request echoed in its explanation; an error echoes it in its message."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> StubReply:
        row = row_id_of(body) or ""
        statuses = plan.get(row, plan.get("*", [200]))
        with lock:
            n = seen[row] = seen.get(row, -1) + 1
        status = statuses[min(n, len(statuses) - 1)]
        if status != 200:
            return StubReply(status=status, content="Incorrect API key provided", echo_request=True)
        verdict = dict(VERDICTS[row])
        verdict["scoreExplanation"] = f"{verdict.get('scoreExplanation', '')} {ECHO}"
        return StubReply(content=json.dumps(verdict, ensure_ascii=False), echo_request=True)

    return respond


def rubric_eval(cwd: Path, *args: object) -> subprocess.CompletedProcess[bytes]:
    env = {
        **os.environ,
        "NO_COLOR": "1",
        "JUDGE_CRED": KEY,  # a name that does not look like a credential's
        "AZURE_API_KEY": AZURE,
        "OPENAI_API_KEY": OPENAI,
        "LITELLM_LOG": "DEBUG",  # litellm's own logging must not leak them either
    }
    return subprocess.run(
        [sys.executable, "-m", "rubric_engine.cli", *map(str, args)],
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=240,
    )


def test_no_sentinel_on_disk_or_in_any_output(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    store = work / "s.sqlite"
    printed: list[bytes] = []

    def run(*args: object) -> subprocess.CompletedProcess[bytes]:
        done = rubric_eval(work, *args)
        printed.extend((done.stdout, done.stderr))
        return done

    def score(mode: str, out: str, base: str, *more: object) -> subprocess.CompletedProcess[bytes]:
        return run(
            "score", ROWS, "-r", RUBRICS / "health_cs.yaml", "--draft", "--mode", mode,
            "--api-base", base, "--store", store, "--out", work / out,
            "--cassettes", work / "cassettes", "-q", *more,
        )  # fmt: skip

    plan = {"medgpt-22": [400], "medgpt-24": [500, 200], "*": [200]}
    with StubServer(echoing(plan)) as server:
        host = server.base_url.split("//", 1)[1]
        query = f"?code={CODE}&region={REGION}"
        keyed = ("--api-key-env", "JUDGE_CRED", "--judge-param", HEADERS)
        # record: the key in a header, a query on the base URL, an extra header
        recorded = score("record", "record", server.base_url + query, *keyed)
        assert recorded.returncode == 0, recorded.stderr.decode()
        # live: user:password@ (HTTP Basic) and a query, no key of its own
        basic = f"http://{USER}:{PASSWORD}@{host}{query}"
        live = score("live", "live", basic, "--judge-param", HEADERS)
        assert live.returncode == 0, live.stderr.decode()
        # live to an azure/ route: the provider's usual variable is the key sent
        azure = score(
            "live", "azure", f"http://{host.removesuffix('/v1')}", "--model", "azure/judge",
            "--judge-param", "api_version=2024-10-21", "--judge-param", HEADERS,
        )  # fmt: skip
        assert azure.returncode == 0, azure.stderr.decode()
        # a 401 quoting everything: the run stops (exit 8) and writes what it has
        plan["*"] = [401]
        refused = score("live", "refused", server.base_url + query, *keyed)
        assert refused.returncode == 8, refused.stderr.decode()
        seen = list(server.requests)

    with BatchStub(echoing({"*": [200]}), faults={"retrieve": 500}) as stub:
        batch = score("batch", "batch", stub.base_url, *keyed, "--batch-poll-interval", "0")
    assert batch.returncode not in (0, 1), batch.stderr.decode()
    assert b"Traceback" not in batch.stderr, batch.stderr.decode()[-3000:]

    # the sentinels did reach the provider: the sweep is not vacuous
    paths = " ".join(r["path"] for r in seen)
    assert CODE in paths and REGION in paths
    assert any(r["headers"].get("x-route") == HEADER for r in seen)
    sha = {r["authSha256"] for r in seen}
    assert hashlib.sha256(f"Bearer {KEY}".encode()).hexdigest() in sha
    userinfo = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert hashlib.sha256(f"Basic {userinfo}".encode()).hexdigest() in sha
    assert any(r["headers"].get("api-key") == AZURE for r in seen)
    # and the replies that quoted them were kept, redacted
    rows = [json.loads(x) for x in (work / "live" / "rows.jsonl").read_text("utf-8").splitlines()]
    by_id = {r["rowId"]: r for r in rows}
    assert "[redacted]" in by_id["medgpt-1"]["scoreExplanation"]
    assert "Incorrect API key provided" in by_id["medgpt-22"]["error"]["message"]
    with TaskStore(store) as opened:
        bases = [t.extra["run"]["apiBase"] for t in opened.tasks()]
    assert bases[0] == f"{server.base_url}?code=[redacted]&region=[redacted]"

    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"s.sqlite", "report.json", "report.html", "rows.jsonl"} <= names, names
    assert any(p.suffix == ".jsonl" and "cassettes" in p.parts for p in written)
    for secret in SENTINELS:
        for path in written:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path}"
        for text in printed:
            assert secret.encode() not in text, f"{secret} printed: {text[-2000:]!r}"
