"""Rubric lifecycle (docs/rubric-packs.md): publish, retire, resolve, diff, renormalize, tamper."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from rubric_engine.errors import RubricError, StoreError
from rubric_engine.rubric import load_rubric
from rubric_engine.rubric.diff import diff_rubrics, renormalize_blockers
from rubric_engine.rubric.model import RubricStatus
from rubric_engine.rubric.versions import LifecycleError, RubricRegistry, rubric_for_scoring
from rubric_engine.store.location import is_postgres, parse_location, store_exists
from rubric_engine.store.migrations import SCHEMA_VERSION
from rubric_engine.store.task_store import TaskStore
from tests.conftest import CASES, CASSETTES, MINI_RUBRIC, RUBRICS
from tests.test_cli import run


def write_pack(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def health(**edits: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((RUBRICS / "health_cs.yaml").read_text("utf-8"))
    data.update(edits)
    return data


def requirement(data: dict[str, Any], rid: str) -> dict[str, Any]:
    every = list(data["commonRequirements"])
    for intent in data["intents"]:
        every += intent["requirements"]
    return next(r for r in every if r["id"] == rid)


def publish(store: Path, path: Path) -> tuple[int, str]:
    return run("rubric", "publish", path, "--store", store)


def score(tmp_path: Path, store: Path, rubric: str, *extra: object) -> tuple[int, str]:
    return run(
        "score",
        CASES / "health_consult_zh.jsonl",
        "-r",
        rubric,
        "--store",
        store,
        "--cassettes",
        CASSETTES,
        "--out",
        tmp_path / "out" / rubric.replace("/", "_"),
        *extra,
    )


def task_id(output: str) -> str:
    return output.rsplit("task id: ", 1)[1].split()[0]


# -- the walk-through a new user does ----------------------------------------------------------


def test_publish_score_v2_retire_v1_and_the_v1_report_rebuilds_byte_for_byte(
    tmp_path: Path,
    store_at: str,
) -> None:
    store = store_at
    code, out = publish(store, RUBRICS / "health_cs.yaml")
    assert code == 0 and "published health_cs@1" in out
    code, out = score(tmp_path, store, "health_cs")
    assert code == 0, out
    v1_task = task_id(out)
    first = {f: (tmp_path / "out/health_cs" / f).read_bytes() for f in ("report.json", "report.md")}

    v2 = health(version=2)
    requirement(v2, "COMMON_CONCISE_NATURAL")["violationScore"] = 1
    code, out = publish(store, write_pack(tmp_path / "health_v2.yaml", v2))
    assert code == 0 and "published health_cs@2" in out
    code, out = run("rubric", "retire", "health_cs@1", "--store", store)
    assert code == 0 and "retired health_cs@1; published now: health_cs@2" in out

    code, out = run("report", v1_task, "--store", store, "--out", tmp_path / "again")
    assert code == 0, out
    for name, data in first.items():
        assert (tmp_path / "again" / name).read_bytes() == data
    assert json.loads(first["report.json"])["task"]["rubricVersion"] == 1

    code, out = run("rubric", "list", "--store", store)
    assert code == 0 and "RETIRED" in out and "PUBLISHED" in out


def test_scoring_by_key_takes_the_latest_published_and_key_at_n_is_exact(
    tmp_path: Path, store_at: str
) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    publish(store, write_pack(tmp_path / "v2.yaml", health(version=2)))
    assert rubric_for_scoring("health_cs", store, draft=False).version == 2
    picked = rubric_for_scoring("health_cs@1", store, draft=False)
    assert picked.version == 1 and picked.status is RubricStatus.PUBLISHED


# -- refusals ----------------------------------------------------------------------------------


def test_republishing_an_edited_version_is_refused_and_says_publish_a_new_one(
    tmp_path: Path,
    store_at: str,
) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = publish(store, RUBRICS / "health_cs.yaml")
    assert code == 0 and "already published with this content; nothing changed" in out
    edited = health()
    requirement(edited, "COMMON_TRANSFER_PATH")["violationScore"] = 3
    code, out = publish(store, write_pack(tmp_path / "edited.yaml", edited))
    assert code == 2
    assert "health_cs@1 is already PUBLISHED with different content" in out
    assert "set `version: 2` in the file and publish that" in out
    with TaskStore(store) as opened:
        assert len(RubricRegistry(opened).versions()) == 1


def test_scoring_a_retired_version_is_refused_and_names_the_published_ones(
    tmp_path: Path,
    store_at: str,
) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    publish(store, write_pack(tmp_path / "v2.yaml", health(version=2)))
    run("rubric", "retire", "health_cs@1", "--store", store)
    code, out = score(tmp_path, store, "health_cs@1")
    assert code == 2
    assert (
        "health_cs@1 is RETIRED" in out and "use one of the published versions: health_cs@2" in out
    )
    run("rubric", "retire", "health_cs@2", "--store", store)
    code, out = score(tmp_path, store, "health_cs")
    assert code == 2 and "no PUBLISHED version of 'health_cs'" in out
    assert "v1 RETIRED, v2 RETIRED" in out


def test_a_retired_version_is_never_published_again(tmp_path: Path, store_at: str) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    run("rubric", "retire", "health_cs@1", "--store", store)
    code, out = run("rubric", "retire", "health_cs@1", "--store", store)
    assert code == 0 and "already retired" in out
    code, out = publish(store, RUBRICS / "health_cs.yaml")
    assert code == 2 and "was retired" in out and "set `version: 2`" in out


def test_publishing_an_unknown_red_flag_type_is_refused_with_the_valid_types(
    tmp_path: Path,
    store_at: str,
) -> None:
    bad = health()
    requirement(bad, "COMMON_BACKEND_EXPOSURE")["redFlagType"] = "BACKEND_LEAK"
    store = store_at
    code, out = publish(store, write_pack(tmp_path / "bad.yaml", bad))
    assert code == 2
    assert "'BACKEND_LEAK' is not declared in redFlags" in out and "BACKEND_EXPOSURE" in out
    assert "add it to redFlags or fix the spelling" in out and "nothing was published" in out


def test_a_file_needs_draft_and_the_task_says_draft(tmp_path: Path, store_at: str) -> None:
    store = store_at
    code, out = score(tmp_path, store, str(RUBRICS / "health_cs.yaml"))
    assert code == 2 and "is a pack file, i.e. a draft" in out and "--draft" in out
    assert not store_exists(parse_location(store))
    code, out = score(tmp_path, store, str(RUBRICS / "health_cs.yaml"), "--draft")
    assert code == 0, out
    report = json.loads((tmp_path / "out").glob("*/report.json").__next__().read_text("utf-8"))
    assert report["task"]["rubricStatus"] == "DRAFT"
    md = next((tmp_path / "out").glob("*/report.md")).read_text("utf-8")
    assert "(DRAFT) — a draft, not a published version" in md


def test_unknown_references_list_what_exists(tmp_path: Path, store_at: str) -> None:
    store = store_at
    code, out = score(tmp_path, store, "health_cs")
    assert code == 2 and "nothing is published there; publish first" in out
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = score(tmp_path, store, "health_cs@7")
    assert code == 2 and "health_cs has: v1 PUBLISHED" in out
    code, out = score(tmp_path, store, "airline_cs")
    assert code == 2 and "published keys: health_cs" in out
    code, out = run("rubric", "retire", "health_cs", "--store", store)
    assert code == 2 and "retire needs an exact version: health_cs@N" in out
    code, out = score(tmp_path, store, "Health CS!")
    assert code == 2 and "write KEY or KEY@VERSION" in out


def test_a_file_that_says_retired_is_not_published(tmp_path: Path) -> None:
    code, out = publish(
        tmp_path / "s.sqlite", write_pack(tmp_path / "r.yaml", health(status="RETIRED"))
    )
    assert code == 2 and "the file says status RETIRED" in out


# -- tampering ---------------------------------------------------------------------------------


def _edit_json_column(store: str, sql_select: str, sql_update: str, edit: Any) -> None:
    with TaskStore(store) as opened:  # by hand, on either backend
        (text,) = opened.backend.execute(sql_select).fetchone()
        data = json.loads(text)
        edit(data)
        opened.backend.execute(sql_update, (json.dumps(data),))
        opened.backend.commit()


def test_a_tampered_task_snapshot_is_reported_not_rebuilt(tmp_path: Path, store_at: str) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = score(tmp_path, store, "health_cs")
    task = task_id(out)

    def loosen(snapshot: dict[str, Any]) -> None:
        snapshot["commonRequirements"][0]["violationScore"] = 5

    _edit_json_column(
        store,
        "SELECT rubric_snapshot FROM tasks",
        "UPDATE tasks SET rubric_snapshot=?",
        loosen,
    )
    code, out = run("report", task, "--store", store)
    assert code == 3
    assert f"task {task}: the stored rubric snapshot does not match the hash recorded" in out
    assert "restore the store from a backup" in out


def test_a_tampered_published_snapshot_is_refused_for_scoring(
    tmp_path: Path, store_at: str
) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    _edit_json_column(
        store,
        "SELECT snapshot FROM rubric_versions",
        "UPDATE rubric_versions SET snapshot=?",
        lambda s: s["intents"].pop(),
    )
    code, out = score(tmp_path, store, "health_cs")
    assert code == 3 and "published health_cs@1" in out and "does not match" in out


def test_an_old_store_gains_the_registry_table(tmp_path: Path) -> None:
    store = tmp_path / "old.sqlite"
    TaskStore(store).close()
    db = sqlite3.connect(store)  # as schema 1 left it: no registry table, no migration record
    db.execute("DROP TABLE rubric_versions")
    db.execute("DROP TABLE work_items")
    db.execute("DROP TABLE migrations")
    db.execute("UPDATE meta SET value='1' WHERE name='schema'")
    db.commit()
    db.close()
    code, out = publish(store, RUBRICS / "health_cs.yaml")
    assert code == 0, out
    db = sqlite3.connect(store)
    assert db.execute("SELECT value FROM meta WHERE name='schema'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    assert db.execute("SELECT COUNT(*) FROM rubric_versions").fetchone() == (1,)


# -- two writers at once -----------------------------------------------------------------------


def _publish_after(barrier: Any, store: str, path: str, results: Any) -> None:
    barrier.wait()
    try:
        with TaskStore(store) as opened:
            outcome = RubricRegistry(opened).publish(Path(path))
        results.put(("ok", outcome.created))
    except LifecycleError as exc:
        results.put(("refused", str(exc)))


@pytest.mark.parametrize("round_", range(4))
def test_two_processes_publishing_at_once_one_wins_the_other_is_refused(
    tmp_path: Path, store_at: str, round_: int
) -> None:
    store = store_at
    TaskStore(store).close()
    a = RUBRICS / "health_cs.yaml"
    other = health()
    requirement(other, "COMMON_TRANSFER_PATH")["violationScore"] = 3
    b = write_pack(tmp_path / "b.yaml", other)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    workers = [
        ctx.Process(target=_publish_after, args=(barrier, str(store), str(p), results))
        for p in ((a, b) if round_ % 2 else (b, a))
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    outcomes = sorted(results.get(timeout=5)[0] for _ in workers)
    assert outcomes == ["ok", "refused"]
    if not is_postgres(store):
        db = sqlite3.connect(store)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with TaskStore(store) as opened:
        assert opened.backend.execute("SELECT COUNT(*) FROM rubric_versions").fetchone() == (1,)


# -- diff --------------------------------------------------------------------------------------


def mini(tmp_path: Path, name: str, edit: Any = None) -> Any:
    data = yaml.safe_load(MINI_RUBRIC)
    if edit is not None:
        edit(data)
    return load_rubric(write_pack(tmp_path / f"{name}.yaml", data))


def test_diff_names_every_kind_of_change_in_words(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["version"] = 2
        common = d["commonRequirements"]
        common[1]["violationScore"] = 2  # COMMON_TONE cap 3 → 2
        common[2]["observableInData"] = True  # COMMON_CARD_SOURCE
        common[0]["text"] = "Never reveal internal tools, prompts or the knowledge base."
        chat = d["intents"][1]["requirements"].pop()  # CHAT_SHORT moves to common
        common.append(chat)
        d["intents"][0]["requirements"].pop(0)  # REFUND_VERIFY removed
        d["intents"].append(
            {"key": "COMPLAINT", "name": "Complaint", "triggerHints": "unhappy user"}
        )
        d["intents"][0]["triggerHints"] = "money back, chargeback"
        d["redFlags"] = [f for f in d["redFlags"] if f["type"] != "PRICE_DISCLOSURE"]
        d["redFlags"].append({"type": "RUDENESS", "text": "insults the user"})
        d["scoreScale"] = {"min": 1, "max": 10}

    diff = diff_rubrics(mini(tmp_path, "a"), mini(tmp_path, "b", edit))
    text = diff.render()
    assert "mini v1 → mini v2" in text
    assert "- REFUND_VERIFY removed (intent REFUND, PROCESS, cap 2)" in text
    assert "cap (violationScore): 3 → 2" in text
    assert "observable in data: no → yes" in text
    assert 'text: "Never reveal the knowledge base or prompts." → "Never reveal internal' in text
    assert 'location: "intent CHAT" → "common"' in text
    assert "+ COMPLAINT added (Complaint)" in text
    assert 'trigger hints: "the user asks for money back" → "money back, chargeback"' in text
    assert "- PRICE_DISCLOSURE removed" in text and "+ RUDENESS added" in text
    assert "score scale:" in text
    blockers = "\n".join(renormalize_blockers(diff, mini(tmp_path, "b2", edit)))
    for expected in (
        "COMMON_LEAK: text changed",
        "CHAT_SHORT: location changed",
        "COMMON_CARD_SOURCE became observable",
        "intent COMPLAINT was added",
        "red-flag type PRICE_DISCLOSURE was removed",
        "the score scale changed",
    ):
        assert expected in blockers
    assert "REFUND_VERIFY" not in blockers  # a removed rule needs no new judge call
    assert "cap" not in blockers


def test_diff_of_identical_packs_says_so(tmp_path: Path) -> None:
    text = diff_rubrics(mini(tmp_path, "a"), mini(tmp_path, "b")).render()
    assert "no changes" in text


def test_diff_command_reads_store_versions_and_files(tmp_path: Path, store_at: str) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    v2 = health(version=2)
    requirement(v2, "INTENT_HEALTH_ON_TOPIC")["observableInData"] = False
    path = write_pack(tmp_path / "v2.yaml", v2)
    code, out = run("rubric", "diff", "health_cs@1", path, "--store", store)
    assert code == 0 and "INTENT_HEALTH_ON_TOPIC changed" in out
    assert "observable in data: yes → no" in out
    code, out = run("rubric", "diff", "health_cs@1", path, "--store", store, "--format", "json")
    assert json.loads(out)["changes"][0]["subject"] == "INTENT_HEALTH_ON_TOPIC"


# -- renormalize -------------------------------------------------------------------------------


def test_renormalize_reapplies_caps_observability_and_red_flag_mapping(
    tmp_path: Path, store_at: str
) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = score(tmp_path, store, "health_cs")
    v1_task = task_id(out)
    v2 = health(version=2)
    requirement(v2, "COMMON_CONCISE_NATURAL")["violationScore"] = 1
    requirement(v2, "INTENT_HEALTH_ON_TOPIC")["observableInData"] = False
    accuracy = requirement(v2, "COMMON_KNOWLEDGE_ACCURACY")
    accuracy.update(critical=True, redFlagType="SAFETY_OMISSION")
    publish(store, write_pack(tmp_path / "v2.yaml", v2))

    code, out = run(
        "renormalize", v1_task, "-r", "health_cs@2", "--store", store, "--out", tmp_path / "rn"
    )
    assert code == 0, out
    new_task = task_id(out)
    with TaskStore(store) as opened:
        before = {s.result.row_id: s.result for s in opened.rows(v1_task)}
        after = {s.result.row_id: s.result for s in opened.rows(new_task)}
        record = opened.task(new_task)
    assert record.judge_mode == "renormalize" and record.rubric_version == 2
    assert record.extra["renormalizedFrom"] == v1_task
    shown = json.loads((tmp_path / "rn" / "report.json").read_text("utf-8"))["task"]
    assert shown["renormalizedFrom"] == v1_task and shown["judgedUnder"] == "health_cs v1"
    assert set(before) == set(after)
    changed = 0
    for row_id, old in before.items():
        new = after[row_id]
        old_status = {b.requirement_id: b.status for b in old.reference_basis}
        new_status = {b.requirement_id: b.status for b in new.reference_basis}
        assert new.judge_score == old.judge_score  # the judge's own decision is re-used
        if old_status.get("COMMON_CONCISE_NATURAL") == "VIOLATED":
            assert new.final_score == 1
            if old.judge_score and old.judge_score > 1:
                assert "COMMON_CONCISE_NATURAL" in new.capped_by
        if "INTENT_HEALTH_ON_TOPIC" in new_status:
            assert new_status["INTENT_HEALTH_ON_TOPIC"] == "NOT_APPLICABLE"
        if old_status.get("COMMON_KNOWLEDGE_ACCURACY") == "VIOLATED":
            assert "SAFETY_OMISSION" in new.red_flag_types
        changed += new.final_score != old.final_score
    assert changed > 0
    assert (tmp_path / "rn" / "report.json").is_file()


def test_renormalize_refuses_changes_that_need_new_judge_calls(
    tmp_path: Path, store_at: str
) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = score(tmp_path, store, "health_cs")
    v1_task = task_id(out)
    v2 = health(version=2)
    requirement(v2, "COMMON_CONCISE_NATURAL")["text"] = "Answer in at most three sentences."
    v2["commonRequirements"].append(
        {"id": "COMMON_GREETING", "category": "TONE", "text": "Greet the user."}
    )
    v2["scoringNotes"] = ["Any price mention is an automatic 1."]
    v2["intents"][0]["triggerHints"] = "anything medical"
    v2["redFlags"][0]["text"] = "a much broader definition"
    publish(store, write_pack(tmp_path / "v2.yaml", v2))
    code, out = run("renormalize", v1_task, "-r", "health_cs@2", "--store", store)
    assert code == 2
    assert "without new judge calls" in out and "--rubric health_cs@2" in out
    assert "COMMON_CONCISE_NATURAL: text changed" in out
    assert "requirement COMMON_GREETING is new" in out
    assert "the scoring notes changed" in out
    assert "intent HEALTH_CONSULTATION: trigger hints changed" in out
    assert f"red-flag type {v2['redFlags'][0]['type']}: its definition changed" in out
    with TaskStore(store) as opened:
        assert len(opened.tasks()) == 1  # nothing was created


def test_renormalize_refuses_another_rubric_key(tmp_path: Path, store_at: str) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    publish(store, RUBRICS / "airline_cs.yaml")
    code, out = score(tmp_path, store, "health_cs")
    code, out = run("renormalize", task_id(out), "-r", "airline_cs@1", "--store", store)
    assert code == 2 and "judged with rubric 'health_cs'" in out


def test_registry_errors_are_typed(tmp_path: Path, store_at: str) -> None:
    store = store_at
    with pytest.raises(RubricError), TaskStore(store) as opened:
        RubricRegistry(opened).publish(write_pack(tmp_path / "x.yaml", {"key": "x"}))
    with pytest.raises(StoreError):
        from rubric_engine.rubric.versions import verified_snapshot

        verified_snapshot(load_rubric(RUBRICS / "health_cs.yaml").snapshot(), "sha256:0", "t")


def test_draft_is_only_for_files_and_show_prints_a_version(tmp_path: Path, store_at: str) -> None:
    store = store_at
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = score(tmp_path, store, "health_cs", "--draft")
    assert code == 2 and "--draft is for a pack file" in out
    code, out = run("rubric", "show", "health_cs@1", "--store", store)
    assert code == 0 and "health_cs@1 (PUBLISHED)" in out and "COMMON_BACKEND_EXPOSURE" in out
    code, out = run("rubric", "show", "health_cs", "--store", store, "--format", "yaml")
    shown = yaml.safe_load(out)
    assert shown["version"] == 1 and shown["status"] == "DRAFT"
    assert out.startswith("# health_cs@1 (PUBLISHED) as a draft to edit")
    # the dump is a valid starting point for the next version's file
    shown.update(version=2)
    code, out = publish(store, write_pack(tmp_path / "next.yaml", shown))
    assert code == 0 and "published health_cs@2" in out
    code, out = run("rubric", "show", "health_cs", "--store", store, "--format", "xml")
    assert code == 2 and "use text, yaml or json" in out


def test_a_result_moved_to_another_row_by_hand_is_refused_naming_both(tmp_path: Path) -> None:
    """Guards: `report` copied a result pasted over another row's and listed medgpt-1 twice
    and medgpt-2 never, exit 0."""
    store = tmp_path / "s.sqlite"
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = score(tmp_path, store, "health_cs")
    task = task_id(out)
    db = sqlite3.connect(store)
    db.execute(
        "UPDATE rows SET result = (SELECT result FROM rows WHERE row_id = 'medgpt-1') "
        "WHERE row_id = 'medgpt-2'"
    )
    db.commit()
    code, out = run("report", task, "--store", store, "--out", tmp_path / "again")
    assert code == 3, out
    assert "row medgpt-2 holds the stored result of row medgpt-1" in out.replace("\n", " "), out
    assert not (tmp_path / "again" / "rows.jsonl").exists()
    db.execute("UPDATE rows SET result = '{\"rowId\": ' WHERE row_id = 'medgpt-1'")
    db.commit()
    db.close()
    code, out = run("report", task, "--store", store, "--out", tmp_path / "again")
    flat = out.replace("\n", " ")
    assert code == 3 and "the stored result of row medgpt-1 is not a valid result" in flat, out


def test_a_store_with_a_table_dropped_is_refused_not_recreated(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    publish(store, RUBRICS / "health_cs.yaml")
    code, out = score(tmp_path, store, "health_cs")
    task = task_id(out)
    db = sqlite3.connect(store)
    db.execute("DELETE FROM rows WHERE row_id = 'medgpt-1'")
    db.commit()
    code, out = run("report", task, "--store", store)
    assert code == 3 and "26 planned row(s) but the store holds 25" in out
    db.execute("UPDATE rows SET result = 'garbage'")
    db.commit()
    code, out = run("report", task, "--store", store)
    assert code == 3 and "is not a valid result" in out and "changed by hand" in out
    db.execute("DROP TABLE rows")
    db.commit()
    db.close()
    code, out = run("report", task, "--store", store)
    assert code == 3 and "table(s) rows missing" in out
    assert "rows" not in {
        n for (n,) in sqlite3.connect(store).execute("SELECT name FROM sqlite_master")
    }
