"""rubric-eval benchmarks: print figures, not pass/fail (see benchmarks/RESULTS.md).

    .venv/bin/python benchmarks/run.py replay --rows 10000 100000
    .venv/bin/python benchmarks/run.py startup --repeat 5
    .venv/bin/python benchmarks/run.py live --concurrency 8 32 128 --latency-ms 200 1000
    .venv/bin/python benchmarks/run.py peer --rows 1000 --concurrency 32 --latency-ms 200
    .venv/bin/python benchmarks/run.py tokens
    .venv/bin/python benchmarks/run.py data --rows 100000 --out DIR   (for an outside timer)
    .venv/bin/python benchmarks/run.py pages --rows 1000 10000 100000  (the review app's pages)
    .venv/bin/python benchmarks/run.py scale --rows 100000 1000000 --data DIR

Every subcommand works in a throwaway folder (rows, cassettes, stores, reports) and prints a
table with the load average before and after each measurement. Each measured run is its own
process, reaped with ``wait4``, so its CPU time, peak memory and ``sys.modules`` belong to that
run alone. Every process here refuses non-loopback connections (``benchmarks/loopback.py``).
The peer runs from its own venv (``benchmarks/.venv-peer``, ``requirements-peer.txt``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from loopback import guard  # noqa: E402

guard()

import live  # noqa: E402
import pages  # noqa: E402
import scale  # noqa: E402
from common import PEER_PYTHON, flags, measured, run_py, stub, table, workdir  # noqa: E402

PACKS = {
    "health_cs": (ROOT / "rubrics" / "health_cs.yaml", ROOT / "cases" / "health_consult_zh.jsonl"),
    "airline_cs": (ROOT / "rubrics" / "airline_cs.yaml", ROOT / "cases" / "airline_tau2_dev.json"),
}
WATCHED_MODULES = ("litellm", "openai", "instructor", "httpx")
#: the replay budget: rows a second (whole process, wall) with no verdict repeated, and the
#: peak memory of the largest size against the smallest
BUDGET_ROWS_S = 2000
BUDGET_PEAK_RATIO = 1.3


# -- the measured engine run, in a fresh process -------------------------------------------


def memory_mb() -> dict[str, float]:
    """This process's resident set now (``VmRSS``) and its peak so far (``VmHWM``), MB."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def run_child(ns: argparse.Namespace) -> None:
    """One ``score()`` call; prints its wall/CPU time, the batch's, and memory at 10 %, 50 %
    and 100 % of the rows and after the report, as one JSON line."""
    from rubric_engine.engine import ScoreOptions, score

    marks: dict[str, Any] = {"rows": 0, "memory": {}}

    def on_start(task_id: str, total: int) -> None:
        marks["batch"], marks["batch_cpu"] = time.perf_counter(), time.process_time()
        # what the process paid before its first row: imports, checks, the task (its CPU
        # since the interpreter started, and its peak memory so far)
        marks["startup_cpu_s"], marks["startup_mb"] = marks["batch_cpu"], memory_mb()["VmHWM"]
        marks["at"] = {}
        for share in (0.1, 0.5, 1.0):
            marks["at"].setdefault(max(1, math.ceil(total * share)), []).append(f"{share:.0%}")

    def on_row(result: Any) -> None:
        # per row only a count and a dict lookup: the clocks are read at the marks alone, so
        # the harness adds next to nothing to the engine's CPU (reading both clocks on every
        # row was ~10 us a row)
        marks["rows"] += 1
        shares = marks.setdefault("at", {}).get(marks["rows"])
        if shares:
            if "100%" in shares:  # the last row: the batch ends here
                marks["last_row"], marks["last_cpu"] = time.perf_counter(), time.process_time()
            for share in shares:
                marks["memory"][share] = memory_mb()

    work = Path(ns.work)
    for old in work.glob("store.sqlite*"):  # each run starts from an empty store
        shutil.rmtree(old) if old.is_dir() else old.unlink()
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
    options, transport = _with_transport(options, ns.transport)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    result = score(options, on_start=on_start, on_row=on_row)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    marks["memory"]["after report"] = memory_mb()
    totals = result.report["totals"]
    print(
        json.dumps(
            {
                "rows": totals["rows"],
                "scored": totals["scored"],
                "score_wall_s": wall,
                "score_cpu_s": cpu,
                # an engine that calls neither callback: the batch is the whole score() call
                "batch_wall_s": marks.get("last_row", wall0 + wall) - marks.get("batch", wall0),
                "batch_cpu_s": marks.get("last_cpu", cpu0 + cpu) - marks.get("batch_cpu", cpu0),
                "memory": marks["memory"],
                "imported": {m: m in sys.modules for m in WATCHED_MODULES},
                "startup_cpu_s": marks.get("startup_cpu_s"),
                "startup_mb": marks.get("startup_mb"),
                "transport": transport,
            }
        )
    )


def _with_transport(options: Any, transport: str | None) -> tuple[Any, str]:
    """The options with ``transport`` set where the engine has that option, and what ran."""
    if "transport" not in {f.name for f in dataclasses.fields(options)}:
        return options, f"{transport}? no such option: default" if transport else "default"
    if transport:
        options = dataclasses.replace(options, transport=transport)
        return options, transport
    # not given: the engine picks ($RUBRIC_EVAL_TRANSPORT, else its default); say which ran
    from rubric_engine.judge.transport import TRANSPORT_ENV, transport_choice

    source = f"${TRANSPORT_ENV}" if os.environ.get(TRANSPORT_ENV) else "default"
    return options, f"{transport_choice(None)} ({source})"


# -- replay: the engine against the floor ----------------------------------------------------


def replica_for(folder: Path, count: int) -> Any:
    """The replica rows and cassette of ``count`` rows in ``folder``, made once and reused."""
    from replicate import Replica, make_replica

    done = folder / "complete"
    if done.exists():
        return Replica(
            folder,
            *(folder / n for n in ("rows.jsonl", "verdicts.jsonl")),
            folder / "cassettes",
            count,
        )
    started = time.perf_counter()
    replica: Replica = make_replica(folder, count)
    done.write_text("made by benchmarks/run.py\n", encoding="utf-8")
    took = time.perf_counter() - started
    print(f"  made {count} replica rows and their cassette in {took:.1f} s", flush=True)
    return replica


def engine_cmd(replica: Any, run_dir: Path, concurrency: int = 8) -> list[str]:
    from replicate import MODEL, RUBRIC

    named = {"--work": run_dir, "--rows": replica.rows, "--rubric": RUBRIC, "--mode": "replay"}
    named |= {"--model": MODEL, "--concurrency": concurrency, "--cassettes": replica.cassettes}
    return run_py("_child", *flags(named))


def floor_cmd(replica: Any, run_dir: Path) -> list[str]:
    from replicate import RUBRIC

    (cassette,) = replica.cassettes.rglob("*.jsonl")
    named = {"--rows": replica.rows, "--cassette": cassette, "--rubric": RUBRIC, "--work": run_dir}
    return [sys.executable, str(HERE / "floor.py"), *flags(named)]


def cmd_replay(ns: argparse.Namespace) -> None:
    speed, memory = [], []
    with workdir(ns.data) as work:
        startup = startup_rows(work, ns.startup_repeat) if ns.startup_repeat else []
        base_peak = None
        for count in ns.rows:
            replica = replica_for(work / f"data-{count}", count)
            floors, engines = [], []
            pipelines = [("floor", floors), ("engine", engines)]
            for i in range(ns.repeat):  # alternated, so a drift of the machine hits all
                for name, runs in pipelines:
                    run_dir = work / f"run-{count}-{name.split()[0]}-{i}"
                    cmd = (
                        floor_cmd(replica, run_dir)
                        if name == "floor"
                        else engine_cmd(replica, run_dir, ns.concurrency)
                    )
                    runs.append(measured(cmd))
                    subprocess.run(["rm", "-rf", str(run_dir)], check=False)
            for name, runs in pipelines:
                ratios = [e.cpu_s / f.cpu_s for e, f in zip(runs, floors, strict=True)]
                inner = [r.out.get("loop_cpu_s", r.out.get("batch_cpu_s")) for r in runs]
                speed.append(
                    [
                        name,
                        count,
                        len(runs),
                        statistics.median(1000 * r.cpu_s / count for r in runs),
                        statistics.median(1000 * c / count for c in inner),
                        statistics.median(ratios),
                        statistics.median(count / r.wall_s for r in runs),
                        max(
                            r.out.get("peak_mb") or r.out["memory"]["after report"]["VmHWM"]
                            for r in runs
                        ),
                        runs[-1].out.get("scored", count),
                        runs[0].load_before,
                        runs[-1].load_after,
                    ]
                )
            got = engines[-1].out
            mem = got["memory"]
            peak = mem["after report"]["VmHWM"]
            base_peak = base_peak or peak
            memory.append(
                [
                    count,
                    *(
                        f"{mem[k]['VmRSS']:.0f} / {mem[k]['VmHWM']:.0f}"
                        for k in ("10%", "50%", "100%")
                    ),
                    peak,
                    peak / base_peak,
                    ", ".join(m for m, on in got["imported"].items() if on),
                    engines[-1].load_before,
                    engines[-1].load_after,
                ]
            )
    print(
        table(
            [
                "pipeline",
                "rows",
                "runs",
                "CPU ms/row (process)",
                "CPU ms/row (batch)",
                "CPU ratio to floor",
                "rows/s (process wall)",
                "peak MB",
                "scored",
                "load before",
                "load after",
            ],
            speed,
        )
    )
    print(
        "\nmedians of the runs (floor and engine alternated); 'process' is the kernel's user+sys "
        "time of the whole process over rows; the floor is the least a replay can do (read, "
        "look up, write)."
    )
    print()
    print(
        table(
            [
                "rows",
                "RSS / peak MB at 10 %",
                "at 50 %",
                "at 100 %",
                "peak MB after report",
                f"peak vs {ns.rows[0]} rows",
                "imported",
                "load before",
                "load after",
            ],
            memory,
        )
    )
    print(
        "\nengine run (the last of each size): VmRSS / VmHWM from /proc/self/status when that "
        "share of rows was stored; 'imported' lists litellm/openai/instructor/httpx if a "
        "replay imported them."
    )
    print()
    for line in budget_lines(speed, memory):
        print(line)
    if startup:
        print("\n" + table(STARTUP_HEADERS, startup))
        print(f"\n{STARTUP_NOTE}")


def budget_lines(speed: list[list[Any]], memory: list[list[Any]]) -> list[str]:
    """The replay budget, met or not: the engine's rows a second at each size (every verdict
    normalized afresh: the engine keeps no cache of decisions, so the replica's repeated
    verdicts are no shortcut), and the peak memory of the largest size against the smallest."""
    lines = []
    for name, count, *_, rows_s, _peak, _scored, _before, _after in speed:
        if name == "engine":
            met = "met" if rows_s >= BUDGET_ROWS_S else "NOT met"
            lines.append(
                f"budget: {count} rows replayed at {rows_s:,.0f} rows/s (process wall), "
                f"no verdict repeated; target >= {BUDGET_ROWS_S:,} rows/s: {met}"
            )
    if len(memory) > 1:
        first, last = memory[0], memory[-1]
        ratio = last[4] / first[4]
        met = "met" if ratio <= BUDGET_PEAK_RATIO else "NOT met"
        lines.append(
            f"budget: peak memory at {last[0]} rows {last[4]:.0f} MB = {ratio:.2f}x of "
            f"{first[0]} rows ({first[4]:.0f} MB); target <= {BUDGET_PEAK_RATIO}x: {met}"
        )
    return lines


# -- start-up -------------------------------------------------------------------------------


def startup_rows(work: Path, repeat: int) -> list[list[Any]]:
    """Table rows: CPU of whole processes that do next to nothing but start — `--help`, a
    1-row replay through the CLI, and the floor on 1 row."""
    from replicate import RUBRIC

    exe = ROOT / ".venv" / "bin" / "rubric-eval"
    replica = replica_for(work / "data-1", 1)
    cli = {"-r": RUBRIC, "--cassettes": replica.cassettes, "--store": work / "s1.sqlite"}
    cli |= {"--out": work / "out-1"}
    commands = {
        "rubric-eval --help": [str(exe), "--help"],
        "rubric-eval score, 1-row replay": [
            str(exe),
            "score",
            str(replica.rows),
            "--draft",
            "-q",
            *flags(cli),
        ],
        "floor, 1 row": floor_cmd(replica, work / "floor-1"),
    }
    rows = []
    for what, cmd in commands.items():
        runs = [measured(cmd, json_line=False) for _ in range(repeat)]
        cpu = [r.cpu_s for r in runs]
        rows.append(
            [what, len(runs), min(cpu), statistics.median(cpu), max(cpu),
             statistics.median(r.wall_s for r in runs), runs[0].load_before, runs[-1].load_after]
        )  # fmt: skip
    return rows


STARTUP_HEADERS = [
    "whole process", "runs", "CPU s min", "CPU s median", "CPU s max", "wall s median",
    "load before", "load after",
]  # fmt: skip
STARTUP_NOTE = "target: a 1-row replay's start-up ≤ 0.5 CPU-s; `--help` ≤ 0.3 s."


def cmd_startup(ns: argparse.Namespace) -> None:
    with workdir() as work:
        rows = startup_rows(work, ns.repeat)
        got = measured(engine_cmd(replica_for(work / "data-20", 20), work / "run-20")).out
    print(table(STARTUP_HEADERS, rows))
    print(f"\n{STARTUP_NOTE}\n")
    print(
        table(
            ["replay run of 20 rows", *[f"{m} imported" for m in WATCHED_MODULES], "scored"],
            [["score()", *got["imported"].values(), got["scored"]]],
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
        replica = write_rows(work / "data", ns.rows)
        criterion = work / "criterion.txt"
        criterion.write_text(rubric_prose(RUBRIC), encoding="utf-8")
        for tool in ("rubric-eval", "inspect-ai"):
            log = work / f"{tool}.requests.jsonl"
            with stub(replica.verdicts, ns.latency_ms, log, kind=ns.stub) as running:
                if tool == "rubric-eval":
                    (work / "ours").mkdir()
                    got = measured(
                        live.client_cmd(
                            "engine",
                            work / "ours",
                            replica.rows,
                            ns,
                            ns.concurrency,
                            running.base_url,
                        )
                    )
                else:
                    # Inspect sends no telemetry unless a hook is configured; none is here
                    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
                    env["DO_NOT_TRACK"] = "1"
                    named = {"--rows": replica.rows, "--criterion": criterion}
                    named |= {"--base-url": running.base_url, "--concurrency": ns.concurrency}
                    peer = [str(PEER_PYTHON), str(HERE / "peer_inspect.py"), *flags(named)]
                    got = measured(peer, env=env)
            seen = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
            results[tool] = {
                "measured": got,
                "calls": len(seen),
                "prompt": sum(count_messages(s["body"]["messages"]) for s in seen),
                "output": sum(count_text(s["reply"] or "") for s in seen),
                "scored": got.out.get("scored"),
                "stub_cpu_s": running.stats.get("cpu_s", 0.0),
            }
    ours = results["rubric-eval"]
    rows = []
    for tool, r in results.items():
        m = r["measured"]
        rows.append(
            [
                tool,
                ns.rows,
                r["scored"],
                m.wall_s,
                m.wall_s / ours["measured"].wall_s,
                m.out.get("batch_wall_s", m.out.get("wall_s")),
                m.cpu_s,
                1000 * m.cpu_s / ns.rows,
                m.cpu_s / ours["measured"].cpu_s,
                r["calls"] / ns.rows,
                r["prompt"] / ns.rows,
                r["output"] / ns.rows,
                1000 * r["stub_cpu_s"] / r["calls"],
                m.load_before,
                m.load_after,
            ]
        )
    print(
        table(
            [
                "tool",
                "rows",
                "scored",
                "wall s (process)",
                "wall ratio",
                "wall s (judging)",
                "CPU s (process)",
                "CPU ms/row",
                "CPU ratio",
                "calls/row",
                "prompt tok/row",
                "output tok/row",
                "stub CPU ms/call",
                "load before",
                "load after",
            ],
            rows,
        )
    )
    print(
        f"\nC = {ns.concurrency}, L = {ns.latency_ms:g} ms, stub: {ns.stub}; whole processes "
        "(start-up, and for rubric-eval the report, included); 'judging': rubric-eval's batch "
        "(first to last stored row), Inspect's eval() call."
    )


# -- data for an outside timer ----------------------------------------------------------------


def cmd_data(ns: argparse.Namespace) -> None:
    replica = replica_for(ns.out / f"data-{ns.rows}", ns.rows)
    floor = floor_cmd(replica, ns.out / "floor-run")
    engine = engine_cmd(replica, ns.out / "engine-run")
    print("floor, one whole process (each run starts from an empty store):")
    print("  " + " ".join(floor))
    print("engine (score() of the same rows), one whole process:")
    print("  " + " ".join(engine))


# -- the CLI ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.split("\n\n")[0])
    # _child, _client, _cli, _write: internal
    shown = "{replay,startup,live,throughput,tokens,peer,data,pages,scale}"
    sub = parser.add_subparsers(dest="command", required=True, metavar=shown)

    p = sub.add_parser(
        "replay", help="engine vs floor: CPU per row, rows/s, memory at 10/50/100 %%"
    )
    p.add_argument("--rows", type=int, nargs="+", default=[10000, 100000])
    p.add_argument("--repeat", type=int, default=1, help="floor/engine pairs per size")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--data", type=Path, help="keep (and reuse) the replica data in this folder")
    p.add_argument("--startup-repeat", type=int, default=3, help="1-row start-up runs (0: none)")
    p.add_argument(
        "--fresh-decisions",
        action="store_true",
        help="no effect, kept for older commands: the engine keeps no cache of decisions, so "
        "every verdict is normalized afresh (none repeated) in every run",
    )
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("startup", help="CPU of `--help` and of a 1-row replay, whole process")
    p.add_argument("--repeat", type=int, default=5)
    p.set_defaults(func=cmd_startup)

    p = sub.add_parser("live", help="the live matrix: engine, litellm alone, bare aiohttp")
    live.add_arguments(p)

    p = sub.add_parser("throughput", help="live rows/s of the engine (the live matrix, 1 client)")
    live.add_arguments(p)
    p.add_argument(
        "--litellm-alone",
        dest="clients",
        action="store_const",
        const=["litellm", "engine"],
        help="also litellm alone (the earlier sections' command)",
    )
    p.set_defaults(clients=["engine"])

    p = sub.add_parser("tokens", help="judge tokens per row for the shipped packs")
    p.set_defaults(func=cmd_tokens)

    p = sub.add_parser("peer", help="the same rows through Inspect AI, same stub")
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--model", default="openai/gpt-4o-mini")
    p.add_argument("--stub", choices=("async", "thread"), default="async")
    p.add_argument("--transport", help="the engine's --transport, where it has one")
    p.set_defaults(func=cmd_peer)

    p = sub.add_parser("data", help="make replica data and print one-shot floor/engine commands")
    p.add_argument("--rows", type=int, default=100000, help="replica rows (default 100000)")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder to keep them in: OUT/data-ROWS/ gets rows.jsonl, verdicts.jsonl and "
        "cassettes/ (the --data DIR of `replay`)",
    )
    p.set_defaults(func=cmd_data)

    p = sub.add_parser(
        "pages", help="the review app: server CPU and memory per page at 1k, 10k, 100k rows"
    )
    pages.add_arguments(p)

    p = sub.add_parser(
        "scale", help="every command at N rows: CPU, wall, peak RSS and output size per step"
    )
    scale.add_arguments(p)

    p = sub.add_parser("_cli")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda ns: scale.run_cli_child(ns.argv))

    p = sub.add_parser("_write")
    p.add_argument("megabytes", type=float)
    p.add_argument("path", type=Path)
    p.set_defaults(func=lambda ns: scale.run_write_child(ns.megabytes, ns.path))

    p = sub.add_parser("_child")
    for name in ("--work", "--rows", "--rubric", "--mode", "--model"):
        p.add_argument(name, required=True)
    p.add_argument("--api-base")
    p.add_argument("--cassettes")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--transport")
    p.set_defaults(func=run_child)

    p = sub.add_parser("_client")
    p.add_argument("--client", choices=("litellm", "bare"), required=True)
    for name in ("--rows", "--rubric", "--model", "--api-base"):
        p.add_argument(name, required=True)
    p.add_argument("--concurrency", type=int, default=8)
    p.set_defaults(func=live.run_client_child)

    ns = parser.parse_args(argv)
    ns.func(ns)


if __name__ == "__main__":
    main()
