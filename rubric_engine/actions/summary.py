"""``actions --summarize``: a model's candidate rule for each cluster of explanations no rule
names (docs/actions.md), asked through :mod:`rubric_engine.judge.one_call` so it replays from a
cassette keyed like every call (``rubricHash``: the task's pack and the cluster's
explanations; ``promptHash``: ``prompts/summary_v1``). The answer is checked (pydantic) and
written as a ``rubric init`` line: ``! text | cap N | category NAME``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field, ValidationError

from rubric_engine.actions.model import TextCluster
from rubric_engine.formats.canonical import canonical_hash
from rubric_engine.judge.backends import Backend
from rubric_engine.judge.one_call import CallSettings, ask, backend_for
from rubric_engine.judge.prompt import LANGUAGE_NAMES, PromptTemplate, block_tag, load_prompt
from rubric_engine.judge.protocol import JudgeRequest
from rubric_engine.rubric.model import CamelModel, EvalRubric

SUMMARY_PROMPT = "summary_v1"
SUMMARY_PARAMS: dict[str, Any] = {
    "temperature": 0.0,
    "max_tokens": 1024,
    "response_format": {"type": "json_object"},
}
#: explanations of a cluster shown to the model (its most typical first)
SHOWN = 12


class CandidateRule(CamelModel):
    """The model's answer: one rule for the next version."""

    text: str = Field(min_length=4, max_length=600)
    critical: bool = False
    violation_score: int | None = None
    category: str = Field(default="PROCESS", pattern=r"^[A-Z][A-Z0-9_]*$")


def criterion_line(rule: CandidateRule) -> str:
    """The rule as a line of a ``rubric init`` criteria file."""
    text = " ".join(rule.text.replace("|", "/").split())
    line = ("! " if rule.critical else "") + text
    if rule.violation_score is not None:
        line += f" | cap {rule.violation_score}"
    return line + f" | category {rule.category}"


def summary_request(
    rubric: EvalRubric,
    cluster: TextCluster,
    model: str,
    prompt: PromptTemplate,
    explanations: Sequence[tuple[str, str]],
) -> tuple[JudgeRequest, dict[str, Any]]:
    """The request that asks for ``cluster``'s candidate rule."""
    system = prompt.system.render(
        rubric=rubric,
        language=LANGUAGE_NAMES.get(rubric.language, rubric.language),
        rules=list(rubric.requirements_by_id.values()),
        schema=json.dumps(CandidateRule.model_json_schema(by_alias=True), sort_keys=True),
    ).strip()
    tag = block_tag(*(text for _, text in explanations))
    user = prompt.user.render(explanations=explanations, count=len(explanations), tag=tag)
    messages = ({"role": "system", "content": system}, {"role": "user", "content": user.strip()})
    first = cluster.row_ids[0]
    request = JudgeRequest(
        row_id=f"summary:{first}" + (f"+{cluster.rows - 1}" if cluster.rows > 1 else ""),
        messages=messages,
        case_requirement_ids=(),
        rubric_hash=canonical_hash([rubric.content_hash(), [list(e) for e in explanations]]),
        prompt_hash=prompt.hash,
    )
    return request, {"model": model, "messages": [dict(m) for m in messages], **SUMMARY_PARAMS}


def read_candidate(text: str, scale: tuple[int, int]) -> tuple[CandidateRule | None, list[str]]:
    """The candidate rule of a reply, or its problems (shape, a cap off the scale)."""
    try:
        rule = CandidateRule.model_validate_json(text.strip())
    except ValidationError as exc:
        return None, [
            f"{'.'.join(map(str, e['loc'])) or '(reply)'}: {e['msg']}" for e in exc.errors()
        ]
    cap = rule.violation_score
    if cap is not None and not scale[0] <= cap <= scale[1]:
        return None, [f"violationScore: {cap} is outside the scale {scale[0]}..{scale[1]}"]
    return rule, []


def _read(scale: tuple[int, int]) -> Callable[[str], tuple[CandidateRule | None, list[str]]]:
    return lambda text: read_candidate(text, scale)


def cluster_explanations(cluster: TextCluster, texts: dict[str, str]) -> list[tuple[str, str]]:
    """The explanations shown for ``cluster``: its rows' in input order, at most
    :data:`SHOWN`."""
    return [(rid, texts[rid]) for rid in cluster.row_ids if rid in texts][:SHOWN]


def summarizer_for(
    model: str, settings: CallSettings
) -> Callable[[EvalRubric, list[TextCluster], dict[str, str]], list[TextCluster]]:
    """A function that adds each cluster's candidate rule (``summary``)."""
    backend: Backend | None = None
    prompt = load_prompt(SUMMARY_PROMPT)

    def summarize(
        rubric: EvalRubric, clusters: list[TextCluster], texts: dict[str, str]
    ) -> list[TextCluster]:
        nonlocal backend
        backend = backend or backend_for(settings, model)
        out = []
        scale = (rubric.score_scale.min, rubric.score_scale.max)
        for cluster in clusters:
            shown = cluster_explanations(cluster, texts)
            request, kwargs = summary_request(rubric, cluster, model, prompt, shown)
            answered = ask(backend, request, kwargs, _read(scale))
            out.append(cluster.model_copy(update={"summary": criterion_line(answered.value)}))
        return out

    return summarize
