"""What a team lead's first trial of the tool found, one test per failure; each failed on the
code before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CASES


def test_a_queue_form_with_a_second_review_share_that_is_no_number_names_the_field(
    tmp_path: Path,
) -> None:
    # the queues page answered "could not convert string to float: 'abc'": Python's own
    # words, naming neither the field nor what it takes
    pytest.importorskip("starlette", reason="the serve extra is not installed")
    from rubric_engine.review.accounts import add_reviewer
    from rubric_engine.serve.app import ServeConfig, create_app
    from rubric_engine.store.task_store import TaskStore
    from tests.serve_helpers import Person, publish, score_demo

    store = str(tmp_path / "s.sqlite")
    publish(store, "health_cs.yaml")
    five = tmp_path / "five.jsonl"
    lines = (CASES / "health_consult_zh.jsonl").read_text("utf-8").splitlines(keepends=True)
    five.write_text("".join(lines[:5]), "utf-8")
    task = score_demo(store, five, "health_cs", tmp_path / "r")
    with TaskStore(store) as opened:
        add_reviewer(opened.backend, "carol", "lead")
    carol = Person(create_app(ServeConfig(store)), store, "carol")
    page = carol.post(f"/tasks/{task}/queues", {"name": "q", "second_review": "abc", "member": ""})
    assert page.status_code == 400
    assert "second_review &#39;abc&#39;: give a share from 0 to 1, e.g. 0.2" in page.text
    assert "could not convert" not in page.text
