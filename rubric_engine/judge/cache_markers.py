"""Prompt-cache markers: the static rubric prefix marked cacheable for providers that need it.

Every row of a task starts with the same system message (the rubric and the verdict schema,
byte for byte; ``benchmarks/tokens.py`` measures it at ~94% of the health pack's prompt).
OpenAI, Azure OpenAI, DeepSeek, xAI and the OpenAI-compatible servers cache such a prefix on
their own and take no marker; their requests are never changed here. Providers whose prompt
caching is explicit only cache what a request marks, so for them the system message goes out
as one text block with ``cache_control: {"type": "ephemeral"}`` (litellm's prompt-caching
format, docs.litellm.ai/docs/completion/prompt_caching; litellm turns it into Anthropic's
``system`` block marker or Bedrock's ``cachePoint``).

Which models get the marker (:func:`needs_markers`), by litellm's provider of the model:

- ``anthropic`` (the Anthropic API, or an Anthropic-compatible ``--api-base``): every model;
- ``bedrock`` (invoke and converse): Claude and Nova models;
- ``vertex_ai``: Claude models;

and not when litellm's model map knows the model and says ``supports_prompt_caching`` is
false. A model the map does not know keeps the marker (a new Claude model caches too).

A cache entry can be read only once the request that writes it has been answered, so the
requests in flight when a run starts would each write the prefix again (at the write rate,
1.25× the input rate on Anthropic). :class:`PrefixWarmup` sends the first request with a
marked prefix alone and lets the others go once it is answered: one write per task, every later
request a read (``benchmarks/tokens.py caching`` prices both).

The marker is a transport detail like the API base: it does not change what the judge is
asked, so it is added on the way to the wire (:class:`~rubric_engine.judge.backends.LiveBackend`)
and is not part of the cassette key; a task recorded with markers replays without them, and
``--no-prompt-cache`` (:attr:`~rubric_engine.judge.backends.LiveSettings.prompt_cache`)
leaves every request as it was before markers existed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any

#: the marker litellm passes on (Anthropic's only cache type; 5-minute lifetime)
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


#: provider prefixes that cache without markers (OpenAI's automatic caching, and the servers
#: that speak its protocol)
UNMARKED = frozenset({"openai", "hosted_vllm", "azure"})


@lru_cache(maxsize=64)
def needs_markers(model: str) -> bool:
    """Whether requests to ``model`` (a litellm model name) mark their static prefix; the
    rule is in the module docstring. Unknown provider prefixes get none."""
    if model.partition("/")[0] in UNMARKED and model.partition("/")[2]:
        return False  # an OpenAI-protocol prefix: known without importing litellm
    from rubric_engine.judge.backends import import_litellm

    litellm = import_litellm()
    try:
        name, provider, _, _ = litellm.get_llm_provider(model)
    except Exception:  # litellm raises for a prefix it does not know: no marker
        return False
    name = str(name).lower()
    explicit = (
        provider == "anthropic"
        or (provider == "bedrock" and ("claude" in name or "nova" in name))
        or (provider == "vertex_ai" and "claude" in name)
    )
    if not explicit:
        return False
    try:
        info = litellm.get_model_info(model)
    except Exception:  # not in litellm's map: the provider decides
        return True
    return info.get("supports_prompt_caching") is not False


def mark_static_prefix(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with its first message, when it is the system message with text content,
    sent as one text block carrying :data:`EPHEMERAL`; every other message as it was.

    ``kwargs`` is not changed. A request with no such message (``--system-as-user``, or
    content that is already a list of blocks) is returned as it is.
    """
    messages = kwargs.get("messages")
    if not messages or messages[0].get("role") != "system":
        return kwargs
    first = messages[0]
    if not isinstance(first.get("content"), str):
        return kwargs
    block = {"type": "text", "text": first["content"], "cache_control": dict(EPHEMERAL)}
    marked = {**first, "content": [block]}
    return {**kwargs, "messages": [marked, *messages[1:]]}


class PrefixWarmup:
    """One writer per marked prefix: the first request with it goes alone; the others with the
    same prefix wait until it is answered (or failed for good), then go together.

    One event loop only (the engine's one async implementation); the check and the set of the
    first request happen without an ``await`` between them.
    """

    def __init__(self) -> None:
        self._written: dict[str, asyncio.Event] = {}

    @asynccontextmanager
    async def turn(self, kwargs: dict[str, Any]) -> AsyncIterator[None]:
        """Hold this request back until the prefix of ``kwargs`` is in the provider's cache;
        a request without a marked prefix goes at once."""
        prefix = marked_prefix(kwargs)
        if prefix is None:
            yield
            return
        written = self._written.get(prefix)
        if written is None:
            self._written[prefix] = written = asyncio.Event()
            try:
                yield
            finally:
                written.set()
            return
        await written.wait()
        yield


def marked_prefix(kwargs: dict[str, Any]) -> str | None:
    """The text of the marked system block of ``kwargs`` (:func:`mark_static_prefix`), or
    ``None`` when it has none."""
    messages = kwargs.get("messages") or [{}]
    content = messages[0].get("content")
    if messages[0].get("role") != "system" or not isinstance(content, list):
        return None
    marked = [b for b in content if isinstance(b, dict) and b.get("cache_control")]
    return str(marked[-1].get("text") or "") if marked else None
