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

**Prompt caching** (:func:`caching_figures`, the target: billed prompt tokens per row,
priced at cached rates, ≤ 30% of today's on a provider with explicit caching): each row's
request as the engine sends it to an Anthropic model (the static system message marked by
``rubric_engine.judge.cache_markers``), priced with the engine's own
``rubric_engine.judge.usage.price`` (litellm's ``input_cost_per_token``,
``cache_creation_input_token_cost``, ``cache_read_input_token_cost``). Without markers every
prompt token is billed at the input rate; with them, the first request writes the prefix
(the engine sends it alone: ``PrefixWarmup``) and every later one reads it. For comparison,
``writes=8``: what 8 requests in flight at the start would cost without the warm-up (each
writes), and the steady state of a long run (every row reads). Anthropic's cache lives 5
minutes from its last use, so a run whose rows follow each other keeps it warm. Tokens are
o200k counts (Claude's tokenizer is not public); the ratio depends on the prefix's share, not
on the tokenizer's absolute counts.

    .venv/bin/python benchmarks/tokens.py caching
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
    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.engine.pipeline import RequestBuilder
    from rubric_engine.judge.cassettes.cassette import key_parts, request_key
    from rubric_engine.judge.cassettes.index import CassetteIndex
    from rubric_engine.judge.instructor_judge import InstructorJudge
    from rubric_engine.judge.prompt import load_prompt
    from rubric_engine.results.normalize import normalize_verdict
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


#: Anthropic models priced for the caching figure (litellm's map; the judge sizes people use)
CACHING_MODELS = ("anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-5")


def caching_figures(rubric_path: Path, cases: Path, model: str, writes: int = 1) -> dict[str, Any]:
    """Prompt cost per row of one pack's demo rows at ``model``'s litellm rates, without and
    with the cache markers, the first ``writes`` requests writing the prefix and the rest
    reading it (see module docstring).

    Returns:
        rows, prompt tokens per row, the marked prefix's tokens, the prompt cost per row (USD)
        without and with caching, and their ratio.

    Raises:
        SystemExit: ``model`` gets no marker, or the marked prefix differs between rows (it
            would not be one cache entry).
    """
    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.engine.pipeline import RequestBuilder
    from rubric_engine.judge.cache_markers import mark_static_prefix, needs_markers
    from rubric_engine.judge.instructor_judge import InstructorJudge
    from rubric_engine.judge.prompt import load_prompt
    from rubric_engine.judge.usage import TokenUsage, price
    from rubric_engine.rubric.loader import load_rubric

    if not needs_markers(model):
        raise SystemExit(f"{model} gets no cache marker; pick a provider with explicit caching")
    rubric = load_rubric(rubric_path)
    builder = RequestBuilder(rubric, load_prompt())
    judge: Any = InstructorJudge(None, rubric, model)  # type: ignore[arg-type]
    source = DialogueSource(cases)
    source.validate()
    prompts: list[int] = []
    prefixes: set[str] = set()
    for seq, row in enumerate(source):
        sent = mark_static_prefix(judge.request_kwargs(builder.prepare(seq, row).request))
        marked = [b for b in sent["messages"][0]["content"] if b.get("cache_control")]
        prefixes.add(marked[-1]["text"])
        prompts.append(count_messages(sent["messages"]))
    if len(prefixes) != 1:
        raise SystemExit(f"the marked prefix differs between rows ({len(prefixes)} versions)")
    prefix = 3 + count_text("system") + count_text(prefixes.pop())  # the system message
    plain, cached = [], []
    for i, tokens in enumerate(prompts):
        plain.append(price(model, TokenUsage(tokens, 0)))
        first = i < writes
        usage = TokenUsage(tokens, 0, 0 if first else prefix, prefix if first else 0)
        cached.append(price(model, usage))
    if None in plain or None in cached:
        raise SystemExit(f"litellm has no price for {model}")
    n = len(prompts)
    without = sum(p or 0.0 for p in plain) / n
    with_cache = sum(p or 0.0 for p in cached) / n
    return {
        "rows": n,
        "prompt_mean": sum(prompts) / n,
        "prefix_tokens": prefix,
        "usd_per_row_without": without,
        "usd_per_row_with": with_cache,
        "ratio": with_cache / without,
    }


def main() -> None:
    import argparse
    import sys

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    sys.path.insert(0, str(here.parent))
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from loopback import guard

    guard()
    parser = argparse.ArgumentParser(description="judge tokens per row: prompt caching")
    parser.add_argument("what", choices=["caching"])
    parser.add_argument("--writes", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    root = here.parent
    rubric, cases = root / "rubrics" / "health_cs.yaml", root / "cases" / "health_consult_zh.jsonl"
    head = ["model", "writes", "rows", "prompt tok/row", "marked prefix tok",
            "prompt $/row, no cache", "prompt $/row, cached", "cached / today",
            "long run (all read) / today"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for model in CACHING_MODELS:
        steady = caching_figures(rubric, cases, model, 0)["ratio"]
        for writes in args.writes:
            f = caching_figures(rubric, cases, model, writes)
            cells = [model, writes, f["rows"], f"{f['prompt_mean']:.0f}", f["prefix_tokens"],
                     f"{f['usd_per_row_without']:.6f}", f"{f['usd_per_row_with']:.6f}",
                     f"{f['ratio']:.1%}", f"{steady:.1%}"]  # fmt: skip
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    print("health_cs pack, demo rows. writes: requests that write the prefix (1: the engine,")
    print("which sends the first request alone; 8: 8 in flight at the start, no warm-up); the")
    print("rest read it. Prices: litellm's map via rubric_engine.judge.usage.price; tokens: o200k")
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
