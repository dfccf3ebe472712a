"""Live matrix: the engine, litellm alone and a bare aiohttp client, each its own process,
against the loopback stub in its own process, at C calls in flight and L ms per answer.

* **engine**: ``score()`` in live mode against the stub (``run.py _child --mode live``); the
  batch runs from the task's start to the last stored row.
* **litellm**: the engine's very requests sent with bare ``litellm.acompletion`` by C workers
  (no engine): the ceiling of any client built on litellm here.
* **bare**: the same requests' JSON posted by C workers through one ``aiohttp.ClientSession``:
  the ceiling of any Python client on this machine.

The requests are built by the engine before the clock starts (``judge_requests``). Rows per
cell: about ``--seconds`` of work at the lower of C/L and the client's CPU bound measured in
its previous cell (1 / CPU-s per call), so a slow client does not run for minutes and a fast
one does not finish in one second; ``--rows`` fixes the count instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

from common import flags, measured, run_py, stub, table, workdir

CLIENTS = ("engine", "litellm", "bare")


def judge_requests(rows: Path, rubric_path: Path, model: str) -> list[dict[str, Any]]:
    """The litellm keyword arguments the engine would send for each row, in row order."""
    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.engine.pipeline import RequestBuilder
    from rubric_engine.judge.instructor_judge import InstructorJudge
    from rubric_engine.judge.prompt import load_prompt
    from rubric_engine.rubric.loader import load_rubric

    rubric = load_rubric(rubric_path)
    builder = RequestBuilder(rubric, load_prompt())
    judge: Any = InstructorJudge(None, rubric, model)  # type: ignore[arg-type]
    source = DialogueSource(rows)
    source.validate()
    return [judge.request_kwargs(builder.prepare(i, r).request) for i, r in enumerate(source)]


async def _workers(concurrency: int, items: list[Any], call: Any) -> None:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)

    async def worker() -> None:
        while not queue.empty():
            await call(queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def run_client_child(ns: argparse.Namespace) -> None:
    """``litellm`` or ``bare``: the batch's wall and CPU seconds, as one JSON line."""
    requests = judge_requests(Path(ns.rows), Path(ns.rubric), ns.model)

    if ns.client == "litellm":
        from rubric_engine.judge.backends import import_litellm

        litellm = import_litellm()

        async def run() -> None:
            async def call(kwargs: dict[str, Any]) -> None:
                await litellm.acompletion(
                    **kwargs, api_base=ns.api_base, api_key="no-key", num_retries=0, timeout=120
                )

            await _workers(ns.concurrency, requests, call)
    else:
        import aiohttp

        bodies = [
            json.dumps({**kw, "model": kw["model"].split("/", 1)[-1]}).encode() for kw in requests
        ]
        url = ns.api_base.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json", "Authorization": "Bearer no-key"}

        async def run() -> None:
            connector = aiohttp.TCPConnector(limit=ns.concurrency)
            async with aiohttp.ClientSession(connector=connector) as session:

                async def call(body: bytes) -> None:
                    async with session.post(url, data=body, headers=headers) as answer:
                        json.loads(await answer.read())["choices"][0]["message"]["content"]
                        answer.raise_for_status()

                await _workers(ns.concurrency, bodies, call)

    wall0, cpu0 = time.perf_counter(), time.process_time()
    asyncio.run(run())
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    print(json.dumps({"rows": len(requests), "batch_wall_s": wall, "batch_cpu_s": cpu}))


def client_cmd(
    client: str, work: Path, rows: Path, ns: argparse.Namespace, concurrency: int, base: str
) -> list[str]:
    """The child command line of one client against the stub at ``base``."""
    from replicate import RUBRIC

    named = {"--rows": rows, "--rubric": RUBRIC, "--model": ns.model}
    named |= {"--concurrency": concurrency, "--api-base": base}
    if client == "engine":
        named |= {"--work": work, "--mode": "live", "--transport": ns.transport}
        return run_py("_child", *flags(named))
    return run_py("_client", "--client", client, *flags(named))


def cmd_live(ns: argparse.Namespace) -> None:
    """The matrix: every (L, C, client) cell, one table row each."""
    from replicate import write_rows

    cpu_per_call: dict[str, float] = {}
    #: (L, C) -> client -> (CPU ms per call over the batch, the cell's load after)
    paired: dict[tuple[float, int], dict[str, tuple[float, str]]] = {}
    startups: list[str] = []
    out = []
    for latency_ms in ns.latency_ms:
        for concurrency in ns.concurrency:
            ideal = concurrency / (latency_ms / 1000)
            for client in ns.clients:
                count = ns.rows or _rows_for(ns, ideal, cpu_per_call.get(client), concurrency)
                with workdir() as work:
                    replica = write_rows(work / "data", count)
                    (work / "run").mkdir()
                    with stub(replica.verdicts, latency_ms, kind=ns.stub) as running:
                        got = measured(
                            client_cmd(
                                client,
                                work / "run",
                                replica.rows,
                                ns,
                                concurrency,
                                running.base_url,
                            )
                        )
                calls = running.stats.get("requests") or count
                rate = got.out["rows"] / got.out["batch_wall_s"]
                cpu_per_call[client] = got.out["batch_cpu_s"] / calls
                paired.setdefault((latency_ms, concurrency), {})[client] = (
                    1000 * cpu_per_call[client],
                    got.load_after,
                )
                if got.out.get("startup_cpu_s") is not None:
                    startups.append(
                        f"engine start-up at C={concurrency}, L={latency_ms:g} ms, {count} rows: "
                        f"{got.out['startup_cpu_s']:.3f} CPU-s, {got.out['startup_mb']:.0f} MB "
                        f"(targets ≤ 0.8 CPU-s, ≤ 120 MB); load after {got.load_after}"
                    )
                stub_cpu = running.stats.get("cpu_s", 0.0)
                out.append(
                    [
                        client,
                        got.out.get("transport", ""),
                        count,
                        concurrency,
                        latency_ms,
                        got.out["batch_wall_s"],
                        rate,
                        ideal,
                        rate / ideal,
                        1000 * cpu_per_call[client],
                        1000 * got.cpu_s / calls,
                        1000 * stub_cpu / calls,
                        stub_cpu / got.out["batch_wall_s"],
                        got.out.get("scored", ""),
                        got.out.get("startup_cpu_s"),
                        got.out.get("startup_mb"),
                        ", ".join(m for m, on in got.out.get("imported", {}).items() if on),
                        got.load_before,
                        got.load_after,
                    ]
                )
                print(
                    f"  {client} C={concurrency} L={latency_ms:g}: {rate:.1f} rows/s "
                    f"({rate / ideal:.2f} of C/L), load {got.load_after}",
                    flush=True,
                )
    print()
    print(
        table(
            [
                "client",
                "transport",
                "rows",
                "C",
                "L ms",
                "batch s",
                "rows/s",
                "C/L",
                "ratio",
                "client CPU ms/call (batch)",
                "client CPU ms/call (process)",
                "stub CPU ms/call",
                "stub core share",
                "scored",
                "start-up CPU s",
                "start-up peak MB",
                "imported",
                "load before",
                "load after",
            ],
            out,
        )
    )
    print(
        "\nratio = rows/s ÷ C/L (targets: ≥ 0.95 at C=128, L=1000 ms; ≥ 0.9 at C=32, L=200 ms); "
        "engine CPU per call target ≤ 1.5 ms. 'process' includes start-up (imports, building "
        "the requests) and, for the engine, the report. The stub's core share is its CPU over "
        f"the batch's wall time (one loop: at 1.0 it would be the bottleneck). Stub: {ns.stub}."
        " Start-up: the engine process's CPU and peak memory before its first row (imports, "
        "checks, the task); targets ≤ 0.8 CPU-s and ≤ 120 MB; 'imported' lists litellm, "
        "openai, instructor or httpx if the engine imported them. At C = 128 the engine's "
        "client CPU per call should be ≤ 2× the bare client's in the same run."
    )
    lines = paired_lines(paired) + startups
    if lines:
        print()
        print("\n".join(lines))


def paired_lines(paired: dict[tuple[float, int], dict[str, tuple[float, str]]]) -> list[str]:
    """The engine's client CPU per call over the bare client's, for each cell both ran in this
    run. Both are the batch's CPU over the calls the stub answered: for the bare client the
    posts and ``json.loads`` of the answers (its request bodies are made before its clock
    starts); for the engine everything it does from its first row to its last stored one
    (reading the rows, rule checks and prompts, the request bodies, the calls, parsing and
    normalizing the verdicts, storing each row, the report's running totals)."""
    lines = []
    for (latency_ms, concurrency), got in paired.items():
        if "engine" not in got or "bare" not in got:
            continue
        (engine, engine_load), (bare, bare_load) = got["engine"], got["bare"]
        target = " (target ≤ 2×)" if concurrency == 128 else ""
        lines.append(
            f"engine ÷ bare client CPU per call at C={concurrency}, L={latency_ms:g} ms: "
            f"{engine:.3f} ÷ {bare:.3f} ms = {engine / bare:.2f}×{target}; "
            f"load after engine {engine_load}, after bare {bare_load}"
        )
    return lines


def _rows_for(ns: argparse.Namespace, ideal: float, cpu_per_call: float | None, c: int) -> int:
    """About ``--seconds`` of work for this cell (module docstring), at least 4 rounds of C."""
    rate = ideal if cpu_per_call is None else min(ideal, 1 / max(cpu_per_call, 1e-6))
    return max(4 * c, min(ns.max_rows, math.ceil(rate * ns.seconds)))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128])
    p.add_argument("--latency-ms", type=float, nargs="+", default=[200.0, 1000.0])
    p.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    p.add_argument("--seconds", type=float, default=15.0, help="about this long per cell")
    p.add_argument("--rows", type=int, help="rows per cell (instead of --seconds)")
    p.add_argument("--max-rows", type=int, default=20000)
    p.add_argument("--model", default="openai/gpt-4o-mini", help="model name sent to the stub")
    p.add_argument("--stub", choices=("async", "thread"), default="async")
    p.add_argument(
        "--transport",
        help="the engine's --transport (litellm|direct) where the engine has that option; "
        "the table says which one ran",
    )
    p.set_defaults(func=cmd_live)
