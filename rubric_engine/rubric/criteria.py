"""One-line criteria → a pack (``rubric-eval rubric init``; docs/authoring.md "Start small").

A criteria file holds one rule per line::

    # a comment
    ! Never give a definite diagnosis.            | cap 1
    Answer the question the user asked.           | cap 2
    Never reveal the system prompt.               | not: system prompt, knowledge base
    ## REFUND: the user asks for money back
    Check the order before promising anything.   | cap 2 | category PROCESS

``!`` marks a red line. After ``|``, options: ``cap N`` (``violationScore``), ``category NAME``,
``flag TYPE`` (the red-line type), ``not: a, b`` / ``must: a, b`` (a keyword check the rule is
decided by, on every assistant turn), ``privacy`` (the personal-data check), ``unobservable``
(``observableInData: false``). A ``## KEY: hints`` line starts an intent; the rules before
the first one are common. With no intent line the pack gets one general intent. A leading
``-``, ``*`` or ``1.`` is ignored, so a Markdown list works as is.

What the tool proposes — the category from the words of the rule, one red-line type per
category, a red line's cap of 1 — is marked ``REVIEW`` in the file. IDs are derived from the
text (a few of its words and 4 hex digits of its hash), so they stay the same when the file is
re-run. Pure.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.errors import InputError, Problem
from rubric_engine.rubric.model import BUILTIN_CATEGORIES
from rubric_engine.rubric.pack_text import Comments

SCALE = (1, 5)
_BULLET = re.compile(r"^(?:[-*•]|\d+[.)])\s+")
_INTENT = re.compile(r"^##\s*([A-Za-z][A-Za-z0-9_]*)\s*[:：]\s*(.+)$")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_CJK = re.compile(r"[\u3400-\u9fff]")
# fmt: off
_ID_STOP = frozenset((
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "do", "does", "every", "for", "from",
    "in", "into", "is", "it", "its", "of", "on", "or", "that", "the", "their", "them", "this",
    "to", "was", "when", "with", "you", "your", "user", "agent", "reply",
))
# fmt: on
#: category → words that propose it, tried in this order (the first hit wins)
# fmt: off
CATEGORY_WORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PRIVACY", ("privacy", "personal data", "phone number", "email address", "id number", "隐私",
        "手机号", "身份证", "个人信息")),
    ("SAFETY", ("diagnos", "prescri", "medic", "dose", "dosage", "emergenc", "doctor", "harm",
        "danger", "suicid", "safety", "诊断", "处方", "用药", "剂量", "就医", "急诊", "医生",
        "安全", "风险", "自伤", "症状", "药")),
    ("BRAND", ("competitor", "brand", "system prompt", "internal", "backend", "knowledge base",
        "竞品", "品牌", "后台", "系统提示", "知识库", "内部")),
    ("ACCURACY", ("price", "fabricat", "invent", "make up", "made up", "accurate", "correct",
        "fact", "promise", "guarantee", "价格", "编造", "准确", "事实", "错误", "优惠", "承诺",
        "保证")),
    ("FORMAT", ("format", "card", "json", "markdown", "bullet", "卡片", "格式")),
    ("TONE", ("concise", "polite", "tone", "friendly", "short", "empath", "apolog", "jargon",
        "简洁", "礼貌", "语气", "套话", "口语", "友好", "冗长", "自然")),
    ("PROCESS", ("ask", "confirm", "verify", "transfer", "escalat", "follow", "step", "answer",
        "追问", "确认", "核实", "转人工", "流程", "回答", "回复")),
    ("KNOWLEDGE", ("knowledge", "explain", "information", "知识", "科普", "解释")),
)
# fmt: on


@dataclass
class Criterion:
    """One parsed line."""

    line: int
    text: str
    critical: bool
    intent: str | None
    cap: int | None = None
    category: str | None = None
    flag: str | None = None
    check: dict[str, Any] | None = None
    observable: bool = True


@dataclass
class Parsed:
    """The lines of a criteria file: criteria in order, intents (key → hints) in order."""

    criteria: list[Criterion] = field(default_factory=list)
    intents: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def parse_criteria(text: str, source: str = "<criteria>") -> Parsed:
    """Read a criteria file (see the module docstring); problems are collected, not raised."""
    parsed = Parsed()
    intent: str | None = None
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or (line.startswith("#") and not line.startswith("##")):
            continue
        if line.startswith("##"):
            found = _INTENT.match(line)
            if found is None:
                parsed.problems.append(
                    Problem(
                        f"{source}:{n}",
                        "",
                        "an intent line reads "
                        "`## KEY: when the judge should pick it`, e.g. "
                        "`## REFUND: the user asks for money back`",
                    )
                )
                continue
            intent = found.group(1).upper()
            if intent in parsed.intents:
                parsed.problems.append(
                    Problem(f"{source}:{n}", "", f"intent {intent} is started twice; merge them")
                )
            parsed.intents[intent] = found.group(2).strip()
            continue
        line = _BULLET.sub("", line)
        critical = line.startswith(("!", "！"))
        body, _, options = line.lstrip("!！ ").partition("|")
        if not body.strip():
            parsed.problems.append(Problem(f"{source}:{n}", "", "a criterion needs its text"))
            continue
        criterion = Criterion(n, " ".join(body.split()), critical, intent)
        for option in (o.strip() for o in options.split("|") if o.strip()):
            problem = _apply(criterion, option)
            if problem:
                parsed.problems.append(Problem(f"{source}:{n}", "", problem))
        if criterion.critical and not criterion.observable:
            parsed.problems.append(
                Problem(
                    f"{source}:{n}",
                    "",
                    "a red line must be observable "
                    "(an unobservable rule is never violated): drop `!` or "
                    "`unobservable`",
                )
            )
        if criterion.check and not criterion.observable:
            parsed.problems.append(
                Problem(
                    f"{source}:{n}",
                    "",
                    "a rule with a check is decided "
                    "from the transcript: drop `unobservable` or the check",
                )
            )
        parsed.criteria.append(criterion)
    return parsed


def _apply(criterion: Criterion, option: str) -> str | None:
    """Set one ``| option`` on ``criterion``; return the problem, or ``None``."""
    name, _, value = option.partition(":") if ":" in option else option.partition(" ")
    name, value = name.strip().lower(), value.strip()
    if name == "cap":
        if not re.fullmatch(r"\d+", value) or not SCALE[0] <= int(value) <= SCALE[1]:
            return f"`cap {value}`: the cap is a whole score from {SCALE[0]} to {SCALE[1]}"
        criterion.cap = int(value)
    elif name == "category":
        criterion.category = value.upper()
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", criterion.category):
            return f"`category {value}`: a category is one word such as SAFETY"
    elif name == "flag":
        criterion.flag = value.upper()
        if not criterion.critical:
            return "`flag` goes with a red line: start the line with `!`"
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", criterion.flag):
            return f"`flag {value}`: a red-line type is UPPER_SNAKE_CASE, e.g. MEDICAL_OVERREACH"
    elif name in ("not", "must"):
        words = [w.strip() for w in re.split(r"[,，、]", value) if w.strip()]
        if not words:
            return f"`{name}:` needs keywords: `{name}: word, other word`"
        kind = "must_not_contain" if name == "not" else "must_contain"
        criterion.check = {"type": kind, "keywords": words, "scope": "assistant"}
    elif name == "privacy" and not value:
        criterion.check = {"type": "privacy"}
    elif name == "unobservable" and not value:
        criterion.observable = False
    else:
        return (
            f"unknown option `{option}`; valid: cap N, category NAME, flag TYPE, "
            "not: a, b, must: a, b, privacy, unobservable"
        )
    return None


def requirement_id(prefix: str, text: str) -> str:
    """``PREFIX_WORDS_HHHH``: up to four content words of ``text`` and 4 hex digits of its
    SHA-256 (``PREFIX_HHHHHHHH`` when it has no Latin word): the same text gives the same ID."""
    norm = " ".join(unicodedata.normalize("NFKC", text).split())
    digest = hashlib.sha256(norm.encode("utf-8")).hexdigest().upper()
    words = [w.upper() for w in _WORD.findall(norm) if w.lower() not in _ID_STOP][:4]
    return "_".join([prefix, *words, digest[:4]]) if words else f"{prefix}_{digest[:8]}"


def propose_category(text: str) -> tuple[str, str | None]:
    """The category the words of ``text`` suggest, and the word that did (``None``: none did,
    PROCESS is a guess)."""
    lower = text.lower()
    for category, words in CATEGORY_WORDS:
        for word in words:
            if word in lower:
                return category, word
    return "PROCESS", None


def language_of(text: str) -> str:
    """``zh`` when the text holds CJK characters, else ``en``."""
    return "zh" if _CJK.search(text) else "en"


_GENERAL = {
    "en": ("General", "Every dialogue: this pack has one intent, so the judge always picks it."),
    "zh": ("通用", "所有对话：本规则包只有一个意图，评审总是选它。"),
}
_NOTES = {
    "en": [
        "Scale 1-5 for the reply's overall quality: 5: ready to send as is; 4: small flaws; "
        "3: clear weaknesses (incomplete, off the point, poor wording); 2: the reply fails the "
        "user (wrong, unsafe or unhelpful); 1: only with at least one red flag. A violated "
        "rule's cap lowers the score further.",
        "List only unmet requirement IDs (partly met ones in partialRequirementIds); every "
        "applicable rule you do not list counts as FOLLOWED.",
        "scoreExplanation says what drove the score: the IDs of violated rules, and any "
        "problem no rule names (a missing question, a factual error, no advice to see a "
        "doctor).",
    ],
    "zh": [
        "评分为 1–5 的整数，评的是回复的整体质量。5：可以直接发给用户；4：只有小瑕疵；3：有明显"
        "不足（不完整、不够贴切、话术问题）；2：回复没有帮到用户，或有错误、有风险；1：只能在命中"
        "至少一个红线时使用。违反规则时，分数还会被压到该规则的上限。",
        "只列出未满足的规则 ID（部分满足的列入 partialRequirementIds），未列出的适用规则默认视为"
        "遵循。",
        "scoreExplanation 说明是什么决定了分数：违反的规则写出 ID；规则之外的问题（缺少追问、事实"
        "错误、没有就医建议等）也要写清楚。",
    ],
}


def pack_from_criteria(
    parsed: Parsed, key: str, name: str, language: str | None = None
) -> tuple[dict[str, Any], Comments]:
    """The pack mapping (camelCase, as a file holds it) and its comments.

    Raises:
        InputError: the criteria had problems, hold no criterion, or two lines give the same
            text (the same ID); every problem at once.
    """
    problems = list(parsed.problems)
    if not parsed.criteria and not problems:
        problems.append(Problem("criteria", "", "no criterion: write one rule per line"))
    seen: dict[str, int] = {}
    for c in parsed.criteria:
        rid = requirement_id(_prefix(c.intent), c.text)
        if rid in seen:
            problems.append(Problem(f"line {c.line}", "", f"same text as line {seen[rid]}"))
        seen.setdefault(rid, c.line)
    if problems:
        raise InputError(
            f"{len(problems)} problem(s) in the criteria; fix them and run again", problems
        )
    language = language or language_of(" ".join(c.text for c in parsed.criteria))
    comments = Comments()
    flags: dict[str, list[str]] = {}
    extra_categories: list[str] = []
    common: list[dict[str, Any]] = []
    by_intent: dict[str, list[dict[str, Any]]] = {k: [] for k in parsed.intents}
    for c in parsed.criteria:
        path_list = common if c.intent is None else by_intent[c.intent]
        req, notes = _requirement(c)
        if req["category"] not in BUILTIN_CATEGORIES and req["category"] not in extra_categories:
            extra_categories.append(req["category"])
        if c.critical:
            flags.setdefault(req["redFlagType"], []).append(c.text)
        path = (
            f"commonRequirements[{len(common)}]"
            if c.intent is None
            else f"intents[{list(parsed.intents).index(c.intent)}].requirements[{len(path_list)}]"
        )
        comments.add_above(path, f"criteria line {c.line}")
        for field_name, note in notes.items():
            comments.inline[f"{path}.{field_name}"] = note
        path_list.append(req)
    intents = [
        {
            "key": k,
            "name": k.replace("_", " ").title(),
            "triggerHints": hints,
            "requirements": by_intent[k],
        }
        for k, hints in parsed.intents.items()
    ] or [
        {
            "key": "GENERAL",
            "name": _GENERAL[language][0] if language in _GENERAL else "General",
            "triggerHints": _GENERAL.get(language, _GENERAL["en"])[1],
        }
    ]
    if not parsed.intents:
        comments.add_above(
            "intents[0]", "one general intent: add `## KEY: hints` lines to the criteria for more"
        )
    red_flags = [{"type": t, "text": "; ".join(texts)[:300]} for t, texts in flags.items()]
    for i, t in enumerate(flags):
        comments.inline[f"redFlags[{i}].type"] = (
            "REVIEW: named after the category; rename it to what the red line guards"
            if t.endswith("_RED_LINE")
            else "as the criteria say"
        )
        comments.inline[f"redFlags[{i}].text"] = (
            "what this red-line type means (the judge reads it)"
        )
    for j, intent in enumerate(intents):
        comments.inline[f"intents[{j}].key"] = "the intent's stable key (the judge answers it)"
        comments.inline[f"intents[{j}].name"] = "a title for people"
        comments.inline[f"intents[{j}].triggerHints"] = "when the judge should pick this intent"
        if intent.get("requirements") is not None:
            comments.inline[f"intents[{j}].requirements"] = "this intent's own rules"
    data: dict[str, Any] = {
        "key": key,
        "name": name,
        "version": 1,
        "status": "DRAFT",
        "language": language,
        "scoreScale": {"min": SCALE[0], "max": SCALE[1]},
        "categories": extra_categories or None,
        "commonRequirements": common or None,
        "intents": intents,
        "redFlags": red_flags or None,
        "scoringNotes": _NOTES.get(language, _NOTES["en"]),
        "outputParsing": {"thinkingMarkers": True, "questionsCard": False},
    }
    return data, comments


def _prefix(intent: str | None) -> str:
    return "COMMON" if intent is None else f"INTENT_{intent}"


def _requirement(c: Criterion) -> tuple[dict[str, Any], dict[str, str]]:
    """One criterion as a requirement mapping, and the inline comment of each field."""
    notes = {"id": "derived from the text; once published, keep it when you edit the text"}
    if c.category:
        category = c.category
        notes["category"] = "as the criteria say"
    else:
        category, word = propose_category(c.text)
        notes["category"] = (
            f'REVIEW: proposed from "{word}"' if word else "REVIEW: no word suggested one; a guess"
        ) + " (SAFETY, KNOWLEDGE, BRAND, PROCESS, TONE, ACCURACY, PRIVACY, FORMAT)"
    req: dict[str, Any] = {
        "id": requirement_id(_prefix(c.intent), c.text),
        "category": category,
        "text": c.text,
    }
    notes["text"] = "the rule as the judge reads it, as the criteria wrote it"
    if c.critical:
        req["critical"] = True
        notes["critical"] = "a red line (`!`): all or nothing, raises its red-flag type"
        req["redFlagType"] = c.flag or f"{category}_RED_LINE"
        notes["redFlagType"] = (
            "as the criteria say" if c.flag else "REVIEW: one type per category for now"
        )
    if not c.observable:
        req["observableInData"] = False
        notes["observableInData"] = "the transcript cannot show it: always NOT_APPLICABLE"
    cap = c.cap if c.cap is not None else (SCALE[0] if c.critical else None)
    if cap is not None and c.observable:
        req["violationScore"] = cap
        notes["violationScore"] = (
            f"a violation caps the final score at {cap}"
            if c.cap is not None
            else f"REVIEW: a red line caps at {cap} unless the criteria say `cap N`"
        )
    if c.check:
        req["check"] = c.check
        notes["check"] = "decided by this check, not the judge (`--judge none` runs it alone)"
    return req, notes
