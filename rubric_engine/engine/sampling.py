"""Asking the judge K times for a row (``score --samples K``, docs/stability.md), or each
judge of a panel (``--judge MODEL`` more than once, docs/panels.md) K times.

A row's samples are asked one after another with the same prompt; each is its own call (its
cassette key carries the sample number from 2 on), goes through the one row → result path
and is stored the moment it is finished, so ``--resume`` never asks it again. The row's result
is the samples' aggregate (:func:`rubric_engine.results.samples.aggregate_samples`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from rubric_engine.judge.protocol import Judge, JudgeOutcome, JudgeRequest
from rubric_engine.results.model import RowResult, RowStatus
from rubric_engine.results.samples import Sample, aggregate_samples
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.rubric.model import HardRequirement
from rubric_engine.store.task_store import StoredRow, StoredSample

__all__ = ["Sampling", "aggregate_row", "ask_samples", "sampled_row"]


#: ``--samples-when`` choices: every row K times, or only where it matters
WHEN = ("always", "unsure")


@dataclass
class Sampling:
    """How a run samples its rows, and (adaptive sampling) what it decided.

    Attributes:
        samples: K, the most asks of a row (1: a single ask, nothing on this page applies).
        model: the judge's model (stored with each sample).
        kept: ``--resume``: rowId → its samples stored before (a scored one is not asked
            again).
        when: ``always`` asks every judged row K times; ``unsure`` asks a second time only
            when the first answer is unsure (:meth:`unsure`), and the rest only when the
            first two disagree (docs/stability.md "Adaptive sampling").
        pass_score: the pack's default pass score (``unsure``'s pass line).
        panel: a panel's judges after the first, each with its model (docs/panels.md): each
            is asked a row's samples after the judge before it; empty for one judge.
    """

    samples: int = 1
    model: str = ""
    kept: Mapping[str, Sequence[StoredSample]] = field(default_factory=dict)
    when: str = "always"
    pass_score: int = 0
    panel: Sequence[tuple[Judge, str]] = ()
    #: rows whose first sample scored; of them, unsure by the pass line / by a red flag
    first: int = 0
    near_pass: int = 0
    red_flag: int = 0
    #: rows whose first two samples disagreed
    split: int = 0
    #: samples after each row's first
    extra: int = 0

    @property
    def many(self) -> bool:
        """Whether a judged row is asked more than once (more samples, or a panel)."""
        return self.samples > 1 or bool(self.panel)

    def near_pass_line(self, first: RowResult) -> bool:
        """Whether a final score is within one point below the pass line or on it."""
        score = first.final_score
        return score is not None and self.pass_score - 1 <= score <= self.pass_score

    def unsure(self, first: RowResult) -> bool:
        """A first answer worth asking again: its final score within one point below the
        pass line or on it, or a red flag."""
        near = self.near_pass_line(first)
        self.near_pass += near
        self.red_flag += bool(first.red_flag_types) and not near
        return near or bool(first.red_flag_types)

    def wanted(self, asked: Sequence[StoredSample]) -> bool:
        """Whether a row with ``asked`` samples (all scored) is asked another: what
        :meth:`more` decides, without counting (batch mode decides again on each pass)."""
        if len(asked) >= self.samples:
            return False
        if self.when == "always" or len(asked) > 2:
            return True
        if len(asked) == 1:
            return self.near_pass_line(asked[0].result) or bool(asked[0].result.red_flag_types)
        return _shape(asked[0].result) != _shape(asked[1].result)

    def more(self, asked: Sequence[StoredSample]) -> bool:
        """Whether a row with ``asked`` samples (all scored) is asked another."""
        if len(asked) >= self.samples:
            return False
        if self.when == "always":
            return True
        if len(asked) == 1:
            self.first += 1
            return self.unsure(asked[0].result)
        if len(asked) == 2:
            split = _shape(asked[0].result) != _shape(asked[1].result)
            self.split += split
            return split
        return True

    def tally(self, samples: Sequence[StoredSample]) -> None:
        """Count a row's decisions as :func:`ask_samples` counts them while it asks, once the
        row is finished (batch mode, where a row is walked again on every pass)."""
        for n in range(1, len(samples) + 1):
            if not reusable(samples[n - 1]) or not self.more(samples[:n]):
                return

    def note(self) -> str | None:
        """What adaptive sampling cost, for the end of the run (``None`` unless ``unsure``)."""
        if self.when != "unsure" or self.samples < 2:
            return None
        unsure = self.near_pass + self.red_flag
        return (
            f"adaptive sampling (K={self.samples}): {unsure} of {self.first} row(s) unsure after "
            f"one sample ({self.near_pass} near the pass line, {self.red_flag} with a red flag); "
            f"{self.split} split after two. Extra calls: expected {unsure} to "
            f"{unsure * (self.samples - 1)}, made {self.extra}"
        )


def _shape(result: RowResult) -> tuple[object, ...]:
    """What two samples must share to agree: intent, red flags, statuses, final score."""
    return (
        result.intent_key,
        result.red_flag_types,
        tuple((e.requirement_id, e.status) for e in result.reference_basis),
        result.final_score,
    )


def requirements_of(
    compiled: CompiledRubric, case: Sequence[HardRequirement]
) -> dict[str, HardRequirement]:
    """Every requirement a row's results may name: the pack's and the row's case-level ones."""
    return {**compiled.rubric.requirements_by_id, **{r.id: r for r in case}}


def aggregate_row(
    compiled: CompiledRubric, case: Sequence[HardRequirement], samples: Sequence[StoredSample]
) -> RowResult:
    """The row's result from its stored samples (in judge, sample order)."""
    return aggregate_samples(
        [Sample(s.judge, s.sample, s.result) for s in samples],
        requirements_of(compiled, case),
        compiled.flag_order,
    )


def sampled_row(
    seq: int,
    dialogue: dict[str, object],
    result: RowResult,
    samples: Sequence[StoredSample],
) -> StoredRow:
    """The row as the store keeps it: the aggregate, usage summed over every sample's calls,
    no raw replies of its own (they are each sample's), sample 1's cassette key."""
    costs = [s.cost_usd for s in samples if s.cost_usd is not None]
    return StoredRow(
        seq=seq,
        result=result,
        dialogue=dialogue,
        raw_attempts=[],
        calls=sum(s.calls for s in samples),
        prompt_tokens=sum(s.prompt_tokens for s in samples),
        completion_tokens=sum(s.completion_tokens for s in samples),
        cost_usd=sum(costs) if costs else None,
        latency_ms=round(sum(s.latency_ms for s in samples), 1),
        cassette_key=samples[0].cassette_key if samples else None,
        cache_read_tokens=sum(s.cache_read_tokens for s in samples),
        cache_creation_tokens=sum(s.cache_creation_tokens for s in samples),
        samples=tuple(samples),
    )


def as_sample(row: StoredRow, sample: int, model: str, judge: int = 1) -> StoredSample:
    """A single ask's stored row as sample ``sample`` of judge ``judge``."""
    return StoredSample(
        judge=judge,
        model=model,
        sample=sample,
        result=row.result,
        raw_attempts=row.raw_attempts,
        calls=row.calls,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        cost_usd=row.cost_usd,
        latency_ms=row.latency_ms,
        cassette_key=row.cassette_key,
        cache_read_tokens=row.cache_read_tokens,
        cache_creation_tokens=row.cache_creation_tokens,
    )


def reusable(sample: StoredSample) -> bool:
    """A stored sample ``--resume`` takes as it is: one that scored."""
    return sample.result.status is RowStatus.SCORED


async def ask_samples(
    judge: Judge,
    request: JudgeRequest,
    sampling: Sampling,
    one: Callable[[JudgeOutcome], StoredRow],
    on_sample: Callable[[StoredSample], None],
    on_outcome: Callable[[JudgeOutcome], None],
) -> list[StoredSample]:
    """Ask the samples of one row not kept from before: judge by judge (``judge``, then
    ``sampling.panel``), each judge's in order, as many as :meth:`Sampling.more` wants; stop
    at the first that does not score (rule 1: the row is then that sample's error)."""
    out: list[StoredSample] = []
    judges = [(judge, sampling.model), *sampling.panel]
    for number, (asked, model) in enumerate(judges, start=1):
        own = await _ask_judge(asked, model, number, request, sampling, one, on_sample, on_outcome)
        out += own
        if not reusable(own[-1]):
            break
    return out


async def _ask_judge(
    judge: Judge,
    model: str,
    number: int,
    request: JudgeRequest,
    sampling: Sampling,
    one: Callable[[JudgeOutcome], StoredRow],
    on_sample: Callable[[StoredSample], None],
    on_outcome: Callable[[JudgeOutcome], None],
) -> list[StoredSample]:
    """The samples of judge ``number`` of a row (see :func:`ask_samples`)."""
    kept = {s.sample: s for s in sampling.kept.get(request.row_id, ()) if s.judge == number}
    out: list[StoredSample] = []
    while True:
        count = len(out) + 1
        sample = kept.get(count)
        if sample is None or not reusable(sample):
            outcome = await judge.judge(replace(request, judge=number, sample=count))
            on_outcome(outcome)
            sample = as_sample(one(outcome), count, model, number)
            on_sample(sample)
            sampling.extra += count > 1
        out.append(sample)
        if not reusable(sample) or not sampling.more(out):
            return out
