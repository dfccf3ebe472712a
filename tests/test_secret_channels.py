"""Each credential channel on its own (docs/security.md): which ``.env`` is read, a base URL's
``user:password@`` and query on each transport, the redaction list and its use on replies."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rubric_engine.engine.options import ScoreOptions, check_options
from rubric_engine.errors import ConfigurationError
from rubric_engine.judge import secrets
from rubric_engine.judge.backends import CallKey, LiveBackend, LiveSettings
from rubric_engine.judge.retry import RetryPolicy
from rubric_engine.testing.openai_stub import StubReply, StubServer
from tests.conftest import CASES, RUBRICS

ROWS = CASES / "health_consult_zh.jsonl"


def test_importing_litellm_reads_no_dotenv_above_the_project() -> None:
    # litellm's import called dotenv.load_dotenv(), which finds the first .env walking up from
    # litellm's own folder: the project's or any folder above the virtualenv
    probe = (
        "import dotenv\n"
        "calls = []\n"
        "dotenv.load_dotenv = lambda *a, **k: calls.append(a) or False\n"
        "import rubric_engine\n"
        "from rubric_engine.judge.backends import import_litellm\n"
        "import_litellm()\n"
        "print(len(calls))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_MODE"}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def test_the_command_line_reads_the_current_folder_s_dotenv_only(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("PARENT_ONLY=from-parent\n", encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("HERE=from-here\nALREADY=from-file\n", encoding="utf-8")
    probe = (
        "import os\n"
        "from rubric_engine.cli import read_dotenv\n"
        "read_dotenv()\n"
        "print(os.environ.get('HERE'), os.environ.get('PARENT_ONLY'), os.environ['ALREADY'])\n"
    )
    env = {**os.environ, "ALREADY": "from-environment"}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=project,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["from-here", "None", "from-environment"]


def test_the_redaction_list_holds_every_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_KNOWN", set())
    monkeypatch.setenv("MY_JUDGE", "named-by-api-key-env")
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "a-provider-key-1")
    secrets.remember_run(
        "https://usr1:pw-9@h.example/v1?code=query-code&region=eu-west",
        "MY_JUDGE",
        {"extra_headers": {"X-Route": "header-value"}, "api_version": "2024-10-21"},
    )
    listed = set(secrets.credential_values())
    basic = base64.b64encode(b"usr1:pw-9").decode()
    assert {
        "named-by-api-key-env", "a-provider-key-1", "usr1", "pw-9", "query-code", "eu-west",
        "header-value", basic,
    } <= listed  # fmt: skip
    assert "2024-10-21" not in listed  # a transport option that is not a header
    # replies: known values only, everything else as written
    reply = {"choices": [{"message": {"content": '{"why": "saw query-code and sk-notours"}'}}]}
    scrubbed = secrets.scrub(reply)
    assert scrubbed["choices"][0]["message"]["content"] == (
        '{"why": "saw [redacted] and sk-notours"}'
    )
    untouched = {"choices": [{"message": {"content": "fine"}}]}
    assert secrets.scrub(untouched) is untouched


def options(**given: object) -> ScoreOptions:
    base: dict[str, object] = {
        "inputs": [ROWS], "rubric": RUBRICS / "health_cs.yaml", "draft": True, "mode": "live",
        "model": "openai/stub",
    }  # fmt: skip
    return ScoreOptions(**{**base, **given})  # type: ignore[arg-type]


def test_a_base_url_query_or_userinfo_is_refused_where_it_cannot_be_sent() -> None:
    query = "http://127.0.0.1:9/v1?code=abc"
    check_options(options(api_base=query))  # the direct transport sends it as given
    for refused, why in (
        (options(api_base=query, transport="litellm"), "--transport litellm cannot send"),
        (options(api_base=query, mode="batch"), "--mode batch"),
        (options(api_base=query, model="anthropic/claude"), "a anthropic/ model"),
        (
            options(api_base="http://u:p@127.0.0.1:9/v1", api_key_env="K"),
            "one Authorization header carries one credential",
        ),
    ):
        with pytest.raises(ConfigurationError, match=why):
            check_options(refused)


@pytest.mark.parametrize("transport", ["direct", "litellm"])
def test_userinfo_is_sent_as_http_basic_on_every_transport(transport: str) -> None:
    from tests.test_transport import judge_request

    kwargs, request = judge_request("openai/stub-judge", "json", {})
    with StubServer(lambda body: StubReply(content='{"score": 4}')) as server:
        host = server.base_url.split("//", 1)[1]
        settings = LiveSettings(
            api_base=f"http://judge:pw-secret@{host}",
            retry=RetryPolicy(max_attempts=1),
            transport=transport,
        )
        backend = LiveBackend(settings)
        answer = asyncio.run(backend.complete(kwargs, request, CallKey.of(kwargs, request), 0))
        seen = list(server.requests)
    assert answer.failure is None, answer.failure
    basic = "Basic " + base64.b64encode(b"judge:pw-secret").decode()
    assert [r["authSha256"] for r in seen] == [hashlib.sha256(basic.encode()).hexdigest()]
