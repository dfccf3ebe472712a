"""The samples of a sampled row and the answered calls of a row in flight, as stored
(docs/stability.md "Where samples are kept").

``row_samples`` keeps one line per judge and sample: the sample's own row result, its raw
replies and usage. ``row_attempts`` keeps each answered call of a row still being judged, so
``--resume`` gives the judge those answers again instead of paying for them twice; the lines of
a row go once the row is stored. Both tables are made by ``m011_samples_and_digests``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rubric_engine.results.model import RowResult
from rubric_engine.store.backend import Backend
from rubric_engine.store.migrations import raw_attempts_text

__all__ = [
    "HELD_SAMPLES",
    "SAMPLE_SELECT",
    "UPSERT_ATTEMPT",
    "UPSERT_SAMPLE",
    "HeldUsage",
    "StoredSample",
    "sample_values",
]


@dataclass(frozen=True, slots=True)
class StoredSample:
    """One judge's one sample of a row.

    Attributes:
        judge: the judge's place in the panel, from 1 (the only judge is 1).
        model: the judge's model.
        sample: the sample's number, from 1.
        result: the sample's own row result (as a single ask's would be).
        raw_attempts: every call of the sample, as a row's ``raw_attempts``.
    """

    judge: int
    model: str
    sample: int
    result: RowResult
    raw_attempts: list[dict[str, Any]]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_ms: float
    cassette_key: str | None
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0


def sample_values(task_id: str, sample: StoredSample, result_text: str) -> tuple[Any, ...]:
    """The ``row_samples`` columns of a sample, in table order (``result_text``: its result
    as the store keeps results)."""
    return (
        task_id,
        sample.result.row_id,
        sample.judge,
        sample.sample,
        sample.model,
        result_text,
        raw_attempts_text(sample.raw_attempts),
        sample.calls,
        sample.prompt_tokens,
        sample.completion_tokens,
        sample.cost_usd,
        sample.latency_ms,
        sample.cassette_key,
        sample.cache_read_tokens,
        sample.cache_creation_tokens,
    )


UPSERT_SAMPLE = (
    "INSERT INTO row_samples VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (task_id, row_id, judge, sample) DO UPDATE SET "
    + ", ".join(
        f"{c}=EXCLUDED.{c}"
        for c in (
            "model",
            "result",
            "raw_attempts",
            "calls",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "latency_ms",
            "cassette_key",
            "cache_read_tokens",
            "cache_creation_tokens",
        )
    )
)
UPSERT_ATTEMPT = (
    "INSERT INTO row_attempts VALUES (?,?,?,?,?,?) "
    "ON CONFLICT (task_id, row_id, judge, sample, answer) DO UPDATE SET attempts=EXCLUDED.attempts"
)
DELETE_ATTEMPTS = "DELETE FROM row_attempts WHERE task_id=? AND row_id=?"
#: every ``row_samples`` column, in table order
SAMPLE_SELECT = (
    "SELECT task_id, row_id, judge, sample, model, result, raw_attempts, calls, prompt_tokens, "
    "completion_tokens, cost_usd, latency_ms, cassette_key, cache_read_tokens, "
    "cache_creation_tokens FROM row_samples"
)


@dataclass(frozen=True, slots=True)
class HeldUsage:
    """The calls and tokens a task holds for rows not stored yet: their scored samples and
    the answers kept for their other calls. A resumed run puts them into those rows without
    asking again, so a run counts them here, not among the calls lost (docs/stability.md
    "Resume")."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def plus(self, calls: int, prompt: int, completion: int, cost: float | None) -> HeldUsage:
        return HeldUsage(
            self.calls + calls,
            self.prompt_tokens + prompt,
            self.completion_tokens + completion,
            self.cost_usd + (cost or 0.0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "costUsd": round(self.cost_usd, 10),
        }


#: the samples of a task's rows not stored yet (a resumed run takes the scored ones as they are)
HELD_SAMPLES = (
    SAMPLE_SELECT
    + " s WHERE s.task_id=? AND NOT EXISTS (SELECT 1 FROM rows r WHERE r.task_id=s.task_id "
    "AND r.row_id=s.row_id)"
)


def sample_rows(
    db: Backend, task_id: str, row_ids: Collection[str]
) -> dict[str, list[tuple[Any, ...]]]:
    """The ``row_samples`` tuples of some rows, by rowId, each row's in (judge, sample) order."""
    wanted = list(row_ids)
    out: dict[str, list[tuple[Any, ...]]] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for found in db.execute(
            f"{SAMPLE_SELECT} WHERE task_id=? AND row_id IN ({marks}) "
            "ORDER BY row_id, judge, sample",
            (task_id, *chunk),
        ):
            out.setdefault(found[1], []).append(tuple(found))
    return out


def stored_sample(columns: Sequence[Any], result: RowResult) -> StoredSample:
    """A ``row_samples`` tuple as a :class:`StoredSample` (``result``: its result column,
    parsed by the store's checked parser)."""
    where = f"task {columns[0]} row {columns[1]!r} judge {columns[2]} sample {columns[3]}"
    return StoredSample(
        judge=int(columns[2]),
        model=str(columns[4]),
        sample=int(columns[3]),
        result=result,
        raw_attempts=_decode(columns[6], where),
        calls=columns[7],
        prompt_tokens=columns[8],
        completion_tokens=columns[9],
        cost_usd=columns[10],
        latency_ms=columns[11],
        cassette_key=columns[12],
        cache_read_tokens=columns[13],
        cache_creation_tokens=columns[14],
    )


def _decode(text: str, where: str) -> list[dict[str, Any]]:
    from rubric_engine.store.task_store import decode_column

    value = decode_column(text, f"{where} raw_attempts")
    return value if isinstance(value, list) else []


def attempt_values(
    task_id: str, row_id: str, judge: int, sample: int, answer: int, attempts: Any
) -> tuple[Any, ...]:
    """A ``row_attempts`` line: one answered call (its tries as JSON) of a row in flight."""
    return (task_id, row_id, judge, sample, answer, raw_attempts_text(attempts))


def kept_answers(
    db: Backend, task_id: str
) -> Iterator[tuple[str, int, int, int, list[dict[str, Any]]]]:
    """``(rowId, judge, sample, answer, tries)`` of every answered call kept for a task's rows
    in flight, in order."""
    for row_id, judge, sample, answer, text in db.execute(
        "SELECT row_id, judge, sample, answer, attempts FROM row_attempts WHERE task_id=? "
        "ORDER BY row_id, judge, sample, answer",
        (task_id,),
    ):
        try:
            tries = json.loads(text)
        except ValueError:
            continue  # a damaged line only costs the call again
        if isinstance(tries, list):
            yield row_id, int(judge), int(sample), int(answer), tries
