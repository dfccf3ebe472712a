"""The loopback stub for benchmarks: rubric-eval's OpenAI-compatible stub with a fixed latency,
answering both rubric-eval's judge and the peer's grader from the same authored verdicts.

Run as its own process (so the server's threads do not share the measured client's GIL); it
prints ``PORT <n>`` when ready and, on SIGTERM, ``STATS {"requests": N, "cpu_s": S}`` (its
own CPU from ready to stop) and writes every request it saw (path, body, arrival time) and its
answer to ``--log`` as JSONL, for counting calls and tokens per row. ``stub_async.py`` serves
the same answers from one asyncio loop (for hundreds of calls a second).

* A request with ``response_format`` JSON (rubric-eval's judge) gets the row's verdict JSON.
* Any other request (the peer's grader, which asks for ``GRADE: C`` / ``GRADE: I``) gets the
  verdict's explanation and the grade it implies: ``C`` when the authored score is 4 or 5 on
  the 1–5 scale, else ``I``. The row is found by the ``rowId: …`` line both prompts carry.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rubric_engine.testing.openai_stub import (
    StubReply,
    StubServer,
    load_verdicts,
    row_id_of,
)

_ANY_ROW_ID = re.compile(r"rowId: ([A-Za-z0-9_.:-]+)")


def grade_text(verdict: dict[str, Any]) -> str:
    grade = "C" if int(verdict["score"]) >= 4 else "I"
    return f"{verdict.get('scoreExplanation', '')}\n\nGRADE: {grade}"


def usage_of(body: dict[str, Any], reply: str) -> dict[str, int]:
    """Token counts as a provider reports them, near enough: UTF-8 bytes / 4 of the messages
    and of the reply (the health rows' prompts: ~6,200 against the 6,511 litellm's tokenizer
    counts). The engine stub's own estimate (characters / 4) is half that for Chinese text,
    which no real server reports."""
    prompt = sum(len(str(m.get("content") or "").encode()) for m in body.get("messages") or ())
    completion = len(reply.encode()) // 4 or 1
    return {"prompt_tokens": prompt // 4 or 1, "completion_tokens": completion,
            "total_tokens": prompt // 4 + completion}  # fmt: skip


def make_responder(
    verdicts: dict[str, dict[str, Any]], log: list[dict[str, Any]] | None = None
) -> Any:
    """The answer to one request body (a :class:`StubReply`); with ``log``, each request and
    answer is appended to it (a live matrix cell runs without, so the stub stays small)."""
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> StubReply:
        row_id = row_id_of(body)
        if row_id is None:  # the peer quotes the task after a label: "[Task]: rowId: …"
            text = json.dumps(body.get("messages"), ensure_ascii=False)
            found = _ANY_ROW_ID.search(text)
            row_id = found.group(1) if found else None
        verdict = verdicts.get(row_id or "")
        if verdict is None:
            reply = StubReply(status=404, content=f"no verdict for rowId {row_id!r}")
        elif (body.get("response_format") or {}).get("type") == "json_object":
            reply = StubReply(content=json.dumps(verdict, ensure_ascii=False))
        else:
            reply = StubReply(content=grade_text(verdict))
        if reply.status == 200:
            reply.usage = usage_of(body, reply.content or "")
        if log is not None:
            with lock:
                log.append(
                    {"at": time.time(), "rowId": row_id, "body": body, "reply": reply.content}
                )
        return reply

    return respond


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=Path, required=True)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--log", type=Path, help="write every request and answer here on exit")
    args = parser.parse_args()
    log: list[dict[str, Any]] | None = [] if args.log else None
    server = StubServer(
        make_responder(load_verdicts(args.verdicts), log), latency_s=args.latency_ms / 1000
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print(f"PORT {server.base_url.rsplit(':', 1)[1].split('/')[0]}", flush=True)
    cpu0 = time.process_time()
    stop.wait()
    server.stop()
    stats = {"requests": len(server.requests), "cpu_s": time.process_time() - cpu0}
    print("STATS " + json.dumps(stats), flush=True)
    if args.log and log is not None:
        with args.log.open("w", encoding="utf-8") as handle:
            for item in log:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
