"""Keep API keys out of everything rubric-eval writes or prints.

Provider errors often quote the key they were sent ("Incorrect API key provided: sk-…") or
the URL they were called at, and a key may come from the provider's usual variable that
rubric-eval never read itself. So every error text from the transport passes through
:func:`redact`, which removes the values of the environment variables that look like
credentials, the values passed explicitly (the key, the secrets of ``--api-base``), and
anything shaped like a bearer token, an ``sk-`` key, a ``user:password@`` in a URL or a
credential-named query parameter (``?key=…``, ``&api_key=…``).

A base URL is stored only as :func:`strip_url_credentials` leaves it: a key in its
query string or its ``user:password@`` part is a credential, never a setting.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_NAME_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
#: query parameters that carry credentials (lower case; ``api-key``, ``X-Api-Key`` … fold here)
_QUERY_HINTS = ("key", "token", "secret", "password", "passwd", "pwd", "sig", "signature", "auth")
_SHAPES = re.compile(
    r"(Bearer\s+)\S+"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{6,}"
    r"|(?<=://)[^/\s:@]+:(?!\*\*\*@)[^/\s@]+(?=@)"  # user:password@host (not user:***@)
    r"|(?<=[?&;])([A-Za-z0-9_\-.]*(?:key|token|secret|password|passwd|sig|signature|auth)"
    r"[A-Za-z0-9_\-.]*=)[^&#\s\"'<>]+",
    re.IGNORECASE,
)
MASK = "[redacted]"


def credential_values(*extra: str | None) -> list[str]:
    """Values of credential-looking environment variables (8+ characters) and the ``extra``
    values (4+ characters), longest first (so a value containing another goes first)."""
    values = {
        v
        for name, v in os.environ.items()
        if any(hint in name.upper() for hint in _NAME_HINTS) and len(v) >= 8
    }
    values.update(value for value in extra if value and len(value) >= 4)
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


def _is_credential_param(name: str) -> bool:
    folded = name.lower().replace("-", "_")
    return any(hint in folded for hint in _QUERY_HINTS)


def url_secrets(url: str | None) -> list[str]:
    """The credential values inside a URL: the password and user of ``user:password@`` and
    the values of credential-named query parameters; ``[]`` for ``None``."""
    if not url:
        return []
    parts = urlsplit(url)
    found = [v for v in (parts.password, parts.username) if v]
    query = parse_qsl(parts.query, keep_blank_values=True)
    found += [v for k, v in query if _is_credential_param(k)]
    return [v for v in found if v]


def strip_url_credentials(url: str) -> tuple[str, bool]:
    """``url`` without its ``user:password@`` part and credential-named query parameters;
    the other query parameters (``api-version=…``) and their order are kept.

    Returns:
        (the stripped URL, whether anything was removed).
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in query if not _is_credential_param(k)]
    netloc = parts.netloc.rsplit("@", 1)[-1]
    removed = netloc != parts.netloc or len(kept) != len(query)
    if not removed:
        return url, False
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(kept), parts.fragment)), True
