"""Property tests of the normalizer's invariants (docs/protocol.md §6–§9)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_engine.results.model import RequirementStatus
from rubric_engine.results.normalize import normalize_verdict
from rubric_engine.rubric import load_rubric
from rubric_engine.verdict.model import verdict_model
from tests.conftest import MINI_RUBRIC, RUBRICS

PACKS = [load_rubric(RUBRICS / "health_cs.yaml"), load_rubric(RUBRICS / "airline_cs.yaml")]


def _mini() -> Any:
    import yaml

    from rubric_engine.rubric import parse_rubric

    return parse_rubric(yaml.safe_load(MINI_RUBRIC))


PACKS.append(_mini())


@st.composite
def verdicts(draw: Any) -> tuple[Any, dict[str, Any]]:
    rubric = draw(st.sampled_from(PACKS))
    intent = draw(st.sampled_from([i.key for i in rubric.intents]))
    ids = list(rubric.requirements_by_id)  # cross-intent IDs included on purpose
    pick = st.lists(st.sampled_from(ids), max_size=8)
    low, high = rubric.score_scale.min, rubric.score_scale.max
    fields = {
        "rowId": "r",
        "intentKey": intent,
        "score": draw(st.integers(low, high)),
        "redFlagTypes": draw(st.lists(st.sampled_from(list(rubric.red_flag_types)), max_size=3)),
        "unmetRequirementIds": draw(pick),
        "partialRequirementIds": draw(pick),
    }
    return rubric, fields


def run(rubric: Any, fields: dict[str, Any]) -> Any:
    verdict = verdict_model(rubric).model_validate(fields, context={"row_id": "r"})
    return normalize_verdict(rubric, verdict, "r")


def without_warnings(result: Any) -> dict[str, Any]:
    data = result.to_json_dict()
    data.pop("warnings")
    return data


@settings(max_examples=300, deadline=None)
@given(verdicts())
def test_one_basis_entry_per_applicable_requirement(case: Any) -> None:
    rubric, fields = case
    result = run(rubric, fields)
    expected = [r.id for r in rubric.applicable_requirements(fields["intentKey"])]
    assert [e.requirement_id for e in result.reference_basis] == expected


@settings(max_examples=300, deadline=None)
@given(verdicts())
def test_caps_hold_and_are_named(case: Any) -> None:
    rubric, fields = case
    result = run(rubric, fields)
    reqs = rubric.requirements_by_id
    violated = [
        e.requirement_id for e in result.reference_basis if e.status is RequirementStatus.VIOLATED
    ]
    caps = [reqs[i].violation_score for i in violated if reqs[i].violation_score is not None]
    assert result.final_score == min([result.judge_score, *caps])
    assert all(reqs[i].violation_score == result.final_score for i in result.capped_by)
    assert bool(result.capped_by) == (result.final_score < result.judge_score)


@settings(max_examples=300, deadline=None)
@given(verdicts(), st.data())
def test_an_extra_violation_never_raises_the_score(case: Any, data: Any) -> None:
    rubric, fields = case
    extra = data.draw(st.sampled_from(list(rubric.requirements_by_id)))
    more = {**fields, "unmetRequirementIds": [*fields["unmetRequirementIds"], extra]}
    assert run(rubric, more).final_score <= run(rubric, fields).final_score


@settings(max_examples=300, deadline=None)
@given(verdicts(), st.randoms(use_true_random=False))
def test_order_and_duplicates_do_not_matter(case: Any, rnd: Any) -> None:
    rubric, fields = case
    shuffled = dict(fields)
    for key in ("unmetRequirementIds", "partialRequirementIds", "redFlagTypes"):
        items = list(fields[key]) * 2
        rnd.shuffle(items)
        shuffled[key] = items
    assert without_warnings(run(rubric, shuffled)) == without_warnings(run(rubric, fields))


@settings(max_examples=300, deadline=None)
@given(verdicts())
def test_not_applicable_never_changes_the_score(case: Any) -> None:
    rubric, fields = case
    hidden = [r.id for r in rubric.requirements_by_id.values() if not r.observable_in_data]
    more = {
        **fields,
        "unmetRequirementIds": [*fields["unmetRequirementIds"], *hidden],
        "partialRequirementIds": [*fields["partialRequirementIds"], *hidden],
    }
    base, loud = run(rubric, fields), run(rubric, more)
    assert (loud.final_score, loud.red_flag_types) == (base.final_score, base.red_flag_types)
    assert all(
        e.status is RequirementStatus.NOT_APPLICABLE
        for e in loud.reference_basis
        if e.requirement_id in hidden
    )


@settings(max_examples=200, deadline=None)
@given(verdicts())
def test_deterministic(case: Any) -> None:
    rubric, fields = case
    assert run(rubric, fields).to_json_dict() == run(rubric, fields).to_json_dict()


@settings(max_examples=300, deadline=None)
@given(verdicts())
def test_a_critical_requirement_is_never_partial(case: Any) -> None:
    # docs/protocol.md §8: a red line is all or nothing, whatever the judge reported
    rubric, fields = case
    result = run(rubric, fields)
    reqs = rubric.requirements_by_id
    assert not [
        e.requirement_id
        for e in result.reference_basis
        if e.status is RequirementStatus.PARTIAL and reqs[e.requirement_id].critical
    ]


@settings(max_examples=300, deadline=None)
@given(verdicts())
def test_every_violated_critical_requirement_has_its_red_flag(case: Any) -> None:
    rubric, fields = case
    result = run(rubric, fields)
    reqs = rubric.requirements_by_id
    for entry in result.reference_basis:
        req = reqs[entry.requirement_id]
        if entry.status is RequirementStatus.VIOLATED and req.critical:
            assert req.red_flag_type in result.red_flag_types
    assert set(fields["redFlagTypes"]) <= set(result.red_flag_types)
