"""The report built as a stream: rows added one at a time, in any order, in bounded memory.

:class:`ReportAccumulator` gives the same :class:`~rubric_engine.report.model.Report` as
aggregating the task's rows in input order (docs/reports.md; the rules are in
:mod:`rubric_engine.report.aggregate`), while holding only what the report needs:

- counters and integer sums (totals, intents, requirements, slices, warnings, router pairs);
- bounded heaps: the :data:`LOWEST_ROWS` lowest-scoring rows and the
  :data:`DRILLDOWN_ROWS` worst rows the HTML drill-down shows;
- per row, where the caller's :class:`~rubric_engine.report.per_row.Storage` keeps it (in
  memory, or a temporary database for a report streamed from a store), what a section lists
  or cannot add up out of order: each latency (for the exact p95), each cost and agent
  duration that exists (float sums are added in input order, as a list would be, so the bytes
  match), and the rowIds the report prints (low rows for the issue clusters, red-flagged rows:
  :class:`~rubric_engine.report.clusters.ListedRows`, read back when the report is written);
  in memory, judge errors and rule summaries.

Rows arrive out of order in a fresh run (concurrency); every order-dependent figure is keyed by
the row's ``seq`` (its input position), never by arrival. Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from rubric_engine.report.clusters import ListedRows, issue_clusters
from rubric_engine.report.model import (
    AgentSummary,
    IntentSummary,
    JudgeErrorEntry,
    LowRow,
    RedFlagCount,
    Report,
    RequirementSummary,
    TaskSection,
    Totals,
    UsageSummary,
)
from rubric_engine.report.outcome import (
    EXACT,
    OUTCOMES,
    ROUNDED,
    STATUS_FIELD,
    Figures,
    checked_pass_score,
    row_outcome,
)
from rubric_engine.report.panel_section import PanelCounts
from rubric_engine.report.per_row import InMemory, Storage
from rubric_engine.report.router import EXPECTED_FIELD, route_pair, router_from_pairs
from rubric_engine.report.row_ids import RowIds
from rubric_engine.report.rows import RowFacts, RowUsage, Usage
from rubric_engine.report.rules_section import rules_section_of
from rubric_engine.report.slices import SliceAccumulator, status_counts
from rubric_engine.report.stability_section import StabilityCounts
from rubric_engine.results.model import (
    RequirementStatus,
    RowResult,
    RowStatus,
    RuleSummary,
)
from rubric_engine.rubric.model import EvalRubric

#: rows in the report's ``lowestRows``
LOWEST_ROWS = 10
#: the HTML drill-down holds at most this many rows: a 10,000-row task would otherwise make a
#: 100 MB page; every row is in rows.jsonl and report.json's aggregates cover all of them
DRILLDOWN_ROWS = 500
_DRILL_RANK = {"RED_FLAG": 0, "JUDGE_ERROR": 1, "FAIL": 2}
#: set in a CHECKED row's listing key: checked rows are listed after every scored row
_CHECKED = 1 << 62
#: distinct referenceBasis shapes (IDs and statuses in order) counted per shape, about 0.5 KB
#: each at 20 entries; rows of other shapes are counted entry by entry
BASIS_SHAPES = 1024
_REQUIREMENT_ID = attrgetter("requirement_id")
_STATUS = attrgetter("status")


class UsageTotals:
    """The report's ``usage`` section, a row at a time: the one place judge usage is added up.

    calls and tokens are integer sums (the prompt-cache counts, part of the prompt tokens, appear
    only when a row has any); ``costUsd`` the sum of the rows that have a cost (``None``
    when none has), to 6 places; latency mean and p95 (the value at ``int(0.95 · n)`` of the
    sorted latencies) to 0.1 ms.
    """

    def __init__(self, storage: Storage) -> None:
        self.calls = self.prompt_tokens = self.completion_tokens = 0
        self.cache_read_tokens = self.cache_creation_tokens = 0
        self.costs = storage.floats("costs")
        self.latencies = storage.floats("latencies")

    def add(self, seq: int, usage: Usage) -> None:
        self.calls += usage.calls
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_creation_tokens += usage.cache_creation_tokens
        if usage.cost_usd is not None:
            self.costs.add(seq, usage.cost_usd)
        self.latencies.add(seq, usage.latency_ms)

    def summary(self) -> UsageSummary:
        n = len(self.latencies)
        cached = bool(self.cache_read_tokens or self.cache_creation_tokens)  # else keys stay out
        return UsageSummary(
            calls=self.calls,
            prompt_tokens=self.prompt_tokens,
            cache_read_tokens=self.cache_read_tokens if cached else None,
            cache_creation_tokens=self.cache_creation_tokens if cached else None,
            completion_tokens=self.completion_tokens,
            cost_usd=round(sum(self.costs.in_order(), 0.0), 6) if len(self.costs) else None,
            latency_ms_mean=round(sum(self.latencies.in_order()) / n, 1) if n else None,
            latency_ms_p95=round(self.latencies.at_rank(min(n - 1, int(0.95 * n))), 1)
            if n
            else None,
        )


class _Shape:
    """Rows whose referenceBasis has one shape: ``key`` (requirement IDs, statuses), how
    many, the smallest listing key among them, and the interned index of its VIOLATED IDs
    (``group``, -1 until a low row needs it)."""

    __slots__ = ("first", "group", "key", "rows")

    def __init__(
        self, key: tuple[tuple[str, ...], tuple[RequirementStatus, ...]], first: int
    ) -> None:
        self.key, self.first, self.rows, self.group = key, first, 0, -1

    def violated(self) -> frozenset[str]:
        ids, statuses = self.key
        return frozenset(
            rid for rid, s in zip(ids, statuses, strict=True) if s is RequirementStatus.VIOLATED
        )


class WorstRows:
    """The drill-down's rows: every row when at most ``limit``, else the worst ``limit`` (red
    flag, JUDGE_ERROR, failing, lowest score, then input order), listed in input order. A heap
    of ``limit`` rows; rows may be added in any order."""

    def __init__(self, pass_score: int, limit: int = DRILLDOWN_ROWS) -> None:
        self.pass_score, self.limit = pass_score, limit
        self._heap: list[tuple[tuple[int, int, int], RowResult]] = []  # the worst kept is largest

    def add(self, seq: int, row: RowResult, outcome: str | None = None) -> None:
        """Offer a row (``outcome``: its :func:`row_outcome` at this pass score, when known)."""
        rank = _DRILL_RANK.get(outcome or row_outcome(row, self.pass_score), 3)
        key = (-rank, -(row.final_score if row.final_score is not None else 0), -seq)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, (key, row))
        elif key > self._heap[0][0]:
            heapq.heapreplace(self._heap, (key, row))

    def rows(self) -> list[RowResult]:
        return [row for _, row in sorted(self._heap, key=lambda kr: -kr[0][2])]


class ReportAccumulator:
    """A task's report, fed one stored row at a time (:meth:`add`), built by :meth:`finish`.

    Args:
        rubric: the task's own snapshot, never the current file.
        pass_score: the lowest passing final score; default
            :func:`~rubric_engine.report.outcome.default_pass_score`.
        by: slice names (``intent``, ``category`` or a metadata field); checked by
            :meth:`finish`, once every row's metadata has been seen.
        exact: unrounded means and ratios, for a gate or a diff.
        storage: where what grows with the rows is kept (in memory by default; a stream from
            a store passes :class:`~rubric_engine.report.scratch_tables.ScratchTables`).

    Raises:
        ConfigurationError: ``pass_score`` outside the scale.
    """

    def __init__(
        self,
        rubric: EvalRubric,
        *,
        pass_score: int | None = None,
        by: tuple[str, ...] = (),
        exact: bool = False,
        storage: Storage | None = None,
    ) -> None:
        threshold = checked_pass_score(rubric, pass_score)
        self.rubric, self.pass_score = rubric, threshold
        self._fig = EXACT if exact else ROUNDED
        self.rows = 0
        self._status: Counter[RowStatus] = Counter()
        self._finals: Counter[int] = Counter()
        self._judge_total = self._judge_count = self._capped = self._flagged = 0
        self._outcomes: Counter[str] = Counter()
        self._error_kinds: Counter[str] = Counter()
        self._errors: list[tuple[int, JudgeErrorEntry]] = []
        self._warnings: Counter[str] = Counter()
        self._flag_first: dict[str, tuple[int, int]] = {}  # (listing key, position in row)
        self._intents = {i.key: [0, 0, 0, 0, 0, 0] for i in rubric.intents}
        self._req_counts: dict[str, Counter[str]] = {}
        self._shapes: dict[tuple[tuple[str, ...], tuple[RequirementStatus, ...]], _Shape] = {}
        self._req_first: dict[str, tuple[int, int]] = {}
        self._case_texts: dict[str, tuple[int, str]] = {}
        self._slices = [SliceAccumulator(n, rubric, threshold, self._fig) for n in by]
        self._metadata_keys: set[str] = set()
        storage = InMemory() if storage is None else storage
        self._listed = ListedRows(storage.listed())
        self._lowest: list[tuple[tuple[int, int], RowResult]] = []  # max-heap by (score, seq)
        self._tool_calls = 0
        self._durations = storage.floats("durations")
        self.usage = UsageTotals(storage)
        self._rules: list[tuple[int, RuleSummary]] = []
        self._routes: Counter[tuple[str, str]] = Counter()
        self._stability = StabilityCounts()
        self._panel = PanelCounts()
        self.worst = WorstRows(threshold)
        self._released = False

    def add(self, seq: int, result: RowResult, usage: Usage, facts: RowFacts) -> None:
        """Count one stored row; ``seq`` is its input position (unique in the task);
        ``usage``: its :class:`RowUsage`, or anything with those fields (a stored row)."""
        if self._released:
            raise RuntimeError("the accumulator was released after its report was built")
        self.rows += 1
        status = result.status
        self._status[status] += 1
        outcome = row_outcome(result, self.pass_score)
        self._outcomes[outcome] += 1
        if result.warnings:  # Counter.update costs a few calls even for nothing
            self._warnings.update(str(w.code) for w in result.warnings)
        if status is RowStatus.SCORED or status is RowStatus.CHECKED:
            shape = self._judged(seq, result, checked=status is RowStatus.CHECKED)
            if status is RowStatus.SCORED:
                self._scored(seq, result, outcome, shape)
        elif status is RowStatus.JUDGE_ERROR:
            kind = str(result.error.kind) if result.error else None
            if result.error:
                self._error_kinds[str(result.error.kind)] += 1
            message = result.error.message if result.error else None
            entry = JudgeErrorEntry(row_id=result.row_id, kind=kind, message=message)
            self._errors.append((seq, entry))
        for rid, text in facts.case_texts.items():
            if rid not in self._case_texts or self._case_texts[rid][0] < seq:
                self._case_texts[rid] = (seq, text)
        for group in self._slices:
            group.add(seq, result, facts.metadata)
        if self._slices:
            self._metadata_keys.update(facts.metadata)
        self._tool_calls += facts.tool_calls
        if facts.duration_ms is not None:
            self._durations.add(seq, facts.duration_ms)
        self.usage.add(seq, usage)
        if result.rules is not None:
            self._rules.append((seq, result.rules))
        if EXPECTED_FIELD in facts.metadata:  # a router-labelled row
            pair = route_pair(facts.metadata)
            if pair is not None:
                self._routes[pair] += 1
        if result.samples:
            self._stability.add(seq, result)
            self._panel.add(result)
        self.worst.add(seq, result, outcome)

    def _scored(self, seq: int, r: RowResult, outcome: str, shape: _Shape | None) -> None:
        if r.final_score is not None:
            self._finals[r.final_score] += 1
        if r.judge_score is not None:
            self._judge_total += r.judge_score
            self._judge_count += 1
        self._capped += bool(r.capped_by)
        self._flagged += bool(r.red_flag_types)
        counts = self._intents.get(r.intent_key) if r.intent_key is not None else None
        if counts is not None:
            counts[0] += 1
            if r.final_score is not None:
                counts[1] += r.final_score
                counts[2] += 1
            counts[3] += outcome == "PASS"
            counts[4] += len(r.red_flag_types)
            counts[5] += bool(r.red_flag_types)
        if outcome != "PASS":
            if shape is None:
                self._listed.add_low(seq, r)
            else:
                if shape.group < 0:  # the shape's violated IDs, interned at its first low row
                    shape.group = self._listed.group_of(shape.violated())
                self._listed.add_low(seq, r, shape.group)
        key = (-(r.final_score or 0), -seq)
        if len(self._lowest) < LOWEST_ROWS:
            heapq.heappush(self._lowest, (key, r))
        elif key > self._lowest[0][0]:
            heapq.heapreplace(self._lowest, (key, r))

    def _judged(self, seq: int, r: RowResult, *, checked: bool) -> _Shape | None:
        """SCORED and CHECKED rows: red flags and requirement counts, listed scored rows first
        (in input order), then checked ones, as the report has always listed them.

        The referenceBasis is counted by its shape (its IDs and statuses in order, one
        counter per distinct shape, added up per requirement by :meth:`_requirement_counts`);
        past :data:`BASIS_SHAPES` shapes (case-level IDs differ from row to row) a row's
        entries are counted one by one. Returns the row's shape, ``None`` for the latter.
        """
        listed = seq | _CHECKED if checked else seq
        if r.red_flag_types:  # a flagged SCORED row is low: listed by _scored already
            if checked:
                self._listed.add_flagged(seq, r)
            for position, flag in enumerate(r.red_flag_types):
                _first_seen(self._flag_first, flag, (listed, position))
        basis = r.reference_basis
        key = (tuple(map(_REQUIREMENT_ID, basis)), tuple(map(_STATUS, basis)))
        shape = self._shapes.get(key)
        if shape is None:
            if len(self._shapes) >= BASIS_SHAPES:
                self._count_entries(key, listed, 1)
                return None
            shape = self._shapes[key] = _Shape(key, listed)
        shape.rows += 1
        if listed < shape.first:
            shape.first = listed
        return shape

    def _count_entries(
        self, key: tuple[tuple[str, ...], tuple[RequirementStatus, ...]], first: int, rows: int
    ) -> None:
        """Count ``rows`` rows of one basis shape entry by entry (``first``: the smallest
        listing key among them)."""
        req_counts, req_first = self._req_counts, self._req_first
        for position, (rid, status) in enumerate(zip(*key, strict=True)):
            counts = req_counts.get(rid)
            if counts is None:  # a new Counter only for a requirement not seen before
                counts = req_counts[rid] = Counter()
            counts[STATUS_FIELD[status]] += rows
            seen = req_first.get(rid)  # _first_seen, inline: once per basis entry
            if seen is None or (first, position) < seen:
                req_first[rid] = (first, position)

    def _requirement_counts(self) -> None:
        """Fold the counted shapes into the per-requirement counts (once, at :meth:`finish`;
        the shapes are then empty)."""
        shapes, self._shapes = self._shapes, {}
        for shape in shapes.values():
            self._count_entries(shape.key, shape.first, shape.rows)

    def finish(self, task: TaskSection) -> Report:
        """The report of the rows added so far (see
        :func:`~rubric_engine.report.aggregate.build_report` for its sections).

        Raises:
            ConfigurationError: a ``by`` name that is neither ``intent``, ``category`` nor a
                metadata field of any row (the valid names are listed).
        """
        if self._released:
            raise RuntimeError("the accumulator was released after its report was built")
        fig, scale = self._fig, self.rubric.score_scale
        scored = self._status[RowStatus.SCORED]
        checked = self._status[RowStatus.CHECKED]
        finals_total = sum(s * n for s, n in self._finals.items())
        totals = Totals(
            rows=self.rows,
            scored=scored,
            judge_errors=self._status[RowStatus.JUDGE_ERROR],
            mean_score=fig.mean_of(finals_total, sum(self._finals.values())),
            mean_judge_score=fig.mean_of(self._judge_total, self._judge_count),
            capped_rows=self._capped,
            rows_with_red_flags=self._flagged,
            pass_score=self.pass_score,
            passed_rows=self._outcomes["PASS"],
            pass_rate=fig.ratio(self._outcomes["PASS"], scored + checked),
            score_distribution={str(s): self._finals[s] for s in range(scale.min, scale.max + 1)},
            outcome_distribution={o: self._outcomes[o] for o in OUTCOMES},
            judge_errors_by_kind=dict(sorted(self._error_kinds.items())),
            checked=checked if checked else None,
        )
        slices = (
            tuple(s.finish(self._metadata_keys) for s in self._slices) if self._slices else None
        )
        return Report(
            task=task,
            totals=totals,
            red_flags=self._red_flags(),
            intents=self._intent_summaries(),
            requirements=self._requirements(),
            slices=slices,
            issue_clusters=issue_clusters(self.rubric, self._listed, fig),
            lowest_rows=self._lowest_rows(),
            judge_errors=tuple(e for _, e in sorted(self._errors, key=lambda se: se[0])),
            warnings=dict(sorted(self._warnings.items())),
            agent=self._agent(),
            usage=self.usage.summary(),
            rules=rules_section_of([s for _, s in sorted(self._rules, key=lambda ss: ss[0])]),
            router=router_from_pairs(self._routes, fig),
            stability=self._stability.section(),
            panel=self._panel.section(task.judges or ()),
        )

    def release(self) -> None:
        """Drop the judge errors and rule summaries once :meth:`finish` has built the report,
        so the report files are written without them (the listed rowIds are read from the
        storage as they are written); the accumulator can neither add nor finish afterwards.
        """
        self._errors, self._rules = [], []
        self._released = True

    def _red_flags(self) -> tuple[RedFlagCount, ...]:
        """Every declared type (zero counts too) plus orphans as first seen; most frequent
        first."""
        texts = {f.type: f.text for f in self.rubric.red_flags}
        order = {t: i for i, t in enumerate(self.rubric.red_flag_types)}
        declared = list(self.rubric.red_flag_types)
        orphans = sorted(
            (t for t in self._flag_first if t not in order), key=self._flag_first.__getitem__
        )
        flagged = self._listed.flagged()
        none = RowIds.of(())
        hits = {t: flagged.get(t, none) for t in [*declared, *orphans]}
        return tuple(
            RedFlagCount(type=t, text=texts.get(t), count=len(ids), row_ids=ids)
            for t, ids in sorted(hits.items(), key=lambda kv: (-len(kv[1]), order.get(kv[0], 1e9)))
        )

    def _intent_summaries(self) -> tuple[IntentSummary, ...]:
        fig = self._fig
        return tuple(
            IntentSummary(
                intent_key=intent.key,
                name=intent.name,
                rows=(c := self._intents[intent.key])[0],
                mean_score=fig.mean_of(c[1], c[2]),
                pass_rate=fig.ratio(c[3], c[0]),
                red_flag_count=c[4],
                rows_with_red_flags=c[5],
            )
            for intent in self.rubric.intents
        )

    def _requirements(self) -> tuple[RequirementSummary, ...]:
        """Pack requirements in pack order (zeros included), then case-level ones as first seen
        (their texts from the last row that carries them)."""
        self._requirement_counts()
        rubric, fig = self.rubric, self._fig
        owners: list[tuple[str | None, Any]] = [(None, req) for req in rubric.common_requirements]
        for intent in rubric.intents:
            owners.extend((intent.key, req) for req in intent.requirements)
        rows: list[RequirementSummary] = []
        known = set()
        for intent_key, req in owners:
            known.add(req.id)
            counter = self._req_counts.get(req.id, Counter())
            rows.append(
                _requirement(req.id, intent_key, req.category, req.critical, req.text, counter, fig)
            )
        others = sorted(
            (rid for rid in self._req_counts if rid not in known), key=self._req_first.__getitem__
        )
        for rid in others:
            text = self._case_texts[rid][1] if rid in self._case_texts else None
            rows.append(_requirement(rid, None, "CASE", False, text, self._req_counts[rid], fig))
        return tuple(rows)

    def _lowest_rows(self) -> tuple[LowRow, ...]:
        ranked = sorted(self._lowest, key=lambda kr: kr[0], reverse=True)
        return tuple(_low_row(r) for _, r in ranked)

    def _agent(self) -> AgentSummary:
        n, durations = self.rows, self._durations
        return AgentSummary(
            tool_calls_total=self._tool_calls,
            tool_calls_mean=round(self._tool_calls / n, 4) if n else None,
            rows_with_duration=len(durations),
            duration_ms_mean=round(sum(durations.in_order()) / len(durations), 1)
            if len(durations)
            else None,
        )


def _first_seen(firsts: dict[str, tuple[int, int]], key: str, at: tuple[int, int]) -> None:
    if key not in firsts or at < firsts[key]:
        firsts[key] = at


def accumulate(
    accumulator: ReportAccumulator, rows: Iterable[tuple[RowResult, RowUsage, RowFacts]]
) -> ReportAccumulator:
    """Add rows given in input order (their seq is their position)."""
    for seq, (result, usage, facts) in enumerate(rows):
        accumulator.add(seq, result, usage, facts)
    return accumulator


def _requirement(
    rid: str,
    intent_key: str | None,
    category: str,
    critical: bool,
    text: str | None,
    counter: Counter[str],
    fig: Figures,
) -> RequirementSummary:
    return RequirementSummary(
        id=rid,
        intent_key=intent_key,
        category=category,
        critical=critical,
        **status_counts(counter, fig),
        text=text,
    )


def _low_row(r: RowResult) -> LowRow:
    return LowRow(
        row_id=r.row_id,
        final_score=r.final_score,
        judge_score=r.judge_score,
        intent_key=r.intent_key,
        violated_requirement_ids=tuple(
            e.requirement_id for e in r.reference_basis if e.status is RequirementStatus.VIOLATED
        ),
        partial_requirement_ids=tuple(
            e.requirement_id for e in r.reference_basis if e.status is RequirementStatus.PARTIAL
        ),
        red_flag_types=tuple(r.red_flag_types),
        capped_by=tuple(r.capped_by),
        score_explanation=r.score_explanation,
        evidence_turns={
            e.requirement_id: e.evidence_turns for e in r.reference_basis if e.evidence_turns
        }
        or None,
    )
