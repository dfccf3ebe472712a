"""Text normalization for rule checks (docs/rule-checks.md: "NFKC, full-width → half-width, case").

Keywords and answers are compared after the same folding: NFKC (which maps full-width letters
and digits such as ``２００`` / ``ＡＢ`` to ``200`` / ``AB`` and the ideographic space to a space),
invisible format characters removed, then case folding. A digit keeps its value: ``２`` becomes
``2``, never dropped or spelled out, and separators inside numbers are left alone. Keyword
matching also treats every run of whitespace, line breaks included, as one space. Pure.
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


def keyword_form(text: str) -> str:
    """``text`` as keywords are matched: :func:`fold`, then every run of whitespace (spaces,
    tabs, line breaks, NBSP …) as one space, trimmed. An answer wrapped onto two lines, or
    spaced twice, still says the same words (``5-7\nbusiness days`` = ``5-7 business days``).
    """
    return " ".join(fold(text).split())


def contains(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack``, both in :func:`keyword_form`; a blank
    ``needle`` never does."""
    folded = keyword_form(needle)
    return bool(folded) and folded in keyword_form(haystack)
