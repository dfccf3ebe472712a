"""Text normalization for rule checks (SPEC §7: "NFKC, full-width → half-width, case").

Keywords and answers are compared after the same folding: NFKC (which maps full-width letters
and digits such as ``２００`` / ``ＡＢ`` to ``200`` / ``AB`` and the ideographic space to a space),
invisible format characters removed, then case folding. A digit keeps its value: ``２`` becomes
``2``, never dropped or spelled out, and separators inside numbers are left alone. Pure.
"""

from __future__ import annotations

import unicodedata


def normalize(text: str) -> str:
    """NFKC with format characters (``Cf``) removed; case is kept (for case-sensitive regexes)."""
    nfkc = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in nfkc if unicodedata.category(ch) != "Cf")


def fold(text: str) -> str:
    """``text`` folded for matching: NFKC, format characters (``Cf``) removed, casefolded.

    Idempotent: ``fold(fold(t)) == fold(t)``.
    """
    return unicodedata.normalize("NFKC", normalize(text).casefold())


def contains(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` once both are folded; a blank one never does."""
    folded = fold(needle).strip()
    return bool(folded) and folded in fold(haystack)
