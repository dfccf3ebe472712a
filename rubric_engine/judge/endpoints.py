"""What a live call knows of its endpoint: which key it may carry, how it is recorded, and
which of its errors mean "the prompt is too long" (docs/self-hosted-judge.md). Pure; litellm
is not imported.
"""

from __future__ import annotations

#: provider prefixes of OpenAI-compatible servers a team runs itself: no key unless asked
SELF_HOSTED_PREFIXES = frozenset(
    {
        "openai",
        "hosted_vllm",
        "ollama",
        "ollama_chat",
        "llamafile",
        "lm_studio",
        "text-completion-openai",
    }
)


def sends_provider_key(model: str, api_base: str | None, api_key_env: str | None) -> bool:
    """Whether a call to ``model`` at ``api_base`` carries the provider's usual key.

    Without ``--api-base``: yes (the provider's own endpoint). With one: only when
    ``--api-key-env`` names the key, or the prefix is not a self-hosted kind (e.g. an
    ``azure/`` or ``anthropic/`` endpoint behind a proxy, which needs its key).
    """
    if not api_base or api_key_env:
        return True
    return model.split("/", 1)[0] not in SELF_HOSTED_PREFIXES


def endpoint_kind(model: str, api_base: str | None) -> dict[str, str]:
    """Where a recorded answer came from, safe to store: the provider prefix and the API
    base's scheme and host (``user:password@``, path and query removed), or ``default``."""
    from urllib.parse import urlsplit

    out = {"providerPrefix": model.split("/", 1)[0] if "/" in model else "openai"}
    if api_base:
        parts = urlsplit(api_base)
        host = parts.hostname or ""
        out["host"] = f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
    else:
        out["host"] = "default"
    return out


def is_context_exceeded(exc: BaseException) -> bool:
    """litellm's ``ContextWindowExceededError`` (a 400 whose text says the prompt is too
    long); matched by name so litellm stays imported lazily."""
    return any(t.__name__ == "ContextWindowExceededError" for t in type(exc).__mro__)
