"""The lean live path: OpenAI-protocol chat completions over one long-lived aiohttp session.

litellm spends 5–6 ms of CPU on every call (logging objects, callbacks, its response model,
pricing); at a few hundred calls in flight that, not the provider, bounds a run.
For the providers that speak OpenAI's chat-completions protocol themselves this module sends
the request directly, and litellm keeps everything else (other providers, batch APIs, the
price map).

Sent directly (:func:`route_for`), everything else goes through litellm:

- ``openai/MODEL`` — OpenAI's endpoint, or any OpenAI-compatible ``--api-base`` (vLLM,
  llama.cpp, LM Studio … served under ``openai/``);
- ``hosted_vllm/MODEL`` with ``--api-base`` (requests without ``tools``: litellm rewrites tool
  schemas for vLLM);
- ``azure/DEPLOYMENT`` with an ``--api-base`` of the resource (``https://NAME.openai.azure.com``),
  an API key, and an ``api-version`` (``--judge-param api_version=…``, ``AZURE_API_VERSION``, or
  litellm's default).

The request is the one litellm sends (``tests/test_transport.py`` compares them on the wire):
the same URL, ``Authorization: Bearer KEY`` (``api-key: KEY`` for Azure), and the same JSON
body — litellm's own parameter mapping (``litellm.get_optional_params``) decides the
parameters and their order, asked once per parameter shape; a shape litellm would change
(a reasoning model's ``temperature`` or ``max_tokens``, an Azure API version without
``response_format``) is sent through litellm instead, so its errors and renames stay its own.
The body is serialized as each litellm path does (the openai SDK's compact JSON for
``openai/`` and ``azure/``, ``json.dumps`` defaults for ``hosted_vllm/``). Only
``User-Agent`` (``rubric-eval``), ``Accept`` (``*/*`` for the SDK's ``application/json``) and
the SDK's ``X-Stainless-*`` telemetry headers differ. Also left to litellm: messages that are
not plain text (content parts, ``cache_control`` markers), parameters outside
:data:`DIRECT_PARAMS`, transport options other than ``api_version`` and ``extra_headers``, a
base URL with credentials or a query, and the environment variables the openai SDK reads for
an organization, a project or another base URL.

``--transport litellm`` (or ``RUBRIC_EVAL_TRANSPORT=litellm``) sends every call through
litellm, for comparison or as an escape hatch.

Errors are raised as :class:`TransportError` subclasses named like litellm's
(``RateLimitError``, ``AuthenticationError``, ``APIConnectionError``, ``Timeout`` …) with
``status_code`` and ``headers``, so :mod:`rubric_engine.judge.retry` treats both paths alike.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: the two transports (``--transport``)
TRANSPORTS = ("direct", "litellm")
TRANSPORT_ENV = "RUBRIC_EVAL_TRANSPORT"
OPENAI_BASE = "https://api.openai.com/v1"
#: request keys a direct call may carry besides ``model`` and ``messages``; anything else
#: (``extra_body``, ``stream`` …) goes through litellm
DIRECT_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "n",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "response_format",
        "seed",
        "tools",
        "tool_choice",
    }
)
#: what litellm's parameter mapping adds that never reaches the wire
_MAPPING_NOISE = {"stream": False, "extra_body": {}}
#: environment variables that change what litellm or the openai SDK send; with one set the
#: call goes through litellm (this module does not imitate them)
_OPENAI_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
               "OPENAI_ORGANIZATION")  # fmt: skip
_AZURE_ENV = ("AZURE_AD_TOKEN",)


def transport_choice(option: str | None = None) -> str:
    """``direct`` or ``litellm``: ``option`` (``--transport``), else ``$RUBRIC_EVAL_TRANSPORT``,
    else ``direct``.

    Raises:
        ValueError: an unknown name (names the valid ones).
    """
    given = option or os.environ.get(TRANSPORT_ENV)
    chosen = (given or "direct").strip().lower()
    if chosen not in TRANSPORTS:
        where = "--transport" if option else f"${TRANSPORT_ENV}"
        fix = "" if option else f", or unset {TRANSPORT_ENV} for the default direct"
        raise ValueError(
            f"{where} {given!r} is not a transport; use one of {', '.join(TRANSPORTS)}{fix}"
        )
    return chosen


@dataclass(frozen=True)
class Route:
    """Where and how one model's calls are sent directly.

    Attributes:
        provider: ``openai``, ``hosted_vllm`` or ``azure`` (litellm's provider name).
        wire_model: the ``model`` of the body (the name after the prefix).
        url: the chat-completions URL, query string included.
        headers: authorization and content type.
        compact: the openai SDK's JSON (no spaces, UTF-8) rather than ``json.dumps``'s.
        api_version: Azure's ``api-version``; ``""`` otherwise.
    """

    provider: str
    wire_model: str
    url: str
    headers: dict[str, str]
    compact: bool
    api_version: str = ""


def route_for(
    model: str, api_base: str | None, api_key: str | None, extra: dict[str, Any]
) -> Route | None:
    """The direct route of ``model`` (``provider/name``), or ``None`` when litellm sends it.

    Args:
        api_base: ``--api-base``, if any.
        api_key: the key the call carries (as :meth:`LiveSettings.transport_kwargs` chose it),
            ``None`` to read the provider's usual variable as litellm does.
        extra: the transport ``--judge-param`` values (``api_version``, ``extra_headers``).
    """
    provider, _, name = model.partition("/")
    if not name or set(extra) - {"api_version", "extra_headers"}:
        return None
    base_url, query, basic = split_base(api_base)
    if (query or basic) and provider not in ("openai", "hosted_vllm"):
        return None  # refused before the run (options.check_api_base)
    headers = {"Content-Type": "application/json"}
    custom = extra.get("extra_headers")
    if custom is not None and not isinstance(custom, dict):
        return None
    if provider in ("openai", "hosted_vllm"):
        if "api_version" in extra or (provider == "openai" and _set(_OPENAI_ENV)):
            return None
        if provider == "hosted_vllm":
            if not api_base:
                return None
            api_key = api_key or os.environ.get("HOSTED_VLLM_API_KEY") or "fake-api-key"
        else:
            api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            return None  # litellm's own error says which key is missing
        base = (base_url or OPENAI_BASE).rstrip("/")
        # user:password@ is HTTP Basic, sent instead of the placeholder key (options refuse
        # it together with a real one: one Authorization header carries one credential)
        headers["Authorization"] = basic or f"Bearer {api_key}"
        headers.update(custom or {})
        url = f"{base}/chat/completions" + (f"?{query}" if query else "")
        return Route(provider, name, url, headers, provider == "openai")
    if provider == "azure":
        base = api_base or os.environ.get("AZURE_API_BASE") or ""
        api_key = (
            api_key or os.environ.get("AZURE_OPENAI_API_KEY") or os.environ.get("AZURE_API_KEY")
        )
        if not base or not api_key or _set(_AZURE_ENV) or urlsplit(base).path.strip("/"):
            return None  # a deployment URL, an AD token, a v1 path: litellm's cases
        version = str(extra.get("api_version") or os.environ.get("AZURE_API_VERSION") or "")
        if not version:
            from rubric_engine.judge.backends import import_litellm

            version = str(import_litellm().AZURE_DEFAULT_API_VERSION)
        headers["api-key"] = api_key
        headers.update(custom or {})
        url = f"{base.rstrip('/')}/openai/deployments/{name}/chat/completions"
        return Route("azure", name, f"{url}?api-version={version}", headers, True, version)
    return None


def split_base(api_base: str | None) -> tuple[str | None, str, str | None]:
    """``--api-base`` as (the URL without ``user:password@`` and query, the query, the HTTP
    Basic ``Authorization`` value of its ``user:password@`` or ``None``)."""
    if not api_base:
        return api_base, "", None
    from rubric_engine.judge.secrets import basic_auth

    parts = urlsplit(api_base)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")), parts.query, basic_auth(api_base)


def _set(names: tuple[str, ...]) -> bool:
    return any(os.environ.get(n) for n in names)


def _shape(params: dict[str, Any]) -> tuple[Any, ...]:
    """What litellm's mapping of ``params`` depends on: names, scalar values, the kind of
    ``response_format`` (its schema does not change the mapping), tools as present."""
    out: list[Any] = []
    for key, value in params.items():
        if key == "response_format" and isinstance(value, dict):
            out.append((key, "rf", value.get("type")))
        elif key == "tools":
            out.append((key, "tools"))
        elif isinstance(value, dict | list):
            out.append((key, json.dumps(value, sort_keys=True)))
        else:
            out.append((key, type(value).__name__, value))
    return tuple(out)


#: message keys litellm passes through unchanged for these providers (text messages, a
#: re-ask's tool call and tool answer)
_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})


def plain_messages(messages: Any) -> bool:
    """Whether every message is text litellm sends as it is: string (or no) content and only
    :data:`_MESSAGE_KEYS`. Content parts, images or ``cache_control`` markers (which litellm
    rewrites per provider) send the call through litellm."""
    return isinstance(messages, list) and all(
        isinstance(m, dict)
        and m.keys() <= _MESSAGE_KEYS
        and (m.get("content") is None or isinstance(m.get("content"), str))
        for m in messages
    )


class RequestShapes:
    """litellm's parameter order per request shape, worked out once (see module docstring):
    from the shipped snapshot of litellm's mapping where it applies
    (:func:`~rubric_engine.judge.litellm_snapshot.direct_order`, no litellm import), else by
    asking litellm."""

    def __init__(self) -> None:
        self._orders: dict[tuple[Any, ...], tuple[str, ...] | None] = {}

    def order(self, route: Route, params: dict[str, Any]) -> tuple[str, ...] | None:
        """The parameter names in the order litellm sends them, or ``None`` when litellm
        would send something else than ``params`` (or refuse it): that call goes through
        litellm."""
        from rubric_engine.judge.litellm_snapshot import direct_order

        if route.provider == "hosted_vllm" and "tools" in params:
            return None
        shape = (route.provider, route.wire_model, route.api_version, _shape(params))
        if shape not in self._orders:
            order = direct_order(route.provider, route.wire_model, params)
            self._orders[shape] = order if order is not None else _litellm_order(route, params)
        return self._orders[shape]


def _litellm_order(route: Route, params: dict[str, Any]) -> tuple[str, ...] | None:
    from rubric_engine.judge.backends import import_litellm

    litellm = import_litellm()
    extra = {"api_version": route.api_version} if route.provider == "azure" else {}
    try:
        mapped = litellm.get_optional_params(
            model=route.wire_model, custom_llm_provider=route.provider, **extra, **params
        )
    except Exception:  # litellm refuses the shape (UnsupportedParamsError …): its path says why
        return None
    kept = {k: v for k, v in mapped.items() if not (k in _MAPPING_NOISE and v == _MAPPING_NOISE[k])}
    if kept != params:
        return None
    if route.provider == "azure":  # the openai SDK's create() orders the body by its signature
        return tuple(k for k in _sdk_order() if k in kept)
    return tuple(kept)


_SDK_ORDER: tuple[str, ...] = ()


def _sdk_order() -> tuple[str, ...]:
    """The body keys of the openai SDK's ``chat.completions.create`` in the order it sends
    them (its parameters: ``messages``, ``model``, then the rest alphabetically)."""
    global _SDK_ORDER
    if not _SDK_ORDER:
        import inspect

        from openai.resources.chat.completions import AsyncCompletions

        names = inspect.signature(AsyncCompletions.create).parameters
        _SDK_ORDER = tuple(n for n in names if n != "self" and not n.startswith("extra_"))
    return _SDK_ORDER


def request_body(route: Route, kwargs: dict[str, Any], order: tuple[str, ...]) -> bytes:
    """The JSON body litellm sends for ``kwargs`` on ``route`` (see module docstring): the
    bytes ``json.dumps`` gives for the whole body, built from encoded pieces so that a long
    message seen before (every row's system message: the rubric) is not encoded again, and
    the body is put together once, as bytes."""
    if route.provider == "azure":
        keys = ("messages", "model", *(k for k in order if k not in ("messages", "model")))
    else:
        keys = ("model", "messages", *order)
    dumps = _COMPACT if route.compact else _DEFAULT
    item, colon = (b",", b":") if route.compact else (b", ", b": ")
    parts = []
    for key in keys:
        if key == "messages":
            value = b"[" + item.join(_message(m, dumps) for m in kwargs["messages"]) + b"]"
        elif key == "model":
            value = dumps(route.wire_model).encode()
        else:
            value = dumps(kwargs[key]).encode()
        parts.append(b'"' + key.encode() + b'"' + colon + value)
    return b"{" + item.join(parts) + b"}"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_COMPACT = _compact
_DEFAULT = json.dumps
#: encoded long messages (the system message), by style and content; a few at most
_ENCODED: dict[tuple[Any, ...], bytes] = {}
_LONG = 2000


def _message(message: dict[str, Any], dumps: Any) -> bytes:
    content = message.get("content")
    if not isinstance(content, str) or len(content) < _LONG:
        return str(dumps(message)).encode()
    key = (dumps is _COMPACT, *message.items())
    encoded = _ENCODED.get(key)
    if encoded is None:
        if len(_ENCODED) >= 8:
            _ENCODED.clear()
        encoded = _ENCODED[key] = str(dumps(message)).encode()
    return encoded


class TransportError(Exception):
    """A failed direct call: ``status_code`` (``None`` client side), response ``headers``."""

    def __init__(self, message: str, status_code: int | None = None, headers: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.headers = headers or {}


class APIConnectionError(TransportError):
    """No answer: the connection was refused, reset or closed before the response."""


class Timeout(TransportError):
    """No answer within the timeout (connect, or between bytes of the response)."""


class BadRequestError(TransportError):
    pass


class ContextWindowExceededError(BadRequestError):
    """HTTP 400 whose text says the prompt is over the model's context (litellm's test)."""


class AuthenticationError(TransportError):
    pass


class PermissionDeniedError(TransportError):
    pass


class NotFoundError(TransportError):
    pass


class UnprocessableEntityError(TransportError):
    pass


class RateLimitError(TransportError):
    pass


class InternalServerError(TransportError):
    pass


class ServiceUnavailableError(TransportError):
    pass


class APIError(TransportError):
    pass


_BY_STATUS: dict[int, type[TransportError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    500: InternalServerError,
    503: ServiceUnavailableError,
}


def status_error(status: int, body: bytes, headers: Any) -> TransportError:
    """The error for an HTTP ``status`` answer: the provider's ``error.message`` (or the body's
    first 500 characters) as the message."""
    text = body.decode("utf-8", "replace")
    message = text[:500]
    try:
        parsed = json.loads(text)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict) and error.get("message"):
            message = str(error["message"])
        elif isinstance(error, str):
            message = error
    except ValueError:
        pass
    kind = _BY_STATUS.get(status, APIError)
    if status == 400:
        from rubric_engine.judge.backends import import_litellm

        import_litellm()  # its offline price map: a plain import would fetch one from the web
        from litellm.litellm_core_utils.exception_mapping_utils import ExceptionCheckers

        if ExceptionCheckers.is_error_str_context_window_exceeded(text):
            kind = ContextWindowExceededError
    return kind(message, status, headers)


class DirectTransport:
    """One aiohttp session per event loop, kept for the whole run.

    The session is opened on the first call in a loop and closed when that loop shuts down
    (``asyncio.run`` closes async generators at its end: :meth:`_lifetime` is one), so a
    caller has nothing to close.

    Args:
        limit: the connection pool size (the run's ``--concurrency``).
    """

    def __init__(self, limit: int = 64) -> None:
        self.limit = max(1, limit)
        #: per event loop: its session, and the async generator that closes it with the loop
        self._sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._keepers: weakref.WeakKeyDictionary[Any, AsyncIterator[None]] = (
            weakref.WeakKeyDictionary()
        )
        self.shapes = RequestShapes()
        self._finish: Any = None

    async def _session(self) -> Any:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            import aiohttp

            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.limit, limit_per_host=self.limit),
                skip_auto_headers=("User-Agent",),
                headers={"User-Agent": "rubric-eval"},
            )
            self._sessions[loop] = session
            keeper = self._lifetime(loop, session)
            await keeper.__anext__()  # registered with the loop's async-generator hooks
            self._keepers[loop] = keeper
        return session

    async def _lifetime(self, key: Any, session: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self._sessions.pop(key, None)
            await session.close()

    async def post(self, route: Route, body: bytes, timeout_s: float) -> Any:
        """POST ``body`` to ``route``; the parsed answer (a chat-completion object, or the text
        of an answer that is not JSON, for
        :func:`~rubric_engine.judge.cassettes.cassette.response_problem`).

        ``timeout_s`` bounds connecting and each wait for response bytes (the openai SDK's
        ``timeout=`` meaning).

        Raises:
            TransportError: a subclass by HTTP status; :class:`APIConnectionError` (names the
                URL) when the server cannot be reached; :class:`Timeout`.
        """
        import aiohttp

        session = await self._session()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        try:
            async with session.post(
                route.url, data=body, headers=route.headers, timeout=timeout
            ) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise status_error(response.status, raw, response.headers)
        except TransportError:
            raise
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise Timeout(f"no answer from {_where(route)} within {timeout_s:g} s") from exc
        except aiohttp.ClientConnectorError as exc:
            raise APIConnectionError(
                refused_message(_where(route))
                if isinstance(exc.os_error, ConnectionRefusedError)
                else f"could not connect to {_where(route)}: {exc.os_error or exc}"
            ) from exc
        except aiohttp.ClientError as exc:
            reason = str(exc) or type(exc).__name__
            raise APIConnectionError(f"the connection to {_where(route)} failed: {reason}") from exc
        try:
            parsed = json.loads(raw)
        except ValueError:  # the caller names what it is (an event stream, text)
            return raw.decode("utf-8", "replace")
        return self.normalize(parsed)

    def normalize(self, parsed: Any) -> Any:
        """``parsed`` with each choice's ``finish_reason`` mapped as litellm maps it
        (``eos`` → ``stop`` …), so both paths record the same response. OpenAI's own reasons
        map to themselves; litellm is imported for another one only."""
        if not isinstance(parsed, dict):
            return parsed
        for choice in parsed.get("choices") or ():
            reason = choice.get("finish_reason") if isinstance(choice, dict) else None
            if isinstance(reason, str) and reason not in OPENAI_FINISH_REASONS:
                if self._finish is None:
                    from rubric_engine.judge.backends import import_litellm

                    import_litellm()  # offline price map, as above
                    from litellm.litellm_core_utils.core_helpers import map_finish_reason

                    self._finish = map_finish_reason
                choice["finish_reason"] = self._finish(choice["finish_reason"])
        return parsed


#: the finish reasons of OpenAI's chat completions, which litellm's mapping leaves as they are
#: (``tests/test_litellm_snapshot.py`` checks it)
OPENAI_FINISH_REASONS = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "function_call"}
)


def refused_message(url: str) -> str:
    """The words of a refused connection (never "HTTP 500": no server answered)."""
    return f"connection refused by {url} (is the server running, is --api-base right?)"


def _where(route: Route) -> str:
    """The URL without its query string (an Azure ``api-version``; never a key)."""
    return route.url.split("?", 1)[0]
