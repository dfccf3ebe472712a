"""``rubric-eval cassette author-summary``: hand-written candidate rules for the explanation
clusters of a task become the ``authored`` answers ``actions --summarize`` replays
(docs/actions.md "Failures no rule names").

Each answer names the rows of its cluster and is the JSON a model would answer
(:class:`~rubric_engine.actions.summary.CandidateRule`). It is keyed exactly as the summary
request of that cluster is keyed and checked as a replay checks it; a cluster without an
answer, or an answer that matches no cluster, stops authoring with both lists."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_engine.actions.model import TextCluster
from rubric_engine.actions.summary import (
    SUMMARY_PROMPT,
    cluster_explanations,
    criterion_line,
    read_candidate,
    summary_request,
)
from rubric_engine.errors import CassetteError, InputError
from rubric_engine.formats.jsonl import read_jsonl
from rubric_engine.judge.backends import CallKey
from rubric_engine.judge.cassettes.authoring import USAGE_NOTE, authored_response
from rubric_engine.judge.cassettes.cassette import CassetteEntry
from rubric_engine.judge.prompt import load_prompt
from rubric_engine.rubric.model import EvalRubric

Summarizer = Callable[[EvalRubric, list[TextCluster], dict[str, str]], list[TextCluster]]


def read_answers(path: Path) -> dict[frozenset[str], str]:
    """The answers of ``path`` (JSON Lines: ``rows`` and the candidate rule's fields), keyed
    by their rows; each value is the rule's JSON as the model would answer it."""
    answers: dict[frozenset[str], str] = {}
    for n, obj in read_jsonl(path, InputError):
        rows = obj.get("rows") if isinstance(obj, dict) else None
        if not isinstance(rows, list) or not rows or not all(isinstance(r, str) for r in rows):
            raise InputError(f"{path}:{n}: an answer needs `rows`, the row ids of its cluster")
        if frozenset(rows) in answers:
            raise InputError(f"{path}:{n}: a second answer for rows {', '.join(rows)}")
        rule = {k: v for k, v in obj.items() if k != "rows"}
        answers[frozenset(rows)] = json.dumps(rule, ensure_ascii=False)
    return answers


def summary_author(
    answers: dict[frozenset[str], str], model: str, provenance: dict[str, Any]
) -> tuple[Summarizer, list[CassetteEntry]]:
    """A summarizer for :func:`~rubric_engine.actions.run.build_actions` that answers each
    cluster from ``answers`` instead of asking a model, and the list it fills with the
    cassette entries of those answers."""
    entries: list[CassetteEntry] = []
    prompt = load_prompt(SUMMARY_PROMPT)

    def summarize(
        rubric: EvalRubric, clusters: list[TextCluster], texts: dict[str, str]
    ) -> list[TextCluster]:
        wanted = {frozenset(c.row_ids): c for c in clusters}
        if set(wanted) != set(answers):
            raise CassetteError(
                "the answers do not match the task's explanation clusters:\n"
                + "\n".join(f"  cluster: {', '.join(c.row_ids)}" for c in clusters)
                + "\n"
                + "\n".join(f"  answer:  {', '.join(sorted(rows))}" for rows in answers)
            )
        scale = (rubric.score_scale.min, rubric.score_scale.max)
        out = []
        for cluster in clusters:
            content = answers[frozenset(cluster.row_ids)]
            rule, problems = read_candidate(content, scale)
            if rule is None:
                raise CassetteError(
                    f"the answer for rows {', '.join(cluster.row_ids)} fails the summary "
                    "checks:\n  - " + "\n  - ".join(problems)
                )
            shown = cluster_explanations(cluster, texts)
            request, kwargs = summary_request(rubric, cluster, model, prompt, shown)
            key = CallKey.of(kwargs, request)
            entries.append(
                CassetteEntry(
                    key=key.key,
                    row_id=request.row_id,
                    key_parts=key.parts,
                    provenance=provenance,
                    attempts=[
                        {"response": authored_response(model, key, kwargs["messages"], content)}
                    ],
                )
            )
            out.append(cluster.model_copy(update={"summary": criterion_line(rule)}))
        return out

    return summarize, entries


def authored_provenance(author: str, method: str, answers: Path) -> dict[str, Any]:
    return {
        "kind": "authored",
        "author": author,
        "method": method,
        "authoredAt": datetime.now(UTC).strftime("%Y-%m-%d"),
        "usage": USAGE_NOTE,
        "answers": answers.name,
    }
