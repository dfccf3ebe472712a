"""Judge cost at batch rates, from litellm's price map (docs/batch.md).

OpenAI, Anthropic and others charge about half the live price for batch requests; litellm's
price map holds the batch rates of the models it knows (``input_cost_per_token_batches``,
``output_cost_per_token_batches``). A model with live rates only is priced at those (an upper
bound) and says so; a model with no price has none (``None``), as in live mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rubric_engine.judge.backends import import_litellm

Basis = Literal["batch", "live", "none"]


@dataclass(frozen=True)
class Rates:
    """USD per token; ``basis`` says which of litellm's rates they are."""

    input_usd: float
    output_usd: float
    basis: Basis

    def price(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.input_usd + completion_tokens * self.output_usd


def rates(model: str, batch: bool = True) -> Rates | None:
    """The model's rates from litellm (batch ones when ``batch`` and known), else ``None``."""
    try:
        info = import_litellm().get_model_info(model)
    except Exception:  # litellm raises several kinds for a model it has no entry for
        return None
    live_in, live_out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    batch_in = info.get("input_cost_per_token_batches")
    batch_out = info.get("output_cost_per_token_batches")
    if batch and batch_in is not None and batch_out is not None:
        return Rates(float(batch_in), float(batch_out), "batch")
    if live_in is not None and live_out is not None:
        return Rates(float(live_in), float(live_out), "live")
    return None


def pricer(model: str) -> tuple[Callable[[int, int], float | None], Basis]:
    """A ``(prompt, completion tokens) → USD`` function at batch rates, and its basis."""
    found = rates(model)
    if found is None:
        return (lambda _p, _c: None), "none"
    return found.price, found.basis
