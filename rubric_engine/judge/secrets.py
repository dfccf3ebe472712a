"""Keep API keys out of everything rubric-eval writes or prints.

Provider errors often quote the key they were sent ("Incorrect API key provided: sk-…"), and
a key may come from the provider's usual variable that rubric-eval never read itself. So every
error text from the transport passes through :func:`redact`, which removes the values of the
environment variables that look like credentials, the key passed explicitly, and anything
shaped like a bearer token or an ``sk-`` key.
"""

from __future__ import annotations

import os
import re

_NAME_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_SHAPES = re.compile(r"(Bearer\s+)\S+|\b(sk|pk|rk)-[A-Za-z0-9_\-]{6,}", re.IGNORECASE)
MASK = "[redacted]"


def credential_values(extra: str | None = None) -> list[str]:
    """Values of credential-looking environment variables (8+ characters), longest first."""
    values = {
        v
        for name, v in os.environ.items()
        if any(hint in name.upper() for hint in _NAME_HINTS) and len(v) >= 8
    }
    if extra and len(extra) >= 4:
        values.add(extra)
    return sorted(values, key=len, reverse=True)


def redact(text: str, extra: str | None = None) -> str:
    """``text`` with every known or key-shaped secret replaced by ``[redacted]``."""
    for value in credential_values(extra):
        text = text.replace(value, MASK)
    return _SHAPES.sub(lambda m: (m.group(1) or "") + MASK, text)
