"""The one transport retry policy (retries live in exactly one place, or attempts multiply).

litellm's own retries and the OpenAI client's are switched off (``num_retries=0``,
``max_retries=0``); instructor only re-asks on *invalid output*, never on transport errors.
So the attempts a provider sees are exactly: (1 + re-asks) × (1 + transport retries at most).

Retried: HTTP 408, 409, 429, 500, 502, 503, 504, timeouts and connection errors — with
exponential backoff and full jitter. A server's ``Retry-After`` (seconds, an HTTP date, or
``retry-after-ms``), or else the wait a rate-limit message names ("try again in 5.3s"), is a
minimum: the wait is at least the hint and at most
``RetryPolicy.max_wait_s`` (30 s by default; a longer hint waits 30 s, and the retry may meet
another 429). The hint also holds off every other row's next attempt
(:meth:`rubric_engine.judge.limiter.AdaptiveLimit.hold_off`).
Never retried: 400, 401, 403, 404, 422 and anything else (a bad request does not get better).

After a client-side timeout the next try waits at least ``after_timeout_s`` (a run sets it to
its request timeout, at most ``max_wait_s``): a self-hosted server usually keeps generating
the abandoned answer, and a retry sent at once would queue behind it and time out too.
A request may also name statuses that are final for it (``retrying(final_status)``): a server
that refuses a schema form with 500 is answered with the next form, not the same one again.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
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
_CLIENT_SIDE = frozenset({"APIConnectionError", "Timeout", "APITimeoutError"})


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a server answered ``exc`` with; ``None`` for a client-side failure
    (litellm gives a refused connection or a timeout a stand-in status 500/408, which no
    server sent: counted as one, a refused connection read as the server refusing a schema
    form)."""
    if type(exc).__name__ in _CLIENT_SIDE:
        return None
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    """True for rate limits, server errors, timeouts and dropped connections."""
    if type(exc).__name__ in _CONNECTION_ERRORS:
        return True
    status = status_of(exc)
    return status in RETRYABLE_STATUS


def is_refused(exc: BaseException) -> bool:
    """A connection the server refused (nothing listens: a server restarting), as the
    transports raise it (:func:`rubric_engine.judge.transport.refused_message`)."""
    return type(exc).__name__ == "APIConnectionError" and "connection refused" in str(exc)


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
    except (AttributeError, TypeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        pass
    try:  # the other form RFC 9110 allows: an HTTP date
        when = parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


#: "try again in 5.3s", "retry after 7 seconds", "try again in 120ms" (OpenAI's and Azure's
#: rate-limit messages name the wait there when no header does)
_MESSAGE_WAIT = re.compile(
    r"(?:try again|retry)(?: in| after)\s+(\d+(?:\.\d+)?)\s*"
    r"(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)\b",
    re.IGNORECASE,
)


def message_wait_s(text: str) -> float | None:
    """Seconds an error message says to wait before trying again, or ``None``."""
    found = _MESSAGE_WAIT.search(text)
    if found is None:
        return None
    amount, unit = float(found.group(1)), found.group(2).lower()
    if unit.startswith("m") and unit not in ("m", "min", "mins", "minute", "minutes"):
        return amount / 1000  # ms, millisecond(s)
    return amount * 60 if unit.startswith("m") else amount


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff settings. ``max_attempts`` counts the first try."""

    max_attempts: int = 4
    base_s: float = 0.5
    max_wait_s: float = 30.0
    #: the least wait after a timeout, seconds (the server may still be finishing the answer)
    after_timeout_s: float = 0.0
    #: seconds a refused connection is retried for, however many attempts that takes: a
    #: self-hosted server restarting (a minute for a model to load); 0 counts it as any error
    restart_wait_s: float = 0.0

    def wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: the jittered backoff, raised to the server's
        ``Retry-After`` hint when it sends one, never above ``max_wait_s``; after a client
        timeout, ``after_timeout_s`` plus the jittered backoff."""
        exc = state.outcome.exception() if state.outcome else None
        if exc is not None and self.after_timeout_s and type(exc).__name__ in _TIMEOUTS:
            ceiling = min(self.max_wait_s, self.base_s * 2 ** (state.attempt_number - 1))
            return self.after_timeout_s + random.uniform(0, ceiling)
        ceiling = min(self.max_wait_s, self.base_s * 2 ** (state.attempt_number - 1))
        backoff = random.uniform(0, ceiling)  # full jitter
        return min(self.max_wait_s, max(backoff, self.hint_s(exc)))

    def hint_s(self, exc: BaseException | None) -> float:
        """The server's hint on ``exc`` in seconds (its ``Retry-After`` header, else the wait its
        message names: "try again in 5.3s"), capped at ``max_wait_s``; 0 without one."""
        if exc is None:
            return 0.0
        hinted = retry_after_s(exc)
        if hinted is None:
            hinted = message_wait_s(str(exc))
        return min(self.max_wait_s, hinted) if hinted is not None else 0.0

    def retrying(self, final_status: frozenset[int] = frozenset()) -> AsyncRetrying:
        """The tenacity loop; an error whose HTTP status is in ``final_status`` ends it."""
        return AsyncRetrying(
            retry=retry_if_exception(
                lambda exc: is_retryable(exc) and status_of(exc) not in final_status
            ),
            stop=self.stop,
            wait=self.wait,
            reraise=True,
        )

    def stop(self, state: RetryCallState) -> bool:
        """Stop after ``max_attempts``; a refused connection, with ``restart_wait_s``, only
        once that long has passed since the first attempt."""
        exc = state.outcome.exception() if state.outcome else None
        if self.restart_wait_s and exc is not None and is_refused(exc):
            return (state.seconds_since_start or 0.0) >= self.restart_wait_s
        return stop_after_attempt(self.max_attempts)(state)
