"""``run.py scale --rows N``: every command a team runs on a big task, at N rows.

Data (made once per size, kept with ``--data DIR``): N rows of the health demo (row *k* is demo
row *k mod 26* with a new rowId, numbered by a permutation of *k*, so rowId order is not input
order), two replay cassettes (tasks A and B) and N/10 human labels.
**No verdict is repeated** within task A: row *k*'s verdict is decoded from a permutation of
*k* (:func:`verdict_for`) into a status for each of the pack's 8 non-critical requirements
(followed, unmet, partial, or both), the judge's score, the questions check and whether a
critical red line is violated: 1,310,720 distinct verdicts, spread the same way at every N
(so 100k and 1M rows are the same mix). Task B is task A with one row in ten judged
otherwise (another score; every other such row also the red line flipped): what a diff of
two versions finds.

Each step is one ``rubric-eval`` command in its own process (``run.py _cli``: the CLI in
process, then its own ``VmHWM``), reaped with ``wait4`` for its CPU time:

score A (replay, the pack published in the store) · report · export csv, parquet,
csv --long · labels import (N/10 labels, naming the published pack: ``--task`` would load the
whole task to check them) · calibrate A · labels export · score B · diff md (B against A) ·
batch export (every row's request) · batch import (an answer for each, task C) · store
migrate (the batch store into a new file) · write-floor: no engine code, a process that writes
as many bytes as migrate did, 32 KB at a time, into a new file. A step that writes gigabytes
spends much of its CPU in the kernel, and the kernel's time for the same bytes changes with
what the page cache holds at that moment (benchmarks/RESULTS.md §11): the floor shows that
beside the steps, and the tables split each step's CPU into user and system time.

The table prints CPU-s, wall, peak RSS and output size per step with the load average; with
two or more sizes a second table compares each step's peak and CPU per row with the first
size's (the targets: peak ≤ 300 MB and within 1.3×; CPU per row within 1.2×).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import measured, own_peak_mb, run_py, table, workdir

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEMO_ROWS = ROOT / "cases" / "health_consult_zh.jsonl"
DEMO_VERDICTS = ROOT / "cases" / "verdicts" / "health_cs.jsonl"
DEMO_CASSETTE = ROOT / "cassettes" / "health_cs" / "health_consult_zh.jsonl"
RUBRIC = ROOT / "rubrics" / "health_cs.yaml"
RUBRIC_KEY = "health_cs"  # RUBRIC, published as version 1 in each store of a run
INTENT = "HEALTH_CONSULTATION"  # every demo row's intent
MODEL = "openai/gpt-4o-mini"
#: distinct verdicts: 4 statuses for each of 8 non-critical requirements, 5 scores, 2
#: questions checks, a critical red line violated or not
DISTINCT = 4**8 * 5 * 2 * 2
#: row k's verdict is number (k * STRIDE + 12345) mod DISTINCT: a bijection (STRIDE is prime to
#: DISTINCT = 2^18 · 5), so rows below DISTINCT never share a verdict
STRIDE = 7919
#: the file that marks a data folder finished (a new name when the data's shape changes)
DONE = "complete-2"
#: in the order they run: task B is scored just before the diff, its one reader, so a run cut
#: short has measured the steps of task A first
STEPS = (
    "score", "report", "export-csv", "export-parquet", "export-long", "labels-import",
    "calibrate", "labels-export", "score-b", "diff", "batch-export", "batch-import", "migrate",
)  # fmt: skip
#: what a step reads that another step makes (those run too when it is asked for)
NEEDS = {
    "score-b": ("score",), "report": ("score",), "export-csv": ("score",),
    "export-parquet": ("score",), "export-long": ("score",), "diff": ("score", "score-b"),
    "labels-import": ("score",), "calibrate": ("labels-import",),
    "labels-export": ("labels-import",), "batch-import": ("batch-export",),
    "migrate": ("batch-import",),
}  # fmt: skip


def with_needs(wanted: set[str]) -> set[str]:
    """``wanted`` and every step they need, transitively."""
    out, todo = set(), list(wanted)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(NEEDS.get(name, ()))
    return out


def row_id(k: int, count: int) -> str:
    """Row k's rowId: a permutation of 0 … count-1, so rowId order is not input order (a diff
    merges the tasks' rows in rowId order)."""
    step = next(p for p in (7919, 7927, 7933) if count % p)  # prime, so coprime with count
    return f"scale-{(k * step) % count:07d}"


# -- the data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirements:
    plain: tuple[str, ...]  #: the intent's non-critical requirement IDs, pack order
    red_line: str  #: one critical requirement (its violation raises a red flag)


def requirements() -> Requirements:
    from rubric_engine.rubric.loader import load_rubric

    found = load_rubric(RUBRIC).applicable_requirements(INTENT)
    plain = tuple(r.id for r in found if not r.critical)
    red_line = next(r.id for r in found if r.critical and r.red_flag_type)
    assert len(plain) == 8, plain  # DISTINCT counts 8
    return Requirements(plain, red_line)


def verdict_for(k: int, reqs: Requirements, task: str = "a") -> dict[str, Any]:
    """Row ``k``'s verdict fields (besides rowId, intent and explanation) in task ``task``."""
    number = (k * STRIDE + 12345) % DISTINCT
    score, number = 1 + number % 5, number // 5
    questions, number = ("NOT_PRESENT", "OK")[number % 2], number // 2
    red_line, number = number % 2 == 1, number // 2
    unmet, partial = [], []
    for rid in reqs.plain:
        status, number = number % 4, number // 4
        if status & 1:
            unmet.append(rid)
        if status & 2:
            partial.append(rid)
    if task == "b" and k % 10 == 7:  # B judges one row in ten otherwise
        score = score % 5 + 1
        if k % 20 == 7:
            red_line = not red_line
    if red_line:
        unmet.append(reqs.red_line)
    return {
        "score": score,
        "unmetRequirementIds": unmet,
        "partialRequirementIds": partial,
        "questionsCheck": questions,
        "questionsIssues": [],
    }


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@dataclass(frozen=True)
class ScaleData:
    folder: Path
    rows: Path
    cassettes_a: Path
    cassettes_b: Path
    labels: Path
    count: int


class Answers:
    """The judge's answer to row k of a data set of ``count`` rows: a chat completion (the
    demo cassette's response) whose content is row k's verdict in task A or B."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.reqs = requirements()
        self.template = _jsonl(DEMO_CASSETTE)[0]["attempts"][0]["response"]
        self.demo_verdicts = [v for v in _jsonl(DEMO_VERDICTS)]
        by_id = {v["rowId"]: v for v in self.demo_verdicts}
        self.demo = [by_id[r["rowId"]] for r in _jsonl(DEMO_ROWS)]  # row k: demo[k % 26]

    def response(self, k: int, task: str = "a") -> dict[str, Any]:
        verdict = {
            "rowId": row_id(k, self.count),
            "intentKey": INTENT,
            "scoreExplanation": self.demo[k % len(self.demo)]["scoreExplanation"],
            **verdict_for(k, self.reqs, task),
        }
        message = {"role": "assistant", "content": json.dumps(verdict, ensure_ascii=False)}
        return {**self.template, "choices": [{**self.template["choices"][0], "message": message}]}


class _KeyingBackend:
    """Answers each request with row k's task-A verdict and writes the cassette entries of
    both tasks under the request's key (the key does not depend on the answer)."""

    def __init__(self, handles: dict[str, Any], answers: Answers) -> None:
        self.handles = handles
        self.answers = answers
        self.k = 0  #: the row being keyed

    def response(self, task: str) -> dict[str, Any]:
        return self.answers.response(self.k, task)

    async def complete(self, kwargs: dict[str, Any], request: Any, key: Any, served: int) -> Any:
        from rubric_engine.judge.backends import Answer
        from rubric_engine.judge.protocol import Attempt

        return Answer(attempts=(Attempt(response=self.response("a")),))

    def finish(self, request: Any, key: Any, outcome: Any) -> None:
        from rubric_engine.judge.cassettes.cassette import CassetteEntry

        if outcome.error is not None:
            raise RuntimeError(f"{request.row_id}: {outcome.error.message}")
        for task, handle in self.handles.items():
            entry = CassetteEntry(
                key=key.key,
                row_id=request.row_id,
                key_parts=key.parts,
                provenance={
                    "kind": "authored",
                    "author": "benchmarks/scale.py",
                    "authoredAt": "benchmark run",
                    "method": f"scale benchmark, task {task.upper()}: the demo row's "
                    "explanation with a verdict decoded from the row number; throwaway",
                },
                attempts=[{"response": self.response(task)}],
            )
            handle.write(entry.to_json() + "\n")


def make_data(folder: Path, count: int) -> ScaleData:
    """Rows, two cassettes and the labels for ``count`` rows under ``folder`` (reused when a
    previous call finished them)."""
    data = ScaleData(
        folder,
        folder / "rows.jsonl",
        folder / "cassettes-a",
        folder / "cassettes-b",
        folder / "labels.jsonl",
        count,
    )
    if (folder / DONE).exists():
        return data
    if count > DISTINCT:
        sys.exit(f"--rows {count}: at most {DISTINCT:,} rows have distinct verdicts")
    started = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    reqs = requirements()
    demo = _jsonl(DEMO_ROWS)
    with data.rows.open("w", encoding="utf-8") as rows, data.labels.open("w") as labels:
        for k in range(count):
            source = demo[k % len(demo)]
            row = {**source, "rowId": row_id(k, count)}
            row["metadata"] = {**source.get("metadata", {}), "benchReplicaOf": source["rowId"]}
            rows.write(json.dumps(row, ensure_ascii=False) + "\n")
            if k % 10 == 0:
                labels.write(json.dumps(label_for(k, count, reqs)) + "\n")
    _write_cassettes(data)
    (folder / DONE).write_text("made by benchmarks/run.py scale\n", encoding="utf-8")
    print(f"  made {count} rows, 2 cassettes and labels in {time.perf_counter() - started:.0f} s")
    return data


def label_for(k: int, count: int, reqs: Requirements) -> dict[str, Any]:
    """A reviewer's label of row k's first non-critical requirement: the judge's (task A)
    status on four rows in five, the other status on the fifth."""
    judged = reqs.plain[0] in verdict_for(k, reqs)["unmetRequirementIds"]
    unmet = judged if k % 50 else not judged
    return {
        "rowId": row_id(k, count),
        "requirementId": reqs.plain[0],
        "status": "VIOLATED" if unmet else "FOLLOWED",
        "reviewer": "bench-reviewer",
        "time": "2026-12-01T00:00:00Z",
        "rubricKey": RUBRIC_KEY,
        "rubricVersion": 1,
    }


def _write_cassettes(data: ScaleData) -> None:
    from rubric_engine.dialogue.readers import DialogueSource
    from rubric_engine.engine.pipeline import RequestBuilder
    from rubric_engine.judge.instructor_judge import DEFAULT_PARAMS, InstructorJudge
    from rubric_engine.judge.prompt import load_prompt
    from rubric_engine.rubric.loader import load_rubric

    rubric = load_rubric(RUBRIC)
    builder = RequestBuilder(rubric, load_prompt())
    paths = {"a": data.cassettes_a, "b": data.cassettes_b}
    for path in paths.values():
        (path / rubric.key).mkdir(parents=True, exist_ok=True)
    handles = {t: (p / rubric.key / "rows.jsonl").open("w", encoding="utf-8")
               for t, p in paths.items()}  # fmt: skip
    try:
        backend = _KeyingBackend(handles, Answers(data.count))
        judge = InstructorJudge(backend, rubric, MODEL, dict(DEFAULT_PARAMS), max_reasks=0)

        async def run() -> None:
            for seq, row in enumerate(DialogueSource(data.rows)):
                backend.k = seq
                await judge.judge(builder.prepare(seq, row).request)

        asyncio.run(run())
    finally:
        for handle in handles.values():
            handle.close()


def answer_batch(requests: Path, results: Path, count: int) -> int:
    """Answer every request under ``requests`` (a ``batch export`` folder) with its row's
    task-A verdict, as OpenAI's batch output lines, into ``results``; each request file is
    deleted once answered (a million rows' requests are ~12 GB). Returns the lines written."""
    from rubric_engine.batch.lines import parse_custom_id

    answers = Answers(count)
    written = 0
    with results.open("w", encoding="utf-8") as out:
        for path in sorted(requests.glob("requests-*.jsonl")):
            with path.open("rb") as lines:
                for line in lines:
                    cid = json.loads(line)["custom_id"]
                    k = parse_custom_id(cid).seq  # type: ignore[union-attr]
                    response = {"status_code": 200, "request_id": str(k),
                                "body": answers.response(k)}  # fmt: skip
                    answer = {"id": f"batch_req_{k}", "custom_id": cid, "response": response,
                              "error": None}  # fmt: skip
                    out.write(json.dumps(answer, ensure_ascii=False) + "\n")
                    written += 1
            path.unlink()
    assert written == count, (written, count)
    return written


# -- the steps --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]
    outputs: list[Path]  #: files or folders the step writes (their size is reported)
    growth: Path | None = None  #: a store file whose growth is the step's output


def steps(data: ScaleData, run: Path) -> list[Step]:
    store, batch_store = run / "store.sqlite", run / "batch.sqlite"
    rubric = ["-r", RUBRIC_KEY, "--model", MODEL]  # published in both stores (publish())
    a, b = "scale-a", "scale-b"
    on = ["--store", str(store)]
    return [
        Step("score", ["score", str(data.rows), *rubric, "--cassettes", str(data.cassettes_a),
                       "--name", a, "--out", str(run / "reports-a"), "-q", *on],
             [run / "reports-a"], store),
        Step("report", ["report", a, "--out", str(run / "report-a"), *on], [run / "report-a"]),
        Step("export-csv", ["export", a, "--format", "csv", "--out", str(run / "a.csv"), *on],
             [run / "a.csv"]),
        Step("export-parquet", ["export", a, "--format", "parquet",
                                "--out", str(run / "a.parquet"), *on], [run / "a.parquet"]),
        Step("export-long", ["export", a, "--format", "csv", "--long",
                             "--out", str(run / "a-long.csv"), *on], [run / "a-long.csv"]),
        Step("labels-import", ["labels", "import", str(data.labels), *on], [], store),
        Step("calibrate", ["calibrate", a, "--out", str(run / "calibration.txt"), *on],
             [run / "calibration.txt"]),
        Step("labels-export", ["labels", "export", a, "--out", str(run / "labels-out.jsonl"),
                               *on], [run / "labels-out.jsonl"]),
        Step("score-b", ["score", str(data.rows), *rubric, "--cassettes", str(data.cassettes_b),
                         "--name", b, "--out", str(run / "reports-b"), "-q", *on],
             [run / "reports-b"], store),
        Step("diff", ["diff", a, b, "--out", str(run / "diff.md"), *on],
             [run / "diff.md", run / "diff.items.jsonl"]),
        Step("batch-export", ["batch", "export", str(data.rows), *rubric,
                              "--out", str(run / "batch-requests"), "--store", str(batch_store)],
             [run / "batch-requests"], batch_store),
        Step("batch-import", ["batch", "import", "TASK", str(run / "batch-results.jsonl"),
                              "--out", str(run / "reports-c"), "--store", str(batch_store)],
             [run / "reports-c"], batch_store),
        Step("migrate", ["store", "migrate", "--from", str(batch_store),
                         "--to", str(run / "migrated.sqlite")], [run / "migrated.sqlite"]),
    ]  # fmt: skip


def size_mb(paths: list[Path]) -> float:
    total = 0
    for path in paths:
        if path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        elif path.exists():
            total += path.stat().st_size
    return total / 1e6


def store_mb(store: Path) -> float:
    return size_mb([store, store.with_name(store.name + "-wal")])


def publish(run: Path) -> None:
    """Publish the pack in the run's stores: tasks score a published version (as a team's
    do), and labels name it, so ``labels import`` checks them against it without reading a
    task (that check, ``--task``, loads the whole task)."""
    for store in ("store.sqlite", "batch.sqlite"):
        cmd = run_py("_cli", "rubric", "publish", str(RUBRIC), "--store", str(run / store))
        got = measured(cmd)
        if got.out.get("exit") != 0:
            sys.exit(f"rubric publish into {store} failed")


def run_steps(data: ScaleData, run: Path, wanted: set[str]) -> list[dict[str, Any]]:
    """Run the wanted steps in order; each one's figures."""
    publish(run)
    figures = []
    for step in steps(data, run):
        if step.name not in wanted:
            continue
        argv = list(step.argv)
        if step.name == "batch-import":
            requests = run / "batch-requests"
            argv[2] = json.loads((requests / "manifest.json").read_text("utf-8"))["taskId"]
            answer_batch(requests, run / "batch-results.jsonl", data.count)
        before = store_mb(step.growth) if step.growth else 0.0
        got = measured(run_py("_cli", *argv))
        if got.out.get("exit") != 0:
            sys.exit(f"step {step.name} exited {got.out.get('exit')}: rubric-eval {' '.join(argv)}")
        output = size_mb(step.outputs)
        if step.growth:
            output += store_mb(step.growth) - before
        figures.append({
            "step": step.name, "rows": data.count, "cpu_s": got.cpu_s, "sys_s": got.sys_s,
            "wall_s": got.wall_s,
            "peak_mb": got.out["peak_mb"], "output_mb": output,
            "load_before": got.load_before, "load_after": got.load_after,
        })  # fmt: skip
        print(
            f"  {data.count} {step.name}: {got.cpu_s:.1f} CPU-s ({got.sys_s:.1f} system), "
            f"{got.wall_s:.1f} s, "
            f"{got.out['peak_mb']:.0f} MB peak, {output:.1f} MB out, load {got.load_after}",
            flush=True,
        )
        if step.name == "migrate":
            figures.append(write_floor(run, data.count, output))
        for done in DONE_WITH.get(step.name, ()):  # a million rows' files run to tens of GB
            _remove(run / done)
    return figures


def write_floor(run: Path, count: int, megabytes: float) -> dict[str, Any]:
    """The write-floor step: a child writing ``megabytes`` into a new file, measured as a step."""
    floor = run / "write-floor.bin"
    got = measured(run_py("_write", str(megabytes), str(floor)))
    _remove(floor)
    print(f"  {count} write-floor: {got.cpu_s:.1f} CPU-s ({got.sys_s:.1f} system), "
          f"{got.wall_s:.1f} s, {megabytes:.1f} MB written", flush=True)  # fmt: skip
    return {
        "step": "write-floor", "rows": count, "cpu_s": got.cpu_s, "sys_s": got.sys_s,
        "wall_s": got.wall_s, "peak_mb": got.out["peak_mb"], "output_mb": megabytes,
        "load_before": got.load_before, "load_after": got.load_after,
    }  # fmt: skip


def run_write_child(megabytes: float, path: Path) -> None:
    """Write ``megabytes`` of zeros into ``path``, 32 KB at a time (SQLite's page size for a
    new store); print this process's peak memory as the last JSON line."""
    block = bytes(32 * 1024)
    with path.open("wb") as out:
        for _ in range(int(megabytes * 1e6) // len(block)):
            out.write(block)
    print(json.dumps({"exit": 0, "peak_mb": own_peak_mb()}), flush=True)


#: what each step leaves that no later step reads, removed once it is measured
DONE_WITH = {
    "export-csv": ("a.csv",), "export-parquet": ("a.parquet",), "export-long": ("a-long.csv",),
    "labels-export": ("labels-out.jsonl", "report-a"),
    "diff": ("diff.md", "diff.items.jsonl", "store.sqlite", "store.sqlite-wal",
             "store.sqlite-shm", "reports-a", "reports-b"),
    "batch-import": ("batch-requests", "batch-results.jsonl", "reports-c"),
    "migrate": ("migrated.sqlite", "migrated.sqlite-wal", "migrated.sqlite-shm"),
}  # fmt: skip


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def cmd_scale(ns: argparse.Namespace) -> None:
    unknown = set(ns.steps or ()) - set(STEPS)
    if unknown:
        sys.exit(f"--steps: unknown {', '.join(sorted(unknown))}; valid: {', '.join(STEPS)}")
    wanted = with_needs(set(ns.steps or STEPS))
    figures: list[dict[str, Any]] = []
    with workdir(ns.data) as work:
        for count in ns.rows:
            data = make_data(work / f"scale-{count}", count)
            run = work / f"run-{count}"
            shutil.rmtree(run, ignore_errors=True)
            run.mkdir()
            try:
                figures += run_steps(data, run, wanted)
            finally:
                if not ns.keep_runs:
                    shutil.rmtree(run, ignore_errors=True)
    print()
    print(table(HEADERS, [[f[k] for k in KEYS] + [1000 * f["cpu_s"] / f["rows"]] for f in figures]))
    print(f"\n{NOTE}")
    if len(ns.rows) > 1:
        first = {f["step"]: f for f in figures if f["rows"] == ns.rows[0]}
        compared = []
        for f in figures:
            base = first[f["step"]]
            if f["rows"] == base["rows"]:
                continue
            per_row = (f["cpu_s"] / f["rows"]) / (base["cpu_s"] / base["rows"])
            user = ((f["cpu_s"] - f["sys_s"]) / f["rows"]) / (
                (base["cpu_s"] - base["sys_s"]) / base["rows"]
            )
            system = (f["sys_s"] / f["rows"]) / max(base["sys_s"] / base["rows"], 1e-9)
            compared.append([f["step"], f["rows"], base["rows"], f["peak_mb"],
                             f["peak_mb"] / base["peak_mb"], per_row, user, system])  # fmt: skip
        print()
        print(table(COMPARED, compared))
        print(f"\ntargets: peak ≤ 300 MB, peak ratio ≤ 1.3, CPU/row ratio ≤ 1.2 (vs {ns.rows[0]}).")


KEYS = ("step", "rows", "cpu_s", "sys_s", "wall_s", "peak_mb", "output_mb", "load_before",
        "load_after")  # fmt: skip
HEADERS = ["step", "rows", "CPU s", "of which system s", "wall s", "peak MB", "output MB",
           "load before", "load after", "CPU ms/row"]  # fmt: skip
COMPARED = ["step", "rows", "vs rows", "peak MB", "peak ratio", "CPU/row ratio", "user/row ratio",
            "system/row ratio"]  # fmt: skip
NOTE = (
    "each step is one rubric-eval command in its own process: CPU is the kernel's user+sys "
    "time (wait4), peak is the process's own VmHWM; output is what it wrote (score and "
    "labels import: the store's growth, WAL included, plus the report folder). calibrate "
    "runs whatever `rubric-eval calibrate` does on this tree. write-floor is no engine code: "
    "a process writing as many bytes as migrate did, for the kernel's cost of those bytes."
)


# -- the measured child ---------------------------------------------------------------------


def run_cli_child(argv: list[str]) -> None:
    """Run ``rubric-eval ARGV`` in this process; print its exit code and this process's peak
    memory (``VmHWM``, reset by ``exec``) as the last JSON line."""
    from rubric_engine.cli import main

    sys.argv = ["rubric-eval", *argv]
    code: Any = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    print(json.dumps({"exit": code, "peak_mb": own_peak_mb()}), flush=True)
    os._exit(0)  # the command is done; its exit code is in the line above


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, nargs="+", default=[10000, 100000])
    p.add_argument(
        "--steps",
        nargs="+",
        metavar="STEP",
        help=f"only these and what they need ({', '.join(STEPS)})",
    )
    p.add_argument("--data", type=Path, help="keep (and reuse) the data in this folder")
    p.add_argument(
        "--keep-runs",
        action="store_true",
        help="keep the run folder (--data); files no later step reads are removed as it goes",
    )
    p.set_defaults(func=cmd_scale)


__all__ = ["add_arguments", "answer_batch", "make_data", "run_cli_child", "verdict_for"]
