"""What a self-hosted judge server does silently, noticed (docs/self-hosted-judge.md).

- :func:`looping_unit`: a reply that repeats one short unit until ``max_tokens`` (small local
  models do this without a grammar) is a loop, not a truncated verdict: a larger budget only
  buys a longer loop.
- :class:`DeliveryCheck`: some chat templates drop the ``system`` message (the rubric), and
  the server answers anyway. The provider's reported prompt tokens are compared with the
  engine's own estimate on the first answered calls; far fewer means the rubric did not
  reach the model, and the run stops (:class:`RubricNotDelivered`).
- :func:`context_message`: the words of a ``CONTEXT_EXCEEDED`` row.
- :func:`system_as_user`: ``--system-as-user``'s prompt shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

#: a unit longer than this is not a "short unit"; a tail shorter than MIN_LOOP_CHARS is no loop
MAX_UNIT_CHARS = 200
MIN_LOOP_CHARS = 120
#: the unit must repeat at least this many times at the end of the reply
MIN_REPEATS = 4
#: reported prompt tokens under this share of the estimate: the system message was dropped
DROPPED_SHARE = 0.2
#: how many first answered calls are checked
CHECKED_CALLS = 3


def looping_unit(text: str) -> str | None:
    """The unit a reply repeats at its end, or ``None`` when it does not loop.

    A loop: the last ``max(MIN_LOOP_CHARS, MIN_REPEATS × len(unit))`` characters are one unit
    of at most :data:`MAX_UNIT_CHARS` characters repeated (a partial unit may end the text),
    and that run covers at least half of the reply. Whitespace at the end is ignored.
    """
    text = text.rstrip()
    for size in range(1, min(MAX_UNIT_CHARS, len(text) // MIN_REPEATS) + 1):
        span = max(MIN_LOOP_CHARS, MIN_REPEATS * size)
        if span > len(text):
            break
        tail = text[-span:]
        if tail[size:] != tail[:-size]:
            continue
        # extend the run backwards as far as it goes
        start = len(text) - span
        while start > 0 and text[start - 1] == text[start - 1 + size]:
            start -= 1
        if len(text) - start >= len(text) / 2:
            return text[-size:]
    return None


def reply_text(response: dict[str, Any]) -> str:
    """The content and every tool call's arguments of a wire response, joined."""
    choices = response.get("choices") or [{}]
    message = (choices[0] or {}).get("message") or {}
    parts = [str(message.get("content") or "")]
    for call in message.get("tool_calls") or []:
        parts.append(str(((call or {}).get("function") or {}).get("arguments") or ""))
    return "".join(parts)


class RubricNotDelivered(Exception):
    """The provider counted far fewer prompt tokens than the request holds (see module)."""

    def __init__(self, row_id: str, reported: int, estimated: int, system: int) -> None:
        super().__init__(
            f"the judge server counted {reported} prompt tokens for row {row_id!r}, but the "
            f"request holds about {estimated} ({system} of them the system message with the "
            "rubric). The rubric most likely never reached the model: the server's chat "
            "template drops system messages (common with Gemma and some llama.cpp / Ollama "
            "templates). Score again with --system-as-user (the rubric goes inside the first "
            "user message), or fix the server's chat template"
        )
        self.row_id = row_id


@dataclass
class DeliveryCheck:
    """Compares reported prompt tokens with ``estimate(messages)`` on the first answered calls.

    Args:
        estimate: tokens of a message list (litellm's ``token_counter`` for the model).
    """

    estimate: Callable[[list[dict[str, Any]]], int]
    checked: int = 0
    _system: dict[str, int] = field(default_factory=dict)

    def check(self, row_id: str, messages: Sequence[dict[str, Any]], reported: int) -> None:
        """Raises :class:`RubricNotDelivered` when ``reported`` is under
        :data:`DROPPED_SHARE` of the estimate and the request has a system message."""
        if self.checked >= CHECKED_CALLS or reported <= 0:
            return
        system = [dict(m) for m in messages if m.get("role") == "system"]
        if not system:
            return
        self.checked += 1
        if reported >= DROPPED_SHARE * most_tokens(messages):
            return  # above the share of any count the request could have: no need to count
        estimated = self.estimate([dict(m) for m in messages])
        text = str(system[0].get("content"))
        if text not in self._system:
            self._system[text] = self.estimate(system)
        if reported < DROPPED_SHARE * estimated:
            raise RubricNotDelivered(row_id, reported, estimated, self._system[text])


def most_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """More tokens than any tokenizer counts for ``messages``: the bytes of their JSON (a
    byte-level token is at least one byte, and the JSON holds every role, name and tool call
    besides the text, more than the few tokens a tokenizer adds a message). A reported count
    above :data:`DROPPED_SHARE` of it needs no tokenizer (litellm's, ~2.5 CPU-s to load)."""
    return len(json.dumps(list(messages), ensure_ascii=False, default=str).encode())


def litellm_estimate(model: str) -> Callable[[list[dict[str, Any]]], int]:
    """litellm's token count for ``model`` (its tokenizer, or tiktoken's default), falling
    back to characters / 4 when litellm cannot count the messages."""
    from rubric_engine.judge.backends import import_litellm

    def estimate(messages: list[dict[str, Any]]) -> int:
        try:  # litellm imported at the first row long enough to need counting
            return int(import_litellm().token_counter(model=model, messages=messages))
        except Exception:  # litellm raises many kinds for a message it cannot count
            return sum(len(str(m.get("content") or "")) for m in messages) // 4

    return estimate


_LIMIT = re.compile(r"(?:maximum context length|context (?:length|window|size)) (?:is |of )?(\d+)")
#: the server's own count of the request: OpenAI/vLLM "resulted in N tokens", "you requested
#: N tokens", llama.cpp "request (N tokens) exceeds"
_COUNTED = re.compile(
    r"(?:resulted in|you requested|request \(|requested) (\d+) tokens", re.IGNORECASE
)


def context_message(detail: str, tokens: int | None, limit: int | None) -> str:
    """``CONTEXT_EXCEEDED``'s message: the server's own token count when its error gives one,
    else the engine's estimate; the limit (from ``--max-context``, else read from the server's
    error text); then the server's words."""
    if limit is None:
        found = _LIMIT.search(detail)
        limit = int(found.group(1)) if found else None
    counted = _COUNTED.search(detail)
    size = (
        f"{counted.group(1)} tokens as the server counted"
        if counted
        else f"about {tokens} tokens"
        if tokens
        else "its prompt"
    )
    over = f"the model's context of {limit} tokens" if limit else "the model's context"
    return (
        f"the row's prompt ({size}) is over {over}; not retried. Shorten the dialogue, or use "
        f"a judge with a longer context. Server said: {detail}"
    )


class ContextLimitWarning(UserWarning):
    """Rows whose prompts will not fit the judge model's context (said before the first call)."""


class JudgeServerWarning(UserWarning):
    """The judge server refuses a connection before the first call (the run waits for it)."""


def oversized_rows(
    prompts: Iterable[tuple[str, list[dict[str, Any]]]],
    limit: int,
    estimate: Callable[[list[dict[str, Any]]], int],
    reserve: int = 0,
) -> list[tuple[str, int]]:
    """``(rowId, tokens)`` of each prompt that does not leave ``reserve`` tokens (the answer's
    ``max_tokens``) within ``limit``: a server counts the prompt and the room asked for the
    answer against its context.

    A prompt of fewer UTF-8 bytes than ``limit - reserve`` is taken to fit without counting
    (a token of a byte-level tokenizer is at least one byte), so only long rows are counted.
    A character is at most four UTF-8 bytes, so a prompt of fewer than a quarter that many
    characters fits without encoding it either.
    """
    room = limit - reserve
    over: list[tuple[str, int]] = []
    for row_id, messages in prompts:
        texts = [str(m.get("content") or "") for m in messages]
        if 4 * sum(map(len, texts)) < room or sum(len(t.encode()) for t in texts) < room:
            continue
        tokens = estimate(messages)
        if tokens + reserve > limit:
            over.append((row_id, tokens))
    return over


#: tokens a chat template adds per message (role markers), on top of the content's
TEMPLATE_TOKENS_PER_MESSAGE = 4
#: what tiktoken's count is raised by for a self-hosted model without a tokenizer endpoint:
#: other tokenizers (Llama's, Qwen's, Gemma's) count up to about 30 % more for the same text
SELF_HOSTED_MARGIN = 1.3


def server_tokenizer(
    api_base: str, model: str, timeout_s: float = 5.0
) -> Callable[[list[dict[str, Any]]], int] | None:
    """The server's own token count of a message list, through its ``/tokenize`` endpoint
    (beside ``/v1``: llama.cpp takes ``{"content": …}`` and answers ``{"tokens": […]}``, vLLM
    takes ``{"model", "prompt"}`` and answers ``{"count": …}``), or ``None`` when the server has
    none (or cannot be reached now). The messages' contents are counted, plus
    :data:`TEMPLATE_TOKENS_PER_MESSAGE` each."""
    import json
    import urllib.error
    import urllib.request

    from rubric_engine.judge.transport import split_base

    base, _, basic = split_base(api_base)
    root = (base or "").rstrip("/").removesuffix("/v1")
    name = model.split("/", 1)[-1]

    def ask(payload: dict[str, Any]) -> int | None:
        headers = {
            "Content-Type": "application/json",
            **({"Authorization": basic} if basic else {}),
        }
        request = urllib.request.Request(
            f"{root}/tokenize", data=json.dumps(payload).encode(), headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                found = json.loads(response.read())
        except (OSError, ValueError, urllib.error.URLError):
            return None
        if isinstance(found, dict) and isinstance(found.get("count"), int):
            return int(found["count"])
        tokens = found.get("tokens") if isinstance(found, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    # vLLM's request shape, then llama.cpp's; the first one the server answers is used
    shapes = ({"model": name, "prompt": "{text}"}, {"content": "{text}"})
    # a shape the server reads counts the probe's tokens (a server that ignores the field it
    # does not know answers 0)
    chosen = next((p for p in shapes if (ask(_filled(p, "probe text")) or 0) > 0), None)
    if chosen is None:
        return None

    def count(messages: list[dict[str, Any]]) -> int:
        counted = ask(_filled(chosen, "\n".join(str(m.get("content") or "") for m in messages)))
        if counted is None:
            raise OSError(f"{root}/tokenize stopped answering")
        return counted + TEMPLATE_TOKENS_PER_MESSAGE * len(messages)

    return count


def _filled(shape: dict[str, str], text: str) -> dict[str, str]:
    return {k: (text if v == "{text}" else v) for k, v in shape.items()}


def system_as_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The system message(s) folded into the first user message (text first), for servers
    whose chat template drops ``system``; other messages unchanged."""
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    for message in rest:
        if message.get("role") == "user":
            message["content"] = "\n\n".join([*system, str(message.get("content") or "")])
            return rest
    return [{"role": "user", "content": "\n\n".join(system)}, *rest]


def unreachable(api_base: str, timeout_s: float = 3.0) -> str | None:
    """Why the server of ``api_base`` cannot be reached now (its host and port refuse or do
    not answer a TCP connection within ``timeout_s``), or ``None`` when it can. Opens and
    closes one connection; sends nothing."""
    import socket

    from rubric_engine.judge.transport import split_base

    base, _, _ = split_base(api_base)
    parts = urlsplit(base or "")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__
