"""Per-row results: the normalized ``referenceBasis`` and scores, and JUDGE_ERROR rows.

The rules that make them are docs/protocol.md.

These are the values written to ``rows.jsonl`` and the task store; reports aggregate them.
JSON spelling is camelCase through the shared alias generator.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def to_json_dict(self) -> dict[str, Any]:
        """camelCase, JSON-ready dict (enums as their values)."""
        return self.model_dump(mode="json", by_alias=True)


class RowStatus(StrEnum):
    SCORED = "SCORED"
    JUDGE_ERROR = "JUDGE_ERROR"
    #: ``--judge none``: decided by rule checks alone; no score, no intent (docs/rule-checks.md)
    CHECKED = "CHECKED"


class RequirementStatus(StrEnum):
    """Status of one applicable requirement in a row's referenceBasis (docs/protocol.md §7)."""

    FOLLOWED = "FOLLOWED"
    PARTIAL = "PARTIAL"
    VIOLATED = "VIOLATED"
    NOT_APPLICABLE = "NOT_APPLICABLE"


class BasisSource(StrEnum):
    """Who decided a referenceBasis entry (docs/protocol.md §7, §8, §10)."""

    JUDGE = "judge"
    RULE = "rule"
    DEFAULT = "default"
    BACKFILL = "backfill"


class WarningCode(StrEnum):
    """Protocol warnings, counted per run (docs/protocol.md §13)."""

    #: an ID of the pack that belongs to another intent than the one chosen; dropped
    CROSS_INTENT_REQUIREMENT = "CROSS_INTENT_REQUIREMENT"
    #: the same ID listed twice in one list; kept once
    DUPLICATE_REQUIREMENT_ID = "DUPLICATE_REQUIREMENT_ID"
    #: an ID in both unmet and partial; VIOLATED wins
    UNMET_AND_PARTIAL = "UNMET_AND_PARTIAL"
    #: the judge listed a requirement marked observableInData: false; kept NOT_APPLICABLE
    UNOBSERVABLE_REPORTED = "UNOBSERVABLE_REPORTED"
    #: a VIOLATED critical requirement whose red-flag type the judge did not report; added
    RED_FLAG_ADDED = "RED_FLAG_ADDED"
    #: a reported red flag with no violated requirement of its type; the least severe applicable
    #: critical requirement of that type was marked VIOLATED (source ``backfill``)
    RED_FLAG_BACKFILLED = "RED_FLAG_BACKFILLED"
    #: a reported red flag with no applicable critical requirement of its type; kept, counted
    ORPHAN_RED_FLAG = "ORPHAN_RED_FLAG"
    #: a critical requirement the judge called PARTIAL (and reported no flag of its type): a
    #: red line is all or nothing, so it is VIOLATED (source ``backfill``), its flag is added
    #: and its cap applies (docs/protocol.md §8)
    CRITICAL_PARTIAL_VIOLATED = "CRITICAL_PARTIAL_VIOLATED"
    #: the final score is the scale minimum but the row has no red flag
    MIN_SCORE_WITHOUT_RED_FLAG = "MIN_SCORE_WITHOUT_RED_FLAG"
    #: the judge scored two or more points below the top but named no unmet or partial rule,
    #: so nothing in the referenceBasis explains the score
    LOW_SCORE_WITHOUT_UNMET_REQUIREMENT = "LOW_SCORE_WITHOUT_UNMET_REQUIREMENT"
    #: questionsCheck other than NOT_PRESENT while the pack has no questions card
    QUESTIONS_CHECK_WITHOUT_CARD = "QUESTIONS_CHECK_WITHOUT_CARD"
    #: the judge's first answer failed validation and it was asked again (detail: why)
    JUDGE_REASKED = "JUDGE_REASKED"
    #: an agent reply has a closing thinking marker with no opening one before it; the text
    #: was kept for the judge and the rule checks (docs/protocol.md §12; detail: the turn)
    STRAY_THINKING_END = "STRAY_THINKING_END"
    #: an agent reply opens a thinking section and never closes it; the text was kept
    UNCLOSED_THINKING_START = "UNCLOSED_THINKING_START"
    #: a reply held more than one verdict-shaped JSON object (content or tool calls), or an
    #: object with a duplicated key; never resolved to one of them, re-asked (detail: where)
    AMBIGUOUS_REPLY = "AMBIGUOUS_REPLY"
    # clean-ups applied to a judge value before it was checked (docs/protocol.md §5);
    # detail names the field, what the judge sent and what was read
    #: leading or trailing whitespace trimmed from an ID, key or type
    JUDGE_VALUE_TRIMMED = "JUDGE_VALUE_TRIMMED"
    #: an ID, key or type matched to the pack's spelling case-insensitively
    JUDGE_VALUE_RECASED = "JUDGE_VALUE_RECASED"
    #: an invisible character (Unicode category Cf or Cc, e.g. U+200B, U+00AD) removed
    INVISIBLE_CHARACTER_REMOVED = "INVISIBLE_CHARACTER_REMOVED"
    #: full-width or other compatibility characters made plain by NFKC
    JUDGE_VALUE_NFKC_NORMALIZED = "JUDGE_VALUE_NFKC_NORMALIZED"
    #: a score sent as text ("4", "4.0") read as the number
    SCORE_TEXT_CONVERTED = "SCORE_TEXT_CONVERTED"
    #: the same red-flag type listed twice; kept once
    DUPLICATE_RED_FLAG_TYPE = "DUPLICATE_RED_FLAG_TYPE"
    # a sampled row's aggregate (docs/stability.md)
    #: the samples did not all pick the same intent; the mode was taken (detail: the counts)
    INTENT_SPLIT = "INTENT_SPLIT"
    #: a red flag some samples raised was dropped by the vote (detail: raised by n of K)
    RED_FLAG_SPLIT = "RED_FLAG_SPLIT"


class ProtocolWarning(_Wire):
    code: WarningCode
    requirement_id: str | None = None
    red_flag_type: str | None = None
    detail: str | None = None


class BasisEntry(_Wire):
    """One applicable requirement of a row's referenceBasis.

    Attributes:
        evidence_turns: the dialogue turns the judge named as showing a VIOLATED or PARTIAL
            status (``judge_v3``, :mod:`rubric_engine.verdict.evidence`): 0-based indexes of
            the row's messages, sorted and distinct — the numbering of the review page and of
            a label's ``evidenceTurns``. ``None`` (left out of the JSON, so rows judged
            without evidence keep their bytes) when the judge named none.
    """

    requirement_id: str
    status: RequirementStatus
    source: BasisSource
    evidence_turns: tuple[int, ...] | None = Field(
        default=None, exclude_if=lambda turns: turns is None
    )


class JudgeErrorKind(StrEnum):
    """Why a row has no score."""

    INVALID_OUTPUT = "INVALID_OUTPUT"  # re-asks ran out
    TRANSPORT = "TRANSPORT"  # network/provider errors after retries
    REFUSED = "REFUSED"  # provider refusal or content filter
    TRUNCATED = "TRUNCATED"  # output cut off at max_tokens
    CASSETTE_MISS = "CASSETTE_MISS"  # replay found no recorded response
    CONTEXT_EXCEEDED = "CONTEXT_EXCEEDED"  # the row's prompt is over the model's context
    LOOPING = "LOOPING"  # the reply repeated one short unit until max_tokens


class JudgeError(_Wire):
    kind: JudgeErrorKind
    message: str
    attempts: int = 0
    cassette_key: str | None = None


class CheckResult(_Wire):
    """One rule check of a row (docs/rule-checks.md): which requirement it decides and how.

    The one type for a check's result: :func:`rubric_engine.rules.evaluate.evaluate_check`
    returns it and a row's :class:`RuleSummary` lists it.

    Attributes:
        requirement_id: the pack requirement the check belongs to, or the case check's
            ``CASE_RULE_<8 hex>`` ID.
        type: the check type (``must_contain``, …).
        name: the check's ``name``, else the pack requirement's ID, else the check type.
        status: FOLLOWED, VIOLATED or NOT_APPLICABLE (never PARTIAL: a rule holds or not).
        detail: why it failed or could not be decided; ``None`` when it held.
        measures: numbers the diagnosis summary adds up: ``matchedKeywordCount``,
            ``requiredKeywordCount``, ``evidenceCoverage`` (``{tool: seen}``). Not written to
            JSON (the summary carries their totals), so a result read back from the store has
            none.
    """

    requirement_id: str
    type: str
    name: str
    status: RequirementStatus
    detail: str | None = None
    measures: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)


class RuleSummary(_Wire):
    """A row's rule checks in the shape of a ``DiagnosisEvalResult`` (docs/cases.md).

    Attributes:
        passed: every check FOLLOWED or NOT_APPLICABLE.
        failed_checks: one ``"<name>: <why>"`` line per VIOLATED check, in check order.
        verifier_verdict: the verifier's verdict from the trace, or ``None``; JSON ``verdict``
            (the diagnosis cases' spelling). Not the judge's verdict.
        matched_keyword_count / required_keyword_count: summed over ``must_contain`` checks.
        evidence_coverage: ``{tool: seen}`` over ``required_tools`` checks.
        tool_call_count: tool invocations in the trace (or the messages).
        duration_ms: the trace's duration, or ``None``.
    """

    case_id: str
    title: str | None = None
    passed: bool
    failed_checks: tuple[str, ...] = ()
    verifier_verdict: str | None = Field(default=None, alias="verdict")
    matched_keyword_count: int = 0
    required_keyword_count: int = 0
    evidence_coverage: dict[str, bool] = {}
    tool_call_count: int = 0
    duration_ms: int | float | None = None
    checks: tuple[CheckResult, ...] = ()

    @property
    def verdict(self) -> str | None:
        """Old name of :attr:`verifier_verdict`, kept while ``report/diff.py`` still reads it."""
        return self.verifier_verdict


class SampleSummary(_Wire):
    """One sample of a sampled row, as its aggregate lists it (docs/stability.md).

    Attributes:
        judge: the judge's place in the panel, from 1.
        sample: the sample's number, from 1.
        statuses: requirement ID → the status the sample gave it (its referenceBasis).
    """

    judge: int
    sample: int
    status: RowStatus
    intent_key: str | None = None
    judge_score: int | None = None
    final_score: int | None = None
    red_flag_types: tuple[str, ...] = ()
    statuses: dict[str, RequirementStatus] = {}


class Stability(_Wire):
    """Whether a sampled row's samples agreed (docs/stability.md).

    Attributes:
        stable: every sample picked the same intent, raised the same red flags, gave every
            requirement the same status and the same final score.
        reasons: which of ``intent``, ``redFlags``, ``requirements``, ``score`` disagreed.
        flips: the requirements whose voting samples did not all give the same status.
        agreement: requirement ID → the share of its voting samples that gave the aggregate's
            status (4 decimals).
    """

    stable: bool
    reasons: tuple[str, ...] = ()
    flips: tuple[str, ...] = ()
    agreement: dict[str, float] = {}


class RowResult(_Wire):
    """One row's outcome. For ``JUDGE_ERROR`` rows every score field is ``None``.

    Attributes:
        judge_score: the score the judge gave, inside the scale.
        final_score: ``min(judge_score, violationScore of each VIOLATED requirement)``.
        capped_by: IDs of the VIOLATED requirements whose cap equals ``final_score`` when it
            is lower than ``judge_score``; empty when no cap applied.
        red_flag_types: in the pack's enumeration order.
        reference_basis: one entry per applicable requirement, common first, then the
            intent's, then case-level, each in declaration order.
    """

    row_id: str
    status: RowStatus
    intent_key: str | None = None
    judge_score: int | None = None
    final_score: int | None = None
    capped_by: tuple[str, ...] = ()
    red_flag_types: tuple[str, ...] = ()
    reference_basis: tuple[BasisEntry, ...] = ()
    warnings: tuple[ProtocolWarning, ...] = ()
    score_explanation: str | None = None
    questions_check: str | None = None
    questions_issues: tuple[str, ...] = ()
    error: JudgeError | None = None
    #: left out of the JSON when absent: rows without rule checks keep the exact shape they
    #: had before checks existed
    rules: RuleSummary | None = Field(default=None, exclude_if=lambda rules: rules is None)
    #: a sampled row's samples and their agreement (docs/stability.md); left out of the JSON
    #: of a single ask, whose bytes are what they were before samples existed
    samples: tuple[SampleSummary, ...] | None = Field(
        default=None, exclude_if=lambda samples: samples is None
    )
    stability: Stability | None = Field(default=None, exclude_if=lambda value: value is None)

    def with_warnings(self, first: tuple[ProtocolWarning, ...]) -> RowResult:
        """This result with ``first`` (warnings found before judging) ahead of its own."""
        return self.model_copy(update={"warnings": (*first, *self.warnings)}) if first else self
