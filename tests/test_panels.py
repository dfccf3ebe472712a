"""Judge panels (docs/panels.md): ``score --judge A --judge B`` asks every row of each judge,
keeps every answer as its judge's sample, aggregates them by docs/stability.md's rules, and
reports how far the judges agreed (Cohen's κ per pair).

The aggregate is checked against the independent reference aggregator of
``tests/test_samples.py`` (written from the rules' text); the panel section's agreement and κ
against a computation here (κ by scikit-learn and by a hand-worked example).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_engine.engine import ScoreOptions, score
from rubric_engine.errors import ConfigurationError
from rubric_engine.report.panel_section import cohen_kappa, judge_verdicts
from rubric_engine.results.model import RequirementStatus, RowStatus
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.openai_stub import StubReply, StubServer, row_id_of
from tests.conftest import CASES, RUBRICS
from tests.test_cli import run
from tests.test_samples import (
    FAST,
    ORDER,
    REQS,
    RUBRIC,
    STRICT,
    VERDICTS,
    as_compared,
    judged,
    reference,
    sample_verdicts,
    subset,
)

A, B = "openai/judge-a", "openai/judge-b"
LOOPBACK = "http://127.0.0.1:9/v1"  # never called: the options are refused first
S = RequirementStatus


def second_opinion(verdict: dict[str, Any], sample: int) -> dict[str, Any]:
    """Judge B's answer: stricter than A's on one more requirement, a point lower, and on its
    first sample without A's red flags (so a flag raised by A alone is split 1 of 2)."""
    out = dict(verdict)
    unmet = list(out.get("unmetRequirementIds") or [])
    spare = [
        r.id
        for r in RUBRIC.applicable_requirements(out["intentKey"])
        if r.id not in unmet and r.id not in (out.get("partialRequirementIds") or [])
        and not r.critical
    ]  # fmt: skip
    if spare:
        out["unmetRequirementIds"] = [*unmet, spare[sample % len(spare)]]
    out["score"] = max(1, out["score"] - 1)
    if sample == 1:
        out["redFlagTypes"] = []
    return out


class Panel:
    """Answers judge A with the demo verdicts and judge B with :func:`second_opinion`; counts
    the requests of each (row, model as sent); ``fail_b``: rows whose judge-B requests fail (HTTP
    500) until ``release`` is set."""

    def __init__(self, fail_b: frozenset[str] = frozenset()) -> None:
        self.asked: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()
        self.fail_b = fail_b
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> StubReply:
        row, model = row_id_of(body) or "", str(body.get("model"))
        with self.lock:
            n = self.asked[(row, model)]
            self.asked[(row, model)] += 1
        verdict = VERDICTS[row]
        if model.endswith("judge-b"):
            if row in self.fail_b and not self.release.is_set():
                return StubReply(status=500, content="overloaded")
            verdict = second_opinion(verdict, n + 1)
        return StubReply(content=json.dumps(verdict, ensure_ascii=False))


def options(tmp_path: Path, rows: Path, mode: str, **extra: Any) -> ScoreOptions:
    extra.setdefault("concurrency", 3)
    return ScoreOptions(
        inputs=[rows], rubric=RUBRICS / "health_cs.yaml", draft=True, mode=mode,  # type: ignore[arg-type]
        model=A, panel=(A, B), store=tmp_path / "s.sqlite", out=tmp_path / mode,
        cassettes=tmp_path / "cassettes", retry=FAST, **extra,
    )  # fmt: skip


def panel_reference(rows: list[Any]) -> dict[str, Any]:
    """The panel section's figures worked out here: per requirement the share of rows both
    judges gave the same status; per pair sklearn's κ over the (row, requirement) pairs."""
    from sklearn.metrics import cohen_kappa_score

    first: list[str] = []
    second: list[str] = []
    per_req: dict[str, list[bool]] = {}
    for row in rows:
        own = {}
        for judge in (1, 2):
            samples = [s.result for s in row.samples if s.judge == judge]
            own[judge] = (
                reference(samples)["statuses"]
                if len(samples) > 1
                else {e.requirement_id: str(e.status) for e in samples[0].reference_basis}
            )
        for rid in own[1].keys() & own[2].keys():
            first.append(own[1][rid])
            second.append(own[2][rid])
            per_req.setdefault(rid, []).append(own[1][rid] == own[2][rid])
    return {
        "kappa": round(float(cohen_kappa_score(first, second)), 4),
        "items": len(first),
        "requirements": {rid: round(sum(v) / len(v), 4) for rid, v in per_req.items()},
    }


@pytest.mark.live
def test_a_two_judge_panel_keeps_every_answer_and_aggregates_by_the_rules(
    tmp_path: Path,
) -> None:
    rows = subset(tmp_path, 8)
    judge = Panel()
    with StubServer(judge) as server:
        task = score(options(tmp_path, rows, "live", api_base=server.base_url, samples=2)).task_id
    assert set(judge.asked.values()) == {2} and len(judge.asked) == 16  # 8 rows × 2 judges
    with TaskStore(tmp_path / "s.sqlite") as store:
        stored = list(store.rows(task))
        record = store.task(task)
    assert record.extra["sampling"] == {"samples": 2, "judges": [A, B]}
    split = 0
    for row in stored:
        assert [(s.judge, s.sample, s.model) for s in row.samples] == [
            (1, 1, A), (1, 2, A), (2, 1, B), (2, 2, B),
        ]  # fmt: skip
        assert as_compared(row.result) == reference([s.result for s in row.samples])
        assert row.result.samples is not None
        assert [(s.judge, s.sample) for s in row.result.samples] == [(1, 1), (1, 2), (2, 1), (2, 2)]
        assert row.calls == 4
        # a red flag judge A raised and judge B dropped on one of its samples: 3 of 4 keep it
        split += bool(row.samples[0].result.red_flag_types)
    assert split  # the scripted rows include flagged ones
    report = json.loads((tmp_path / "live" / "report.json").read_text("utf-8"))
    panel = report["panel"]
    assert report["task"]["judges"] == [A, B]
    assert [j["model"] for j in panel["judges"]] == [A, B] and panel["rows"] == 8
    expected = panel_reference(stored)
    (pair,) = panel["pairs"]
    assert pair["judges"] == [1, 2] and pair["items"] == expected["items"]
    assert pair["kappa"] == expected["kappa"]
    assert {r["requirementId"]: r["agreement"] for r in panel["requirements"]} == expected[
        "requirements"
    ]
    assert any(r["agreement"] < 1 for r in panel["requirements"])  # the judges disagree
    md = (tmp_path / "live" / "report.md").read_text("utf-8")
    assert "## Judge panel" in md and f"| 1 vs 2 | {expected['items']} |" in md
    html = (tmp_path / "live" / "report.html").read_text("utf-8")
    assert 'id="panel"' in html and "judge-b" in html
    code, out = run("verify", task, "--store", tmp_path / "s.sqlite")
    assert code == 0 and "8 of 8 row(s) re-derived" in out, out
    code, out = run(
        "gate", task, "--store", tmp_path / "s.sqlite", "--threshold", "panel.kappa>=0.99"
    )
    assert code == 7 and "panel.kappa" in out, out


@pytest.mark.live
def test_a_recorded_panel_replays_byte_for_byte(tmp_path: Path) -> None:
    rows = subset(tmp_path, 6)
    judge = Panel()
    with StubServer(judge) as server:
        score(options(tmp_path, rows, "record", api_base=server.base_url))
    assert len(judge.asked) == 12 and set(judge.asked.values()) == {1}
    entries = [
        json.loads(line)
        for path in (tmp_path / "cassettes").rglob("*.jsonl")
        for line in path.read_text("utf-8").splitlines()
    ]
    # each judge's call keyed by its own model, as a single ask's: no judge part in the key
    assert sorted(e["keyParts"]["model"] for e in entries) == [A] * 6 + [B] * 6
    assert not any("judge" in e["keyParts"] or "sample" in e["keyParts"] for e in entries)
    replayed = score(options(tmp_path, rows, "replay")).task_id
    assert (tmp_path / "record" / "rows.jsonl").read_bytes() == (
        tmp_path / "replay" / "rows.jsonl"
    ).read_bytes()
    code, out = run("verify", replayed, "--store", tmp_path / "s.sqlite")
    assert code == 0, out
    # judge A alone replays its calls exactly as one judge (its keys are a single ask's)
    alone = ScoreOptions(
        inputs=[rows], rubric=RUBRICS / "health_cs.yaml", draft=True, model=A,
        store=tmp_path / "s.sqlite", out=tmp_path / "single", cassettes=tmp_path / "cassettes",
    )  # fmt: skip
    single = score(alone)
    assert single.report.totals.judge_errors == 0


@pytest.mark.live
def test_resume_asks_no_stored_judge_again(tmp_path: Path) -> None:
    rows = subset(tmp_path, 6)
    lines = rows.read_text("utf-8").splitlines()
    failing = frozenset(json.loads(line)["rowId"] for line in lines[:2])
    judge = Panel(fail_b=failing)
    with StubServer(judge) as server:
        first = score(options(tmp_path, rows, "live", api_base=server.base_url))
        assert first.report.totals.judge_errors == 2
        with TaskStore(tmp_path / "s.sqlite") as store:
            kept = store.unfinished_samples(first.task_id, frozenset())
        for row in failing:  # judge A's answer stored, judge B's failed
            assert [(s.judge, s.result.status) for s in kept[row]] == [
                (1, RowStatus.SCORED), (2, RowStatus.JUDGE_ERROR),
            ]  # fmt: skip
        judge.release.set()
        before = Counter(judge.asked)
        code, out = run("score", "--resume", first.task_id, "--store", tmp_path / "s.sqlite")
        assert code == 0, out
        resumed = judge.asked - before
    assert resumed == Counter({(row, "judge-b"): 1 for row in failing})  # not judge A again
    with TaskStore(tmp_path / "s.sqlite") as store:
        done = list(store.rows(first.task_id))
    assert all(r.result.status is RowStatus.SCORED and len(r.samples) == 2 for r in done)
    code, out = run("verify", first.task_id, "--store", tmp_path / "s.sqlite")
    assert code == 0, out


def test_cohen_kappa_of_a_hand_worked_example() -> None:
    # 10 items: both FOLLOWED 4, both VIOLATED 3, FOLLOWED/VIOLATED 2, VIOLATED/FOLLOWED 1.
    # observed 7/10; rater 1 FOLLOWED 6, VIOLATED 4; rater 2 FOLLOWED 5, VIOLATED 5;
    # chance 0.6·0.5 + 0.4·0.5 = 0.5; κ = (0.7 − 0.5) / (1 − 0.5) = 0.4
    pairs = Counter(
        {(S.FOLLOWED, S.FOLLOWED): 4, (S.VIOLATED, S.VIOLATED): 3,
         (S.FOLLOWED, S.VIOLATED): 2, (S.VIOLATED, S.FOLLOWED): 1}
    )  # fmt: skip
    kappa = cohen_kappa(pairs)
    assert kappa is not None and abs(kappa - 0.4) < 1e-12
    assert cohen_kappa(Counter({(S.FOLLOWED, S.FOLLOWED): 5})) is None  # one status: undefined
    assert cohen_kappa(Counter()) is None


def test_cohen_kappa_matches_scikit_learn() -> None:
    from sklearn.metrics import cohen_kappa_score

    statuses = list(S)
    first = [statuses[(i * 7) % 4] for i in range(40)]
    second = [statuses[(i * 7 + (i % 3 == 0)) % 4] for i in range(40)]
    kappa = cohen_kappa(Counter(zip(first, second, strict=True)))
    assert kappa is not None
    assert abs(kappa - cohen_kappa_score([str(s) for s in first], [str(s) for s in second])) < 1e-12


def test_a_judges_own_verdict_is_its_samples_vote_ties_to_the_stricter() -> None:
    from rubric_engine.results.model import SampleSummary

    def summary(judge: int, sample: int, status: S, score: int) -> SampleSummary:
        return SampleSummary(
            judge=judge, sample=sample, status=RowStatus.SCORED, final_score=score,
            statuses={"R": status},
        )  # fmt: skip

    verdicts = judge_verdicts(
        [summary(1, 1, S.FOLLOWED, 4), summary(1, 2, S.PARTIAL, 3), summary(2, 1, S.FOLLOWED, 5)]
    )
    assert verdicts == {1: ({"R": S.PARTIAL}, 3), 2: ({"R": S.FOLLOWED}, 5)}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--judge", A, "--judge", A], "given more than once"),
        (  # a bare name is sent to the provider litellm's table lists for it
            ["--judge", "openai/gpt-4o-mini", "--judge", "gpt-4o-mini"],
            "--judge openai/gpt-4o-mini (as openai/gpt-4o-mini, gpt-4o-mini) is given more "
            "than once",
        ),
        (  # with --api-base a bare name is openai/
            ["--judge", "m1", "--judge", "openai/m1", "--mode", "live", "--api-base", LOOPBACK],
            "--judge openai/m1 (as m1, openai/m1) is given more than once",
        ),
        (  # litellm knows no provider "OpenAI"
            ["--judge", "openai/gpt-4o-mini", "--judge", "OpenAI/gpt-4o-mini"],
            "no provider is named 'OpenAI' (litellm's provider names are lower case): write "
            "--judge openai/gpt-4o-mini, which is judge 1 already",
        ),
        (["--judge", A, "--judge", "none"], "cannot be combined"),
        (["--judge", A, "--judge", B, "--mode", "batch"], "not supported with --mode batch"),
        (["--judge", A, "--judge", B, "--model", "openai/other"], "both name the judge"),
        (["--judge", A, "--judge", B, "--samples", "3", "--samples-when", "unsure"], "unsure"),
    ],
)
def test_a_panel_refuses_what_it_cannot_do_with_a_clear_message(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    code, out = run(
        "score", CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--store", tmp_path / "s.sqlite", *flags,
    )  # fmt: skip
    assert code == 2 and message in out, out


def test_a_bare_name_resolves_to_the_provider_litellm_gives_it() -> None:
    from rubric_engine.engine.panel import resolved_judge
    from rubric_engine.judge.backends import import_litellm

    for bare in ("gpt-4o-mini", "gpt-4o"):
        provider = import_litellm().get_llm_provider(model=bare)[1]
        assert resolved_judge(bare, None) == f"{provider}/{bare}" == f"openai/{bare}"
    assert resolved_judge("no-such-model-x", None) == "no-such-model-x"
    assert resolved_judge("anthropic/claude-x", "http://h/v1") == "anthropic/claude-x"


def test_a_panels_cassette_miss_names_judge_not_model(tmp_path: Path) -> None:
    from tests.conftest import CASSETTES

    code, out = run(
        "score", CASES / "health_panel_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--judge", "openai/gpt-4o-mini", "--judge", "openai/other-judge", "--cassettes",
        CASSETTES, "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o",
    )  # fmt: skip
    assert code != 0 and "cassette has 'openai/gpt-4o-mini'; pass --judge openai/gpt-4o-mini" in (
        " ".join(out.split())
    ), out
    assert "pass --model" not in " ".join(out.split()), out


def test_the_library_refuses_a_panel_whose_first_judge_is_not_the_model() -> None:
    from rubric_engine.engine.options import check_options

    with pytest.raises(ConfigurationError, match="first judge"):
        check_options(
            ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"], rubric="x", panel=(A, B))
        )


def test_one_judge_model_is_the_same_as_model(tmp_path: Path) -> None:
    from tests.conftest import CASSETTES

    code, out = run(
        "score", CASES / "health_consult_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--judge", "openai/gpt-4o-mini", "--cassettes", CASSETTES, "--store", tmp_path / "s.sqlite",
        "--out", tmp_path / "o", "-q",
    )  # fmt: skip
    assert code == 0, out
    report = json.loads((tmp_path / "o" / "report.json").read_text("utf-8"))
    assert "panel" not in report and "judges" not in report["task"]


def test_a_dry_run_counts_and_prices_every_judge_of_a_panel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    rows = CASES / "health_panel_zh.jsonl"

    def dry(*flags: str) -> tuple[int, float]:
        code, text = run(
            "score", rows, "-r", RUBRICS / "health_cs.yaml", "--draft", "--mode", "live",
            "--store", tmp_path / "s.sqlite", "--dry-run", *flags,
        )  # fmt: skip
        assert code == 0, text
        calls = re.search(r"judge calls: (\d+)", text)
        cost = re.search(r"cost: at most ([0-9.]+) USD", text)
        assert calls and cost, text
        return int(calls.group(1)), float(cost.group(1))

    mini = dry("--model", "openai/gpt-4o-mini")
    large = dry("--model", "openai/gpt-4o")
    panel = dry("--judge", "openai/gpt-4o-mini", "--judge", "openai/gpt-4o", "--samples", "2")
    assert mini[0] == large[0] == 4 and panel[0] == 4 * 2 * 2
    assert panel[1] == pytest.approx(2 * (mini[1] + large[1]), abs=2e-4)  # each at its price
    assert not (tmp_path / "s.sqlite").exists()


def test_the_summary_names_the_panel(tmp_path: Path) -> None:
    code, out = run(
        "score", CASES / "health_panel_zh.jsonl", "-r", RUBRICS / "health_cs.yaml", "--draft",
        "--judge", "openai/gpt-4o-mini", "--judge", "openai/gpt-4o",
        "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o", "--display", "none",
    )  # fmt: skip
    assert code == 0, out
    said = " ".join(out.split())
    assert "panel of 2 judges" in out and "openai/gpt-4o-mini, openai/gpt-4o" in said, out
    assert "answers from 8 authored cassette entries, not from these models" in said, out


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(sample_verdicts(), st.integers(2, 3)), min_size=1, max_size=4))
def test_the_panel_section_is_the_reference_on_random_panels(
    rows: list[tuple[list[dict[str, Any]], int]],
) -> None:
    """Random answers dealt to 2–3 judges: the row's aggregate is the reference aggregator's,
    and the section's agreement and κ are those worked out here from each judge's own vote."""
    import math

    from sklearn.metrics import cohen_kappa_score

    from rubric_engine.report.panel_section import PanelCounts
    from rubric_engine.results.samples import Sample, aggregate_samples

    counts = PanelCounts()
    pairs: dict[tuple[int, int], tuple[list[str], list[str]]] = {}
    for verdicts, judges in rows:
        results = [judged(v) for v in verdicts]
        dealt = [Sample(1 + n % judges, 1 + n // judges, r) for n, r in enumerate(results)]
        dealt.sort(key=lambda s: (s.judge, s.sample))
        got = aggregate_samples(dealt, REQS, ORDER)
        assert as_compared(got) == reference([s.result for s in dealt])
        counts.add(got)
        own: dict[int, dict[str, str]] = {}
        for s in dealt:  # each judge's own vote: majority, a tie to the stricter
            votes = own.setdefault(s.judge, {})
            for e in s.result.reference_basis:
                votes[e.requirement_id] = votes.get(e.requirement_id, "") + str(e.status) + " "
        own = {
            j: {rid: max(STRICT, key=lambda st: (v.split().count(st), STRICT.index(st)))
                for rid, v in votes.items()}
            for j, votes in own.items()
        }  # fmt: skip
        present = sorted(own)
        for a, b in ((a, b) for a in present for b in present if a < b):
            first, second = pairs.setdefault((a, b), ([], []))
            for rid in sorted(own[a].keys() & own[b].keys()):
                first.append(own[a][rid])
                second.append(own[b][rid])
    section = counts.section()
    multi = [v for v, j in rows if min(len(v), j) > 1]
    if not multi:
        assert section is None
        return
    assert section is not None and section.rows == len(multi)
    for pair in section.pairs:
        first, second = pairs[pair.judges]
        assert pair.items == len(first)
        if len(set(first) | set(second)) == 1:
            assert pair.kappa is None
            continue
        expected = cohen_kappa_score(first, second)
        if math.isnan(expected):
            assert pair.kappa is None
        else:
            # rounded to 4 places from its own float sum: a tie (0.21875) may round either way
            assert pair.kappa is not None and abs(pair.kappa - float(expected)) <= 5e-5 + 1e-9
