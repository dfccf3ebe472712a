"""The one canonical JSON of every stored hash (rubric content, cassette keys, input rows).

Canonical form: keys sorted at every depth, no whitespace (``","`` and ``":"``), non-ASCII kept
as UTF-8 (``ensure_ascii=False``), hashed as UTF-8 bytes and written ``sha256:<64 hex>``. Every
hash the store, the registry and the cassettes keep was made this way before this module
existed (each module had its own ``json.dumps`` with these arguments), so every existing hash
still verifies.

One older spelling is frozen on purpose: :data:`SPACED` (``", "`` and ``": "``) is what
``CASE_RULE_…`` IDs were derived from. Those IDs are written in stored tasks and in the judge's
prompt, hence in every cassette key of a row with case rule checks; re-deriving them compactly
would rename every such requirement, so :func:`canonical_json` takes the spacing for that one
caller. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

COMPACT = (",", ":")
#: the spacing ``CASE_RULE_…`` IDs were derived with (see the module docstring); no new use
SPACED = (", ", ": ")


def canonical_json(value: Any, separators: tuple[str, str] = COMPACT) -> str:
    """The canonical JSON text of a JSON-ready value (sorted keys, compact, UTF-8 kept).

    Raises:
        TypeError / ValueError: as :func:`json.dumps` for a value JSON cannot hold.
    """
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=separators)


def dialogue_json(row: Any) -> str:
    """A row's dialogue as the store and the work queue keep it: compact, UTF-8 kept, and its
    keys in the order the row has them, not sorted.

    The order is part of what the judge was shown: a ``referenceOutput`` object is rendered
    key by key, and the prompt's block tag is a hash of the rendering (docs/judges.md), so a
    row read back from the store must render the prompt the run sent, byte for byte (for
    ``verify``, workers and a cassette key). A tau-bench row's reference, for one, lists
    ``expectedActions`` before ``communicateInfo``.
    """
    return json.dumps(row, ensure_ascii=False, separators=COMPACT)


def sha256_text(text: str) -> str:
    """``sha256:<64 hex>`` of a text's UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_hash(value: Any) -> str:
    """``sha256:<64 hex>`` of :func:`canonical_json` of ``value``."""
    return sha256_text(canonical_json(value))
