"""Make N benchmark rows from the real demo rows, with their verdicts and a replay cassette.

Row ``k`` is demo row ``k mod len(demo)`` of ``cases/health_consult_zh.jsonl`` with a new
rowId (``bench-000042``); its verdict is that demo row's authored verdict with the new rowId.
Everything is written to a throwaway folder (nothing large is committed):

* ``rows.jsonl``      the input, one row per line (read streamed by the engine)
* ``verdicts.jsonl``  the verdicts (for the loopback stub in live runs)
* ``cassettes/health_cs/rows.jsonl``  a replay cassette keyed exactly like a real run

The cassette is keyed by the engine itself: each row's request goes through the same prompt
rendering and instructor preparation as ``rubric-eval score`` (a tiny backend answers it with
the row's replicated verdict), so a replay of ``rows.jsonl`` hits every entry. Its provenance
is ``authored`` and says it is a benchmark replica of the demo row's authored verdict.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEMO_ROWS = ROOT / "cases" / "health_consult_zh.jsonl"
DEMO_VERDICTS = ROOT / "cases" / "verdicts" / "health_cs.jsonl"
DEMO_CASSETTE = ROOT / "cassettes" / "health_cs" / "health_consult_zh.jsonl"
RUBRIC = ROOT / "rubrics" / "health_cs.yaml"
MODEL = "openai/gpt-4o-mini"


@dataclass(frozen=True)
class Replica:
    """Paths of one generated data set."""

    folder: Path
    rows: Path
    verdicts: Path
    cassettes: Path
    count: int


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def replica_id(k: int) -> str:
    return f"bench-{k:06d}"


def write_rows(folder: Path, count: int) -> Replica:
    """Write ``rows.jsonl`` and ``verdicts.jsonl`` for ``count`` rows (no cassette)."""
    folder.mkdir(parents=True, exist_ok=True)
    demo = _jsonl(DEMO_ROWS)
    verdicts = {v["rowId"]: v for v in _jsonl(DEMO_VERDICTS)}
    rows_path, verdicts_path = folder / "rows.jsonl", folder / "verdicts.jsonl"
    with (
        rows_path.open("w", encoding="utf-8") as rows,
        verdicts_path.open("w", encoding="utf-8") as out,
    ):
        for k in range(count):
            source = demo[k % len(demo)]
            row = {**source, "rowId": replica_id(k)}
            row["metadata"] = {**source.get("metadata", {}), "benchReplicaOf": source["rowId"]}
            rows.write(json.dumps(row, ensure_ascii=False) + "\n")
            verdict = {**verdicts[source["rowId"]], "rowId": replica_id(k)}
            out.write(json.dumps(verdict, ensure_ascii=False) + "\n")
    return Replica(folder, rows_path, verdicts_path, folder / "cassettes", count)


class _ReplicaBackend:
    """Answers each request with the demo row's authored response, rowId replaced; writes the
    cassette entry as soon as the row is judged (streamed, so 10,000 rows stay small)."""

    def __init__(self, handle: Any, responses: dict[str, dict[str, Any]]) -> None:
        self.handle = handle
        self.responses = responses  # source rowId -> authored response
        self.source_of: dict[str, str] = {}

    async def complete(self, kwargs: dict[str, Any], request: Any, key: Any, served: int) -> Any:
        from rubric_engine.judge.backends import Answer
        from rubric_engine.judge.protocol import Attempt

        raw = copy.deepcopy(self.responses[self.source_of[request.row_id]])
        message = raw["choices"][0]["message"]
        verdict = json.loads(message["content"])
        verdict["rowId"] = request.row_id
        message["content"] = json.dumps(verdict, ensure_ascii=False)
        usage = raw.get("usage") or {}
        attempt = Attempt(
            response=raw,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
        return Answer(attempts=(attempt,))

    def finish(self, request: Any, key: Any, outcome: Any) -> None:
        from rubric_engine.judge.cassettes.cassette import CassetteEntry

        if outcome.error is not None:
            raise RuntimeError(f"replica {request.row_id}: {outcome.error.message}")
        source = self.source_of[request.row_id]
        entry = CassetteEntry(
            key=key.key,
            row_id=request.row_id,
            key_parts=key.parts,
            provenance={
                "kind": "authored",
                "author": "benchmarks/replicate.py",
                "authoredAt": "benchmark run",
                "method": f"benchmark replica of the authored verdict of demo row {source}, "
                "rowId replaced; throwaway",
            },
            attempts=[{"response": outcome.attempts[0].response}],
        )
        self.handle.write(entry.to_json() + "\n")


def make_replica(folder: Path, count: int) -> Replica:
    """Rows, verdicts and a replay cassette for ``count`` rows under ``folder``."""
    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.engine.pipeline import RequestBuilder
    from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS, InstructorJudge
    from rubric_engine.judge.prompt import load_prompt
    from rubric_engine.rubric.loader import load_rubric

    replica = write_rows(folder, count)
    rubric = load_rubric(RUBRIC)
    builder = RequestBuilder(rubric, load_prompt())
    responses = {e["rowId"]: e["attempts"][0]["response"] for e in _jsonl(DEMO_CASSETTE)}
    cassette = replica.cassettes / rubric.key / "rows.jsonl"
    cassette.parent.mkdir(parents=True, exist_ok=True)
    demo_ids = [r["rowId"] for r in _jsonl(DEMO_ROWS)]
    with cassette.open("w", encoding="utf-8") as handle:
        backend = _ReplicaBackend(handle, responses)
        judge = InstructorJudge(backend, rubric, MODEL, dict(DEFAULT_PARAMS), max_reasks=0)

        async def run() -> None:
            source = DialogueSource(replica.rows)
            for seq, row in enumerate(source):
                backend.source_of[row.row_id] = demo_ids[seq % len(demo_ids)]
                await judge.judge(builder.prepare(seq, row).request)
                del backend.source_of[row.row_id]

        asyncio.run(run())
    return replica
