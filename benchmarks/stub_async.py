"""The loopback stub on one asyncio loop (aiohttp's server): ``asyncio.sleep(latency)``, then
the same answers as ``stub_server.py`` (its responder, the engine stub's ``completion``).

A thread per connection costs the threaded stub a GIL hand-off per call; one loop serves the
640 calls a second of C = 128 at L = 200 ms with CPU to spare, so the stub is never what a
live cell measures (its CPU per call is printed beside every cell). Same protocol: ``PORT <n>``
when ready; on SIGTERM ``STATS {"requests": N, "cpu_s": S}`` and the ``--log`` JSONL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loopback import guard
from stub_server import make_responder

from rubric_engine.testing.openai_stub import completion, load_verdicts


async def serve(args: argparse.Namespace) -> None:
    from aiohttp import web

    log: list[dict[str, Any]] | None = [] if args.log else None
    respond = make_responder(load_verdicts(args.verdicts), log)
    latency_s = args.latency_ms / 1000
    answered = 0

    async def chat(request: web.Request) -> web.Response:
        nonlocal answered
        body = json.loads(await request.read() or b"{}")
        reply = respond(body)
        if reply.delay_s or latency_s:
            await asyncio.sleep(reply.delay_s + latency_s)
        answered += 1
        if reply.status != 200:
            payload: dict[str, Any] = {"error": {"message": reply.content, "type": "stub_error"}}
        else:
            payload = completion(body, reply)
        return web.Response(
            body=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            status=reply.status,
            content_type="application/json",
            headers=reply.headers,
        )

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"PORT {port}", flush=True)
    cpu0 = time.process_time()
    await stop.wait()
    await runner.cleanup()
    print("STATS " + json.dumps({"requests": answered, "cpu_s": time.process_time() - cpu0}))
    if args.log and log is not None:
        with args.log.open("w", encoding="utf-8") as handle:
            for item in log:
                handle.write(json.dumps(item, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=Path, required=True)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--log", type=Path, help="write every request and answer here on exit")
    args = parser.parse_args()
    guard()
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
