"""``rubric-eval actions`` (docs/actions.md): low rows → clusters → ranked action items, how each
cluster moved against a baseline, issue bodies in GitHub's shape, and the failures no rule
names clustered by their explanations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

from rubric_engine.actions.clusters import LowRows, action_items
from rubric_engine.actions.failures import explanation_clusters
from rubric_engine.cli import app
from rubric_engine.report.rows import RowFacts
from rubric_engine.results.model import (
    BasisEntry,
    BasisSource,
    ProtocolWarning,
    RequirementStatus,
    RowResult,
    RowStatus,
    WarningCode,
)
from rubric_engine.rubric import parse_rubric
from rubric_engine.rubric.model import EvalRubric
from rubric_engine.rubric.similarity import kmeans, terms, tfidf
from tests.conftest import CASES, CASSETTES, RUBRICS

V, P, F = RequirementStatus.VIOLATED, RequirementStatus.PARTIAL, RequirementStatus.FOLLOWED

#: GitHub's "create an issue" body (docs.github.com REST issues), as `--format github` writes a
#: list of them; the limits are GitHub's (a label name ≤ 50, a title ≤ 256 characters)
GITHUB_ISSUES = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["title"],
        "additionalProperties": False,
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 256},
            "body": {"type": "string", "maxLength": 65536},
            "labels": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 50},
                "uniqueItems": True,
            },
            "assignees": {"type": "array", "items": {"type": "string"}},
            "milestone": {"type": ["string", "integer", "null"]},
        },
    },
}


def pack() -> EvalRubric:
    return parse_rubric(
        {
            "key": "t",
            "name": "T",
            "version": 1,
            "language": "en",
            "commonRequirements": [
                {"id": "TONE", "category": "TONE", "text": "Be polite.", "violationScore": 3},
                {"id": "ASK", "category": "PROCESS", "text": "Ask first.", "violationScore": 2},
                {
                    "id": "LEAK",
                    "category": "BRAND",
                    "text": "Never leak.",
                    "critical": True,
                    "redFlagType": "LEAK",
                    "violationScore": 1,
                },
                {"id": "FACTS", "category": "ACCURACY", "text": "Be right."},
            ],
            "intents": [{"key": "GENERAL", "name": "G", "triggerHints": "any"}],
            "redFlags": [{"type": "LEAK", "text": "leaks"}],
        }
    )


def row(
    rid: str,
    final: int,
    statuses: dict[str, RequirementStatus],
    *,
    flags: tuple[str, ...] = (),
    why: str = "",
    warnings: tuple[ProtocolWarning, ...] = (),
) -> RowResult:
    return RowResult(
        row_id=rid,
        status=RowStatus.SCORED,
        intent_key="GENERAL",
        judge_score=final,
        final_score=final,
        red_flag_types=flags,
        reference_basis=tuple(
            BasisEntry(requirement_id=k, status=s, source=BasisSource.JUDGE)
            for k, s in statuses.items()
        ),
        score_explanation=why or None,
        warnings=warnings,
    )


def low_rows(
    rows: list[RowResult],
    metadata: dict[str, dict[str, Any]] | None = None,
    by: tuple[str, ...] = (),
) -> LowRows:
    low = LowRows(pack(), 4, by, "owner")
    for seq, r in enumerate(rows):
        low.add(seq, r, RowFacts(metadata=(metadata or {}).get(r.row_id, {})))
    return low


def test_each_low_row_goes_to_its_most_severe_unmet_rule() -> None:
    low = low_rows(
        [
            row("a", 3, {"TONE": V, "ASK": P}),  # VIOLATED before PARTIAL
            row("b", 1, {"TONE": V, "ASK": V, "LEAK": V}, flags=("LEAK",)),  # red line first
            row("c", 2, {"TONE": V, "ASK": V}),  # the lower cap
            row("d", 5, {"TONE": F}),  # PASS: not low
            row("e", 2, {"TONE": F, "FACTS": V}),  # an uncapped rule
            row("f", 3, {"TONE": F}, why="vague answer"),  # nothing unmet
        ]
    )
    leads = {c.lead: c.row_ids for c in low.clusters.values()}
    assert leads == {"TONE": ["a"], "LEAK": ["b"], "ASK": ["c"], "FACTS": ["e"], None: ["f"]}
    assert (low.scored, low.low, low.unexplained_ids) == (6, 5, ["f"])
    items = action_items(low)
    # red lines first, then impact = rows × severity (5 - cap; 1 for an uncapped rule;
    # for rows no rule explains, their mean points lost)
    assert [(i.lead_requirement_id, i.severity, i.impact) for i in items] == [
        ("LEAK", 4.0, 4.0),
        ("ASK", 3.0, 3.0),
        (None, 2.0, 2.0),
        ("TONE", 2.0, 2.0),
        ("FACTS", 1.0, 1.0),
    ]
    assert [i.rank for i in items] == [1, 2, 3, 4, 5] and items[0].title.startswith("LEAK (red")


def test_states_against_a_baseline_and_new_rows_first_in_the_evidence() -> None:
    base = low_rows(
        [
            row("a", 2, {"ASK": V}),
            row("b", 3, {"TONE": V}),
            row("c", 3, {"TONE": V}),
            row("d", 2, {"FACTS": V}),
            row("e", 2, {"FACTS": V}),
        ]
    )
    now = low_rows(
        [
            row("a", 2, {"ASK": V}),
            row("x", 2, {"ASK": V}),  # ASK grew, x new in it
            row("b", 3, {"TONE": V}),  # TONE shrank
            row("d", 1, {"LEAK": V}, flags=("LEAK",)),  # LEAK new; FACTS's d moved here
        ]
    )
    items = {i.lead_requirement_id: i for i in action_items(now, base)}
    assert {k: i.state for k, i in items.items()} == {
        "ASK": "GREW",
        "TONE": "SHRANK",
        "LEAK": "NEW",
        "FACTS": "MOVED",
    }
    assert (items["ASK"].baseline_rows, items["ASK"].rows) == (1, 2)
    assert items["ASK"].new_row_ids == ("x",) and items["ASK"].evidence[0].row_id == "x"
    assert items["ASK"].evidence[0].new and not items["ASK"].evidence[1].new
    assert items["FACTS"].moved_to == {"LEAK|GENERAL|": 1} and items["FACTS"].rows == 0
    gone = action_items(low_rows([row("a", 2, {"ASK": V})]), low_rows([row("z", 2, {"TONE": V})]))
    assert [(i.lead_requirement_id, i.state) for i in gone] == [("ASK", "NEW"), ("TONE", "FIXED")]


def test_metadata_splits_clusters_and_names_the_owner() -> None:
    meta = {
        "a": {"scenario": "refund", "owner": "team-pay"},
        "b": {"scenario": "refund", "owner": "team-pay"},
        "c": {"scenario": "login", "owner": "team-id"},
    }
    rows = [row(r, 2, {"ASK": V}) for r in "abc"]
    items = action_items(low_rows(rows, meta, by=("scenario",)))
    assert [(i.slice, i.rows, i.owner) for i in items] == [
        ({"scenario": "refund"}, 2, "team-pay"),
        ({"scenario": "login"}, 1, "team-id"),
    ]
    assert items[0].key == "ASK|GENERAL|scenario=refund"


def test_an_orphan_red_flag_is_a_failure_no_rule_names() -> None:
    orphan = ProtocolWarning(code=WarningCode.ORPHAN_RED_FLAG, red_flag_type="LEAK")
    low = low_rows([row("a", 1, {"ASK": V}, flags=("LEAK",), warnings=(orphan,), why="x y")])
    assert low.unexplained_ids == ["a"] and low.texts == [("a", "x y")]
    assert [c.lead for c in low.clusters.values()] == ["ASK"]


def test_explanation_clusters_are_deterministic_and_group_by_words() -> None:
    texts = [
        ("r1", "the agent quoted a wrong price for the refund"),
        ("r2", "wrong price quoted, refund amount invented"),
        ("r3", "never asked for the order number before acting"),
        ("r4", "did not ask for the order number"),
        ("r5", "the refund price was wrong again"),
    ]
    first = explanation_clusters(texts, k=2, seed=0)
    assert first == explanation_clusters(texts, k=2, seed=0)
    groups = sorted(sorted(c.row_ids) for c in first)
    assert groups == [["r1", "r2", "r5"], ["r3", "r4"]]
    assert "price" in first[0].terms and first[0].candidate.startswith("A rule about: ")
    assert explanation_clusters([("r", "")], k=1) == []


def test_of_many_explanations_an_evenly_spaced_sample_is_clustered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import rubric_engine.actions.failures as failures

    monkeypatch.setattr(failures, "MOST", 4)
    texts = [
        (f"r{i}", f"{'wrong price' if i % 2 else 'no order number'} case {i}") for i in range(10)
    ]
    clusters = explanation_clusters(texts, k=2)
    assert sorted(r for c in clusters for r in c.row_ids) == ["r0", "r2", "r5", "r7"]
    assert clusters == explanation_clusters(texts, k=2)


def test_tfidf_and_kmeans_agree_with_scikit_learn() -> None:
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = [
        "回复没有追问病程",
        "没有追问年龄和病程",
        "报出了编造的价格",
        "价格是编造的",
        "答非所问",
    ]
    ours, vocabulary = tfidf(texts)
    theirs = TfidfVectorizer(analyzer=terms).fit(texts)
    assert list(theirs.get_feature_names_out()) == vocabulary
    assert np.allclose(ours, theirs.transform(texts).toarray())
    labels = kmeans(ours, 2, seed=3, restarts=1)
    # the same Lloyd iterations from the same start: scikit-learn with our seeding's centers
    from rubric_engine.rubric.similarity import _seed_centers

    start = _seed_centers(ours, 2, np.random.default_rng(3))
    fitted = KMeans(n_clusters=2, init=start, n_init=1, algorithm="lloyd").fit(ours)
    same = {(a, b) for a, b in zip(labels.tolist(), fitted.labels_.tolist(), strict=True)}
    assert len(same) == 2  # one-to-one: the same partition


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The regression demo (base and worse health tasks) and the starter pack's task."""
    folder = tmp_path_factory.mktemp("actions")
    store = str(folder / "s.sqlite")
    assert run("rubric", "publish", str(RUBRICS / "health_cs.yaml"), "--store", store)[0] == 0
    rows = str(CASES / "health_consult_zh.jsonl")
    for name, cassettes in (("base", CASSETTES), ("worse", CASSETTES.parent / "cassettes-worse")):
        code, out = run(
            "score",
            rows,
            "-r",
            "health_cs",
            "--store",
            store,
            "--name",
            name,
            "--cassettes",
            str(cassettes),
            "--out",
            str(folder / name),
            "-q",
        )
        assert code == 0, out
    made = run(
        "rubric",
        "init",
        "--criteria",
        str(CASES.parent / "examples" / "criteria" / "health_start.txt"),
        "--key",
        "health_start",
        "--out",
        str(folder / "hs.yaml"),
    )
    assert made[0] == 0, made[1]
    code, out = run(
        "score",
        rows,
        "-r",
        str(folder / "hs.yaml"),
        "--draft",
        "--store",
        store,
        "--name",
        "start",
        "--cassettes",
        str(CASSETTES),
        "--out",
        str(folder / "start"),
        "-q",
    )
    assert code == 0, out  # the starter pack's authored cassette replays: no miss
    code, out = run(
        "score",
        rows,
        "-r",
        "health_cs",
        "--store",
        store,
        "--name",
        "v3",
        "--prompt",
        "judge_v3",
        "--cassettes",
        str(CASSETTES.parent / "cassettes-v3"),
        "--out",
        str(folder / "v3"),
        "-q",
    )
    assert code == 0, out
    return folder / "s.sqlite"


def test_the_demo_against_its_baseline_lists_the_clusters_that_grew(demo_store: Path) -> None:
    code, out = run(
        "actions",
        "worse",
        "--baseline",
        "base",
        "--store",
        str(demo_store),
        "--state",
        "NEW",
        "--state",
        "GREW",
    )
    assert code == 0, out
    assert "26 low row(s) of 26" in out and "1 NEW, 2 GREW, 8 SAME, 1 MOVED" in out
    sections = [ln for ln in out.splitlines() if ln.startswith("## ")]
    assert sections[:3] == [
        "## 6. COMMON_QUESTIONS_CARD_NO_OVERREACH (red line CARD_VIOLATION) in HEALTH_CONSULTATION",
        "## 7. COMMON_KNOWLEDGE_ACCURACY (rule) in HEALTH_CONSULTATION",
        "## 8. INTENT_HEALTH_TRIAGE (rule) in HEALTH_CONSULTATION",
    ]
    assert "GREW: 3 → 4 rows against baseline task" in out
    assert "- `medgpt-45` final score 2 (new in this cluster):" in out
    assert "**New since the baseline**: medgpt-24" in out


def test_issue_bodies_validate_against_githubs_shape(demo_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "issues.json"
    code, said = run(
        "actions",
        "worse",
        "--baseline",
        "base",
        "--store",
        str(demo_store),
        "--format",
        "github",
        "--top",
        "0",
        "--out",
        str(out),
    )
    assert code == 0 and "wrote" in said and "2 GREW" in said
    issues = json.loads(out.read_text("utf-8"))
    jsonschema.validate(issues, GITHUB_ISSUES)
    assert len(issues) == 12
    grew = [i for i in issues if "state:grew" in i["labels"]]
    assert [i["title"] for i in grew] == [
        "[GREW] COMMON_KNOWLEDGE_ACCURACY (rule) in HEALTH_CONSULTATION: 4 low row(s)",
        "[GREW] INTENT_HEALTH_TRIAGE (rule) in HEALTH_CONSULTATION: 3 low row(s)",
    ]
    assert "**Evidence**:" in grew[0]["body"] and "medgpt-45" in grew[0]["body"]
    with pytest.raises(jsonschema.ValidationError):  # the schema is not a rubber stamp
        jsonschema.validate([{"title": "x", "labels": ["y" * 51]}], GITHUB_ISSUES)
    # newcomer finding: `--top 2` wrote 2 issues and said "10 item(s)"
    args = ("actions", "worse", "--store", str(demo_store), "--format", "github", "--out", str(out))
    code, said = run(*args, "--top", "2")
    written = json.loads(out.read_text("utf-8"))
    assert code == 0 and len(written) == 2, said
    assert said.startswith(f"wrote {out}: 2 item(s) of ") and "low row(s)" in said


def test_json_holds_every_item_and_the_failures_no_rule_names(demo_store: Path) -> None:
    code, out = run(
        "actions", "start", "--store", str(demo_store), "--format", "json", "--text-clusters", "3"
    )
    assert code == 0, out
    data = json.loads(out)
    assert data["rubric"] == "health_start@1" and data["baselineTaskId"] is None
    unexplained = data["unexplained"]
    assert unexplained["rowIds"] == [
        "medgpt-34",
        "medgpt-35",
        "medgpt-40",
        "medgpt-42",
        "medgpt-47-agent",
        "medgpt-13-agent",
        "medgpt-45-agent",
    ]
    groups = sorted(sorted(c["rowIds"]) for c in unexplained["clusters"])
    assert groups == [
        ["medgpt-13-agent", "medgpt-45-agent", "medgpt-47-agent"],
        ["medgpt-34", "medgpt-42"],
        ["medgpt-35", "medgpt-40"],
    ]


def test_bad_options_are_refused_with_the_choices(demo_store: Path) -> None:
    code, out = run("actions", "worse", "--store", str(demo_store), "--by", "nope")
    assert code == 2 and "no row of task" in out and "answerSource" in out
    code, out = run("actions", "worse", "--store", str(demo_store), "--state", "GREW")
    assert code == 2 and "with --baseline" in out
    code, out = run("actions", "worse", "--baseline", "start", "--store", str(demo_store))
    assert code == 2 and "compare two tasks of the same pack" in out


@pytest.mark.live
def test_summaries_are_asked_live_recorded_and_replayed(demo_store: Path, tmp_path: Path) -> None:
    from rubric_engine.testing.openai_stub import StubReply, StubServer

    answer = {
        "text": "回复须先追问关键信息再下结论",
        "critical": False,
        "violationScore": 2,
        "category": "PROCESS",
    }
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> StubReply:
        seen.append(body)
        return StubReply(content=json.dumps(answer, ensure_ascii=False))

    cassettes = tmp_path / "cassettes"
    args = [
        "actions",
        "start",
        "--store",
        str(demo_store),
        "--format",
        "json",
        "--text-clusters",
        "3",
        "--summarize",
        "--cassettes",
        str(cassettes),
    ]
    with StubServer(respond) as server:
        code, out = run(*args, "--mode", "record", "--api-base", server.base_url)
    assert code == 0, out
    assert len(seen) == 3 and "[medgpt-47-agent]" in seen[0]["messages"][1]["content"]
    summaries = [c["summary"] for c in json.loads(out)["unexplained"]["clusters"]]
    assert summaries == ["回复须先追问关键信息再下结论 | cap 2 | category PROCESS"] * 3
    code, again = run(*args)  # replay from what was recorded, no server
    assert code == 0 and json.loads(again) == json.loads(out)


def test_evidence_names_the_turns_the_judge_named_with_their_text(demo_store: Path) -> None:
    code, out = run("actions", "v3", "--store", str(demo_store), "--format", "json")
    assert code == 0, out
    first = json.loads(out)["items"][0]
    assert first["leadRequirementId"] == "INTENT_HEALTH_NO_REMOTE_DIAGNOSIS"
    turns = {e["rowId"]: e["turns"] for e in first["evidence"]}
    assert turns["medgpt-1"][0]["turn"] == 1 and turns["medgpt-1"][0]["role"] == "assistant"
    assert "肾阳虚衰而痿" in turns["medgpt-1"][0]["text"]
    code, md = run("actions", "v3", "--store", str(demo_store), "--top", "1")
    assert "  - turn 1 assistant: 男子早泄" in md and "(10 more: `--top 0` lists them all)" in md


def test_the_shipped_candidate_rules_replay_and_author_again_into_the_same_cassette(
    demo_store: Path, tmp_path: Path
) -> None:
    code, out = run("actions", "start", "--store", str(demo_store), "--summarize")
    assert code == 0, out  # replayed from cassettes/actions/, no model
    proposed = [ln for ln in out.splitlines() if ln.startswith("**Proposed criterion**")]
    assert len(proposed) == 3 and "| cap 2 | category BRAND`" in proposed[0]
    answers = CASES / "summaries" / "health_start_candidates.jsonl"
    again = tmp_path / "again.jsonl"
    args = ["--answers", str(answers), "--author", "test", "--method", "re-authored"]
    code, out = run(
        "cassette",
        "author-summary",
        "start",
        "--store",
        str(demo_store),
        *args,
        "--out",
        str(again),
    )
    assert code == 0 and "wrote 3 authored candidate rule(s)" in out, out
    shipped = CASSETTES / "actions" / "health_start_summaries.jsonl"

    def keyed(path: Path) -> list[tuple[str, Any]]:
        lines = [json.loads(ln) for ln in path.read_text("utf-8").splitlines()]
        return [(e["key"], e["attempts"][0]["response"]["choices"][0]["message"]) for e in lines]

    assert keyed(again) == keyed(shipped)
    # an answer set that is not the task's clusters is refused with both lists, nothing written
    one = tmp_path / "one.jsonl"
    one.write_text(answers.read_text("utf-8").splitlines()[0] + "\n", "utf-8")
    wrong = tmp_path / "wrong.jsonl"
    code, out = run(
        "cassette", "author-summary", "start", "--store", str(demo_store),
        "--answers", str(one), "--author", "t", "--method", "m", "--out", str(wrong),
    )  # fmt: skip
    assert code != 0 and "cluster: medgpt-34, medgpt-42" in out and not wrong.exists()
    # a cap off the scale fails the checks a replay applies
    bad = tmp_path / "bad.jsonl"
    bad.write_text(answers.read_text("utf-8").replace('"violationScore": 2', '"violationScore": 9'))
    code, out = run(
        "cassette", "author-summary", "start", "--store", str(demo_store),
        "--answers", str(bad), "--author", "t", "--method", "m", "--out", str(wrong),
    )  # fmt: skip
    assert code != 0 and "violationScore: 9 is outside the scale 1..5" in out
