"""``score --dry-run``: what a run would do and cost, with no judge call and nothing stored.

Every check a run makes before its first call is made (options, rubric, inputs, credentials,
the cassette folder); then each row the judge would see is rendered into its first request
and counted the way the context check counts (the model's tokenizer, or a self-hosted
server's ``/tokenize``, else tiktoken plus a stated margin). The cost is an upper bound: the
prompts at the uncached input rate plus every answer at its full ``--max-tokens`` (answers are
usually far shorter), for the first asks; each re-ask adds a call. No task, no report folder,
no cassette is written (docs/judge-replies.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rubric_engine.engine.judge_when import judge_if_for
from rubric_engine.engine.options import ScoreOptions, check_options, effective_model
from rubric_engine.engine.plan import fresh_plan, judge_unreachable, prompt_counter
from rubric_engine.errors import ConfigurationError


@dataclass(frozen=True)
class DryRun:
    """What ``score`` would do with the same options.

    Attributes:
        mode: ``--mode`` (a replay is not checked against a context: it calls no model).
        rows: the input rows.
        judged: rows the judge would be asked about (``--judge-when`` leaves the rest to their
            rule checks; ``--judge none`` all of them).
        max_reasks: re-asks a row may take after an invalid answer (``--max-reasks``).
        prompt_tokens: the first requests' tokens, ``counted`` as said.
        answer_tokens: ``--max-tokens`` times ``judged``: what the first answers may take.
        cost_usd: the upper bound above, ``None`` when not known (``cost_note`` says why).
        context_limit: the judge's context in tokens, when known.
        oversized: ``(rowId, tokens)`` of the prompts that leave no room for the answer.
        asks: the first requests of each judged row: ``--samples K`` of each judge of a panel
            (docs/panels.md); the calls, tokens and cost above count them all.
    """

    mode: str
    rows: int
    judged: int
    max_reasks: int
    prompt_tokens: int
    answer_tokens: int
    counted: str
    cost_usd: float | None
    cost_note: str
    context_limit: int | None
    answer_room: int
    oversized: tuple[tuple[str, int], ...]
    asks: int = 1
    #: ``(api base, why not)`` when the judge's server could not be reached
    unreachable: tuple[str, str] | None = None

    @property
    def max_calls(self) -> int:
        """Calls if every row used every re-ask (transport retries aside)."""
        return self.judged * self.asks * (1 + self.max_reasks)

    def lines(self) -> list[str]:
        """What ``score --dry-run`` prints."""
        left = self.rows - self.judged
        by_rules = f", {left} decided by their rule checks alone" if left else ""
        out = [
            "dry run: no judge call was made and no task was stored",
            f"rows: {self.rows} ({self.judged} to judge{by_rules})",
            f"judge calls: {self.judged * self.asks}{self._per_row()} (at most "
            f"{self.max_calls} if every row used its {self.max_reasks} re-ask(s); retries of "
            "failed calls aside)",
        ]
        if self.judged:
            out += [
                f"prompt tokens: {self.prompt_tokens:,} in the first requests, {self.counted}",
                f"answer tokens: at most {self.answer_tokens:,} ({self.answer_room} a call, "
                "--max-tokens)",
            ]
        cost = f"at most {self.cost_usd:.4f} USD " if self.cost_usd else ""
        out.append(f"cost: {cost}{self.cost_note}")
        if self.context_limit is None:
            if self.judged and self.mode != "replay":
                out.append(
                    "context: not checked (the model's context is not known; give --max-context N)"
                )
        elif self.oversized:
            named = ", ".join(f"{r} (~{n} tokens)" for r, n in self.oversized[:10])
            more = f" and {len(self.oversized) - 10} more" if len(self.oversized) > 10 else ""
            out.append(
                f"context: {len(self.oversized)} row(s) will not fit {self.context_limit} "
                f"tokens with room for a {self.answer_room}-token answer: {named}{more}; they "
                "would be CONTEXT_EXCEEDED rows"
            )
        else:
            out.append(
                f"context: every prompt fits {self.context_limit} tokens with room for a "
                f"{self.answer_room}-token answer"
            )
        if self.unreachable is not None:
            where, why = self.unreachable
            out.append(
                f"judge server: not reachable at {where} ({why}); a run would wait for it "
                "(--restart-wait) and then stop: start it, or check --api-base"
            )
        return out

    def _per_row(self) -> str:
        return f" ({self.judged} row(s) × {self.asks} asks each)" if self.asks > 1 else ""


def dry_run(options: ScoreOptions) -> DryRun:
    """Plan the run ``options`` describe, count its prompts and price them; call nothing.

    Raises:
        ConfigurationError: ``--resume`` (a dry run plans a new task), and every error a run
            raises before its first call (:func:`rubric_engine.engine.score_async`).
    """
    check_options(options)
    if options.resume is not None:
        raise ConfigurationError(
            "--dry-run plans a new task from INPUT files; `rubric-eval report TASK` shows what "
            "a stored task has, and --resume without --dry-run finishes it"
        )
    plan = fresh_plan(options, "dry-run", dry=True)
    try:
        judge_if = judge_if_for(options.judge_when)
        estimate, counted = prompt_counter(options) if plan.template else (len, "")
        reserve = int(plan.params.get("max_tokens") or 0)
        limit = plan.context_limit
        rows = judged = prompt_tokens = 0
        oversized: list[tuple[str, int]] = []
        for seq, row in enumerate(plan.inputs.stream()):
            rows += 1
            if plan.template is None or (judge_if is not None and not judge_if(row)):
                continue
            judged += 1
            messages = [dict(m) for m in plan.builder.prepare(seq, row).request.messages]
            try:
                tokens = estimate(messages)
            except OSError:  # the tokenizer endpoint stopped answering: tiktoken, the margin
                estimate, counted = prompt_counter(options, ask_server=False)
                tokens = estimate(messages)
            prompt_tokens += tokens
            if limit is not None and tokens + reserve > limit:
                oversized.append((row.row_id, tokens))
    finally:
        plan.inputs.close()
    models = tuple(options.panel) or (options.model,)
    asks = options.samples * len(models) if plan.template is not None else 1
    answer_tokens = judged * reserve * asks
    # each judge is asked the same prompts K times: priced at its own rates
    k = options.samples
    cost, note = _cost(options, prompt_tokens * k, judged * reserve * k, judged)
    prompt_tokens *= asks
    return DryRun(
        mode=options.mode,
        rows=rows,
        judged=judged,
        max_reasks=options.max_reasks if plan.template is not None else 0,
        prompt_tokens=prompt_tokens,
        answer_tokens=answer_tokens,
        counted=counted,
        cost_usd=cost,
        cost_note=note,
        context_limit=limit,
        answer_room=reserve,
        oversized=tuple(oversized),
        asks=asks,
        unreachable=judge_unreachable(options) if judged else None,
    )


def _cost(
    options: ScoreOptions, prompt_tokens: int, answer_tokens: int, judged: int
) -> tuple[float | None, str]:
    """The upper bound in USD and the words that say what it is (or why there is none);
    ``prompt_tokens`` and ``answer_tokens`` are each judge's (a panel's judges add up)."""
    if not judged:
        return 0.0, "none: no judge call"
    if options.mode == "replay":
        return 0.0, "none: a replay answers from cassettes"
    from rubric_engine.batch.pricing import rates

    usd, basis = 0.0, ""
    for judge in tuple(options.panel) or (options.model,):  # each judge of a panel at its price
        model = effective_model(replace(options, model=judge))
        found = rates(model, batch=options.mode == "batch")
        if found is None:
            return None, f"not known: litellm has no price for {model}"
        usd += found.price(prompt_tokens, answer_tokens)
        basis = found.basis
    return usd, f"at {basis} rates, prompts uncached and every answer at --max-tokens"
