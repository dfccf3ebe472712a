"""What one judge call used, read from the response's ``usage``, and what it cost.

:func:`read_usage` takes the ``usage`` mapping of a response as it arrives (OpenAI's
chat-completion JSON, a litellm ``Usage`` through ``model_dump()``, the cut-down copy a
cassette keeps, or an Anthropic Messages ``usage``) and returns one :class:`TokenUsage`;
:func:`price` prices it at litellm's rates for the model, cached tokens at the provider's
cached rates. Every live transport (litellm's and a direct HTTP one) and replay read usage
here, so they count the same tokens.

Where the cached counts are (checked against litellm 1.110's ``Usage`` and its Anthropic
transformation):

- OpenAI (automatic caching): ``prompt_tokens_details.cached_tokens``, a part of
  ``prompt_tokens``; OpenAI bills no cache writes.
- Anthropic through litellm: litellm folds ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens`` into ``prompt_tokens`` and repeats them as
  ``prompt_tokens_details.cached_tokens`` / ``cache_creation_tokens`` (``cache_write_tokens``
  is the same count) and as top-level ``cache_read_input_tokens`` /
  ``cache_creation_input_tokens``. A cassette keeps the ``prompt_tokens_details`` counts.
- Anthropic's own Messages ``usage``: ``input_tokens`` counts only the uncached tokens; the
  cached and written ones come beside it.
- DeepSeek: ``prompt_cache_hit_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """The tokens of one call.

    Attributes:
        prompt_tokens: every prompt token, those read from or written to the provider's
            prompt cache included (OpenAI's and litellm's ``prompt_tokens``).
        completion_tokens: output tokens, reasoning tokens included.
        cache_read_tokens: of ``prompt_tokens``, those read from the prompt cache (billed at
            the cached rate, litellm's ``cache_read_input_token_cost``).
        cache_creation_tokens: of ``prompt_tokens``, those written to the prompt cache
            (Anthropic bills them above the input rate: ``cache_creation_input_token_cost``).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0

    @property
    def uncached_prompt_tokens(self) -> int:
        """Prompt tokens billed at the plain input rate."""
        return max(0, self.prompt_tokens - self.cache_read_tokens - self.cache_creation_tokens)


#: a usage of only these counts has no cached, written or reasoning tokens to read
_PLAIN_COUNTS = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def read_usage(usage: Mapping[str, Any] | None) -> TokenUsage:
    """The :class:`TokenUsage` of a response's ``usage`` (see the module docstring for the
    shapes); missing or non-integer counts read as 0, never an error.

    Reasoning tokens: OpenAI counts ``completion_tokens_details.reasoning_tokens`` inside
    ``completion_tokens``; a provider whose ``total_tokens`` shows they were counted outside
    it (total = prompt + completion + reasoning) has them added, so usage and budgets count
    every token billed.
    """
    if not usage:
        return TokenUsage()
    if usage.keys() <= _PLAIN_COUNTS:  # the usual usage: no cache, no reasoning breakdown
        return TokenUsage(
            _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
        )
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    read = _count(details.get("cached_tokens")) or _count(
        usage.get("cache_read_input_tokens") or usage.get("prompt_cache_hit_tokens")
    )
    written = (
        _count(details.get("cache_creation_tokens"))
        or _count(details.get("cache_write_tokens"))
        or _count(usage.get("cache_creation_input_tokens"))
    )
    if "prompt_tokens" not in usage and "input_tokens" in usage:  # Anthropic's own shape
        prompt = _count(usage.get("input_tokens")) + read + written
        return TokenUsage(prompt, _count(usage.get("output_tokens")), read, written)
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    done = usage.get("completion_tokens_details")
    reasoning = _count(done.get("reasoning_tokens")) if isinstance(done, Mapping) else 0
    if reasoning and usage.get("total_tokens") == prompt + completion + reasoning:
        completion += reasoning
    read = min(read, prompt)  # a count beyond the prompt is the server's slip, not billed
    return TokenUsage(prompt, completion, read, min(written, prompt - read))


def usage_of(response: Mapping[str, Any] | None) -> TokenUsage:
    """:func:`read_usage` of a wire response's ``usage`` (``None``: no response, no tokens)."""
    return read_usage((response or {}).get("usage"))


def price(model: str, usage: TokenUsage) -> float | None:
    """The call's cost in USD at litellm's rates for ``model``, or ``None`` when litellm has
    no price for it.

    litellm's ``cost_per_token`` is handed the counts in its normalized shape (prompt tokens
    inclusive, ``prompt_tokens_details.cached_tokens`` / ``cache_creation_tokens``), so the
    uncached prompt tokens are billed at ``input_cost_per_token``, the cached ones at
    ``cache_read_input_token_cost`` and the written ones at ``cache_creation_input_token_cost``
    (each falls back to the input rate where the map has none), the output at
    ``output_cost_per_token``. ``tests/test_prompt_cache.py`` checks this against the rates.
    A model litellm does not know is looked up once (litellm searches every rule before it
    gives up).

    Args:
        model: the litellm model name (``anthropic/claude-haiku-4-5``, ``gpt-4o-mini`` …).
    """
    if not _priced(model):
        return None
    from rubric_engine.judge.backends import import_litellm

    litellm = import_litellm()
    from litellm.types.utils import Usage

    details = {"cached_tokens": usage.cache_read_tokens}
    if usage.cache_creation_tokens:
        details["cache_creation_tokens"] = usage.cache_creation_tokens
    billed = Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
        prompt_tokens_details=details,
    )
    prompt_usd, completion_usd = litellm.cost_per_token(
        model=model,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        usage_object=billed,
    )
    return float(prompt_usd) + float(completion_usd)


@lru_cache(maxsize=64)
def _priced(model: str) -> bool:
    from rubric_engine.judge.backends import import_litellm

    try:
        info = import_litellm().get_model_info(model)
    except Exception:  # litellm raises many kinds for a model it has no entry for
        return False
    return info.get("input_cost_per_token") is not None
