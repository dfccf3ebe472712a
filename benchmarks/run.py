"""rubric-eval benchmarks: print figures, not pass/fail (see benchmarks/RESULTS.md).

    .venv/bin/python benchmarks/run.py throughput --rows 1000 --concurrency 32 --latency-ms 200
    .venv/bin/python benchmarks/run.py replay --rows 1000 10000 --repeat 3
    .venv/bin/python benchmarks/run.py startup --repeat 10
    .venv/bin/python benchmarks/run.py tokens
    .venv/bin/python benchmarks/run.py peer --rows 200 --concurrency 16 --latency-ms 200

Every subcommand works in a throwaway folder (rows, cassettes, stores, reports) and prints a
table. Each measured run is its own process, so imports, peak memory (ru_maxrss) and
``sys.modules`` belong to that run alone. Every process here refuses non-loopback connections
(``benchmarks/loopback.py``). The peer runs from its own venv (``benchmarks/.venv-peer``,
``benchmarks/requirements-peer.txt``), never the project's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from loopback import guard  # noqa: E402

guard()
PEER_PYTHON = HERE / ".venv-peer" / "bin" / "python"
PACKS = {
    "health_cs": (ROOT / "rubrics" / "health_cs.yaml", ROOT / "cases" / "health_consult_zh.jsonl"),
    "airline_cs": (ROOT / "rubrics" / "airline_cs.yaml", ROOT / "cases" / "airline_tau2_dev.json"),
}


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain Markdown table (pastes into RESULTS.md as it is)."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


@contextmanager
def workdir(keep: bool = False) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="rubric-eval-bench-"))
    try:
        yield folder
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def stub(verdicts: Path, latency_ms: float, log: Path | None = None) -> Iterator[str]:
    """The loopback stub in its own process; yields its base URL."""
    cmd = [sys.executable, str(HERE / "stub_server.py"), "--verdicts", str(verdicts)]
    cmd += ["--latency-ms", str(latency_ms)] + (["--log", str(log)] if log else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().split()[1]
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def child(args: list[str]) -> dict[str, Any]:
    """Run ``run.py _child …`` in a fresh interpreter; return its JSON line."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "_child", *args],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"a measured run failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the measured run, in a fresh process --------------------------------------------------


def run_child(ns: argparse.Namespace) -> None:
    """One ``score()`` call; prints wall/CPU time of the call and of the batch, peak RSS."""
    started_process = time.perf_counter()
    from rubric_engine.scoring import ScoreOptions, score

    marks: dict[str, float] = {}

    def on_start(task_id: str, total: int) -> None:
        marks["batch"] = time.perf_counter()
        marks["batch_cpu"] = time.process_time()

    def on_row(result: Any) -> None:
        marks["last_row"] = time.perf_counter()
        marks["batch_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    work = Path(ns.work)
    options = ScoreOptions(
        inputs=[Path(ns.rows)],
        rubric=Path(ns.rubric),
        draft=True,  # the shipped pack files are DRAFTs: a trial run, marked so in the report
        mode=ns.mode,
        cassettes=Path(ns.cassettes) if ns.cassettes else work / "cassettes",
        model=ns.model,
        api_base=ns.api_base,
        concurrency=ns.concurrency,
        store=work / "store.sqlite",
        out=work / "out",
    )
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = score(options, on_start=on_start, on_row=on_row)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    totals = result.report["totals"]
    print(
        json.dumps(
            {
                "rows": totals["rows"],
                "scored": totals["scored"],
                "score_wall_s": wall,
                "score_cpu_s": cpu,
                "batch_wall_s": marks["last_row"] - marks["batch"],
                "batch_cpu_s": time.process_time() - marks["batch_cpu"],
                "process_wall_s": time.perf_counter() - started_process,
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "batch_maxrss_mb": marks["batch_rss"] / 1024,
                "report_s": wall - (marks["last_row"] - marks["batch"]),
                "litellm_imported": "litellm" in sys.modules,
                "usage": result.report["usage"],
            }
        )
    )


def run_litellm_child(ns: argparse.Namespace) -> None:
    """litellm alone, no engine: the same judge requests with ``C`` in flight (the bound any
    engine built on litellm meets on this machine)."""
    import asyncio

    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.judge.backends import import_litellm
    from rubric_engine.judge.instructor_judge import InstructorJudge
    from rubric_engine.pipeline import RequestBuilder
    from rubric_engine.prompt import load_prompt
    from rubric_engine.rubric.loader import load_rubric

    litellm = import_litellm()
    rubric = load_rubric(Path(ns.rubric))
    builder = RequestBuilder(rubric, load_prompt())
    judge: Any = InstructorJudge(None, rubric, ns.model)  # type: ignore[arg-type]
    source = DialogueSource(Path(ns.rows))
    source.validate()
    requests = [judge.request_kwargs(builder.prepare(i, r).request) for i, r in enumerate(source)]

    async def run() -> None:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for kwargs in requests:
            queue.put_nowait(kwargs)

        async def worker() -> None:
            while not queue.empty():
                kwargs = queue.get_nowait()
                await litellm.acompletion(
                    **kwargs, api_base=ns.api_base, api_key="no-key", num_retries=0, timeout=120
                )

        await asyncio.gather(*(worker() for _ in range(ns.concurrency)))

    wall0, cpu0 = time.perf_counter(), time.process_time()
    asyncio.run(run())
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    print(json.dumps({"rows": len(requests), "batch_wall_s": wall, "batch_cpu_s": cpu}))


# -- throughput against the provider limit ---------------------------------------------------


def cmd_throughput(ns: argparse.Namespace) -> None:
    from replicate import RUBRIC, write_rows

    rows = []
    for concurrency in ns.concurrency:
        for latency_ms in ns.latency_ms:
            for _ in range(ns.repeat):
                with workdir() as work:
                    replica = write_rows(work, ns.rows)
                    args = _child_args(
                        work, replica.rows, RUBRIC, "live", None, ns.model, concurrency
                    )
                    with stub(replica.verdicts, latency_ms) as base_url:
                        got = child([*args, "--api-base", base_url])
                    if ns.litellm_alone:
                        with stub(replica.verdicts, latency_ms) as base_url:
                            alone = child([*args, "--api-base", base_url, "--litellm-alone"])
                ideal = concurrency / (latency_ms / 1000)
                rate = got["rows"] / got["batch_wall_s"]
                if ns.litellm_alone:
                    bare = alone["rows"] / alone["batch_wall_s"]
                    rows.append(
                        [
                            "litellm alone",
                            alone["rows"],
                            concurrency,
                            latency_ms,
                            alone["batch_wall_s"],
                            bare,
                            ideal,
                            bare / ideal,
                            1000 * alone["batch_cpu_s"] / alone["rows"],
                            "",
                            "",
                        ]
                    )
                rows.append(
                    [
                        "rubric-eval",
                        got["rows"],
                        concurrency,
                        latency_ms,
                        got["batch_wall_s"],
                        rate,
                        ideal,
                        rate / ideal,
                        1000 * got["batch_cpu_s"] / got["rows"],
                        got["score_wall_s"],
                        got["scored"],
                    ]
                )
    print(
        table(
            [
                "what",
                "rows",
                "C",
                "L ms",
                "batch s",
                "rows/s",
                "ideal C/L",
                "ratio",
                "client CPU ms/row",
                "whole score() s",
                "scored",
            ],
            rows,
        )
    )


def _child_args(
    work: Path,
    rows: Path,
    rubric: Path,
    mode: str,
    api_base: str | None,
    model: str,
    concurrency: int,
    cassettes: Path | None = None,
) -> list[str]:
    out = ["--work", str(work), "--rows", str(rows), "--rubric", str(rubric), "--mode", mode]
    out += ["--model", model, "--concurrency", str(concurrency)]
    if api_base:
        out += ["--api-base", api_base]
    if cassettes:
        out += ["--cassettes", str(cassettes)]
    return out


# -- replay engine overhead ----------------------------------------------------------------


def cmd_replay(ns: argparse.Namespace) -> None:
    from replicate import MODEL, RUBRIC, make_replica

    rows = []
    with workdir() as work:
        for count in ns.rows:
            replica = make_replica(work / f"data-{count}", count)
            runs = []
            for i in range(ns.repeat):
                run_dir = work / f"run-{count}-{i}"
                run_dir.mkdir()
                started = time.perf_counter()
                got = child(
                    _child_args(
                        run_dir,
                        replica.rows,
                        RUBRIC,
                        "replay",
                        None,
                        MODEL,
                        ns.concurrency,
                        replica.cassettes,
                    )
                )
                got["subprocess_wall_s"] = time.perf_counter() - started
                runs.append(got)
            best = min(runs, key=lambda r: r["score_wall_s"])
            rows.append(
                [
                    count,
                    len(runs),
                    best["score_wall_s"],
                    count / best["score_wall_s"],
                    statistics.median(count / r["score_wall_s"] for r in runs),
                    count / min(r["score_cpu_s"] for r in runs),
                    max(count / r["batch_wall_s"] for r in runs),
                    min(r["report_s"] for r in runs),
                    min(r["subprocess_wall_s"] for r in runs),
                    max(r["batch_maxrss_mb"] for r in runs),
                    max(r["maxrss_mb"] for r in runs),
                    any(r["litellm_imported"] for r in runs),
                    best["scored"],
                ]
            )
    print(
        table(
            [
                "rows",
                "runs",
                "best score() s",
                "rows/s (best)",
                "rows/s (median)",
                "rows/CPU-s (best)",
                "batch rows/s (best)",
                "start + report s",
                "whole process s",
                "peak RSS MB at last row",
                "peak RSS MB",
                "litellm imported",
                "scored",
            ],
            rows,
        )
    )


# -- start-up -------------------------------------------------------------------------------


def cmd_startup(ns: argparse.Namespace) -> None:
    exe = ROOT / ".venv" / "bin" / "rubric-eval"
    times = []
    for _ in range(ns.repeat):
        started = time.perf_counter()
        subprocess.run([str(exe), "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    rows = [["rubric-eval --help (s)", min(times), statistics.median(times), max(times)]]
    print(table(["what", "min", "median", "max"], rows))
    from replicate import MODEL, RUBRIC, make_replica

    with workdir() as work:
        replica = make_replica(work / "data", 20)
        got = child(
            _child_args(work, replica.rows, RUBRIC, "replay", None, MODEL, 8, replica.cassettes)
        )
    print()
    print(
        table(
            ["replay run of 20 rows", "litellm in sys.modules", "scored"],
            [["score()", got["litellm_imported"], got["scored"]]],
        )
    )


# -- tokens per row ------------------------------------------------------------------------


def cmd_tokens(ns: argparse.Namespace) -> None:
    from tokens import pack_tokens

    rows = []
    for key, (rubric, cases) in PACKS.items():
        found = pack_tokens(rubric, cases)
        rows.append(
            [
                key,
                found["rows"],
                found["prompt_mean"],
                found["system_tokens"],
                found["cacheable_share"],
                found["output_mean"],
                found["full_status_only_mean"],
                found["full_with_reason_mean"],
                1 - found["output_mean"] / found["full_with_reason_mean"],
                1 - found["output_mean"] / found["full_status_only_mean"],
                found["applicable_mean"],
            ]
        )
    print(
        table(
            [
                "pack",
                "rows",
                "prompt tok/row",
                "identical prefix tok",
                "cacheable share",
                "output tok/row (unmet IDs)",
                "full protocol, status only",
                "full protocol + short reason",
                "saving vs full+reason",
                "saving vs status only",
                "applicable reqs/row",
            ],
            rows,
        )
    )
    print(
        "\ntokenizer: tiktoken o200k_base (the gpt-4o / gpt-4o-mini encoding), offline; "
        "+3 tokens per message and +3 for the reply, as OpenAI counts chat messages"
    )


# -- side by side with a peer --------------------------------------------------------------


def cmd_peer(ns: argparse.Namespace) -> None:
    from replicate import RUBRIC, write_rows
    from tokens import count_messages, count_text, rubric_prose

    if not PEER_PYTHON.exists():
        sys.exit(
            "the peer's venv is missing; create it with:\n"
            "  python3 -m venv benchmarks/.venv-peer && "
            "benchmarks/.venv-peer/bin/pip install -r benchmarks/requirements-peer.txt"
        )
    results: dict[str, dict[str, Any]] = {}
    with workdir() as work:
        replica = write_rows(work, ns.rows)
        criterion = work / "criterion.txt"
        criterion.write_text(rubric_prose(RUBRIC), encoding="utf-8")
        for tool in ("rubric-eval", "inspect-ai"):
            log = work / f"{tool}.requests.jsonl"
            with stub(replica.verdicts, ns.latency_ms, log) as base_url:
                started = time.perf_counter()
                if tool == "rubric-eval":
                    run_dir = work / "ours"
                    run_dir.mkdir()
                    got = child(
                        _child_args(
                            run_dir,
                            replica.rows,
                            RUBRIC,
                            "live",
                            base_url,
                            ns.model,
                            ns.concurrency,
                        )
                    )
                else:
                    # Inspect sends no telemetry unless a hook is configured; none is here
                    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
                    env["DO_NOT_TRACK"] = "1"
                    out = subprocess.run(
                        [
                            str(PEER_PYTHON),
                            str(HERE / "peer_inspect.py"),
                            "--rows",
                            str(replica.rows),
                            "--criterion",
                            str(criterion),
                            "--base-url",
                            base_url,
                            "--concurrency",
                            str(ns.concurrency),
                        ],
                        capture_output=True,
                        text=True,
                        env=env,
                    )
                    if out.returncode != 0:
                        sys.exit(f"the peer failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
                    got = json.loads(out.stdout.strip().splitlines()[-1])
                wall = time.perf_counter() - started
            seen = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
            results[tool] = {
                "wall_s": wall,
                "calls": len(seen),
                "prompt": sum(count_messages(s["body"]["messages"]) for s in seen),
                "output": sum(count_text(s["reply"] or "") for s in seen),
                "rows": ns.rows,
                "scored": got.get("scored"),
            }
    ours = results["rubric-eval"]
    rows = []
    for tool, r in results.items():
        rows.append(
            [
                tool,
                r["rows"],
                r["scored"],
                r["wall_s"],
                r["wall_s"] / ours["wall_s"],
                r["calls"] / r["rows"],
                r["prompt"] / r["rows"],
                (r["prompt"] / r["rows"]) / (ours["prompt"] / ours["rows"]),
                r["output"] / r["rows"],
                (r["output"] / r["rows"]) / (ours["output"] / ours["rows"]),
            ]
        )
    print(
        table(
            [
                "tool",
                "rows",
                "scored",
                "wall s (whole process)",
                "wall ratio",
                "calls/row",
                "prompt tok/row",
                "prompt ratio",
                "output tok/row",
                "output ratio",
            ],
            rows,
        )
    )


# -- the CLI ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("throughput", help="live rows/s against the stub vs the ideal C/L")
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--concurrency", type=int, nargs="+", default=[32])
    p.add_argument("--latency-ms", type=float, nargs="+", default=[200.0])
    p.add_argument("--model", default="openai/gpt-4o-mini", help="model name sent to the stub")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument(
        "--litellm-alone",
        action="store_true",
        help="also time bare litellm.acompletion calls of the same requests (no engine)",
    )
    p.set_defaults(func=cmd_throughput)

    p = sub.add_parser("replay", help="engine overhead: replay rows/s and peak memory")
    p.add_argument("--rows", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=8)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("startup", help="`rubric-eval --help` time; litellm imported by replay?")
    p.add_argument("--repeat", type=int, default=10)
    p.set_defaults(func=cmd_startup)

    p = sub.add_parser("tokens", help="judge tokens per row for the shipped packs")
    p.set_defaults(func=cmd_tokens)

    p = sub.add_parser("peer", help="the same rows through Inspect AI, same stub")
    p.add_argument("--rows", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--model", default="openai/gpt-4o-mini")
    p.set_defaults(func=cmd_peer)

    p = sub.add_parser("_child", help=argparse.SUPPRESS)
    for name in ("--work", "--rows", "--rubric", "--mode", "--model"):
        p.add_argument(name, required=True)
    p.add_argument("--api-base")
    p.add_argument("--cassettes")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--litellm-alone", action="store_true")
    p.set_defaults(func=lambda ns: (run_litellm_child if ns.litellm_alone else run_child)(ns))

    ns = parser.parse_args(argv)
    ns.func(ns)


if __name__ == "__main__":
    main()
