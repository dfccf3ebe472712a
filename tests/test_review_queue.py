"""The review queue's and the review form's rules on small hand-made rows (docs/review.md):
strategies, the exact seeded second-review sample, how many reviewers a row needs and when a
two-person team is done, row states, nothing presumed in a form, reasons where changes are
made, the lead's decision."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rubric_engine.errors import ConfigurationError, InputError
from rubric_engine.labels.model import Label, LabelSource, LabelStatus
from rubric_engine.results.model import BasisEntry, BasisSource, RowResult, RowStatus, Stability
from rubric_engine.review.adjudication import decision_from_form, dispute
from rubric_engine.review.answers import (
    NOT_CHECKED,
    Answer,
    ReviewContext,
    answer_from_form,
    answers_of_labels,
    check_reason,
    differences,
    labels_of_answer,
)
from rubric_engine.review.queue import (
    QueueSettings,
    check_strategy,
    ordered,
    row_state,
    sample_size,
    second_review_sample,
    summary_of_result,
)

F, V, P = LabelStatus.FOLLOWED, LabelStatus.VIOLATED, LabelStatus.PARTIAL


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


ROWS = [
    row("r1", "X", 5),
    row("r2", "X", 2, unmet=("A",), flags=("F",)),
    row("r3", "Y", 3, unmet=("B",)),
    row("r4", "Y", 1, unmet=("A", "C"), flags=("F",)),
    row("r5", "Z", 4, unmet=("A",)),
]
SUMMARIES = [summary_of_result(r) for r in ROWS]


def answer(row_id: str = "r1", **statuses: LabelStatus) -> Answer:
    return Answer(row_id, "X", {"A": F, "B": F, "C": F, **statuses}, frozenset(), 5)


def test_strategies_draw_and_order_the_rows() -> None:
    assert ordered(SUMMARIES, "red-flag", 0) == ["r2", "r4"]
    assert ordered(SUMMARIES, "low-score", 0) == ["r4", "r2", "r3", "r5", "r1"]
    # A is unmet 3 times, B once, C once: rows with B or C first
    assert ordered(SUMMARIES, "rare", 0)[:2] == ["r3", "r4"]
    assert set(ordered(SUMMARIES, "rare", 0)) == {"r2", "r3", "r4", "r5"}
    drawn = ordered(SUMMARIES, "random", 0)
    assert sorted(drawn) == ["r1", "r2", "r3", "r4", "r5"]
    # random is stratified: the first three rows cover the three intents
    intents = {r.row_id: r.intent_key for r in SUMMARIES}
    assert {intents[r] for r in drawn[:3]} == {"X", "Y", "Z"}
    assert sorted(ordered(SUMMARIES, "random", 7)) == sorted(drawn)
    assert ordered(SUMMARIES, "disagreement", 0) == []
    other = {"r3": [summary_of_result(row("r3", "Y", 5))]}
    assert ordered(SUMMARIES, "disagreement", 0, other) == ["r3"]


def test_unstable_first_puts_the_most_disagreeing_rows_ahead_then_the_random_order() -> None:
    def sampled(row_id: str, intent: str, stability: Stability | None) -> RowResult:
        return row(row_id, intent, 4).model_copy(update={"stability": stability})

    agreed = {"A": 1.0, "B": 1.0, "C": 1.0}
    rows = [
        sampled("stable-1", "X", Stability(stable=True, agreement=agreed)),
        sampled("score", "X", Stability(stable=False, reasons=("score",), agreement=agreed)),
        sampled("unsampled", "Y", None),
        sampled(
            "two-flips",
            "Y",
            Stability(
                stable=False,
                reasons=("requirements",),
                flips=("A", "B"),
                agreement={**agreed, "A": 0.6667, "B": 0.6667},
            ),
        ),
        sampled(
            "one-flip-low",
            "Z",
            Stability(stable=False, reasons=("requirements",), flips=("A",), agreement={"A": 0.5}),
        ),
        sampled(
            "one-flip",
            "X",
            Stability(
                stable=False, reasons=("requirements",), flips=("C",), agreement={"C": 0.6667}
            ),
        ),
        sampled("stable-2", "Z", Stability(stable=True, agreement=agreed)),
    ]
    summaries = [summary_of_result(r) for r in rows]
    order = ordered(summaries, "unstable-first", 3)
    # most disagreements first; of equals, the lowest agreement first; a score split counts
    assert order[:4] == ["two-flips", "one-flip-low", "one-flip", "score"]
    rest = [s for s in summaries if s.row_id in {"stable-1", "unsampled", "stable-2"}]
    assert order[4:] == ordered(rest, "random", 3)  # the rest in the default order
    assert check_strategy("unstable-first") == "unstable-first"


@given(
    st.integers(0, 400),
    st.sampled_from([0.0, 0.1, 0.2, 0.25, 0.5, 0.9, 1.0]),
    st.integers(0, 5),
)
def test_the_second_review_takes_exactly_round_share_times_rows(
    rows: int, share: float, seed: int
) -> None:
    ids = [f"row-{i}" for i in range(rows)]
    sample = second_review_sample(ids, share, seed)
    expected = int(share * rows + 0.5)  # half up: 0.5 × 5 rows = 3
    assert len(sample) == expected == sample_size(share, rows)
    assert sample <= set(ids) and sample == second_review_sample(list(reversed(ids)), share, seed)


def test_the_sample_depends_on_the_seed_and_rounds_halves_up() -> None:
    ids = [f"row-{i}" for i in range(25)]
    assert len(second_review_sample(ids, 0.2, 0)) == 5  # not a coin flip per row
    assert second_review_sample(ids, 0.2, 0) != second_review_sample(ids, 0.2, 1)
    assert sample_size(0.5, 5) == 3 and sample_size(0.1, 5) == 1 and sample_size(0.05, 5) == 0


def test_a_second_review_never_asks_more_reviewers_than_a_pair() -> None:
    # the bug this guards: with 2 reviewers per row a sampled row needed 3, so a two-person
    # team's queue never emptied
    assert QueueSettings(reviewers_per_row=1).needed(second=True, overridden=False) == 2
    assert QueueSettings(reviewers_per_row=2).needed(second=True, overridden=True) == 2
    assert QueueSettings(reviewers_per_row=1).needed(second=False, overridden=True) == 2
    assert QueueSettings(reviewers_per_row=3).needed(second=True, overridden=False) == 3
    assert QueueSettings(reviewers_per_row=1).needed(second=False, overridden=False) == 1


def test_row_states_follow_the_reviews() -> None:
    settings = QueueSettings(reviewers_per_row=1)
    judge = answer()
    assert row_state(settings, False, judge, {}, False).state == "open"
    agreeing = {"ann": answer()}
    assert row_state(settings, False, judge, agreeing, False).state == "done"
    assert row_state(settings, True, judge, agreeing, False).state == "partial"  # sampled
    override = {"ann": answer(A=V)}
    state = row_state(settings, False, judge, override, False)
    assert (state.state, state.needed, state.overridden) == ("partial", 2, True)
    two_agree = {"ann": answer(A=V), "bob": answer(A=V)}
    assert row_state(settings, False, judge, two_agree, False).state == "done"
    two_differ = {"ann": answer(A=V), "bob": answer()}
    assert row_state(settings, False, judge, two_differ, False).state == "disputed"
    # a settled row stays settled whatever its reviews say, until a lead reopens it
    assert row_state(settings, False, judge, two_differ, True).state == "settled"


def test_queue_settings_name_each_bad_value() -> None:
    with pytest.raises(ConfigurationError, match="disagreement, red-flag"):
        check_strategy("worst")
    with pytest.raises(ConfigurationError) as found:
        QueueSettings(name="no spaces", reviewers_per_row=0, second_review=1.5, claim_ttl_s=0)
    for part in ("queue name", "at least 1", "from 0 to 1", "claim TTL"):
        assert part in str(found.value)
    settings = QueueSettings(members={"ann": True, "bob": False}, blind=False)
    assert QueueSettings.from_json(settings.to_json()) == settings
    assert settings.blind_for("ann") and not settings.blind_for("bob")
    assert not settings.is_member("cat") and QueueSettings().is_member("cat")


def test_a_form_presumes_nothing(mini_rubric) -> None:  # type: ignore[no-untyped-def]
    form = {"intent": "REFUND", "score": "3"}
    with pytest.raises(InputError) as found:
        answer_from_form(form, "r1", mini_rubric, ())
    message = str(found.value)
    # every observable applicable requirement is asked; the unobservable one is not
    assert "5 requirement(s) not answered" in message
    for rid in ("COMMON_LEAK", "COMMON_TONE", "REFUND_VERIFY", "REFUND_NO_PROMISE_AMOUNT"):
        assert rid in message
    assert "COMMON_CARD_SOURCE" not in message
    full = {
        **form,
        "status.COMMON_LEAK": "FOLLOWED",
        "status.COMMON_TONE": NOT_CHECKED,
        "status.REFUND_VERIFY": "violated",
        "status.REFUND_NO_PROMISE": NOT_CHECKED,
        "status.REFUND_NO_PROMISE_AMOUNT": "FOLLOWED",
        "reason.REFUND_VERIFY": "no order lookup before the promise",
        "evidence.REFUND_VERIFY": "2, 1",
    }
    got = answer_from_form(full, "r1", mini_rubric, (), turn_count=4)
    # "not checked" stores no status; nothing else is filled in
    assert got.statuses == {"COMMON_LEAK": F, "REFUND_VERIFY": V, "REFUND_NO_PROMISE_AMOUNT": F}
    assert got.reasons == {"REFUND_VERIFY": "no order lookup before the promise"}
    assert got.evidence == {"REFUND_VERIFY": (2, 1)} and got.red_flag_types == frozenset()
    context = ReviewContext("ann", "t1", "mini", 1, "h", saw_judge_verdict=False)
    labels = labels_of_answer(got, context)
    by_req = {lab.requirement_id: lab for lab in labels}
    assert set(by_req) == {None, "COMMON_LEAK", "REFUND_VERIFY", "REFUND_NO_PROMISE_AMOUNT"}
    # the reason stays on its requirement: not copied onto every label
    assert by_req["REFUND_VERIFY"].reason == "no order lookup before the promise"
    assert by_req["COMMON_LEAK"].reason is None and by_req[None].reason is None
    assert all(lab.saw_judge_verdict is False and lab.reviewer == "ann" for lab in labels)
    back = answers_of_labels(labels)[("r1", "ann")]
    assert back.reasons == got.reasons and back.statuses == got.statuses


def test_a_change_needs_its_reason_where_it_was_made() -> None:
    judge = Answer("r1", "X", {"A": V, "B": F}, frozenset({"F"}), 2)
    mine = Answer("r1", "X", {"A": F, "B": F}, frozenset(), 5)
    with pytest.raises(InputError) as found:
        check_reason(mine, judge, saw_judge_verdict=True, red_lines={"A": "F"})
    message = str(found.value)
    assert "A VIOLATED → FOLLOWED (its reason)" in message and "score 2 → 5" in message
    explained = Answer("r1", "X", {"A": F, "B": F}, frozenset(), 5, "reads well", {}, {"A": "ok"})
    check_reason(explained, judge, saw_judge_verdict=True, red_lines={"A": "F"})
    # the red line's own reason explains its flag; the score still needs the row's
    only_req = Answer("r1", "X", {"A": F, "B": F}, frozenset(), 2, None, {}, {"A": "asked first"})
    check_reason(only_req, judge, saw_judge_verdict=True, red_lines={"A": "F"})
    check_reason(mine, judge, saw_judge_verdict=False)  # blind: nothing was changed


def test_the_dispute_lays_out_each_reviewer_per_requirement(mini_rubric) -> None:  # type: ignore[no-untyped-def]
    ann = Answer(
        "r1",
        "REFUND",
        {"COMMON_LEAK": F, "REFUND_VERIFY": V},
        frozenset(),
        2,
        None,
        {"REFUND_VERIFY": (3,)},
        {"REFUND_VERIFY": "no lookup"},
    )
    bob = Answer("r1", "REFUND", {"COMMON_LEAK": F, "REFUND_VERIFY": F}, frozenset(), 4)
    table = dispute(mini_rubric, (), {"ann": ann, "bob": bob}, None)
    assert table.disputed_requirements == ("REFUND_VERIFY",)
    assert table.disputed_fields == frozenset({"score"})
    verify = next(r for r in table.requirements if r.id == "REFUND_VERIFY")
    assert verify.answers["ann"] == (V, (3,), "no lookup") and verify.answers["bob"][0] is F
    form = {"intent": "REFUND", "score": "3", "reason": "turn 3 shows no lookup"}
    with pytest.raises(InputError, match="decide each disputed requirement: REFUND_VERIFY"):
        decision_from_form(form, "r1", mini_rubric, (), table, 5)
    decided = decision_from_form(
        {**form, "decide.REFUND_VERIFY": "VIOLATED"}, "r1", mini_rubric, (), table, 5
    )
    # only the decided requirement: where the reviewers agree, their labels stand
    assert decided.statuses == {"REFUND_VERIFY": V} and decided.score == 3
    with pytest.raises(InputError, match="say why"):
        decision_from_form(
            {"intent": "REFUND", "score": "3", "decide.REFUND_VERIFY": "VIOLATED"},
            "r1",
            mini_rubric,
            (),
            table,
            5,
        )


def test_differences_name_what_changed() -> None:
    assert differences(answer(), answer(A=V)) == ["A FOLLOWED → VIOLATED"]
    assert differences(answer(), answer()) == []


def test_answers_of_labels_keep_the_row_reason_apart() -> None:
    common = {"row_id": "r1", "reviewer": "ann", "source": LabelSource.REVIEW}
    labels = [
        Label(intent_key="X", score=3, reason="about the row", **common),  # type: ignore[arg-type]
        Label(requirement_id="A", status=P, reason="half done", **common),  # type: ignore[arg-type]
    ]
    got = answers_of_labels(labels)[("r1", "ann")]
    assert got.reason == "about the row" and got.reasons == {"A": "half done"}
