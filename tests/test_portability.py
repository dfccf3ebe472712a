"""Portability: the per-task lock is filelock's (no fcntl: ``score`` runs on Windows) and every
stored hash goes through one canonical JSON function whose bytes are those of the hashes
already stored (shipped cassettes, published rubrics, case rule IDs keep verifying)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rubric_engine.engine import task_lock
from rubric_engine.errors import StoreError
from rubric_engine.formats.canonical import SPACED, canonical_hash, canonical_json
from rubric_engine.rubric import load_rubric
from rubric_engine.rules.evaluate import case_rule_id, check_json
from rubric_engine.rules.model import Check
from tests.conftest import CASSETTES, ROOT, RUBRICS

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_json_is_the_form_every_module_used_before(value: object) -> None:
    before = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert canonical_json(value) == before
    assert canonical_hash(value) == "sha256:" + hashlib.sha256(before.encode()).hexdigest()


def test_shipped_cassettes_still_match_the_rubric_hashes() -> None:
    for pack in ("health_cs", "airline_cs"):
        rubric = load_rubric(RUBRICS / f"{pack}.yaml")
        first = next((CASSETTES / pack).glob("*.jsonl")).read_text("utf-8").splitlines()[0]
        assert json.loads(first)["keyParts"]["rubricHash"] == rubric.content_hash()


def test_case_rule_ids_keep_their_first_derivation() -> None:
    from pydantic import TypeAdapter

    check: Check = TypeAdapter(Check).validate_python({"type": "forbidden_tools", "tools": ["x"]})
    spaced = json.dumps(check_json(check), sort_keys=True, ensure_ascii=False)
    assert canonical_json(check_json(check), SPACED) == spaced
    assert (
        case_rule_id(check)
        == "CASE_RULE_" + hashlib.sha256(spaced.encode()).hexdigest()[:8].upper()
    )


def test_no_module_hashes_its_own_json() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "rubric_engine").rglob("*.py")
        if p.name != "canonical.py"
        and "sort_keys=True" in (text := p.read_text("utf-8"))
        and "hashlib" in text
    ]
    assert offenders == []
    assert not [
        p for p in (ROOT / "rubric_engine").rglob("*.py") if "fcntl" in p.read_text("utf-8")
    ]


def test_a_task_locked_by_another_process_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from pathlib import Path; from rubric_engine.engine import task_lock\n"
         f"with task_lock(Path({str(store)!r}), 't1'):\n"
         " print('held', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(StoreError, match="being run by another rubric-eval process"),
            task_lock(store, "t1"),
        ):
            pass
        with task_lock(store, "t2"):  # another task is free
            pass
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 5
    while True:  # released when the holder is gone
        try:
            with task_lock(store, "t1"):
                break
        except StoreError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
