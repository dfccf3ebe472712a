"""``rubric-eval rubric draft`` (docs/authoring.md "From prose to a draft"): a pack proposed
from policy prose replays from its cassette into a DRAFT that validates, every quoted source
line is in the policy, and a bad answer is re-asked with its problems (live, loopback stub)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.rubric import load_rubric
from rubric_engine.rubric.proposal import PolicyText, read_reply
from rubric_engine.testing.openai_stub import StubReply, StubServer
from tests.conftest import CASES, CASSETTES

POLICY = CASES / "policies" / "retail_policy.md"
PROPOSAL = CASES / "drafts" / "retail_cs_proposal.json"
MODEL = "openai/gpt-4o-mini"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def draft(out: Path, *more: str) -> tuple[int, str]:
    return run(
        "rubric",
        "draft",
        str(POLICY),
        "--model",
        MODEL,
        "--key",
        "retail_cs",
        "--out",
        str(out),
        *more,
    )


def test_the_shipped_draft_replays_into_a_pack_whose_every_source_line_is_in_the_policy(
    tmp_path: Path,
) -> None:
    out = tmp_path / "retail.yaml"
    code, said = draft(out, "--cassettes", str(CASSETTES))
    assert code == 0, said
    assert "7 intent(s), 27 requirement(s) (10 red line(s))" in said and "answer: authored" in said
    pack = load_rubric(out)
    assert pack.status == "DRAFT" and pack.key == "retail_cs"
    text = out.read_text("utf-8")
    assert "Nothing is published" in text and "an authored answer replayed" in text
    # every requirement names its lines; each quote of the proposal is on those lines
    policy_lines = POLICY.read_text("utf-8").splitlines()
    proposal = json.loads(PROPOSAL.read_text("utf-8"))
    quotes = {
        r["id"]: [s["quote"] for s in r["sources"]]
        for r in [
            *proposal["commonRequirements"],
            *(q for i in proposal["intents"] for q in i.get("requirements", [])),
        ]
    }
    assert set(quotes) == set(pack.requirements_by_id)
    for rid, req in pack.requirements_by_id.items():
        assert req.source and req.source.startswith("retail_policy.md:"), rid
        numbers: list[int] = []
        for span in req.source.split(":", 1)[1].split(","):
            first, _, last = span.partition("-")
            numbers += range(int(first), int(last or first) + 1)
        held = " ".join(policy_lines[n - 1] for n in numbers).replace("**", "")
        for quote in quotes[rid]:
            assert " ".join(quote.split()) in " ".join(held.split()), (rid, quote)
        assert f"# from retail_policy.md:{numbers[0]}" in text


def test_a_quote_not_in_the_policy_is_found_out() -> None:
    policy = PolicyText("p.md", "# Title\n\n- **cancel or modify\n  pending orders**\nOther.\n")
    found = policy.find("cancel or modify pending orders")
    assert found is not None and (found.first, found.last) == (3, 4)
    assert policy.find("cancel any order") is None
    proposal, problems = read_reply('```json\n{"key": "x"}\n```')
    assert proposal is None and any("intents" in p for p in problems)


def test_author_draft_refuses_a_proposal_whose_quote_is_not_in_the_policy(tmp_path: Path) -> None:
    bad = json.loads(PROPOSAL.read_text("utf-8"))
    bad["commonRequirements"][0]["sources"][0]["quote"] = "Authenticate users by their phone."
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    code, said = run(
        "cassette",
        "author-draft",
        str(POLICY),
        "--proposal",
        str(path),
        "--key",
        "retail_cs",
        "--author",
        "t",
        "--method",
        "t",
        "--out",
        str(tmp_path / "c.jsonl"),
    )
    assert code == 2
    assert (
        "COMMON_AUTHENTICATE_FIRST: the quote 'Authenticate users by their phone.' is not in "
        in (said)
    )


def test_another_model_is_a_cassette_miss_that_says_how_to_record(tmp_path: Path) -> None:
    code, said = run(
        "rubric",
        "draft",
        str(POLICY),
        "--model",
        "openai/gpt-4.1",
        "--key",
        "retail_cs",
        "--cassettes",
        str(CASSETTES),
        "--out",
        str(tmp_path / "x.yaml"),
    )
    assert code == 4, said
    assert "cassette miss for row 'draft:retail_policy'" in said and "--mode record" in said
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.live
def test_a_bad_answer_is_reasked_live_and_the_recording_replays(tmp_path: Path) -> None:
    good = PROPOSAL.read_text("utf-8")
    broken = json.loads(good)
    broken["intents"][0]["requirements"][0]["sources"][0]["quote"] = "Cancel for any reason."
    replies = [json.dumps(broken), good]
    seen: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> StubReply:
        seen.append(body)
        return StubReply(content=replies[min(len(seen), 2) - 1])

    cassettes = tmp_path / "cassettes"
    with StubServer(respond) as server:
        code, said = draft(
            tmp_path / "live.yaml",
            "--mode",
            "record",
            "--cassettes",
            str(cassettes),
            "--api-base",
            server.base_url,
        )
    assert code == 0, said
    assert "1 re-ask(s)" in said
    assert len(seen) == 2
    reask = seen[1]["messages"][-1]["content"]
    assert "INTENT_CANCEL_ID_AND_REASON: the quote 'Cancel for any reason.' is not in" in reask
    recorded = cassettes / "drafts" / "retail_policy.jsonl"
    entry = json.loads(recorded.read_text("utf-8"))
    assert entry["provenance"]["kind"] == "recorded" and len(entry["attempts"]) == 2
    code, said = draft(tmp_path / "again.yaml", "--cassettes", str(cassettes))
    assert code == 0, said
    live_pack = (tmp_path / "live.yaml").read_text("utf-8").split("#\n", 1)[1]
    again = (tmp_path / "again.yaml").read_text("utf-8").split("#\n", 1)[1]
    assert live_pack == again  # the same pack, only the header says where it came from


@pytest.mark.live
def test_answers_that_never_pass_end_with_every_problem_and_no_file(tmp_path: Path) -> None:
    with StubServer(lambda body: StubReply(content="not json")) as server:
        code, said = draft(
            tmp_path / "x.yaml",
            "--mode",
            "live",
            "--api-base",
            server.base_url,
            "--max-reasks",
            "1",
        )
    assert code == 5, said
    assert "no valid answer after 1 re-ask(s)" in said and "Invalid JSON" in said
    assert not (tmp_path / "x.yaml").exists()


def test_the_draft_cassette_is_a_valid_authored_cassette(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    shutil.copytree(CASSETTES / "drafts", folder / "drafts")
    code, said = run("cassette", "check", str(folder))
    assert code == 0 and "1 entries; 1 authored" in said
