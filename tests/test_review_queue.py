"""The review queue's rules, on small hand-made rows: strategies, N reviewers per row,
the second-review sample, overrides re-checked, claims, adjudication."""

from __future__ import annotations

import pytest

from rubric_engine.errors import ConfigurationError
from rubric_engine.labels.model import Label, LabelSource, LabelStatus
from rubric_engine.results.model import BasisEntry, BasisSource, RowResult, RowStatus
from rubric_engine.review.answers import Answer, answers_of_labels, differences
from rubric_engine.review.queue import (
    QueuePolicy,
    adjudication_rows,
    build_queue,
    check_strategy,
    row_reviews,
)

NO_SAMPLE = QueuePolicy(second_review_share=0)


def row(
    row_id: str, intent: str, score: int, unmet: tuple[str, ...] = (), flags: tuple[str, ...] = ()
) -> RowResult:
    basis = [
        BasisEntry(
            requirement_id=r,
            status="VIOLATED" if r in unmet else "FOLLOWED",
            source=BasisSource.JUDGE,
        )
        for r in ("A", "B", "C")
    ]
    return RowResult(
        row_id=row_id,
        status=RowStatus.SCORED,
        intent_key=intent,
        judge_score=score,
        final_score=score,
        red_flag_types=flags,
        reference_basis=tuple(basis),
    )


def labels(
    row_id: str,
    reviewer: str,
    result: RowResult,
    source: LabelSource = LabelSource.REVIEW,
    **status: str,
) -> list[Label]:
    out = [
        Label(
            row_id=row_id,
            reviewer=reviewer,
            intent_key=result.intent_key,
            score=result.final_score,
            red_flag_types=result.red_flag_types,
            source=source,
        )
    ]
    for entry in result.reference_basis:
        given = status.get(entry.requirement_id, str(entry.status))
        out.append(
            Label(
                row_id=row_id,
                reviewer=reviewer,
                requirement_id=entry.requirement_id,
                status=LabelStatus(given),
                source=source,
            )
        )
    return out


ROWS = [
    row("r1", "X", 5),
    row("r2", "X", 2, unmet=("A",), flags=("F",)),
    row("r3", "Y", 3, unmet=("B",)),
    row("r4", "Y", 1, unmet=("A", "C"), flags=("F",)),
    row("r5", "Z", 4, unmet=("A",)),
]


def ids(rows: list) -> list[str]:  # type: ignore[type-arg]
    return [r.result.row_id for r in rows]


def test_strategies_order_the_open_rows() -> None:
    reviews = row_reviews(ROWS, [], NO_SAMPLE)
    assert ids(build_queue(reviews, "a", "red-flag", NO_SAMPLE)) == ["r2", "r4"]
    assert ids(build_queue(reviews, "a", "low-score", NO_SAMPLE)) == ["r4", "r2", "r3", "r5", "r1"]
    # A is unmet 3 times, B once, C once: rows with B or C first
    assert ids(build_queue(reviews, "a", "rare", NO_SAMPLE))[:2] == ["r3", "r4"]
    assert set(ids(build_queue(reviews, "a", "rare", NO_SAMPLE))) == {"r2", "r3", "r4", "r5"}
    # random is stratified: the first three rows cover the three intents
    drawn = build_queue(reviews, "a", "random", NO_SAMPLE)
    assert sorted(ids(drawn)) == ["r1", "r2", "r3", "r4", "r5"]
    assert {r.result.intent_key for r in drawn[:3]} == {"X", "Y", "Z"}
    other = build_queue(reviews, "a", "random", QueuePolicy(second_review_share=0, seed=7))
    assert sorted(ids(other)) == sorted(ids(drawn))
    assert build_queue(reviews, "a", "disagreement", NO_SAMPLE) == []


def test_a_row_needs_n_reviewers_and_an_override_gets_one_more() -> None:
    agree = labels("r1", "ann", ROWS[0])
    override = labels("r2", "ann", ROWS[1], A="FOLLOWED")
    reviews = row_reviews(ROWS, agree + override, NO_SAMPLE)
    # ann answered both; for bob r1 is done (one reviewer, agreeing), r2 needs a second look
    assert "r1" not in ids(build_queue(reviews, "bob", "random", NO_SAMPLE))
    assert ids(build_queue(reviews, "bob", "disagreement", NO_SAMPLE)) == ["r2"]
    assert ids(build_queue(reviews, "bob", "random", NO_SAMPLE))[0] == "r2"  # answered rows first
    assert "r1" not in ids(build_queue(reviews, "ann", "random", NO_SAMPLE))
    two = QueuePolicy(reviewers_per_row=2, second_review_share=0)
    assert "r1" in ids(build_queue(row_reviews(ROWS, agree, two), "bob", "random", two))


def test_the_second_review_sample_is_about_its_share_and_repeatable() -> None:
    many = [row(f"row-{i}", "X", 5) for i in range(1000)]
    policy = QueuePolicy()
    sampled = [r for r in row_reviews(many, [], policy) if r.in_sample]
    assert 150 < len(sampled) < 250
    assert sampled == [r for r in row_reviews(many, [], policy) if r.in_sample]
    assert sampled != [r for r in row_reviews(many, [], QueuePolicy(seed=1)) if r.in_sample]


def test_claimed_rows_are_left_to_their_holder() -> None:
    reviews = row_reviews(ROWS, [], NO_SAMPLE)
    assert "r2" not in ids(
        build_queue(reviews, "a", "red-flag", NO_SAMPLE, claimed_by_others=frozenset({"r2"}))
    )


def test_disagreeing_reviewers_wait_for_an_adjudication_made_after_them() -> None:
    first = labels("r2", "ann", ROWS[1], A="FOLLOWED")
    second = labels("r2", "bob", ROWS[1])
    disputed = row_reviews(ROWS, first + second, NO_SAMPLE)
    assert ids(adjudication_rows(disputed)) == ["r2"]
    settled = first + second + labels("r2", "cat", ROWS[1], LabelSource.ADJUDICATION, A="FOLLOWED")
    assert adjudication_rows(row_reviews(ROWS, settled, NO_SAMPLE)) == []
    # a review after the adjudication opens the question again
    later = settled + labels("r2", "dan", ROWS[1], C="VIOLATED")
    assert ids(adjudication_rows(row_reviews(ROWS, later, NO_SAMPLE))) == ["r2"]


def test_other_judge_runs_that_disagree_put_a_row_in_the_disagreement_queue() -> None:
    reviews = row_reviews(ROWS, [], NO_SAMPLE)
    other = {"r3": [Answer("r3", "Y", {"B": LabelStatus.FOLLOWED}, frozenset(), 5)]}
    assert ids(build_queue(reviews, "a", "disagreement", NO_SAMPLE, other_judges=other)) == ["r3"]


def test_differences_name_what_changed() -> None:
    judge = answers_of_labels(labels("r4", "j", ROWS[3]))[("r4", "j")]
    mine = answers_of_labels(labels("r4", "m", ROWS[3], A="FOLLOWED"))[("r4", "m")]
    assert differences(judge, mine) == ["A VIOLATED → FOLLOWED"]
    assert differences(judge, judge) == []


def test_bad_policy_and_strategy_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="disagreement, red-flag"):
        check_strategy("worst")
    with pytest.raises(ConfigurationError):
        QueuePolicy(reviewers_per_row=0)
    with pytest.raises(ConfigurationError):
        QueuePolicy(second_review_share=1.5)
