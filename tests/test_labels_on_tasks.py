"""A label applies to the dialogue it was made on (docs/calibration.md "Labels pinned to what
they judged"): the eval set scored again with a rewritten answer under the same rowId does not
take the labels of the old answer, in calibrate, labels export or a re-import; labels stored
before dialogues were pinned keep applying, counted. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.labels.model import Label
from rubric_engine.labels.store import append_labels, read_labels
from rubric_engine.store.task_store import TaskStore
from rubric_engine.testing.openai_stub import StubServer, load_verdicts, verdicts_responder
from tests.conftest import CASES, RUBRICS

runner = CliRunner()
TRIAGE = "INTENT_HEALTH_TRIAGE"


def bob(row: str, status: str) -> str:
    """A JSONL line: bob's label of the triage requirement on ``row``."""
    line = {"rowId": row, "requirementId": TRIAGE, "status": status, "reviewer": "bob"}
    return json.dumps(line) + "\n"


def run(*args: object) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def score(store: str, rows: Path, verdicts: dict[str, Any], name: str, out: Path) -> str:
    with StubServer(verdicts_responder(verdicts)) as server:
        code, text = run("score", rows, "--rubric", "health_cs", "--store", store, "--name", name,
                         "--out", out, "--display", "none", "--mode", "live",
                         "--api-base", server.base_url, "--model", "openai/stub-judge")  # fmt: skip
    assert code == 0, text
    return text.split("task id: ")[1].split()[0]


@pytest.fixture
def two_runs(store_at: str, tmp_path: Path) -> tuple[str, str, str]:
    """h1: medgpt-1 (a poor answer the judge finds unmet on triage) and medgpt-2; h2: the same
    rows with medgpt-1's answer rewritten into a good one (the judge finds nothing unmet) and
    a new run note in its metadata on medgpt-2 (the dialogue itself unchanged)."""
    rows = [
        json.loads(line)
        for line in (CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines()
    ][:2]
    verdicts = load_verdicts(CASES / "verdicts" / "health_cs.jsonl")
    first = tmp_path / "h1.jsonl"
    first.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    rows[0]["messages"][-1]["content"] = "建议尽快到男科就诊，医生会根据检查结果给出治疗方案。"
    rows[1]["metadata"]["agentVersion"] = "v2"
    second = tmp_path / "h2.jsonl"
    second.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    assert run("rubric", "publish", RUBRICS / "health_cs.yaml", "--store", store_at)[0] == 0
    h1 = score(store_at, first, verdicts, "h1", tmp_path / "r1")
    good = {**verdicts["medgpt-1"], "score": 5, "redFlagTypes": [],
            "unmetRequirementIds": [], "partialRequirementIds": []}  # fmt: skip
    h2 = score(store_at, second, {**verdicts, "medgpt-1": good}, "h2", tmp_path / "r2")
    labels = tmp_path / "bob.jsonl"
    labels.write_text(bob("medgpt-1", "VIOLATED") + bob("medgpt-2", "VIOLATED"), "utf-8")
    code, out = run("labels", "import", labels, "--task", h1, "--store", store_at)
    assert code == 0 and "imported 2 label(s)" in out, out
    return store_at, h1, h2


def test_labels_of_a_rewritten_answer_are_left_out_of_calibrate_and_export(
    two_runs: tuple[str, str, str], tmp_path: Path
) -> None:
    store, h1, h2 = two_runs
    code, out = run("calibrate", h1, "--no-save", "--store", store)
    assert code == 0 and "pairs compared: 2 (TP 2, FP 0, FN 0, TN 0)" in out, out
    assert "different dialogue" not in out and "name no dialogue" not in out
    # h2's medgpt-1 is another answer: bob's VIOLATED on the old one is no miss of the judge
    code, out = run("calibrate", h2, "--no-save", "--store", store)
    assert code == 0 and "pairs compared: 1 (TP 1, FP 0, FN 0, TN 0)" in out, out
    assert "left out: 1 label(s) made on a different dialogue" in out
    code, out = run("calibrate", h2, "--no-save", "--store", store, "--format", "json")
    chosen = json.loads(out)["labels"]
    assert chosen["otherDialogue"] == 1 and chosen["count"] == 1 and chosen["noDialoguePin"] == 0
    code, out = run("labels", "export", h1, "--store", store)
    assert code == 0 and [json.loads(line)["rowId"] for line in out.splitlines()] == [
        "medgpt-1",
        "medgpt-2",
    ]
    exported = tmp_path / "h1-labels.jsonl"
    exported.write_text(out, "utf-8")
    code, out = run("labels", "export", h2, "--store", store)
    assert code == 0 and [json.loads(line)["rowId"] for line in out.splitlines()] == ["medgpt-2"]
    # h1's export imported against h2: the line of the old answer is refused, by name
    code, out = run("labels", "import", exported, "--task", h2, "--store", store)
    assert code == 2 and "(row medgpt-1): dialogueHash" in out and "another dialogue" in out, out
    assert "medgpt-2): dialogueHash" not in out
    code, out = run("calibrate", h2, "--labels", exported, "--no-save", "--store", store)
    assert code == 2 and "(row medgpt-1): dialogueHash" in out, out
    with TaskStore(store) as opened:
        assert len(read_labels(opened.backend)) == 2


def test_the_same_judgment_on_each_dialogue_is_kept_for_each(
    two_runs: tuple[str, str, str], tmp_path: Path
) -> None:
    """bob labels h2's rewritten answer FOLLOWED: a label of its own, beside (not superseding)
    his label of h1's answer, which h1 keeps using; h2 no longer counts that one as left out
    (bob labelled the requirement again on h2's answer)."""
    store, h1, h2 = two_runs
    file = tmp_path / "h2.jsonl"
    file.write_text(bob("medgpt-1", "FOLLOWED"), "utf-8")
    code, out = run("labels", "import", file, "--task", h2, "--store", store)
    assert code == 0 and "imported 1 label(s)" in out and "(0 superseding" in out, out
    code, out = run("calibrate", h1, "--no-save", "--store", store)
    assert "pairs compared: 2 (TP 2, FP 0, FN 0, TN 0)" in out, out
    code, out = run("calibrate", h2, "--no-save", "--store", store)
    assert "pairs compared: 2 (TP 1, FP 0, FN 0, TN 1)" in out, out
    assert "different dialogue" not in out


def test_a_label_stored_before_dialogues_were_pinned_applies_as_before_and_is_counted(
    two_runs: tuple[str, str, str],
) -> None:
    """A label without dialogueHash (stored by an earlier rubric-eval, or imported with a
    rubricKey and no task) applies to every task's row of its rowId; calibrate says how many
    it used. A label imported against a task over it, with the same judgment, changes
    nothing; with another, supersedes it."""
    store, h1, h2 = two_runs
    with TaskStore(store) as opened:
        old = Label(row_id="medgpt-2", requirement_id=TRIAGE, status="VIOLATED", reviewer="cy",
                    rubric_key="health_cs", rubric_version=1,
                    rubric_hash=opened.task(h1).rubric_hash)  # fmt: skip
        (stored,) = append_labels(opened.backend, [old]).added
        assert stored.dialogue_hash is None
    for task in (h1, h2):
        code, out = run("calibrate", task, "--no-save", "--store", store, "--format", "json")
        assert code == 0 and json.loads(out)["labels"]["noDialoguePin"] == 1, out
        code, out = run("calibrate", task, "--no-save", "--store", store)
        assert "1 label(s) used name no dialogue" in out, out
    with TaskStore(store) as opened:
        again = append_labels(opened.backend, [old.model_copy(update={"task_id": h2})])
        assert again.unchanged == 1
        edit = old.model_copy(update={"task_id": h2, "status": "FOLLOWED"})
        (new,) = append_labels(opened.backend, [edit]).added
        assert new.supersedes == stored.label_id and new.dialogue_hash is not None


def test_a_label_edited_in_the_store_is_refused_by_calibrate_and_export(
    two_runs: tuple[str, str, str],
) -> None:
    """bob's VIOLATED edited into FOLLOWED in place (its trigger dropped first): calibrate and
    labels export used the edited label; now they refuse, naming both labels."""
    store, h1, _ = two_runs
    with TaskStore(store) as opened:
        db = opened.backend
        ids = [lab.label_id for lab in read_labels(db)]
        sqlite = db.dialect != "postgres"
        db.execute(
            "DROP TRIGGER labels_no_update" if sqlite else "DROP TRIGGER labels_no_change ON labels"
        )
        db.execute("UPDATE labels SET label=replace(label, '\"VIOLATED\"', '\"FOLLOWED\"')")
        db.commit()
    for command in (("calibrate", h1, "--no-save"), ("labels", "export", h1)):
        code, out = run(*command, "--store", store)
        assert code != 0 and "2 stored label(s) were changed after they were stored" in out, out
        assert all(f"{label_id} (row medgpt-" in out for label_id in ids)
        assert "restore it from a backup" in out and "pairs compared" not in out
