"""Judge tokens per row, counted offline with tiktoken's ``o200k_base`` (gpt-4o / gpt-4o-mini).

The encoding file is the copy bundled in litellm's package (``TIKTOKEN_CACHE_DIR`` points at
it), and the calling process refuses non-loopback connections, so nothing is downloaded.
Chat messages are counted as OpenAI documents: 3 tokens per message plus its role and
content, and 3 for priming the reply.

For each shipped pack and its demo rows:

* **prompt**: the exact messages rubric-eval sends (instructor's JSON-mode system message with
  the schema, then the row's user message), as built by the engine itself;
* **identical prefix**: the longest run of leading tokens shared by every row's prompt (the
  static rubric + schema system message comes first, so a provider's prefix cache applies);
* **output (unmet-IDs protocol)**: the judge's reply as served by the authored cassette;
* **full per-requirement protocol**: the same verdict with ``unmetRequirementIds`` /
  ``partialRequirementIds`` replaced by one ``{"id", "status"}`` entry per applicable
  requirement from the row's normalized ``referenceBasis`` — once with the status only (the
  floor of any such protocol) and once with a short ``reason``: the requirement's own text cut
  to its first 12 tokens, a stand-in of realistic length in the pack's language.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

REASON_TOKENS = 12


@lru_cache(maxsize=1)
def encoding() -> Any:
    import litellm

    bundled = Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    import tiktoken

    return tiktoken.get_encoding("o200k_base")


def count_text(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def count_messages(messages: list[dict[str, Any]]) -> int:
    return 3 + sum(
        3 + count_text(m.get("role", "")) + count_text(_content_text(m.get("content")))
        for m in messages
    )


def _prompt_tokens(messages: list[dict[str, Any]]) -> list[int]:
    out: list[int] = []
    for m in messages:
        out += encoding().encode(f"<|{m['role']}|>", disallowed_special=())
        out += encoding().encode(_content_text(m.get("content")), disallowed_special=())
    return out


def rubric_prose(rubric_path: Path) -> str:
    """The pack's rules as prose, for a peer's grader (criterion text)."""
    from rubric_engine.rubric.loader import load_rubric

    rubric = load_rubric(rubric_path)
    lines = ["The reply must follow every rule that applies to the dialogue:"]
    lines += [f"- [{r.id}] {r.text.strip()}" for r in rubric.common_requirements]
    for intent in rubric.intents:
        lines.append(f"When the user's intent is {intent.name} ({intent.key}):")
        lines += [f"- [{r.id}] {r.text.strip()}" for r in intent.requirements]
    lines.append(f"Red lines: {', '.join(rubric.red_flag_types)}.")
    return "\n".join(lines)


def pack_tokens(rubric_path: Path, cases: Path, cassettes: Path | None = None) -> dict[str, Any]:
    """Token figures of one pack over its demo rows (see module docstring)."""
    from rubric_engine.cassette import CassetteIndex, key_parts, request_key
    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.judge.instructor_judge import InstructorJudge
    from rubric_engine.normalize import normalize_verdict
    from rubric_engine.pipeline import RequestBuilder
    from rubric_engine.prompt import load_prompt
    from rubric_engine.rubric.loader import load_rubric

    rubric = load_rubric(rubric_path)
    builder = RequestBuilder(rubric, load_prompt())
    judge: Any = InstructorJudge(None, rubric, "openai/gpt-4o-mini")  # type: ignore[arg-type]
    index = CassetteIndex.load(cassettes or rubric_path.parent.parent / "cassettes")
    source = DialogueSource(cases)
    source.validate()
    prompts, outputs, full_plain, full_reason, applicable = [], [], [], [], []
    token_lists: list[list[int]] = []
    for seq, row in enumerate(source):
        prepared = builder.prepare(seq, row)
        kwargs = judge.request_kwargs(prepared.request)
        prompts.append(count_messages(kwargs["messages"]))
        token_lists.append(_prompt_tokens(kwargs["messages"]))
        entry = index.get(
            request_key(
                key_parts(kwargs, prepared.request.rubric_hash, prepared.request.prompt_hash)
            )
        )
        if entry is None:
            raise SystemExit(f"no cassette entry for {row.row_id}; the demo cassettes must replay")
        content = entry.attempts[-1]["response"]["choices"][0]["message"]["content"]
        outputs.append(count_text(content))
        verdict = judge.verdict_model.model_validate_json(
            content,
            context={
                "row_id": row.row_id,
                "case_requirement_ids": list(prepared.request.case_requirement_ids),
            },
        )
        result = normalize_verdict(rubric, verdict, row.row_id, prepared.case_requirements)
        texts = {
            r.id: r.text for r in (*rubric.requirements_by_id.values(), *prepared.case_requirements)
        }
        base = json.loads(content)
        base.pop("unmetRequirementIds", None)
        base.pop("partialRequirementIds", None)
        plain = [{"id": e.requirement_id, "status": str(e.status)} for e in result.reference_basis]
        reasoned = [
            {**p, "reason": _first_tokens(texts.get(p["id"], ""), REASON_TOKENS)} for p in plain
        ]
        full_plain.append(
            count_text(json.dumps({**base, "requirements": plain}, ensure_ascii=False))
        )
        full_reason.append(
            count_text(json.dumps({**base, "requirements": reasoned}, ensure_ascii=False))
        )
        applicable.append(len(plain))
    prefix = _common_prefix(token_lists)
    system_tokens = count_text(_content_text(kwargs["messages"][0]["content"]))
    n = len(prompts)
    return {
        "rows": n,
        "prompt_mean": sum(prompts) / n,
        "system_tokens": system_tokens,
        "prefix_tokens": prefix,
        "cacheable_share": sum(prefix / p for p in prompts) / n,
        "output_mean": sum(outputs) / n,
        "full_status_only_mean": sum(full_plain) / n,
        "full_with_reason_mean": sum(full_reason) / n,
        "applicable_mean": sum(applicable) / n,
    }


def _first_tokens(text: str, count: int) -> str:
    return encoding().decode(encoding().encode(text.strip(), disallowed_special=())[:count])


def _common_prefix(lists: list[list[int]]) -> int:
    first = lists[0]
    length = len(first)
    for other in lists[1:]:
        length = min(length, len(other))
        for i in range(length):
            if other[i] != first[i]:
                length = i
                break
    return length
