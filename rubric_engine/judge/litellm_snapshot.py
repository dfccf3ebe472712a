"""What the direct transport needs of litellm's parameter mapping, taken from litellm once.

The direct transport sends the body litellm would send (:mod:`rubric_engine.judge.transport`):
the parameters in the order litellm's mapping (``litellm.get_optional_params``) gives them.
For ``openai/`` and ``hosted_vllm/`` models that order is litellm's own parameter order, with
every value passed through unchanged, except for the models litellm maps (reasoning models
that take ``max_completion_tokens``, models that refuse some parameters). Asking litellm at
run time meant importing it (~2.5 CPU-s, ~250 MB) before the first call, so the answer is
kept in ``litellm_snapshot.json`` beside this module:

- ``litellm``: the version it was taken from;
- ``paramOrder``: the parameters a direct call may carry, in litellm's order;
- ``openaiPlain`` / ``openaiMapped``: the ``openai`` chat models of litellm's table whose
  parameters litellm passes through as given, and those it maps.

:func:`direct_order` answers from it: an ``openai/`` model litellm maps, or one in the
installed litellm's table that the snapshot did not check (a newer litellm), goes on asking
litellm; a model its table does not know (a local server's) is sent as given, as litellm
sends it. ``tests/test_litellm_snapshot.py`` compares the file with the installed litellm.

Refresh it after upgrading litellm::

    python -m rubric_engine.judge.litellm_snapshot
"""

from __future__ import annotations

import inspect
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).with_name("litellm_snapshot.json")
#: request shapes a model must pass through unchanged to be plain (the engine's own shapes:
#: default sampling, a seed, a JSON schema, tool calling, and the other direct parameters)
_TOOL = {"type": "function", "function": {"name": "verdict", "parameters": {"type": "object"}}}
_SCHEMA = {"type": "json_schema", "json_schema": {"name": "v", "schema": {"type": "object"}}}
PROBES: tuple[dict[str, Any], ...] = (
    {"temperature": 0.0, "max_tokens": 1024},
    {"temperature": 0.0, "max_tokens": 1024, "seed": 7},
    {"temperature": 0.0, "max_tokens": 1024, "response_format": {"type": "json_object"}},
    {"temperature": 0.0, "max_tokens": 1024, "response_format": _SCHEMA},
    {"temperature": 0.0, "max_tokens": 1024, "tools": [_TOOL], "tool_choice": "auto"},
    {"top_p": 0.9, "n": 1, "stop": ["\n\n"], "presence_penalty": 0.1, "frequency_penalty": 0.1},
    {"temperature": 0.0, "max_completion_tokens": 1024},
)


@lru_cache(maxsize=1)
def snapshot() -> dict[str, Any]:
    """The shipped snapshot."""
    data: dict[str, Any] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    data["openaiPlain"] = frozenset(data["openaiPlain"])
    data["openaiMapped"] = frozenset(data["openaiMapped"])
    return data


def direct_order(provider: str, model: str, params: dict[str, Any]) -> tuple[str, ...] | None:
    """The order litellm sends ``params`` in for ``provider/model`` when it sends them as
    given; ``None`` when litellm must be asked (a model it maps, a parameter outside the
    snapshot's, a model the snapshot did not check)."""
    from rubric_engine.judge.model_table import model_entry

    known = snapshot()
    order: list[str] = known["paramOrder"]
    if not params.keys() <= set(order) or provider not in ("openai", "hosted_vllm"):
        return None
    unchecked = provider == "openai" and model not in known["openaiPlain"]
    if unchecked and (model in known["openaiMapped"] or model_entry(f"openai/{model}")):
        return None
    return tuple(name for name in order if name in params)


def make_snapshot() -> dict[str, Any]:
    """Ask the installed litellm (imported) what :func:`direct_order` needs."""
    from rubric_engine.judge.backends import import_litellm
    from rubric_engine.judge.transport import DIRECT_PARAMS

    litellm = import_litellm()
    signature = inspect.signature(litellm.get_optional_params).parameters
    order = [name for name in signature if name in DIRECT_PARAMS]
    plain: list[str] = []
    mapped: list[str] = []
    for name, entry in sorted(litellm.model_cost.items()):
        if not isinstance(entry, dict) or entry.get("litellm_provider") != "openai":
            continue
        if entry.get("mode") not in (None, "chat", "responses"):
            continue
        (plain if _passes_through(litellm, name, order) else mapped).append(name)
    return {
        "litellm": getattr(litellm, "__version__", None) or _version(),
        "paramOrder": order,
        "openaiPlain": plain,
        "openaiMapped": mapped,
    }


def _passes_through(litellm: Any, model: str, order: list[str]) -> bool:
    for params in PROBES:
        try:
            mapped = litellm.get_optional_params(
                model=model, custom_llm_provider="openai", **params
            )
        except Exception:  # litellm refuses a parameter for this model: it maps it
            return False
        kept = {k: v for k, v in mapped.items() if k not in ("stream", "extra_body")}
        if kept != params or list(kept) != [k for k in order if k in params]:
            return False
    return True


def _version() -> str:
    from importlib.metadata import version

    return version("litellm")


def main() -> None:
    """Write the snapshot of the installed litellm over the shipped one."""
    made = make_snapshot()
    SNAPSHOT.write_text(json.dumps(made, indent=1) + "\n", encoding="utf-8")
    print(
        f"wrote {SNAPSHOT.name} from litellm {made['litellm']}: {len(made['openaiPlain'])} "
        f"openai models sent as given, {len(made['openaiMapped'])} mapped by litellm"
    )


if __name__ == "__main__":
    main()
