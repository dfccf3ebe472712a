"""Cross-field rules of a rubric pack (docs/rubric-packs.md "Validation at load time").

They run on the *raw* mapping read from YAML, so they still report when the structure is also
broken, and a file's problems all come out at once. Each problem is ``(field path, message)``;
field paths use the YAML (camelCase) spelling: ``intents[1].requirements[0].redFlagType``.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from rubric_engine.rubric.model import BUILTIN_CATEGORIES

FieldProblem = tuple[str, str]
#: BCP 47-like: a 2–3 letter language, then subtags (script, region, variant): zh, en-US,
#: zh-Hans-CN, yue, und (undetermined). Case is free, as in BCP 47.
LANGUAGE_TAG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")


def _requirements(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(path, requirement mapping)`` for every well-shaped requirement of the pack."""
    common = data.get("commonRequirements")
    if isinstance(common, list):
        for i, req in enumerate(common):
            if isinstance(req, dict):
                yield f"commonRequirements[{i}]", req
    intents = data.get("intents")
    if isinstance(intents, list):
        for j, intent in enumerate(intents):
            reqs = intent.get("requirements") if isinstance(intent, dict) else None
            if isinstance(reqs, list):
                for i, req in enumerate(reqs):
                    if isinstance(req, dict):
                        yield f"intents[{j}].requirements[{i}]", req


#: the most points a score scale may have (``0..100`` is the widest accepted)
MAX_SCALE_POINTS = 101


def _scale(data: dict[str, Any]) -> tuple[int, int] | None:
    scale = data.get("scoreScale", {"min": 1, "max": 5})
    if not isinstance(scale, dict):
        return None
    low, high = scale.get("min", 1), scale.get("max", 5)
    if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool):
        return low, high
    return None


def rubric_problems(data: Any) -> list[FieldProblem]:
    """Every cross-field problem of a raw rubric mapping, in file order.

    Checks: unique requirement IDs across the whole pack; unique intent keys; unique red-flag
    types; ``critical`` ⇔ ``redFlagType``; a critical rule is observable; every
    ``redFlagType`` declared in ``redFlags``; ``category`` known; ``violationScore`` inside
    ``scoreScale``; a requirement with a ``check`` is observable; ``min < max``; at least
    one intent.

    Args:
        data: the mapping loaded from a pack file; anything else yields one problem.

    Returns:
        A list of ``(field path, message)``; empty when the pack is consistent.
    """
    if not isinstance(data, dict):
        return [("", "a rubric pack must be a mapping of fields (key, name, version, intents, …)")]
    problems: list[FieldProblem] = []

    scale = _scale(data)
    if scale is not None and scale[0] >= scale[1]:
        problems.append(
            ("scoreScale", f"min ({scale[0]}) must be lower than max ({scale[1]}); e.g. 1..5")
        )
    elif scale is not None and scale[1] - scale[0] + 1 > MAX_SCALE_POINTS:
        problems.append(
            (
                "scoreScale",
                f"{scale[0]}..{scale[1]} has {scale[1] - scale[0] + 1:,} points, more than "
                f"{MAX_SCALE_POINTS}: a judge cannot tell that many apart, and every point is "
                "listed in the verdict's schema; use a scale such as 1..5 or 0..10",
            )
        )

    flags = data.get("redFlags")
    declared: list[str] = []
    if isinstance(flags, list):
        for i, flag in enumerate(flags):
            ftype = flag.get("type") if isinstance(flag, dict) else None
            if isinstance(ftype, str):
                if ftype in declared:
                    problems.append((f"redFlags[{i}].type", f"red-flag type {ftype!r} repeats"))
                declared.append(ftype)

    intents = data.get("intents")
    if not intents:
        problems.append(
            ("intents", "at least one intent is required: the judge must pick exactly one key")
        )
    seen_keys: dict[str, str] = {}
    if isinstance(intents, list):
        for j, intent in enumerate(intents):
            key = intent.get("key") if isinstance(intent, dict) else None
            if isinstance(key, str):
                if key in seen_keys:
                    problems.append(
                        (
                            f"intents[{j}].key",
                            f"intent key {key!r} already used at {seen_keys[key]}",
                        )
                    )
                else:
                    seen_keys[key] = f"intents[{j}]"

    extra_categories = data.get("categories") or []
    categories = set(BUILTIN_CATEGORIES) | {c for c in extra_categories if isinstance(c, str)}
    seen_ids: dict[str, str] = {}
    for path, req in _requirements(data):
        problems.extend(_requirement_problems(path, req, seen_ids, declared, categories, scale))
    return problems


def _requirement_problems(
    path: str,
    req: dict[str, Any],
    seen_ids: dict[str, str],
    declared_flags: list[str],
    categories: set[str],
    scale: tuple[int, int] | None,
) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    rid = req.get("id")
    if isinstance(rid, str):
        if rid in seen_ids:
            problems.append(
                (
                    f"{path}.id",
                    f"requirement ID {rid!r} already used at {seen_ids[rid]}; IDs are "
                    "unique across the whole pack (common and every intent)",
                )
            )
        else:
            seen_ids[rid] = path
    category = req.get("category")
    if isinstance(category, str) and category not in categories:
        problems.append(
            (
                f"{path}.category",
                f"unknown category {category!r}; valid: "
                f"{', '.join(sorted(categories))} (add your own under the pack's `categories`)",
            )
        )
    flag = req.get("redFlagType")
    if req.get("critical") is True and not flag:
        problems.append(
            (
                f"{path}.redFlagType",
                "a critical requirement needs a redFlagType; valid: "
                f"{', '.join(declared_flags) or '(declare types under redFlags first)'}",
            )
        )
    if flag and req.get("critical", False) is False:  # another value is a problem of its own
        problems.append(
            (
                f"{path}.redFlagType",
                "only a critical requirement raises a red flag; set "
                "`critical: true` or remove redFlagType",
            )
        )
    if req.get("critical") is True and req.get("observableInData") is False:
        problems.append(
            (
                f"{path}.observableInData",
                "a critical requirement must be observable: an "
                "unobservable rule is always NOT_APPLICABLE, so its red line could never fire; "
                "make it non-critical or observable",
            )
        )
    if req.get("check") is not None and req.get("observableInData") is False:
        problems.append(
            (
                f"{path}.observableInData",
                "a requirement with a check is decided by that check from the row's data; "
                "remove `observableInData: false` or the check",
            )
        )
    if isinstance(flag, str) and flag not in declared_flags:
        problems.append(
            (
                f"{path}.redFlagType",
                f"{flag!r} is not declared in redFlags; valid: "
                f"{', '.join(declared_flags) or '(none declared)'}; add it to redFlags or fix the "
                "spelling",
            )
        )
    cap = req.get("violationScore")
    if scale is not None and isinstance(cap, int) and not isinstance(cap, bool):
        low, high = scale
        if not low <= cap <= high:
            problems.append(
                (f"{path}.violationScore", f"{cap} is outside scoreScale {low}..{high}")
            )
    return problems


def rubric_warnings(data: Any) -> list[FieldProblem]:
    """What a pack may mean but probably does not: reported, never refused.

    Warnings do not stop a pack from loading (stored snapshots published before a warning
    existed stay readable); ``rubric validate`` lists them with the errors.

    * ``language`` is not a BCP 47-like code (``zh``, ``en-US``, ``zh-Hans``): the judge is
      told the dialogue's language from it.
    * a ``redFlags`` type that no critical requirement raises: the judge may report it, but
      it can never be backfilled to a requirement, so every report of it is an orphan.
    * a ``categories`` entry listed twice, or one that is built in already.
    * a ``violationScore`` that can never lower a score: equal to the scale's top, or on a
      requirement with ``observableInData: false`` (always NOT_APPLICABLE, never VIOLATED).

    Args:
        data: the raw mapping; a non-mapping yields no warnings (:func:`rubric_problems`
            reports it).

    Returns:
        ``(field path, message)`` pairs in file order.
    """
    if not isinstance(data, dict):
        return []
    found: list[FieldProblem] = []
    language = data.get("language")
    if isinstance(language, str) and not LANGUAGE_TAG.match(language.strip()):
        found.append(
            (
                "language",
                f"{language!r} is not a language code; use a BCP 47 tag such as zh, en, "
                "zh-Hans or en-US (the judge is told the dialogue's language from it)",
            )
        )
    categories = data.get("categories")
    if isinstance(categories, list):
        seen: set[str] = set()
        for i, category in enumerate(categories):
            if not isinstance(category, str):
                continue
            if category in BUILTIN_CATEGORIES:
                found.append(
                    (f"categories[{i}]", f"{category!r} is built in already; remove it here")
                )
            elif category in seen:
                found.append((f"categories[{i}]", f"{category!r} is listed twice"))
            seen.add(category)
    raised = {
        req.get("redFlagType") for _, req in _requirements(data) if req.get("critical") is True
    }
    flags = data.get("redFlags")
    if isinstance(flags, list):
        for i, flag in enumerate(flags):
            ftype = flag.get("type") if isinstance(flag, dict) else None
            if isinstance(ftype, str) and ftype not in raised:
                found.append(
                    (
                        f"redFlags[{i}].type",
                        f"no critical requirement raises {ftype!r}: when the judge reports it "
                        "no rule can be marked violated (an orphan red flag, no cap). Give a "
                        "critical requirement `redFlagType: " + ftype + "`, or remove the type",
                    )
                )
    scale = _scale(data)
    for path, req in _requirements(data):
        cap = req.get("violationScore")
        if not isinstance(cap, int) or isinstance(cap, bool):
            continue
        if req.get("observableInData") is False:
            found.append(
                (
                    f"{path}.violationScore",
                    "never applies: the requirement is unobservable (always NOT_APPLICABLE, "
                    "never VIOLATED); remove the cap or make it observable",
                )
            )
        elif scale is not None and cap == scale[1]:
            found.append(
                (
                    f"{path}.violationScore",
                    f"{cap} is the top of scoreScale {scale[0]}..{scale[1]}: the cap can never "
                    "lower a score; lower it or remove it",
                )
            )
    return found
