"""Write ``authored`` cassettes from hand-written verdicts (docs/judges.md).

An authored verdict is a person's (or model's) careful judgment of one dialogue under one
rubric. This module wraps each verdict in the provider's wire format (an OpenAI
``chat.completion`` whose message content is the verdict JSON) and keys it exactly like a real
run would: the request goes through the same prompt rendering and instructor preparation
(:meth:`InstructorJudge.request_kwargs`), and the response through the same
:func:`~rubric_engine.verdict.parse.parse_reply` a replay will apply. A verdict that fails stops
authoring with the reason; nothing is repaired.

``usage`` in an authored response is *estimated* with ``litellm.token_counter`` (the request's
messages and the verdict text); the entry's provenance says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.engine.pipeline import RequestBuilder
from rubric_engine.errors import CassetteError, InputError
from rubric_engine.formats.jsonl import read_jsonl
from rubric_engine.judge.backends import Answer, CallKey
from rubric_engine.judge.cassettes.cassette import CassetteEntry
from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS, InstructorJudge
from rubric_engine.judge.prompt import DEFAULT_PROMPT, load_prompt
from rubric_engine.judge.protocol import JudgeOutcome, JudgeRequest
from rubric_engine.rubric.loader import load_rubric
from rubric_engine.verdict.parse import ParseFailure, RowContext, parse_reply

USAGE_NOTE = "usage estimated with litellm.token_counter; no provider reported it"


def _read_verdicts(path: Path) -> dict[str, dict[str, Any]]:
    verdicts: dict[str, dict[str, Any]] = {}
    for n, obj in read_jsonl(path, InputError):
        row_id = obj.get("rowId") if isinstance(obj, dict) else None
        if not row_id:
            raise InputError(f"{path}:{n}: a verdict needs its rowId")
        if row_id in verdicts:
            raise InputError(f"{path}:{n}: second verdict for rowId {row_id!r}")
        verdicts[str(row_id)] = obj
    return verdicts


def authored_response(
    model: str, key: CallKey, messages: Sequence[dict[str, Any]], content: str
) -> dict[str, Any]:
    """An OpenAI ``chat.completion`` whose message is ``content``, a hand-written answer to the
    request keyed ``key``; its ``usage`` estimated (:data:`USAGE_NOTE`)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    prompt_tokens = litellm.token_counter(model=model, messages=list(messages))
    completion_tokens = litellm.token_counter(model=model, text=content)
    return {
        "id": "authored-" + key.key.split(":")[1][:24],
        "object": "chat.completion",
        "created": 0,
        "model": model.split("/")[-1],
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class _Author:
    """Turns each row's hand-written verdict into one cassette entry, checked as replay will."""

    def __init__(
        self, judge: InstructorJudge, verdicts: dict[str, dict[str, Any]], model: str
    ) -> None:
        self.judge = judge
        self.verdicts = verdicts
        self.model = model

    def entry(self, request: JudgeRequest, provenance: dict[str, Any]) -> CassetteEntry:
        """The entry of one row.

        Raises:
            CassetteError: the verdict does not parse or validate under the rubric.
        """
        kwargs = self.judge.request_kwargs(request)
        key = CallKey.of(kwargs, request)
        content = json.dumps(self.verdicts[request.row_id], ensure_ascii=False)
        raw = authored_response(self.model, key, kwargs["messages"], content)
        context = RowContext(request.row_id, request.case_requirement_ids, request.turn_count)
        parsed = parse_reply(raw, self.judge.rubric_model, context)
        if isinstance(parsed, ParseFailure):
            raise CassetteError(
                f"authored verdict for row {request.row_id!r} is not valid "
                f"under the rubric: {parsed.reason}"
            )
        return CassetteEntry(
            key=key.key,
            row_id=request.row_id,
            key_parts=key.parts,
            provenance=provenance,
            attempts=[{"response": raw}],
        )


class _NoBackend:
    """Authoring asks no one: the judge only prepares requests here."""

    async def complete(
        self,
        kwargs: dict[str, Any],
        request: JudgeRequest,
        key: CallKey,
        served: int,
        final_status: frozenset[int] = frozenset(),
    ) -> Answer:
        raise AssertionError("authoring never calls a backend")

    def finish(self, request: JudgeRequest, key: CallKey, outcome: JudgeOutcome) -> None:
        return None


def author_cassette(
    inputs: Sequence[Path],
    rubric_path: Path,
    verdicts_path: Path,
    author: str,
    method: str,
    out: Path,
    model: str,
    prompt_version: str = DEFAULT_PROMPT,
    sample: int = 1,
) -> int:
    """Build an authored cassette for every row of ``inputs``; return the entry count.

    ``prompt_version`` is the template the requests are rendered and keyed with; under one that
    asks for evidence (``judge_v3``) each verdict is checked with its ``evidence`` turns.
    ``sample``: the entries answer that sample of each row (``score --samples K``,
    docs/stability.md): a second or third opinion; 1 is a single ask's key.

    Raises:
        InputError: a row has no verdict, a verdict names no row, or the files are malformed.
        CassetteError: a verdict fails the rubric's validation (unknown ID, score off-scale …).
    """
    rubric = load_rubric(rubric_path)
    template = load_prompt(prompt_version)
    builder = RequestBuilder(rubric, template)
    verdicts = _read_verdicts(verdicts_path)
    provenance = {
        "kind": "authored",
        "author": author,
        "method": method,
        "authoredAt": datetime.now(UTC).strftime("%Y-%m-%d"),
        "usage": USAGE_NOTE,
        "verdicts": verdicts_path.name,
    }
    if template.version != DEFAULT_PROMPT:
        provenance["prompt"] = template.version
    if sample != 1:
        provenance["sample"] = str(sample)
    judge = InstructorJudge(
        _NoBackend(),
        rubric,
        model,
        dict(DEFAULT_PARAMS),
        max_reasks=0,
        evidence=template.asks_evidence,
    )
    rows: list[DialogueRow] = []
    for path in inputs:
        source = DialogueSource(path)
        source.validate()
        rows.extend(source)
    missing = [r.row_id for r in rows if r.row_id not in verdicts]
    extra = sorted(set(verdicts) - {r.row_id for r in rows})
    if missing or extra:
        raise InputError(
            f"{verdicts_path}: verdicts and rows do not match; rows without a "
            f"verdict: {missing or 'none'}; verdicts without a row: {extra or 'none'}"
        )

    writer = _Author(judge, verdicts, model)
    entries = [
        writer.entry(replace(builder.prepare(seq, row).request, sample=sample), provenance)
        for seq, row in enumerate(rows)
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(e.to_json() + "\n" for e in entries), encoding="utf-8")
    return len(entries)
