"""Keep credentials out of everything rubric-eval writes or prints (docs/security.md).

One redaction list is fed by every credential a run knows (:func:`remember_run`): the value of
the variable ``--api-key-env`` names, the ``user:password@`` part and **every** query value of
``--api-base`` (``?code=…`` is as secret as ``?key=…``), and the header values of
``--judge-param extra_headers``. Besides those, the values of environment variables whose names
look like credentials (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``: the providers' usual
variables) are always on it. :func:`redact` removes them, and anything shaped like a bearer
token, an ``sk-`` key, a ``user:password@`` in a URL or a credential-named query parameter,
from an error text; :func:`scrub` removes the listed values from every string of a reply (a
provider may quote the key in a 200 answer), without touching anything else in it.

A base URL is stored only as :func:`masked_url` leaves it: without its ``user:password@`` part
and with every query value replaced by ``[redacted]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

_NAME_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_SHAPES = re.compile(
    r"(Bearer\s+)[^\s'\",;]+"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{6,}"
    r"|(?<=://)[^/\s:@]+:(?!\*\*\*@)[^/\s@]+(?=@)"  # user:password@host (not user:***@)
    r"|(?<=[?&;])([A-Za-z0-9_\-.]*(?:key|token|secret|password|passwd|sig|signature|auth)"
    r"[A-Za-z0-9_\-.]*=)[^&#\s\"'<>]+",
    re.IGNORECASE,
)
MASK = "[redacted]"
#: a known secret shorter than this is not searched for (it would mask ordinary words)
MIN_SECRET_CHARS = 4
#: the credentials this process's run knows besides the environment's (:func:`remember_run`)
_KNOWN: set[str] = set()
#: transport options whose values are headers (``--judge-param extra_headers={…}``)
HEADER_PARAMS = ("extra_headers", "headers")


def remember(*values: object) -> None:
    """Add ``values`` (strings of :data:`MIN_SECRET_CHARS` or more) to the redaction list."""
    _KNOWN.update(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS)


def remember_run(
    api_base: str | None, api_key_env: str | None, transport: Mapping[str, Any]
) -> None:
    """Put every credential of a run on the redaction list: the value of ``api_key_env``, the
    secrets of ``api_base`` (:func:`url_secrets`) and the header values of ``transport``'s
    :data:`HEADER_PARAMS`. Called before anything of the run is checked or printed."""
    remember(os.environ.get(api_key_env) if api_key_env else None, *url_secrets(api_base))
    remember(*header_values(transport))
    basic = basic_auth(api_base)
    if basic:  # the header that carries them: Basic base64(user:password)
        remember(basic.split(" ", 1)[1])


def basic_auth(url: str | None) -> str | None:
    """The ``Authorization`` value of a URL's ``user:password@`` part (HTTP Basic), else
    ``None``."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return None
    from base64 import b64encode
    from urllib.parse import unquote

    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return "Basic " + b64encode(pair.encode("utf-8")).decode("ascii")


def header_values(transport: Mapping[str, Any]) -> list[str]:
    """The values of the header mappings among ``transport`` options."""
    found: list[str] = []
    for name in HEADER_PARAMS:
        headers = transport.get(name)
        if isinstance(headers, Mapping):
            found += [str(v) for v in headers.values() if v is not None]
    return found


def credential_values(*extra: str | None) -> list[str]:
    """Values of credential-looking environment variables (8+ characters), the run's
    remembered values and the ``extra`` values (4+ characters), longest first (so a value
    containing another goes first)."""
    values = {
        v
        for name, v in os.environ.items()
        if any(hint in name.upper() for hint in _NAME_HINTS) and len(v) >= 8
    }
    values.update(_KNOWN)
    values.update(value for value in extra if value and len(value) >= MIN_SECRET_CHARS)
    return sorted(values, key=len, reverse=True)


def _masked(match: re.Match[str]) -> str:
    if match.group(1):
        return match.group(1) + MASK
    if match.group(2):
        return match.group(2) + MASK
    return MASK


def redact(text: str, *extra: str | None) -> str:
    """``text`` with every known or credential-shaped secret replaced by ``[redacted]``.

    Args:
        extra: values known to be secret (the API key sent, the secrets of the base URL).
    """
    for value in credential_values(*extra):
        text = text.replace(value, MASK)
    return _SHAPES.sub(_masked, text)


def scrub(value: Any, secrets: Iterable[str] | None = None) -> Any:
    """``value`` (a reply: JSON values) with every listed secret removed from its strings.

    Only known values are replaced (``secrets``, default :func:`credential_values`), never
    shapes: a verdict's text is left exactly as the judge wrote it otherwise. Returns ``value``
    itself when nothing in it changed.
    """
    listed = credential_values() if secrets is None else list(secrets)
    return _scrubbed(value, listed) if listed else value


def _scrubbed(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        out = {k: _scrubbed(v, secrets) for k, v in value.items()}
        return value if all(out[k] is value[k] for k in value) else out
    if isinstance(value, list):
        items = [_scrubbed(v, secrets) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def url_secrets(url: str | None) -> list[str]:
    """The secrets inside a URL: the user and password of ``user:password@`` and every query
    value (a query may carry a key under any name: ``?code=``, ``?sig=``); ``[]`` for
    ``None``."""
    if not url:
        return []
    parts = urlsplit(url)
    found = [v for v in (parts.password, parts.username) if v]
    found += [v for _, v in parse_qsl(parts.query, keep_blank_values=True)]
    return [v for v in found if v]


def masked_url(url: str) -> tuple[str, bool]:
    """``url`` as it may be stored and shown: without its ``user:password@`` part, every query
    value replaced by ``[redacted]`` (the names and their order are kept).

    Returns:
        (the masked URL, whether it held userinfo or a query value).
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if netloc == parts.netloc and not any(v for _, v in query):
        return url, False
    shown = "&".join(f"{k}={MASK}" if v else f"{k}=" for k, v in query)
    return urlunsplit((parts.scheme, netloc, parts.path, shown, "")), True
