"""litellm's model table (context sizes, per-token prices), read without importing litellm.

litellm ships its price and context map as a JSON file inside its package, and the engine
reads the copy the installed litellm holds (litellm itself reads that copy when
``LITELLM_LOCAL_MODEL_COST_MAP`` is set, as the engine sets it: :func:`~rubric_engine.judge.
backends.import_litellm`). Importing litellm costs ~2.5 CPU-s and ~250 MB before the first
call; an OpenAI-protocol judge needs only its model's entry, so this module finds the file
(:func:`importlib.util.find_spec` does not import the package), reads it once per model asked
for, and keeps that entry alone (docs/scale.md). ``pip install -U litellm`` refreshes the
table.

:func:`model_entry` resolves a name as ``litellm.get_model_info`` does for the providers the
engine sends directly (``openai/NAME`` → the ``NAME`` entry whose provider is ``openai``,
an alias row → the row it names) for the ``openai/`` and ``hosted_vllm/`` models it answers
for (:func:`answers_for`); :func:`linear_rates` gives the per-token prices of an entry
whose prices do not change with the prompt's size. Anything else is litellm's to answer.
"""

from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

#: the file litellm ships its model map in (``litellm.model_cost`` is read from it)
TABLE_FILE = "model_prices_and_context_window_backup.json"


def table_path() -> Path | None:
    """The installed litellm's model table, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or ()) if spec else ():
        path = Path(folder) / TABLE_FILE
        if path.is_file():
            return path
    return None


@lru_cache(maxsize=16)
def model_entry(model: str) -> dict[str, Any] | None:
    """The table's entry for ``model`` (a litellm model name), or ``None`` when it has none.

    The file is read for each new model asked for and only that entry kept: the whole table
    is ~3.5 MB of JSON, and a run asks about one model."""
    path = table_path()
    if path is None:
        return None
    table = read_table(path)
    provider, _, name = model.partition("/")
    found = _row(table, model)
    if found is not None and (not name or found.get("litellm_provider") == provider):
        return found
    found = _row(table, name) if name else None
    if found is not None and found.get("litellm_provider") == provider:
        return found
    return None


def read_table(path: Path) -> dict[str, Any]:
    """The table file, decoded (not kept: :func:`model_entry` keeps the entries it finds)."""
    table: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return table


def _row(table: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The row served under ``name``: its own, the row its ``alias_of`` names, or the row that
    lists it among its ``aliases`` (as litellm expands them when it loads the table)."""
    found = table.get(name)
    if isinstance(found, dict) and isinstance(found.get("alias_of"), str):
        found = table.get(found["alias_of"])
        if isinstance(found, dict) and "alias_of" in found:
            found = None  # an alias of an alias: litellm drops it
    elif found is None:
        found = next(
            (row for row in table.values() if isinstance(row, dict)
             and name in (row.get("aliases") or ())),
            None,
        )  # fmt: skip
    return found if isinstance(found, dict) else None


#: the providers whose models this table answers for as litellm does (checked against litellm
#: in ``tests/test_litellm_snapshot.py``); other providers' calls go through litellm anyway
PROVIDERS = frozenset({"openai", "hosted_vllm"})


def answers_for(model: str) -> bool:
    """Whether ``model`` is an ``openai/`` or ``hosted_vllm/`` model (the table answers for
    it); for any other, ask litellm."""
    provider, _, name = model.partition("/")
    return bool(name) and provider in PROVIDERS


def context_size(model: str) -> int | None:
    """The model's input context in tokens (``max_input_tokens``, else ``max_tokens``)."""
    entry = model_entry(model)
    limit = (entry.get("max_input_tokens") or entry.get("max_tokens")) if entry else None
    return int(limit) if limit else None


@lru_cache(maxsize=16)
def linear_rates(model: str) -> tuple[float, float] | None:
    """USD per prompt token and per completion token of ``model``, when its entry prices
    them at one rate whatever the prompt's size (no ``…_above_…_tokens`` rate); ``None``
    when it has no such prices (litellm prices those)."""
    entry = model_entry(model)
    if entry is None:
        return None
    tiered = any("_above_" in key and key.startswith(("input_", "output_")) for key in entry)
    prompt, completion = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if tiered or not isinstance(prompt, int | float) or not isinstance(completion, int | float):
        return None
    return float(prompt), float(completion)


def has_price(model: str) -> bool:
    """Whether the table prices ``model``'s prompt tokens (what ``--max-cost`` needs)."""
    entry = model_entry(model)
    return bool(entry and entry.get("input_cost_per_token"))
