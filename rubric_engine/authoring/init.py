"""``rubric-eval rubric init``: one-line criteria → a commented DRAFT pack file that loads.

The pure work is in :mod:`rubric_engine.rubric.criteria` (parsing, IDs, proposals) and
:mod:`rubric_engine.rubric.pack_text` (the commented YAML); here the text is read back with
the pack loader, so a file that would not load is never written (docs/authoring.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rubric_engine.errors import Problem
from rubric_engine.formats.safe_yaml import load_documents
from rubric_engine.rubric.criteria import pack_from_criteria, parse_criteria
from rubric_engine.rubric.loader import MAX_PACK_BYTES, parse_rubric_checked
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rubric.pack_text import render_pack


@dataclass(frozen=True)
class InitResult:
    text: str
    rubric: EvalRubric
    warnings: list[Problem]
    review: int  # fields marked REVIEW


def key_from_name(name: str) -> str:
    """A pack key (lower snake case, starting with a letter) from a file name; ``my_pack``
    when nothing usable is left."""
    key = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return key if re.match(r"^[a-z]", key) else "my_pack"


def init_pack(
    criteria: str, source: str, key: str, name: str | None = None, language: str | None = None
) -> InitResult:
    """The pack file text for ``criteria`` (see :mod:`rubric_engine.rubric.criteria`).

    Raises:
        InputError: a criteria line is wrong (every problem at once).
        RubricError: the options make a pack that does not validate (a bad ``key``).
    """
    parsed = parse_criteria(criteria, source)
    data, comments = pack_from_criteria(
        parsed, key, name or key.replace("_", " ").title(), language
    )
    header = [
        f"{data['name']}: a first pack from the one-line criteria in {source}",
        "(`rubric-eval rubric init`). Read every line marked REVIEW, then",
        "`rubric-eval rubric validate FILE --lint` and try it on a few rows:",
        "`rubric-eval score ROWS --rubric FILE --draft …`. Publish it when it reads right.",
        "",
    ]
    text = render_pack(data, comments, header)
    documents = load_documents(text, MAX_PACK_BYTES)
    rubric, warnings = parse_rubric_checked(documents[0][1], source=f"pack from {source}")
    return InitResult(text, rubric, warnings, text.count("REVIEW:"))
