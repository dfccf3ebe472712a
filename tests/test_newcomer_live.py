"""A newcomer's live-run findings: an Azure key in AZURE_API_KEY is enough when --api-base and
api_version are given, and a bad $RUBRIC_EVAL_TRANSPORT stops only runs that call a judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_engine.testing.openai_stub import StubServer, scripted_responder
from tests.conftest import CASSETTES, RUBRICS
from tests.test_cli import run
from tests.test_live import verdict

pytestmark = pytest.mark.live


def _rows(tmp_path: Path) -> Path:
    path = tmp_path / "r2.jsonl"
    turns = [
        {"role": "user", "content": "头疼三天了，怎么办？"},
        {"role": "assistant", "content": "请问还有发烧或呕吐吗？"},
    ]
    lines = [json.dumps({"rowId": f"a{i}", "messages": turns}, ensure_ascii=False) for i in (1, 2)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_azure_key_alone_is_enough_with_api_base_and_api_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AZURE_API_BASE", "AZURE_API_VERSION", "RUBRIC_EVAL_TRANSPORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_API_KEY", "azure-key-k")
    script = {f"a{i}": [verdict(f"a{i}")] for i in (1, 2)}
    with StubServer(scripted_responder(script)) as server:
        code, out = run(
            "score", _rows(tmp_path), "-r", RUBRICS / "health_cs.yaml", "--draft",
            "--mode", "live", "--model", "azure/x",
            "--api-base", server.base_url.removesuffix("/v1"),
            "--judge-param", "api_version=2024-10-21",
            "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out", "--display", "none",
        )  # fmt: skip
        sent = list(server.requests)
    assert code == 0, out
    assert len(sent) == 2 and {r["headers"].get("api-key") for r in sent} == {"azure-key-k"}
    assert all("api-version=2024-10-21" in r["path"] for r in sent)


def test_azure_without_a_key_is_still_refused_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AZURE_API_BASE", "AZURE_API_VERSION", "AZURE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    code, out = run(
        "score", _rows(tmp_path), "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--mode", "live", "--model", "azure/x", "--api-base", "http://127.0.0.1:9",
        "--judge-param", "api_version=2024-10-21", "--store", tmp_path / "s.sqlite",
    )  # fmt: skip
    assert code == 2 and "needs AZURE_API_KEY set" in out
    assert "AZURE_API_BASE" not in out and "AZURE_API_VERSION" not in out


def test_a_bad_transport_variable_does_not_stop_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUBRIC_EVAL_TRANSPORT", "bogus")
    demo = Path(__file__).parent.parent / "cases" / "health_consult_zh.jsonl"
    code, out = run(
        "score", demo, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes", CASSETTES,
        "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out", "--display", "none",
    )  # fmt: skip
    assert code == 0, out
    # a live run is refused before any call, naming the variable and the choices
    code, out = run(
        "score", _rows(tmp_path), "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--mode", "live", "--model", "openai/stub", "--api-base", "http://127.0.0.1:9/v1",
        "--store", tmp_path / "s2.sqlite",
    )  # fmt: skip
    assert code == 2
    assert "$RUBRIC_EVAL_TRANSPORT 'bogus' is not a transport; use one of direct, litellm" in out
    # an explicit --transport is an option, checked in every mode
    code, out = run(
        "score", demo, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes", CASSETTES,
        "--transport", "httpx", "--store", tmp_path / "s3.sqlite",
    )  # fmt: skip
    assert code == 2 and "--transport 'httpx' is not a transport" in out
