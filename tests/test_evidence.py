"""Evidence turns: the ``judge_v3`` judge names, per unmet or partial
requirement, the dialogue turns that show it; they are checked (re-asked when wrong), stored on
the referenceBasis, listed in report.md and marked in the review page. ``judge_v1`` replays
exactly as before."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.engine.pipeline import RequestBuilder
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.prompt import load_prompt, render_user
from rubric_engine.results.model import BasisEntry, BasisSource, RequirementStatus, WarningCode
from rubric_engine.results.normalize import normalize_verdict
from rubric_engine.verdict.model import verdict_model
from rubric_engine.verdict.parse import ParsedVerdict, ParseFailure, RowContext, parse_reply
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS
from tests.serve_helpers import publish
from tests.test_judge_equivalence import ScriptBackend

CASSETTES_V3 = ROOT / "cassettes-v3"


def reply(verdict: dict[str, Any]) -> dict[str, Any]:
    """A full chat-completion wire dict (instructor's re-ask reads it as one)."""
    message = {"role": "assistant", "content": json.dumps(verdict)}
    return {
        "id": "evidence-test",
        "object": "chat.completion",
        "created": 0,
        "model": "stub-judge",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }


def verdict_of(rubric: Any, **fields: Any) -> dict[str, Any]:
    intent = rubric.intents[0]
    return {
        "rowId": "r1",
        "intentKey": intent.key,
        "score": 3,
        "unmetRequirementIds": [intent.requirements[0].id],
        **fields,
    }


def test_v1_and_v2_verdict_schemas_have_no_evidence_field(mini_rubric: Any) -> None:
    # the v1 schema is part of every demo cassette key: it must not grow a field
    plain = verdict_model(mini_rubric).model_json_schema()
    assert "evidence" not in plain["properties"]
    assert verdict_model(mini_rubric) is verdict_model(mini_rubric, evidence=False)
    v3 = verdict_model(mini_rubric, evidence=True).model_json_schema()
    assert v3["properties"]["evidence"]["type"] == "object"
    assert {k: v for k, v in v3["properties"].items() if k != "evidence"} == plain["properties"]


def test_a_v1_reply_with_evidence_is_read_as_before(mini_rubric: Any) -> None:
    rid = mini_rubric.intents[0].requirements[0].id
    got = parse_reply(
        reply(verdict_of(mini_rubric, evidence={rid: [99]})),
        verdict_model(mini_rubric),
        RowContext("r1", (), 2),
    )
    assert isinstance(got, ParsedVerdict)
    assert got.verdict.evidence_turns() == {}


@pytest.mark.parametrize(
    ("evidence", "needle"),
    [
        ({"{rid}": [2]}, "turn 2 is outside the dialogue"),
        ({"{rid}": [-1]}, "turn -1 is outside the dialogue"),
        ({"{rid}": ["1"]}, "got '1'"),
        ({"{rid}": 1}, "must be a JSON array"),
        ({"NOT_AN_ID": [0]}, "is not a requirement ID of this rubric; valid:"),
        ({"{other}": [0]}, "not in unmetRequirementIds or partialRequirementIds"),
    ],
)
def test_bad_evidence_is_an_invalid_reply_naming_the_valid_choices(
    mini_rubric: Any, evidence: dict[str, Any], needle: str
) -> None:
    rid = mini_rubric.intents[0].requirements[0].id
    other = mini_rubric.intents[0].requirements[1].id
    sent = {k.format(rid=rid, other=other): v for k, v in evidence.items()}
    got = parse_reply(
        reply(verdict_of(mini_rubric, evidence=sent)),
        verdict_model(mini_rubric, evidence=True),
        RowContext("r1", (), 2),
    )
    assert isinstance(got, ParseFailure), got
    assert needle in got.reason
    if "outside" in needle:
        assert "integers from 0 to 1" in got.reason  # the valid range, for the re-ask


def test_evidence_keys_are_cleaned_like_ids_and_turns_sorted(mini_rubric: Any) -> None:
    rid = mini_rubric.intents[0].requirements[0].id
    got = parse_reply(
        reply(verdict_of(mini_rubric, evidence={f" {rid.lower()}": [1, 0, 1]})),
        verdict_model(mini_rubric, evidence=True),
        RowContext("r1", (), 2),
    )
    assert isinstance(got, ParsedVerdict)
    assert got.verdict.evidence_turns() == {rid: (0, 1)}
    codes = {w.code for w in got.cleanups if w.requirement_id == rid}
    assert {WarningCode.JUDGE_VALUE_TRIMMED, WarningCode.JUDGE_VALUE_RECASED} <= codes


def test_out_of_range_turns_are_re_asked_and_the_corrected_answer_kept(mini_rubric: Any) -> None:
    """The live path: prompt → judge → parse → re-ask with the range → valid answer."""
    row = DialogueRow.model_validate(
        {
            "rowId": "r1",
            "messages": [
                {"role": "user", "content": "Refund my order please"},
                {"role": "assistant", "content": "Refund approved, 100% guaranteed!"},
            ],
        }
    )
    template = load_prompt("judge_v3")
    prepared = RequestBuilder(mini_rubric, template).prepare(0, row)
    rid = mini_rubric.intents[0].requirements[0].id
    bad = reply(verdict_of(mini_rubric, evidence={rid: [2]}))  # [0] and [1] exist
    good = reply(verdict_of(mini_rubric, evidence={rid: [1]}))
    backend = ScriptBackend([bad, good])
    judge = InstructorJudge(backend, mini_rubric, "openai/stub-judge", evidence=True)
    outcome = asyncio.run(judge.judge(prepared.request))
    assert outcome.verdict is not None and outcome.verdict.evidence_turns() == {rid: (1,)}
    assert len(outcome.reasks) == 1 and "turn 2 is outside the dialogue" in outcome.reasks[0]
    reask = backend.seen[1]["messages"][-1]["content"]
    assert "integers from 0 to 1" in reask
    # the prompt numbers the turns the way the evidence is checked
    user = render_user(template, mini_rubric, row, ())
    assert "[0] USER:" in user and "[1] ASSISTANT:" in user and "[0] to [1]" in user
    assert "[1] USER:" in render_user(load_prompt("judge_v1"), mini_rubric, row, ())


def test_evidence_lands_on_the_judges_entries_only(mini_rubric: Any) -> None:
    first, second = (r.id for r in mini_rubric.intents[0].requirements[:2])
    model = verdict_model(mini_rubric, evidence=True)
    verdict = model.model_validate(
        verdict_of(
            mini_rubric,
            unmetRequirementIds=[first, second],
            evidence={first: [3], second: [1, 2]},
        ),
        context={"row_id": "r1", "turn_count": 4},
    )
    result = normalize_verdict(mini_rubric, verdict, "r1")
    by_id = {e.requirement_id: e for e in result.reference_basis}
    assert by_id[first].evidence_turns == (3,)
    assert by_id[second].evidence_turns == (1, 2)
    assert all(
        e.evidence_turns is None
        for e in result.reference_basis
        if e.status is RequirementStatus.FOLLOWED
    )
    ruled = normalize_verdict(
        mini_rubric, verdict, "r1", rule_results={first: RequirementStatus.VIOLATED}
    )
    assert {e.requirement_id: e for e in ruled.reference_basis}[first].evidence_turns is None


def test_a_basis_entry_without_evidence_keeps_its_old_json() -> None:
    entry = BasisEntry(
        requirement_id="X", status=RequirementStatus.VIOLATED, source=BasisSource.JUDGE
    )
    assert entry.to_json_dict() == {"requirementId": "X", "status": "VIOLATED", "source": "judge"}
    cited = entry.model_copy(update={"evidence_turns": (4,)})
    assert cited.to_json_dict()["evidenceTurns"] == [4]
    assert BasisEntry.model_validate(cited.to_json_dict()) == cited


@pytest.fixture(scope="module")
def airline_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The airline demo scored twice in one store: judge_v1 (the default) and judge_v3."""
    tmp = tmp_path_factory.mktemp("evidence")
    store = tmp / "store.sqlite"
    publish(store, "airline_cs.yaml")
    outs = {}
    for prompt, cassettes in (("judge_v1", CASSETTES), ("judge_v3", CASSETTES_V3)):
        outs[prompt] = tmp / prompt
        result = score(
            ScoreOptions(
                inputs=[CASES / "airline_tau2_dev.json"],
                rubric="airline_cs",
                store=store,
                out=outs[prompt],
                cassettes=cassettes,
                prompt_version=None if prompt == "judge_v1" else prompt,
            )
        )
        assert not result.cassette_misses and result.report.totals.scored == 25
    outs["store"] = store
    return outs


def test_v1_demo_replays_without_evidence(airline_runs: dict[str, Path]) -> None:
    out = airline_runs["judge_v1"]
    assert "evidenceTurns" not in (out / "rows.jsonl").read_text(encoding="utf-8")
    assert "evidenceTurns" not in (out / "report.json").read_text(encoding="utf-8")
    assert "Evidence turns" not in (out / "report.md").read_text(encoding="utf-8")


def test_v3_demo_shows_the_authored_evidence_turns(airline_runs: dict[str, Path]) -> None:
    out = airline_runs["judge_v3"]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Prompt: `judge_v3`" in md
    # airline-0 (authored): the update call at turn 32 dropped a flown segment unasked
    assert (
        "- `airline-0`: COMMON_EXPLICIT_CONFIRMATION VIOLATED (turn 32); "
        "COMMON_ONE_TOOL_CALL_AT_A_TIME VIOLATED (turns 6, 13, 19, 24)"
    ) in md
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "judge's turns 32 (from 0)" in html
    assert "judge's turns" not in (airline_runs["judge_v1"] / "report.html").read_text("utf-8")
    rows = [json.loads(line) for line in (out / "rows.jsonl").open(encoding="utf-8")]
    first = next(r for r in rows if r["rowId"] == "airline-0")
    cited = {e["requirementId"]: e.get("evidenceTurns") for e in first["referenceBasis"]}
    assert cited["COMMON_TRANSFER_PROCEDURE"] == [42]
    # every judge-decided unmet/partial entry of every row carries the turns authored for it
    for row in rows:
        for entry in row["referenceBasis"]:
            if entry["status"] in ("VIOLATED", "PARTIAL") and entry["source"] == "judge":
                assert entry.get("evidenceTurns"), (row["rowId"], entry)


@pytest.mark.parametrize(
    ("path", "rows"),
    [("airline_cs/airline_tau2_dev.jsonl", 25), ("health_cs/health_consult_zh.jsonl", 26)],
)
def test_v3_cassettes_are_authored_and_say_how_turns_were_chosen(path: str, rows: int) -> None:
    lines = (CASSETTES_V3 / path).read_text(encoding="utf-8")
    entries = [json.loads(line) for line in lines.splitlines()]
    assert len(entries) == rows
    for entry in entries:
        provenance = entry["provenance"]
        assert provenance["kind"] == "authored" and provenance["prompt"] == "judge_v3"
        assert "turns" in provenance["method"] and "reading" in provenance["method"]


def test_review_page_marks_the_judges_evidence_apart_from_the_reviewers(
    airline_runs: dict[str, Path],
) -> None:
    pytest.importorskip("starlette", reason="the serve extra is not installed")
    from rubric_engine.review.accounts import add_reviewer
    from rubric_engine.serve.app import ServeConfig, create_app
    from rubric_engine.store.task_store import TaskStore
    from tests.serve_helpers import Person, make_queue

    store = str(airline_runs["store"])
    with TaskStore(store) as opened:
        tasks = {t.prompt_version: t.id for t in opened.tasks()}
        for name in ("alice", "bob"):
            add_reviewer(opened.backend, name, "reviewer")
    for task in tasks.values():
        make_queue(store, task, members={"alice": False, "bob": True})
    app = create_app(ServeConfig(store))
    alice, bob = Person(app, store, "alice"), Person(app, store, "bob")
    seen = alice.get(f"/tasks/{tasks['judge_v3']}/review/airline-0").text
    assert 'class="msg assistant judge-evidence" id="turn-32"' in seen
    assert "judge-badge\">judge's evidence: COMMON_EXPLICIT_CONFIRMATION</span>" in seen
    assert '<a href="#turn-32">#32</a>' in seen  # the form links the judge's turn
    assert 'class="msg user" id="turn-31"' in seen  # not cited: plain
    alice.post(f"/tasks/{tasks['judge_v3']}/skip/airline-0", {"queue": "main"})  # releases it
    blind = bob.get(f"/tasks/{tasks['judge_v3']}/review/airline-0").text
    # a blind page never shows the judge's turns (only the stylesheet names the class)
    assert "data-judge-evidence" not in blind and ' judge-evidence"' not in blind
    assert 'judge-badge"' not in blind and 'id="turn-32"' in blind
    old = alice.get(f"/tasks/{tasks['judge_v1']}/review/airline-0").text
    assert "data-judge-evidence" not in old and 'id="turn-32"' in old


def test_authoring_refuses_a_v3_verdict_with_turns_outside_the_dialogue(tmp_path: Path) -> None:
    from rubric_engine.errors import CassetteError
    from rubric_engine.judge.cassettes.authoring import author_cassette

    verdicts = [
        json.loads(line)
        for line in (ROOT / "cases" / "verdicts" / "airline_cs_v3.jsonl").open(encoding="utf-8")
    ]
    verdicts[0]["evidence"]["COMMON_EXPLICIT_CONFIRMATION"] = [44]  # airline-0 has 0..43
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(v) + "\n" for v in verdicts), encoding="utf-8")
    with pytest.raises(CassetteError, match="turn 44 is outside the dialogue"):
        author_cassette(
            [CASES / "airline_tau2_dev.json"],
            RUBRICS / "airline_cs.yaml",
            bad,
            "test",
            "test",
            tmp_path / "out.jsonl",
            "openai/gpt-4o-mini",
            "judge_v3",
        )


def test_health_v3_demo_cites_the_users_turn_where_the_reply_ignores_it(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    publish(store, "health_cs.yaml")
    result = score(
        ScoreOptions(
            inputs=[CASES / "health_consult_zh.jsonl"],
            rubric="health_cs",
            store=store,
            out=tmp_path / "out",
            cassettes=CASSETTES_V3,
            prompt_version="judge_v3",
        )
    )
    assert not result.cassette_misses and result.report.totals.scored == 26
    lines = [json.loads(r) for r in (tmp_path / "out" / "rows.jsonl").open(encoding="utf-8")]
    rows = {r["rowId"]: {e["requirementId"]: e for e in r["referenceBasis"]} for r in lines}
    # medgpt-42: the haematuria the user reports (turn 0) goes unanswered in the reply (turn 1);
    # the judge calls the critical referral PARTIAL, which the engine turns into VIOLATED (a red
    # line is all or nothing): the judge's evidence turns stay with the requirement
    referral = rows["medgpt-42"]["INTENT_HEALTH_RED_FLAG_REFERRAL"]
    assert (referral["status"], referral["source"], referral["evidenceTurns"]) == (
        "VIOLATED",
        "backfill",
        [0, 1],
    )
    warnings = next(r["warnings"] for r in lines if r["rowId"] == "medgpt-42")
    assert ("CRITICAL_PARTIAL_VIOLATED", "INTENT_HEALTH_RED_FLAG_REFERRAL") in [
        (w["code"], w.get("requirementId")) for w in warnings
    ]
    assert "evidenceTurns" not in rows["medgpt-42"]["COMMON_BACKEND_EXPOSURE"]
    assert all("evidenceTurns" not in e for e in rows["medgpt-26-agent"].values())


def test_renormalize_keeps_a_v3_tasks_evidence(
    airline_runs: dict[str, Path], tmp_path: Path
) -> None:
    # renormalize re-reads the stored reply: with the v1 model the evidence would be dropped
    from rubric_engine.engine.renormalize import renormalize
    from rubric_engine.store.task_store import TaskStore

    store = airline_runs["store"]
    with TaskStore(store) as opened:
        v3 = next(t.id for t in opened.tasks() if t.prompt_version == "judge_v3")
    result = renormalize(store, v3, "airline_cs@1", out=tmp_path / "rn")
    again = (tmp_path / "rn" / "rows.jsonl").read_text(encoding="utf-8")
    before = (airline_runs["judge_v3"] / "rows.jsonl").read_text(encoding="utf-8")
    cited = [
        [(e["requirementId"], e.get("evidenceTurns")) for e in json.loads(line)["referenceBasis"]]
        for line in before.splitlines()
    ]
    assert cited == [
        [(e["requirementId"], e.get("evidenceTurns")) for e in json.loads(line)["referenceBasis"]]
        for line in again.splitlines()
    ]
    assert result.source_task_id == v3
