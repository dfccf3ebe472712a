"""A direct call to an OpenAI-protocol judge imports no litellm (docs/scale.md): what it needs
of litellm is read from litellm's model table file or the shipped snapshot of its parameter
mapping. Each answer is checked here against the installed litellm itself."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from rubric_engine.judge import litellm_snapshot, model_table
from rubric_engine.judge.backends import import_litellm
from rubric_engine.judge.transport import OPENAI_FINISH_REASONS, Route, _litellm_order
from tests.conftest import ROOT

litellm = import_litellm()
OPENAI_CHAT = sorted(
    name
    for name, entry in litellm.model_cost.items()
    if isinstance(entry, dict)
    and entry.get("litellm_provider") == "openai"
    and entry.get("mode") in (None, "chat", "responses")
)
#: names a local server may serve a model under (no entry in litellm's table)
LOCAL_NAMES = ["my-model", "Qwen/Qwen2.5-7B-Instruct", "llama-3.1-8b", "gemma-3-12b-it"]


@pytest.fixture(autouse=True)
def table_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine reads the table once per model a run asks about; here once for all."""
    monkeypatch.setattr(model_table, "read_table", functools.lru_cache(1)(model_table.read_table))
    model_table.model_entry.cache_clear()


def test_the_shipped_snapshot_is_the_installed_litellm_s() -> None:
    shipped = json.loads(litellm_snapshot.SNAPSHOT.read_text("utf-8"))
    assert shipped == litellm_snapshot.make_snapshot(), (
        "refresh it: python -m rubric_engine.judge.litellm_snapshot"
    )


def _route(provider: str, model: str) -> Route:
    return Route(
        provider, model, "http://127.0.0.1:1/v1/chat/completions", {}, provider == "openai"
    )


@pytest.mark.parametrize("params", litellm_snapshot.PROBES, ids=lambda p: "+".join(p))
def test_the_snapshot_order_is_litellm_s_for_every_model_it_answers_for(
    params: dict[str, object],
) -> None:
    plain = sorted(litellm_snapshot.snapshot()["openaiPlain"])[::10]  # every plain one: above
    cases = [("openai", name) for name in plain + LOCAL_NAMES + ["gpt-4o-mini", "o3-mini"]]
    if "tools" not in params:  # hosted_vllm/ with tools goes through litellm
        cases += [("hosted_vllm", name) for name in LOCAL_NAMES]
    answered = 0
    for provider, name in cases:
        order = litellm_snapshot.direct_order(provider, name, dict(params))
        if order is None:
            continue  # litellm is asked, as before
        answered += 1
        assert order == _litellm_order(_route(provider, name), dict(params)), (provider, name)
    assert answered >= len(LOCAL_NAMES) * 2  # local names and plain OpenAI models at least


def test_openai_s_finish_reasons_are_left_as_they_are_by_litellm() -> None:
    from litellm.litellm_core_utils.core_helpers import map_finish_reason

    assert all(map_finish_reason(reason) == reason for reason in OPENAI_FINISH_REASONS)


@pytest.mark.parametrize("prefix", ["openai/", "hosted_vllm/"])
def test_the_table_gives_litellm_s_context_sizes(prefix: str) -> None:
    for name in [*OPENAI_CHAT, *LOCAL_NAMES]:
        model = prefix + name
        assert model_table.answers_for(model)
        try:
            info = litellm.get_model_info(model)
            expected = info.get("max_input_tokens") or info.get("max_tokens")
        except Exception:
            expected = None
        assert model_table.context_size(model) == (int(expected) if expected else None), model


def test_the_table_gives_litellm_s_per_token_prices() -> None:
    priced = 0
    for name in [*OPENAI_CHAT, *LOCAL_NAMES]:
        model = f"openai/{name}"
        rates = model_table.linear_rates(model)
        try:
            one = litellm.cost_per_token(
                model=name, custom_llm_provider="openai", prompt_tokens=1, completion_tokens=1
            )
        except Exception:
            assert rates is None and not model_table.has_price(model), model
            continue
        if rates is None:
            continue  # priced by tiers: litellm prices those calls
        priced += 1
        assert rates == pytest.approx(one, rel=1e-12), model
        big = litellm.cost_per_token(
            model=name, custom_llm_provider="openai", prompt_tokens=900_000,
            completion_tokens=50_000,
        )  # fmt: skip
        assert (900_000 * rates[0], 50_000 * rates[1]) == pytest.approx(big, rel=1e-9), model
    assert priced > 40


def test_a_live_run_of_an_openai_protocol_judge_imports_no_litellm(tmp_path: object) -> None:
    """The benchmark's live child against the loopback stub: scored, priced, and neither
    litellm, openai nor httpx in ``sys.modules``."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "live", "--concurrency", "4",
         "--latency-ms", "5", "--rows", "8", "--clients", "engine"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| engine"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[13] == "8"  # scored
    assert cells[16] == "", f"imported {cells[16]}"
