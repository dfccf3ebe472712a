"""Lint a rubric pack for what confuses judges (docs/authoring.md "Lint").

``rubric validate`` checks that a pack *can* run; the lint says where its texts will leave a
judge guessing — the problems docs/rubric-feedback-v1.md found by hand after the demo's
judges ran into them. Each finding names the rule, quotes the text and suggests the fix; none
stops a pack from loading. Pure: the pack, and optionally a task's figures (:class:`RowFigures`
fed one row result at a time) and label disagreement, in; findings out.

From the pack alone:

* ``MIXED_RED_LINE`` — a red line that forbids something and also demands a duty: a judge
  who sees only the duty missed must decide whether the line was crossed.
* ``OPEN_LIST_RED_LINE`` — a red line whose trigger is an open list ("such as", "如…").
* ``NOTE_REDEFINES_RULE`` — a scoring note that tells the judge how to decide a rule in words
  the rule's own text does not use: two texts for one rule.
* ``UNCAPPED_RULE`` — an observable rule without ``violationScore``: what a violation does to
  the score is left to each judge (a scoring note may say otherwise).
* ``NEAR_DUPLICATE`` — two rules whose texts say nearly the same.
* ``OVERLAPPING_HINTS`` — two intents whose trigger hints overlap.
* ``UNOBSERVABLE_TEXT`` — an observable rule whose text names what a transcript cannot show.

From a task (``--task``): ``VIOLATED_IN_MOST_ROWS``, ``CAP_BINDS_MOST_ROWS``,
``CAP_NEVER_BINDS``, ``OFTEN_UNMET_TOGETHER``; from labels on it: ``LABEL_DISAGREEMENT``,
ranked, which rules to rewrite first.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import combinations

from rubric_engine.results.model import RequirementStatus, RowResult, RowStatus
from rubric_engine.rubric.model import EvalRubric, HardRequirement
from rubric_engine.rubric.similarity import cosine_matrix


class LintCode(StrEnum):
    MIXED_RED_LINE = "MIXED_RED_LINE"
    OPEN_LIST_RED_LINE = "OPEN_LIST_RED_LINE"
    NOTE_REDEFINES_RULE = "NOTE_REDEFINES_RULE"
    UNCAPPED_RULE = "UNCAPPED_RULE"
    NEAR_DUPLICATE = "NEAR_DUPLICATE"
    OVERLAPPING_HINTS = "OVERLAPPING_HINTS"
    UNOBSERVABLE_TEXT = "UNOBSERVABLE_TEXT"
    VIOLATED_IN_MOST_ROWS = "VIOLATED_IN_MOST_ROWS"
    CAP_BINDS_MOST_ROWS = "CAP_BINDS_MOST_ROWS"
    CAP_NEVER_BINDS = "CAP_NEVER_BINDS"
    OFTEN_UNMET_TOGETHER = "OFTEN_UNMET_TOGETHER"
    LABEL_DISAGREEMENT = "LABEL_DISAGREEMENT"


@dataclass(frozen=True)
class LintFinding:
    """One thing to look at: ``path`` in the pack's YAML spelling, what and the fix."""

    code: LintCode
    path: str
    requirement_id: str | None
    message: str
    fix: str

    def __str__(self) -> str:
        rid = f" {self.requirement_id}" if self.requirement_id else ""
        return f"{self.code} {self.path}{rid}: {self.message} Fix: {self.fix}"


#: thresholds, each a judgment call stated once
NEAR_DUPLICATE_COSINE = 0.6
OVERLAPPING_HINTS_COSINE = 0.35
MOST_ROWS_SHARE = 0.8
MIN_ROWS = 5
TOGETHER_SHARE = 0.5
MIN_TOGETHER = 3
#: unmet together this many times more often than two independent rules would be (so a rule
#: unmet in almost every row is not "together" with every other)
TOGETHER_LIFT = 1.4

_SENTENCE = re.compile(r"(?<=[。；;！？!?])|(?<=\.)\s+|\n+")
_FORBID = re.compile(
    r"不得|不能|不可|禁止|严禁|切勿|不要"
    r"|\bnever\b|\bmust not\b|\bmay not\b|\bshall not\b|\bshould not\b|\bmustn't\b"
    r"|\b(?:agent|assistant|it|you|they)\s+(?:does|do)\s+not\b|^\s*do not\b|^\s*don't\b",
    re.IGNORECASE,
)
_DUTY = re.compile(
    r"必须|务必|一定要|应当|应该|只能|(?<![无必])须(?!知)|(?<![反相适回])应(?![用对激答])"
    r"|\bmust\b(?! not)|\bshould\b(?! not)|\balways\b|\bis required to\b|\bhas to\b|\bneeds to\b",
    re.IGNORECASE,
)
_OPEN_LIST = re.compile(
    r"（如|\(如|例如|比如|诸如|之类|such as|e\.g\.|for example|for instance|including|etc\.?"
    r"|and so on",
    re.IGNORECASE,
)
_CONDITION = re.compile(r"时|若|如果|当|\bwhen\b|\bif\b|\bwhenever\b|\bin case\b", re.IGNORECASE)
_JUDGING = re.compile(
    r"判断|判定|视为|算作|\bjudge[sd]?\b|\bcounts? as\b|\bis met\b|\bis violated\b|\bmeans\b",
    re.IGNORECASE,
)
_UNSEEN = re.compile(
    r"知识源|知识库|商品库|审核节点|内部工具|内部流程|检索|系统日志"
    r"|knowledge base|internal (?:tool|system|process|review)|retriev|database state"
    r"|behind the scenes|source of truth|system log",
    re.IGNORECASE,
)
_SAYING = re.compile(r"暴露|泄露|提及|说出|透露|expos|reveal|mention|disclos|leak", re.IGNORECASE)


def _short(text: str, limit: int = 70) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def requirement_paths(rubric: EvalRubric) -> Iterator[tuple[str, HardRequirement]]:
    """``(path, requirement)`` for every requirement, in pack order."""
    for i, req in enumerate(rubric.common_requirements):
        yield f"commonRequirements[{i}]", req
    for j, intent in enumerate(rubric.intents):
        for i, req in enumerate(intent.requirements):
            yield f"intents[{j}].requirements[{i}]", req


def sentences(text: str) -> list[str]:
    """``text`` cut at sentence ends (。；;！？!? and a full stop before a space)."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def lint_pack(rubric: EvalRubric) -> list[LintFinding]:
    """Every finding the pack's texts give, in pack order (see the module docstring)."""
    found: list[LintFinding] = []
    for path, req in requirement_paths(rubric):
        found += _requirement_findings(path, req)
    found += _note_findings(rubric)
    found += _duplicates(rubric)
    found += _overlapping_hints(rubric)
    return found


def _requirement_findings(path: str, req: HardRequirement) -> list[LintFinding]:
    found: list[LintFinding] = []
    if req.critical:
        parts = sentences(req.text)
        forbids = [s for s in parts if _FORBID.search(s)]
        duties = [s for s in parts if _DUTY.search(s) and not _FORBID.search(s)]
        if forbids and duties:
            found.append(
                LintFinding(
                    LintCode.MIXED_RED_LINE,
                    f"{path}.text",
                    req.id,
                    f'the red line forbids ("{_short(forbids[0], 50)}") and also demands '
                    f'("{_short(duties[0], 50)}"): a judge who sees only the duty missed must '
                    "decide whether the red line was crossed.",
                    f"split it: keep the prohibition(s) critical under {req.id}; move "
                    f'"{_short(" ".join(duties), 60)}" to a new rule {req.id}_DUTY '
                    "(category PROCESS, not critical, its own cap).",
                )
            )
        opened = _open_list_in_condition(req.text)
        if opened is not None:
            found.append(
                LintFinding(
                    LintCode.OPEN_LIST_RED_LINE,
                    f"{path}.text",
                    req.id,
                    f'when the red line applies is an open list ("{_short(opened, 60)}"): '
                    "whether a case not listed triggers it is left to each judge.",
                    "close the list (name every case that triggers it), or say how to decide "
                    "one that is not listed.",
                )
            )
    if req.observable_in_data and req.violation_score is None and req.check is None:
        found.append(
            LintFinding(
                LintCode.UNCAPPED_RULE,
                f"{path}.violationScore",
                req.id,
                "no cap: what a violation does to the score is left to each judge (and to "
                "any scoring note that speaks of it).",
                "set violationScore, or say in the text that a violation does not lower the score.",
            )
        )
    unseen = _UNSEEN.search(req.text)
    if req.observable_in_data and unseen and not _SAYING.search(req.text):
        found.append(
            LintFinding(
                LintCode.UNOBSERVABLE_TEXT,
                f"{path}.observableInData",
                req.id,
                f'the text names "{unseen.group(0)}", which a transcript does not show: the '
                "judge would guess.",
                "set observableInData: false (always NOT_APPLICABLE), or restate the rule as "
                "what the transcript shows.",
            )
        )
    return found


def _open_list_in_condition(text: str) -> str | None:
    """The clause of ``text`` where an open list follows a condition ("…时（如…", "when …
    such as"), or ``None``."""
    for sentence in sentences(text):
        opened = _OPEN_LIST.search(sentence)
        if opened and _CONDITION.search(sentence[: opened.start()]):
            return sentence
    return None


def _note_findings(rubric: EvalRubric) -> list[LintFinding]:
    reqs = rubric.requirements_by_id
    found: list[LintFinding] = []
    for n, note in enumerate(rubric.scoring_notes):
        for sentence in sentences(note):
            if not _JUDGING.search(sentence):
                continue
            for rid in re.findall(r"\b[A-Z][A-Z0-9_]+\b", sentence):
                if rid not in reqs:
                    continue
                found.append(
                    LintFinding(
                        LintCode.NOTE_REDEFINES_RULE,
                        f"scoringNotes[{n}]",
                        rid,
                        f'the note says how to decide {rid} ("{_short(sentence, 60)}") while '
                        f'the rule says "{_short(reqs[rid].text, 50)}": judges reading both '
                        "may apply either.",
                        f"put the test into {rid}'s text (one place) and drop it from the note.",
                    )
                )
    return found


def _duplicates(rubric: EvalRubric) -> list[LintFinding]:
    listed = list(requirement_paths(rubric))
    if len(listed) < 2:
        return []
    similar = cosine_matrix([req.text for _, req in listed])
    found = []
    for i, j in combinations(range(len(listed)), 2):
        if not _together(listed[i][0], listed[j][0]):
            continue  # rules of two intents never apply to the same dialogue
        if similar[i, j] >= NEAR_DUPLICATE_COSINE:
            (path, a), (_, b) = listed[i], listed[j]
            found.append(
                LintFinding(
                    LintCode.NEAR_DUPLICATE,
                    f"{path}.text",
                    a.id,
                    f"{a.id} and {b.id} say nearly the same (text similarity "
                    f"{similar[i, j]:.2f}): judges will list one, the other or both.",
                    "merge them, or say in each text what the other does not cover.",
                )
            )
    return found


def _together(path_a: str, path_b: str) -> bool:
    """Whether two requirements can apply to one dialogue: not two intents' own rules."""
    intent_a, intent_b = path_a.split(".")[0], path_b.split(".")[0]
    common = "commonRequirements"
    return intent_a == intent_b or common in (intent_a.split("[")[0], intent_b.split("[")[0])


def _overlapping_hints(rubric: EvalRubric) -> list[LintFinding]:
    intents = rubric.intents
    if len(intents) < 2:
        return []
    similar = cosine_matrix([i.trigger_hints for i in intents])
    guidance = [*rubric.scoring_notes, *(i.notes or "" for i in intents)]
    found = []
    for i, j in combinations(range(len(intents)), 2):
        a, b = intents[i].key, intents[j].key
        if any(a in text and b in text for text in guidance):
            continue  # a note already says which one wins
        if similar[i, j] >= OVERLAPPING_HINTS_COSINE:
            found.append(
                LintFinding(
                    LintCode.OVERLAPPING_HINTS,
                    f"intents[{i}].triggerHints",
                    None,
                    f"{intents[i].key} and {intents[j].key} have overlapping trigger hints "
                    f"(similarity {similar[i, j]:.2f}): a dialogue may fit both, and each "
                    "intent brings other rules.",
                    "say in the hints (or a scoring note) which intent wins when both fit.",
                )
            )
    return found


@dataclass
class RuleUse:
    """One requirement over a task's scored rows."""

    applicable: int = 0  # FOLLOWED, PARTIAL or VIOLATED
    unmet: int = 0  # PARTIAL or VIOLATED
    violated: int = 0
    binding: int = 0  # VIOLATED and the final score equals its cap


@dataclass
class RowFigures:
    """What the task lint reads of a task, fed one row result at a time (:meth:`add`)."""

    scored: int = 0
    uses: dict[str, RuleUse] = field(default_factory=dict)
    together: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, row: RowResult, rubric: EvalRubric) -> None:
        """Count a SCORED row (others are ignored)."""
        if row.status is not RowStatus.SCORED:
            return
        self.scored += 1
        reqs = rubric.requirements_by_id
        unmet: list[str] = []
        for entry in row.reference_basis:
            if entry.status is RequirementStatus.NOT_APPLICABLE:
                continue
            use = self.uses.setdefault(entry.requirement_id, RuleUse())
            use.applicable += 1
            if entry.status is RequirementStatus.FOLLOWED:
                continue
            use.unmet += 1
            unmet.append(entry.requirement_id)
            if entry.status is RequirementStatus.VIOLATED:
                use.violated += 1
                req = reqs.get(entry.requirement_id)
                cap = req.violation_score if req else None
                if cap is not None and row.final_score == cap:
                    use.binding += 1
        self.together.update(combinations(sorted(unmet), 2))


def lint_task(rubric: EvalRubric, figures: RowFigures) -> list[LintFinding]:
    """Findings from how the pack's rules fared over a task's scored rows (pack order)."""
    paths = dict((req.id, path) for path, req in requirement_paths(rubric))
    found: list[LintFinding] = []
    for rid, path in paths.items():
        use = figures.uses.get(rid)
        if use is None:
            continue
        cap = rubric.requirements_by_id[rid].violation_score
        if use.applicable >= MIN_ROWS and use.unmet >= MOST_ROWS_SHARE * use.applicable:
            found.append(
                LintFinding(
                    LintCode.VIOLATED_IN_MOST_ROWS,
                    path,
                    rid,
                    f"unmet in {use.unmet} of {use.applicable} rows it applied to"
                    + ("" if cap is None else f", capping each at {cap}")
                    + ": it pulls otherwise clean dialogues down, or the rule asks for what "
                    "the agent never does.",
                    "check the text against a few of those rows; decide its cap (or no "
                    "effect on the score) on purpose.",
                )
            )
        if cap is not None and figures.scored >= MIN_ROWS:
            if use.binding >= MOST_ROWS_SHARE * figures.scored:
                found.append(
                    LintFinding(
                        LintCode.CAP_BINDS_MOST_ROWS,
                        f"{path}.violationScore",
                        rid,
                        f"its cap {cap} sets the final score of {use.binding} of "
                        f"{figures.scored} scored rows: the score says little besides this "
                        "rule.",
                        "raise the cap, or split the rule so one frequent slip does not set "
                        "the score.",
                    )
                )
            if use.violated >= MIN_TOGETHER and use.binding == 0:
                found.append(
                    LintFinding(
                        LintCode.CAP_NEVER_BINDS,
                        f"{path}.violationScore",
                        rid,
                        f"violated in {use.violated} rows, each ending below its cap {cap}: "
                        "the cap changed no score.",
                        "lower the cap if a violation should weigh more, or drop it.",
                    )
                )
    found += _unmet_together(figures, paths)
    return found


def _unmet_together(figures: RowFigures, paths: Mapping[str, str]) -> list[LintFinding]:
    found = []
    order = {rid: i for i, rid in enumerate(paths)}
    pairs = sorted(figures.together.items(), key=lambda kv: (-kv[1], kv[0]))
    for (a, b), both in pairs:
        if a not in paths or b not in paths or both < MIN_TOGETHER:
            continue
        unmet_a, unmet_b = figures.uses[a].unmet, figures.uses[b].unmet
        either = unmet_a + unmet_b - both
        if both < TOGETHER_SHARE * either or both * figures.scored < (
            TOGETHER_LIFT * unmet_a * unmet_b
        ):
            continue
        lift = both * figures.scored / (unmet_a * unmet_b)
        first, second = sorted((a, b), key=order.__getitem__)
        found.append(
            LintFinding(
                LintCode.OFTEN_UNMET_TOGETHER,
                paths[first],
                first,
                f"{first} and {second} are unmet together in {both} of the {either} rows "
                f"where either is ({lift:.1f} times what chance gives): judges may list one "
                "problem under both, or be unsure which applies.",
                "if they are one problem, say in each text what separates them (the case "
                "each covers alone); if they are two steps of one duty, leave them.",
            )
        )
    return found


def lint_labels(
    rubric: EvalRubric, disagreement: Mapping[str, tuple[int, int]], top: int = 10
) -> list[LintFinding]:
    """Requirements ranked by how often the judge and the labels disagree on them (unmet vs
    followed), most first; ``disagreement`` is rid → (pairs that disagree, pairs compared).
    Only rules with at least one disagreement are listed, at most ``top``."""
    paths = dict((req.id, path) for path, req in requirement_paths(rubric))
    ranked = sorted(
        ((rid, d, n) for rid, (d, n) in disagreement.items() if d and n),
        key=lambda item: (-item[1] / item[2], -item[1], item[0]),
    )
    return [
        LintFinding(
            LintCode.LABEL_DISAGREEMENT,
            paths.get(rid, "(case level)"),
            rid,
            f"rank {rank}: judge and labels disagree in {d} of {n} labelled rows ({d / n:.0%}).",
            "rewrite this rule's text first; read the labels' reasons on those rows.",
        )
        for rank, (rid, d, n) in enumerate(ranked[:top], start=1)
    ]
