"""The one transport retry policy (STYLE.md: retries live in exactly one place).

litellm's own retries and the OpenAI client's are switched off (``num_retries=0``,
``max_retries=0``); instructor only re-asks on *invalid output*, never on transport errors.
So the attempts a provider sees are exactly: (1 + re-asks) × (1 + transport retries at most).

Retried: HTTP 408, 409, 429, 500, 502, 503, 504, timeouts and connection errors — with
exponential backoff and full jitter, or the server's ``Retry-After`` when it sends one.
Never retried: 400, 401, 403, 404, 422 and anything else (a bad request does not get better).

After a client-side timeout the next try waits at least ``after_timeout_s`` (a run sets it to
its request timeout, at most ``max_wait_s``): a self-hosted server usually keeps generating
the abandoned answer, and a retry sent at once would queue behind it and time out too.
A request may also name statuses that are final for it (``retrying(final_status)``): a server
that refuses a schema form with 500 is answered with the next form, not the same one again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_CONNECTION_ERRORS = (
    "APIConnectionError",
    "Timeout",
    "APITimeoutError",
    "ConnectError",
    "ReadTimeout",
    "ServerDisconnectedError",
)


_TIMEOUTS = ("Timeout", "APITimeoutError", "ReadTimeout")


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    """True for rate limits, server errors, timeouts and dropped connections."""
    if type(exc).__name__ in _CONNECTION_ERRORS:
        return True
    status = status_of(exc)
    return status in RETRYABLE_STATUS


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds from a ``Retry-After`` (or ``retry-after-ms``) header on the error, if any."""
    headers: Any = getattr(exc, "headers", None)
    response = getattr(exc, "response", None)
    if not headers and response is not None:
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        value = headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff settings. ``max_attempts`` counts the first try."""

    max_attempts: int = 4
    base_s: float = 0.5
    max_wait_s: float = 30.0
    #: the least wait after a timeout, seconds (the server may still be finishing the answer)
    after_timeout_s: float = 0.0

    def wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if exc is not None and self.after_timeout_s and type(exc).__name__ in _TIMEOUTS:
            ceiling = min(self.max_wait_s, self.base_s * 2 ** (state.attempt_number - 1))
            return self.after_timeout_s + random.uniform(0, ceiling)
        hinted = retry_after_s(exc) if exc is not None else None
        if hinted is not None:
            return min(hinted, self.max_wait_s)
        ceiling = min(self.max_wait_s, self.base_s * 2 ** (state.attempt_number - 1))
        return random.uniform(0, ceiling)  # full jitter

    def retrying(self, final_status: frozenset[int] = frozenset()) -> AsyncRetrying:
        """The tenacity loop; an error whose HTTP status is in ``final_status`` ends it."""
        return AsyncRetrying(
            retry=retry_if_exception(
                lambda exc: is_retryable(exc) and status_of(exc) not in final_status
            ),
            stop=stop_after_attempt(self.max_attempts),
            wait=self.wait,
            reraise=True,
        )
