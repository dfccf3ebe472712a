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
from collections.abc import Callable
from typing import Any

COMPACT = (",", ":")
#: the spacing ``CASE_RULE_…`` IDs were derived with (see the module docstring); no new use
SPACED = (", ", ": ")
#: the encoder ``json.dumps`` builds for :func:`canonical_json`'s arguments, built once (it
#: holds no state between calls; the several canonical texts of every row skip its set-up)
_COMPACT_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=COMPACT)


def canonical_json(value: Any, separators: tuple[str, str] = COMPACT) -> str:
    """The canonical JSON text of a JSON-ready value (sorted keys, compact, UTF-8 kept).

    Raises:
        TypeError / ValueError: as :func:`json.dumps` for a value JSON cannot hold.
    """
    if separators == COMPACT:
        return _COMPACT_ENCODER.encode(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=separators)


def sha256_text(text: str) -> str:
    """``sha256:<64 hex>`` of a text's UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_hash(value: Any) -> str:
    """``sha256:<64 hex>`` of :func:`canonical_json` of ``value``."""
    return sha256_text(canonical_json(value))


def encoder_built_once(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode`` as one function built once: ``JSONEncoder.encode`` builds the C
    encoder again for every value it encodes (about 0.6 µs, several times a row: issue 18),
    while the C encoder it builds holds nothing between calls (no cycle markers: an encoder
    without the cycle check is only given fresh trees, never circular). Used for the store's
    row columns and ``rows.jsonl``'s metadata. The same text, from the same C code;
    ``encoder.encode`` itself where the C encoder is missing or gives other text."""
    import json.encoder as stdlib  # its C encoder (``c_make_encoder``) is not in typeshed

    make = getattr(stdlib, "c_make_encoder", None)
    if make is None or encoder.check_circular or encoder.indent is not None:
        return encoder.encode
    made = make(
        None,
        encoder.default,
        stdlib.encode_basestring_ascii if encoder.ensure_ascii else stdlib.encode_basestring,
        None,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )

    def encode(value: Any) -> str:
        return "".join(made(value, 0))

    probe = {"b": [1, 2.5, -0.0, 1e-05, 10**20, None, True], "a": {'中\n"': "é\x00"}}
    return encode if encode(probe) == encoder.encode(probe) else encoder.encode
