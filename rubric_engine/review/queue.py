"""A review queue's rules: its settings, the second-review sample, the order rows are offered
in, and each row's review state (docs/review.md "Queues"). Pure: no I/O, no clock.

A queue is a task setting, stored with the task (:mod:`rubric_engine.review.queue_store`) and
read by every server. Its rows are drawn and ordered once, when it is made:

- ``random``: every row, shuffled by a seeded hash within each intent and drawn from the
  intents in turn (stratified), so a short session covers every intent;
- ``disagreement``: rows where another judge run of the same rubric over the same rows
  differs from this one (rows a reviewer overrides join at the front as they happen);
- ``red-flag``: rows the judge gave a red flag;
- ``low-score``: scored rows, lowest final score first;
- ``rare``: rows with an unmet requirement, the least often unmet in the task first;
- ``unstable-first``: a task scored with ``--samples K`` (docs/stability.md): the rows whose
  samples disagreed first, the most disagreements first (flipped requirements plus a split
  intent, red flags or score; then the lowest agreement of a requirement), then every other
  row in the ``random`` order.

The second review takes exactly ``round(share × rows)`` rows (half up): the rows whose seeded
hash is smallest, so the sample is the same on every server and recorded with the queue.
Experts correct the criteria and a second expert re-checks a share of the set before it is
locked (20% by default, as in docs/review.md).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from rubric_engine.errors import ConfigurationError
from rubric_engine.labels.model import UNMET
from rubric_engine.results.model import RowResult, RowStatus
from rubric_engine.review.answers import Answer, differences

Strategy = Literal["random", "disagreement", "red-flag", "low-score", "rare", "unstable-first"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
#: a second reviewer re-checks this share of a queue's rows unless the queue says otherwise
DEFAULT_SECOND_REVIEW_SHARE = 0.2
#: how long an opened row stays reserved for its reviewer, seconds
DEFAULT_CLAIM_TTL_S = 600
#: a queue's row states: ``open`` (nobody answered), ``partial`` (answered, needs more
#: reviewers), ``done`` (enough reviewers, who agree), ``disputed`` (enough reviewers, who
#: differ: waits for a lead), ``settled`` (a lead decided; leaves every queue until reopened)
RowStateName = Literal["open", "partial", "done", "disputed", "settled"]
#: states a reviewer may be offered
WAITING: tuple[RowStateName, ...] = ("partial", "open")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")

__all__ = [
    "DEFAULT_CLAIM_TTL_S",
    "DEFAULT_SECOND_REVIEW_SHARE",
    "STRATEGIES",
    "WAITING",
    "QueueSettings",
    "RowState",
    "RowSummary",
    "check_strategy",
    "ordered",
    "row_state",
    "second_review_sample",
    "summary_of_result",
]


def check_strategy(name: str) -> Strategy:
    """Raises: ConfigurationError: not one of :data:`STRATEGIES` (they are listed)."""
    if name not in STRATEGIES:
        raise ConfigurationError(
            f"queue strategy {name!r} is not valid; use one of {', '.join(STRATEGIES)}"
        )
    return name  # type: ignore[return-value]


@dataclass(frozen=True)
class QueueSettings:
    """How a queue is drawn and worked.

    Attributes:
        name: the queue's name within its task (letters, digits, ``.``, ``_``, ``-``).
        reviewers_per_row: N ≥ 1 reviewers every row needs.
        second_review: 0–1, the share of rows that get a second reviewer (a row that already
            needs two or more gets no third from it).
        seed: makes the sample and the ``random`` order repeatable.
        blind: members without their own setting review without seeing the judge's verdict.
        claim_ttl_s: how long an opened row stays reserved for its reviewer (1 s – 1 day).
        members: reviewer → blind, for the people assigned to the queue; empty = every active
            reviewer account may work it (each with ``blind``).
    """

    name: str = "main"
    strategy: Strategy = "random"
    reviewers_per_row: int = 1
    second_review: float = DEFAULT_SECOND_REVIEW_SHARE
    seed: int = 0
    blind: bool = False
    claim_ttl_s: int = DEFAULT_CLAIM_TTL_S
    members: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if not _NAME.match(self.name):
            problems.append(
                f"queue name {self.name!r}: use 1-40 letters, digits, '.', '_' or '-', e.g. main"
            )
        if self.reviewers_per_row < 1:
            problems.append("reviewers per row must be at least 1")
        if not 0 <= self.second_review <= 1:
            problems.append("the second-review share must be from 0 to 1, e.g. 0.2")
        if not 1 <= self.claim_ttl_s <= 86400:
            problems.append("the claim TTL must be 1 to 86400 seconds")
        check_strategy(self.strategy)
        if problems:
            raise ConfigurationError("; ".join(problems))

    def is_member(self, reviewer: str) -> bool:
        return not self.members or reviewer in self.members

    def blind_for(self, reviewer: str) -> bool:
        """Whether ``reviewer`` works this queue blind (their assignment, else the default)."""
        return self.members.get(reviewer, self.blind)

    def needed(self, second: bool, overridden: bool) -> int:
        """Reviewers a row needs: N, and at least two for a row in the second-review sample
        or one whose reviewer changed the judge's verdict (an override is re-checked)."""
        return max(self.reviewers_per_row, 2) if second or overridden else self.reviewers_per_row

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "strategy": self.strategy,
            "reviewersPerRow": self.reviewers_per_row,
            "secondReview": self.second_review,
            "seed": self.seed,
            "blind": self.blind,
            "claimTtlS": self.claim_ttl_s,
            "members": dict(sorted(self.members.items())),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueueSettings:
        return cls(
            name=data["name"],
            strategy=check_strategy(data["strategy"]),
            reviewers_per_row=int(data["reviewersPerRow"]),
            second_review=float(data["secondReview"]),
            seed=int(data["seed"]),
            blind=bool(data["blind"]),
            claim_ttl_s=int(data["claimTtlS"]),
            members={str(k): bool(v) for k, v in data.get("members", {}).items()},
        )


def _draw(seed: int, text: str) -> bytes:
    """A repeatable sort key for ``text`` (no random state)."""
    return hashlib.sha256(f"{seed}:{text}".encode()).digest()


def sample_size(share: float, rows: int) -> int:
    """``round(share × rows)``, halves rounded up (0.5 of 5 rows is 3)."""
    return min(rows, math.floor(share * rows + 0.5 + 1e-9))


def second_review_sample(row_ids: Sequence[str], share: float, seed: int) -> frozenset[str]:
    """Exactly :func:`sample_size` rows: those whose seeded hash is smallest."""
    ranked = sorted(row_ids, key=lambda r: _draw(seed, "second:" + r))
    return frozenset(ranked[: sample_size(share, len(row_ids))])


@dataclass(frozen=True)
class RowSummary:
    """What ordering a queue needs of one judged row."""

    row_id: str
    intent_key: str | None
    final_score: int | None
    red_flags: tuple[str, ...]
    unmet: tuple[str, ...]
    #: the row was scored with samples (it carries ``stability``)
    sampled: bool = False
    #: how much its samples disagreed: flipped requirements plus each other split (intent,
    #: red flags, score); 0 for a stable or unsampled row
    disagreements: int = 0
    #: the lowest share of samples that agreed on a requirement's status (1.0: all agreed)
    lowest_agreement: float = 1.0
    #: how many samples the row has (1 for a row ``--samples-when unsure`` found clear)
    sample_count: int = 0


def summary_of_result(result: RowResult) -> RowSummary:
    unmet = tuple(b.requirement_id for b in result.reference_basis if str(b.status) in UNMET)
    score = None if result.status is RowStatus.JUDGE_ERROR else result.final_score
    summary = RowSummary(result.row_id, result.intent_key, score, result.red_flag_types, unmet)
    stability = result.stability
    if stability is None:
        return summary
    others = [r for r in stability.reasons if r != "requirements"]
    return replace(
        summary,
        sampled=True,
        disagreements=0 if stability.stable else len(stability.flips) + len(others),
        lowest_agreement=min(stability.agreement.values(), default=1.0),
        sample_count=len(result.samples or ()),
    )


def ordered(
    rows: Sequence[RowSummary],
    strategy: Strategy,
    seed: int,
    other_judges: Mapping[str, Iterable[RowSummary]] | None = None,
) -> list[str]:
    """The rowIds of a new queue in the order they are offered (see the module docstring);
    a strategy may leave rows out (``red-flag`` keeps only rows with a red flag).

    Args:
        other_judges: rowId → other judge runs' summaries of the same row (``disagreement``).
    """
    if strategy == "disagreement":
        others = other_judges or {}

        def differs(r: RowSummary) -> bool:
            return any(
                (o.intent_key, o.final_score, set(o.red_flags), set(o.unmet))
                != (r.intent_key, r.final_score, set(r.red_flags), set(r.unmet))
                for o in others.get(r.row_id, ())
            )

        return [r.row_id for r in rows if differs(r)]
    if strategy == "red-flag":
        return [r.row_id for r in rows if r.red_flags]
    if strategy == "low-score":
        scored = [r for r in rows if r.final_score is not None]
        return [r.row_id for r in sorted(scored, key=lambda r: r.final_score or 0)]
    if strategy == "rare":
        counts = Counter(rid for r in rows for rid in r.unmet)
        rare = [r for r in rows if r.unmet]
        return [r.row_id for r in sorted(rare, key=lambda r: min(counts[i] for i in r.unmet))]
    if strategy == "unstable-first":
        unstable = [r for r in rows if r.disagreements]
        unstable.sort(key=lambda r: (-r.disagreements, r.lowest_agreement))  # stable sort
        first = {r.row_id for r in unstable}
        rest = _stratified([r for r in rows if r.row_id not in first], seed)
        return [r.row_id for r in unstable] + rest
    return _stratified(rows, seed)


def _stratified(rows: Sequence[RowSummary], seed: int) -> list[str]:
    """Every row, shuffled per intent by a seeded hash and drawn from the intents in turn."""
    strata: dict[str, list[RowSummary]] = {}
    for r in rows:
        strata.setdefault(r.intent_key or "(no intent)", []).append(r)
    for members in strata.values():
        members.sort(key=lambda r: _draw(seed, "order:" + r.row_id))
    out: list[str] = []
    for depth in range(max((len(s) for s in strata.values()), default=0)):
        out += [s[depth].row_id for _, s in sorted(strata.items()) if depth < len(s)]
    return out


@dataclass(frozen=True)
class RowState:
    """One queued row's review state, derived from its reviews and events."""

    reviews: int
    needed: int
    overridden: bool
    disputed: bool
    settled: bool
    state: RowStateName


def row_state(
    settings: QueueSettings,
    second: bool,
    judge: Answer | None,
    reviews: Mapping[str, Answer],
    settled: bool,
) -> RowState:
    """The state of a queued row (see :data:`RowStateName`).

    Args:
        judge: the judge's answer (``None`` for a JUDGE_ERROR row: nothing to override).
        reviews: reviewer → their current answer (adjudications excluded).
        settled: a lead settled the row and nobody reopened it since.
    """
    answers = list(reviews.values())
    overridden = judge is not None and any(differences(judge, a) for a in answers)
    disputed = any(differences(a, b) for i, a in enumerate(answers) for b in answers[i + 1 :])
    needed = settings.needed(second, overridden)
    state: RowStateName
    if settled:
        state = "settled"
    elif not answers:
        state = "open"
    elif len(answers) < needed:
        state = "partial"
    else:
        state = "disputed" if disputed else "done"
    return RowState(len(answers), needed, overridden, disputed, settled, state)
