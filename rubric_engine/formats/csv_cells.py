"""CSV cells a spreadsheet opens as text, not as a formula (OWASP's CSV injection rule), shared
by every CSV the engine writes (``export``, ``labels export``; docs/reports.md,
docs/calibration.md).

A text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to
a spreadsheet: it is written with a leading ``'``, which spreadsheets show as text. So that a
file the engine reads back (``labels import``) gives the text it was written from, a text whose
leading ``'`` already precedes such a character gets one more, and :func:`plain_cell` takes one
off: ``=x`` ↔ ``'=x``, ``'=x`` ↔ ``''=x``; any other text is written as it is.
"""

from __future__ import annotations

__all__ = ["FORMULA_STARTS", "plain_cell", "text_cell"]

#: a text cell starting with one of these is a formula to a spreadsheet
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _escaped(text: str) -> bool:
    return text.lstrip("'").startswith(FORMULA_STARTS)


def text_cell(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows as text (see the module docstring)."""
    return "'" + text if _escaped(text) else text


def plain_cell(cell: str) -> str:
    """The text :func:`text_cell` wrote as ``cell``."""
    return cell[1:] if cell.startswith("'") and _escaped(cell[1:]) else cell
