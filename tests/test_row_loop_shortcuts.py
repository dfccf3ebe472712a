"""Shortcuts of the row loop that must not change an outcome:

- a verdict value that is the pack's own spelling skips the clean-up lookups: the verdict,
  its clean-up warnings and its re-ask reasons are those of the full reading (the same model
  with the shortcut's tables emptied);
- ``stored_row`` adds up the attempts in one pass: the totals equal
  :class:`~rubric_engine.judge.protocol.JudgeOutcome`'s.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine.pipeline import RequestBuilder, row_result, stored_row
from rubric_engine.judge.protocol import Attempt, JudgeOutcome
from rubric_engine.rubric.compiled import CompiledRubric
from rubric_engine.verdict.model import verdict_model
from rubric_engine.verdict.parse import validation_reason
from tests.test_normalize_properties import PACKS


class _Text(str):
    """A str subclass (an enum of strings, say): never the pack's spelling as sent."""


def _spellings(values: list[str]) -> Any:
    """A pack value as sent: itself, recased, padded, with a soft hyphen, full-width, a str
    subclass, or junk."""
    value = st.sampled_from(values)
    return st.one_of(
        value,
        value.map(_Text),
        value.map(str.lower),
        value.map(lambda v: f" {v} "),
        value.map(lambda v: v[:1] + "\u00ad" + v[1:]),
        value.map(lambda v: v.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)})),
        st.sampled_from(["NOT_IN_PACK", "", None, 3, ["nested"]]),
    )


@st.composite
def replies(draw: Any) -> tuple[Any, dict[str, Any], list[str]]:
    rubric = draw(st.sampled_from(PACKS))
    ids = list(rubric.requirements_by_id)
    case = draw(st.lists(st.sampled_from(["CASE_EXPECTED_0000AAAA", "CASE_RULE_0000CCCC"])))
    fields = {
        "rowId": "r",
        "intentKey": draw(_spellings([i.key for i in rubric.intents])),
        "score": draw(st.sampled_from([1, 3, "4", 2.0, True])),
        "redFlagTypes": draw(st.lists(_spellings(list(rubric.red_flag_types)), max_size=3)),
        "unmetRequirementIds": draw(st.lists(_spellings([*ids, *case] or ids), max_size=4)),
        "partialRequirementIds": draw(st.lists(_spellings(ids), max_size=3)),
        "questionsCheck": draw(_spellings(["NOT_PRESENT", "OK", "HAS_ISSUES"])),
    }
    return rubric, fields, case


def _read(model: Any, fields: dict[str, Any], case: list[str]) -> Any:
    cleanups: list[Any] = []
    context = {"row_id": "r", "case_requirement_ids": case, "cleanups": cleanups}
    try:
        verdict = model.model_validate(fields, context=context)
    except ValidationError as exc:
        return "invalid", validation_reason(exc)
    return verdict.model_dump(), [w.model_dump() for w in cleanups]


@settings(max_examples=500, deadline=None)
@given(replies())
def test_the_pack_spelling_shortcut_reads_as_the_full_reading(reply: Any) -> None:
    rubric, fields, case = reply
    model = verdict_model(rubric)
    full = type("FullReading", (model,), {})
    full._intent_spellings = full._flag_spellings = full._requirement_spellings = frozenset()
    assert _read(model, fields, case) == _read(full, fields, case)


MS = st.floats(0, 5000, allow_nan=False) | st.sampled_from([0.05, 0.15, 812.25, -0.0])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.builds(
            Attempt,
            response=st.none() | st.just({"choices": []}),
            error=st.none() | st.just("boom"),
            latency_ms=MS,
            prompt_tokens=st.integers(0, 10**5),
            completion_tokens=st.integers(0, 10**4),
            cost_usd=st.none() | st.floats(0, 1, allow_nan=False) | st.just(-0.0),
            cache_read_tokens=st.integers(0, 100),
            cache_creation_tokens=st.integers(0, 100),
        ),
        max_size=4,
    )
)
def test_stored_row_totals_are_the_outcomes(attempts: list[Attempt]) -> None:
    rubric = PACKS[0]
    row = DialogueRow.model_validate({"rowId": "r", "messages": [{"role": "user", "content": "x"}]})
    prepared = RequestBuilder(rubric, None).prepare(0, row)
    outcome = JudgeOutcome(verdict=None, error=None, attempts=attempts)
    stored = stored_row(prepared, outcome, row_result(CompiledRubric.of(rubric), prepared, outcome))
    assert stored.calls == len(attempts)
    assert repr(stored.cost_usd) == repr(outcome.cost_usd)
    assert (stored.prompt_tokens, stored.completion_tokens) == (
        outcome.prompt_tokens,
        outcome.completion_tokens,
    )
    assert (stored.cache_read_tokens, stored.cache_creation_tokens) == (
        outcome.cache_read_tokens,
        outcome.cache_creation_tokens,
    )
    expected = round(sum(round(a.latency_ms, 1) for a in attempts), 1)
    assert repr(stored.latency_ms) == repr(expected)
    assert stored.raw_attempts == [
        {"response": a.response, "error": a.error, "latencyMs": round(a.latency_ms, 1)}
        for a in attempts
    ]
