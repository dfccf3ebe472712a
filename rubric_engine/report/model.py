"""The report's one type: every section of ``report.json`` and of a baseline diff (docs/reports.md).

Aggregation (:mod:`rubric_engine.report.aggregate`, :mod:`~rubric_engine.report.diff`) builds
these frozen models; every renderer (JSON, Markdown, HTML, console, JUnit) and the metric table
(:mod:`rubric_engine.report.metrics`) reads them by attribute. Python names are snake_case;
the JSON keeps the camelCase spelling through the project's one alias generator
(:class:`rubric_engine.results.model._Wire`), so ``report.json`` is :meth:`Report.to_json` of the
model, byte for byte what the dict-built report was.

Field order is the JSON key order. A field listed in a model's ``_omit_when_none`` is left out
of the JSON when ``None`` (the report's optional keys: ``slices`` without ``--by``, ``rules``
without rule checks, ``totals.checked`` without rules-only rows, the task's extras); every other
``None`` is written as ``null``. Figures are rounded as :mod:`rubric_engine.report.outcome`
says. The one key whose JSON name is not the field name is ``totals.verdictDistribution``
(kept for readers of ``report.json``): it counts row *outcomes*, not judge verdicts.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel

from rubric_engine.report.row_ids import RowIds
from rubric_engine.results.model import RuleSummary, _Wire

#: a row's outcome in a report (see :mod:`rubric_engine.report.outcome`)
RowOutcome = Literal["PASS", "FAIL", "RED_FLAG", "JUDGE_ERROR"]
ItemType = Literal["REGRESSION", "IMPROVEMENT", "CHANGED"]
ItemScope = Literal["aggregate", "case"]


class _Section(_Wire):
    """A report section: frozen, camelCase JSON, optional keys left out when ``None``."""

    _omit_when_none: ClassVar[frozenset[str]] = frozenset()
    #: fields holding :class:`~rubric_engine.report.row_ids.RowIds` or sections that do
    #: (kept as they are by :meth:`json_tree`)
    _streamed: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _leave_out_optional(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self._omit_when_none:
            key = to_camel(name)
            if key in data and data[key] is None:
                del data[key]
        return data

    def json_tree(self) -> dict[str, Any]:
        """:meth:`to_json_dict` with each :class:`~rubric_engine.report.row_ids.RowIds` left
        as it is instead of a list of ``str``, for
        :func:`~rubric_engine.report.row_ids.json_chunks` to write the same text without that
        list (a report lists every low row's id)."""
        if not self._streamed:
            return self.to_json_dict()
        data = self.model_dump(mode="json", by_alias=True, exclude=set(self._streamed))
        tree: dict[str, Any] = {}
        for name, info in type(self).model_fields.items():
            key = info.serialization_alias or info.alias or name
            if name in self._streamed:
                value = getattr(self, name)
                if value is not None or name not in self._omit_when_none:
                    tree[key] = _tree_of(value)
            elif key in data:
                tree[key] = data[key]
        return tree


def _tree_of(value: Any) -> Any:
    if isinstance(value, _Section):
        return value.json_tree()
    if isinstance(value, tuple | list):
        return [_tree_of(item) for item in value]
    return value


class _Document(_Section):
    """A whole JSON document (a report, a diff)."""

    def to_json(self) -> str:
        """Indented UTF-8 JSON with a final newline, keys in field order: the file's bytes."""
        return json.dumps(self.to_json_dict(), ensure_ascii=False, indent=2) + "\n"

    def __getitem__(self, key: str) -> Any:
        """The JSON value under camelCase ``key`` (a plain dict/list copy), for scripts written
        against the dict report; the library itself reads attributes. Only that section is
        dumped.

        Raises:
            KeyError: no such key in the JSON (or an optional section left out).
        """
        for name, info in type(self).model_fields.items():
            if not info.exclude and (info.serialization_alias or info.alias or name) == key:
                return self.model_dump(mode="json", by_alias=True, include={name})[key]
        raise KeyError(key)


class TaskSection(_Section):
    """Identity of the task and every version that made its scores (docs/rubric-packs.md)."""

    _omit_when_none = frozenset(
        {
            "cassettes",
            "answer_sources",
            "stop_reason",
            "renormalized_from",
            "judged_under",
            "latency",
            "output_form",
            "judges",
        }
    )

    id: str
    created_at: str
    state: str
    rubric_key: str
    rubric_version: int
    rubric_status: str
    rubric_hash: str
    prompt_version: str
    prompt_hash: str
    engine_version: str
    analysis_version: str
    model: str
    judge_mode: str
    judge_params: dict[str, Any]
    inputs: tuple[Any, ...]
    planned_rows: int
    #: cassette entries the answers came from, by provenance (``{"authored": 25}``)
    cassettes: dict[str, int] | None = None
    #: where a replay's answers came from, one entry per distinct provenance:
    #: ``{"kind", "by", "method" | "model", "rows"}`` (``by``: the author, or the provider and
    #: model they were recorded from); tasks scored before it was kept have none
    answer_sources: tuple[dict[str, Any], ...] | None = None
    stop_reason: str | None = None
    renormalized_from: str | None = None
    judged_under: Any = None
    #: ``recorded``: a replay's latency figures are those recorded with the cassettes
    latency: str | None = None
    #: ``schema``/``tools`` mode: the request form used, and a form the server refused
    output_form: dict[str, Any] | None = None
    #: a panel's judges' models, in order (docs/panels.md); absent for one judge
    judges: tuple[str, ...] | None = None


class Totals(_Section):
    """Row counts, means over SCORED rows, the pass rate and the distributions."""

    _omit_when_none = frozenset({"checked"})

    rows: int
    scored: int
    judge_errors: int
    mean_score: float | None
    mean_judge_score: float | None
    capped_rows: int
    rows_with_red_flags: int
    pass_score: int
    passed_rows: int
    #: passed / (scored + checked), 0–1; ``None`` without such rows
    pass_rate: float | None
    #: ``{"1": n, …}`` over the whole scale, ascending
    score_distribution: dict[str, int]
    #: rows per outcome, in :data:`~rubric_engine.report.outcome.OUTCOMES` order
    outcome_distribution: dict[RowOutcome, int] = Field(alias="verdictDistribution")
    judge_errors_by_kind: dict[str, int]
    #: rows decided by rule checks alone (``--judge none``); left out when there are none
    checked: int | None = None


class RedFlagCount(_Section):
    _streamed = ("row_ids",)

    type: str
    text: str | None
    count: int
    #: the flagged rows: SCORED ones in input order, then CHECKED ones
    row_ids: RowIds


class IntentSummary(_Section):
    intent_key: str
    name: str
    rows: int
    mean_score: float | None
    pass_rate: float | None
    red_flag_count: int
    rows_with_red_flags: int


class StatusCounts(_Section):
    """referenceBasis entries per status; compliance = followed / (followed + partial +
    violated), ``None`` when nothing was judged (docs/protocol.md §14)."""

    followed: int
    partial: int
    violated: int
    not_applicable: int
    compliance: float | None


class RequirementSummary(_Section):
    id: str
    intent_key: str | None
    category: str
    critical: bool
    followed: int
    partial: int
    violated: int
    not_applicable: int
    compliance: float | None
    text: str | None


class SliceRequirement(_Section):
    id: str
    followed: int
    partial: int
    violated: int
    not_applicable: int
    compliance: float | None


class SliceGroup(_Section):
    value: str
    rows: int
    scored: int
    mean_score: float | None
    pass_rate: float | None
    red_flag_rows: int
    followed: int
    partial: int
    violated: int
    not_applicable: int
    compliance: float | None
    requirements: tuple[SliceRequirement, ...]


class Slice(_Section):
    by: str
    groups: tuple[SliceGroup, ...]


class CoViolated(_Section):
    id: str
    rows: int
    text: str | None


class IssueCluster(_Section):
    _streamed = ("row_ids",)

    rank: int
    lead_requirement_id: str | None
    text: str | None
    critical: bool
    category: str | None
    size: int
    #: every row of the cluster, in input order
    row_ids: RowIds
    example_row_ids: tuple[str, ...]
    mean_score: float | None
    red_flag_share: float
    red_flag_types: dict[str, int]
    co_violated: tuple[CoViolated, ...]


class LowRow(_Section):
    """A lowest-scoring row. ``evidence_turns``: the turns the judge named per VIOLATED or
    PARTIAL requirement (``judge_v3``; 0-based message indexes, as on the referenceBasis);
    left out of the JSON when the judge named none, so older reports keep their bytes."""

    _omit_when_none = frozenset({"evidence_turns"})

    row_id: str
    final_score: int | None
    judge_score: int | None
    intent_key: str | None
    violated_requirement_ids: tuple[str, ...]
    partial_requirement_ids: tuple[str, ...]
    red_flag_types: tuple[str, ...]
    capped_by: tuple[str, ...]
    score_explanation: str | None
    evidence_turns: dict[str, tuple[int, ...]] | None = None


class JudgeErrorEntry(_Section):
    row_id: str
    kind: str | None
    message: str | None


class AgentSummary(_Section):
    tool_calls_total: int
    tool_calls_mean: float | None
    rows_with_duration: int
    duration_ms_mean: float | None


class UsageSummary(_Section):
    """The judge calls of a task and what they used.

    ``cache_read_tokens`` / ``cache_creation_tokens``: of ``prompt_tokens``, those the
    provider read from / wrote to its prompt cache (:mod:`rubric_engine.judge.usage`);
    both are left out of the JSON when no call of the task reported either, so a task without
    prompt caching keeps the report it had before they existed.
    """

    _omit_when_none = frozenset({"cache_read_tokens", "cache_creation_tokens", "reasoning_tokens"})

    calls: int
    prompt_tokens: int
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    completion_tokens: int
    #: of ``completion_tokens``, the model's reasoning (``completion_tokens_details``), counted
    #: by the runs that judged the task; left out when no call reported any
    reasoning_tokens: int | None = None
    cost_usd: float | None
    latency_ms_mean: float | None
    latency_ms_p95: float | None

    @property
    def cache_line(self) -> str | None:
        """``R read from the prompt cache, W written to it, U not cached`` (tokens), the words
        every renderer shows (``W written to it`` only when the provider reported cache writes:
        OpenAI-style automatic caching has none); ``None`` when the task reported no cached
        tokens."""
        if self.cache_read_tokens is None or self.cache_creation_tokens is None:
            return None
        uncached = self.prompt_tokens - self.cache_read_tokens - self.cache_creation_tokens
        writes = self.cache_creation_tokens
        written = f"{writes} written to it, " if writes else ""
        return (
            f"{self.cache_read_tokens} read from the prompt cache, "
            f"{written}{max(0, uncached)} not cached"
        )


class RulesSection(_Section):
    """The diagnosis report (``DiagnosisEvalReport``, docs/cases.md) of rows with rule checks."""

    total_cases: int
    passed_cases: int
    #: passed / total, 0–1 (the section exists only when some row has rule checks)
    pass_rate: float
    #: the verifier's verdicts from the traces (a missing one as ``NONE``)
    verdict_distribution: dict[str, int]
    average_tool_call_count: float
    average_duration_ms: float | None
    results: tuple[RuleSummary, ...]


class CalibrationFigure(_Section):
    """One figure of the calibration section: a flat calibration metric with its 95% bounds
    (``None`` where the figure is undefined for the compared labels)."""

    name: str
    label: str
    value: float | None
    interval: tuple[float, float] | None


class CalibrationSection(_Section):
    """The judge calibration a task may use (docs/calibration.md).

    ``state`` is ``current`` (a record pinned to the task's rubric hash, prompt hash, judge
    model and parameters: ``metrics`` holds its flat ``calibration.*`` figures), ``stale`` (the
    rubric was calibrated under other pins; ``reason`` names them) or ``missing``. It is read
    from the store by the edge (:mod:`rubric_engine.report.stored`) and attached to a report
    for the gate's ``calibration.*`` metrics and the Markdown/HTML section; ``report.json``
    never holds it (it is not a figure of the task's rows, and the file stays a rebuild of
    the task alone).
    """

    state: Literal["current", "stale", "missing"]
    reason: str
    record_id: str | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    figures: tuple[CalibrationFigure, ...] = ()


class RouterClass(_Section):
    label: str
    #: rows whose expected label this is
    support: int
    precision: float | None
    recall: float | None
    f1: float | None


class RouterConfusion(_Section):
    expected: str
    predicted: str
    rows: int


class RouterSection(_Section):
    """Routing metrics over rows with ``metadata.expectedRoute`` (report/router.py)."""

    rows: int
    accuracy: float | None
    macro_f1: float | None
    classes: tuple[RouterClass, ...]
    confusions: tuple[RouterConfusion, ...]


class StabilityRequirement(_Section):
    """One requirement whose samples disagreed on some row."""

    requirement_id: str
    #: sampled rows that judged it
    rows: int
    #: of those, rows whose voting samples did not all agree
    flips: int
    flip_rate: float


class StabilityRow(_Section):
    """An unstable row: its aggregate score, each sample's, and what disagreed."""

    row_id: str
    final_score: int | None
    scores: tuple[int | None, ...]
    reasons: tuple[str, ...]
    flips: tuple[str, ...]


class StabilitySection(_Section):
    """How far a sampled task's samples agreed (report/stability_section.py,
    docs/stability.md)."""

    sampled_rows: int
    #: samples asked (and stored) over the sampled rows
    samples: int
    unstable_rows: int
    unstable_rate: float | None
    flip_rate: float | None
    #: Fleiss' κ of the requirement statuses across samples
    kappa: float | None
    red_flag_splits: int
    intent_splits: int
    rows_with_failed_sample: int
    #: the requirements that flipped on some row, the highest flip rate first
    requirements: tuple[StabilityRequirement, ...]
    #: the unstable rows with the most disagreements (at most 50), the most first
    unstable: tuple[StabilityRow, ...]


class PanelJudge(_Section):
    """One judge of a panel: the rows it scored and its mean final score."""

    judge: int
    #: its model (``None`` for a task stored without its panel's models)
    model: str | None
    rows: int
    mean_final_score: float | None


class PanelRequirement(_Section):
    """How often a panel's judges gave one requirement the same status."""

    requirement_id: str
    #: rows every judge gave it a status
    rows: int
    #: of those, the share where every judge gave the same
    agreement: float


class PanelPair(_Section):
    """Two judges of a panel against each other."""

    judges: tuple[int, int]
    #: (row, requirement) pairs both gave a status
    items: int
    agreement: float | None
    #: Cohen's κ over those pairs (``None``: undefined, one status throughout)
    kappa: float | None
    #: the share of their common rows with the same final score
    same_score: float | None


class PanelSection(_Section):
    """How far a panel's judges agreed (report/panel_section.py, docs/panels.md)."""

    #: scored rows judged by more than one judge
    rows: int
    judges: tuple[PanelJudge, ...]
    #: (row, requirement) pairs where every judge gave the same status / pairs all judged
    agreement: float | None
    #: each requirement, the lowest agreement first
    requirements: tuple[PanelRequirement, ...]
    pairs: tuple[PanelPair, ...]


class Report(_Document):
    """A task's report (README "Reports"); :meth:`to_json` is ``report.json``.

    The rowIds of ``red_flags`` and ``issue_clusters`` are
    :class:`~rubric_engine.report.row_ids.RowIds` (read like tuples, held without a ``str``
    per id); :func:`rubric_engine.report.render.json_md.json_chunks` writes the file from
    :meth:`json_tree` without making them lists.
    """

    _omit_when_none = frozenset({"slices", "rules", "router", "stability", "panel"})
    _streamed = ("red_flags", "issue_clusters")

    task: TaskSection
    totals: Totals
    red_flags: tuple[RedFlagCount, ...]
    intents: tuple[IntentSummary, ...]
    requirements: tuple[RequirementSummary, ...]
    slices: tuple[Slice, ...] | None = None
    issue_clusters: tuple[IssueCluster, ...]
    lowest_rows: tuple[LowRow, ...]
    judge_errors: tuple[JudgeErrorEntry, ...]
    warnings: dict[str, int]
    agent: AgentSummary
    usage: UsageSummary
    rules: RulesSection | None = None
    #: attached by the edge for the gate and the md/html section; never in ``report.json``
    calibration: CalibrationSection | None = Field(default=None, exclude=True)
    #: routing metrics, when rows carry ``metadata.expectedRoute`` (docs/ci.md)
    router: RouterSection | None = None
    #: a sampled task's agreement between samples (docs/stability.md); absent otherwise
    stability: StabilitySection | None = None
    #: a panel's agreement between judges (docs/panels.md); absent for one judge
    panel: PanelSection | None = None


class DiffItem(_Section):
    """One difference; ``delta`` is ``current - baseline`` for numbers, else ``None``."""

    type: ItemType
    scope: ItemScope
    case_id: str | None
    metric: str
    baseline_value: Any
    current_value: Any
    delta: int | float | None
    message: str


class RubricRef(_Section):
    key: str
    version: int
    hash: str


class RubricComparison(_Section):
    same_rubric: bool
    baseline: RubricRef
    current: RubricRef
    shared_requirement_ids: int
    only_in_baseline: tuple[str, ...]
    only_in_current: tuple[str, ...]
    note: str


class CappedItems(_Section):
    """A diff that lists only the most important of its case items (docs/scale.md).

    Attributes:
        case_items: every case item found (counted in the diff's regression, improvement and
            change counts).
        listed: of them, the ones in ``items`` (after the aggregate items).
        items_file: the JSON Lines file holding every item, aggregate and case, when one was
            written; ``None`` otherwise.
    """

    case_items: int
    listed: int
    items_file: str | None


class Diff(_Document):
    """A baseline diff (docs/reports.md): summary fields, ``rubricComparison``, ``items``."""

    baseline_task_id: str
    current_task_id: str
    baseline_total_cases: int
    current_total_cases: int
    baseline_passed_cases: int
    current_passed_cases: int
    baseline_pass_rate: float | None
    current_pass_rate: float | None
    regression_count: int
    improvement_count: int
    changed_count: int
    has_regression: bool
    rubric_comparison: RubricComparison
    items: tuple[DiffItem, ...]
    #: set when the case items were more than the diff lists (docs/scale.md); left out
    #: otherwise, so a diff that lists every item keeps its bytes
    capped: CappedItems | None = None

    _omit_when_none = frozenset({"capped"})
