"""What every benchmark table needs: Markdown tables, the load average, throwaway folders, the
loopback stub in its own process, and measured child processes.

A measured run is its own process, reaped with ``os.wait4`` so its CPU time (user + system) is
the kernel's accounting of that process alone (and of any child it waited for), not an
estimate from inside. Peak memory is not taken from ``wait4``: a child's ``ru_maxrss`` keeps
the high-water mark of the parent's pages it shared before ``exec``; each child reports its
own ``VmHWM`` (reset by ``exec``) instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER_PYTHON = HERE / ".venv-peer" / "bin" / "python"
STUBS = {"async": HERE / "stub_async.py", "thread": HERE / "stub_server.py"}


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
    if value is None:
        return ""
    return str(value)


def load() -> str:
    """The 1- and 5-minute load averages, ``"1.23/1.80"`` (2 cores: above 2 the CPU is shared)."""
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


@contextmanager
def workdir(keep: Path | None = None) -> Iterator[Path]:
    """A throwaway folder, deleted afterwards; ``keep`` names a folder to use and keep instead."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    folder = Path(tempfile.mkdtemp(prefix="rubric-eval-bench-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Measured:
    """One finished child process: its last JSON line and the kernel's figures for it."""

    out: dict[str, Any]
    cpu_s: float  # user + system, seconds
    sys_s: float  # of which system (the kernel's work for the process: file I/O, page faults)
    wall_s: float
    load_before: str
    load_after: str


def measured(
    cmd: Sequence[str], env: dict[str, str] | None = None, json_line: bool = True
) -> Measured:
    """Run ``cmd``, wait for it with ``wait4`` and return its figures (``out``: its last line
    that is a JSON object; ``{}`` with ``json_line=False``).

    Raises:
        SystemExit: the command exited non-zero (its stderr's end is in the message), or
            printed no JSON line where one was wanted.
    """
    before = load()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=env, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, problems = out.read(), err.read()
    if proc.returncode != 0:
        sys.exit(f"a measured run failed (exit {proc.returncode}): {cmd[:3]}\n{problems[-3000:]}")
    lines = [line for line in text.splitlines() if line.startswith("{")] or ["{}"]
    if json_line and lines == ["{}"]:
        sys.exit(f"a measured run printed no JSON line: {cmd[:3]}\n{text[-2000:]}")
    return Measured(
        out=json.loads(lines[-1]),
        cpu_s=usage.ru_utime + usage.ru_stime,
        sys_s=usage.ru_stime,
        wall_s=wall,
        load_before=before,
        load_after=load(),
    )


def own_peak_mb() -> float:
    """This process's own peak resident memory in MB (``VmHWM``, which ``exec`` resets)."""
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(s.split()[1]) for s in status if s.startswith("VmHWM:")) / 1024


def run_py(*args: str) -> list[str]:
    """The command line of ``benchmarks/run.py ARGS`` with this interpreter."""
    return [sys.executable, str(HERE / "run.py"), *args]


def flags(named: dict[str, Any]) -> list[str]:
    """``{"--rows": 5, "--fast": None}`` → ``["--rows", "5"]``: options with a value, in order."""
    return [text for name, value in named.items() if value is not None
            for text in (name, str(value))]  # fmt: skip


@dataclass
class Stub:
    """A running loopback stub: its base URL; after it stopped, its own figures."""

    base_url: str
    stats: dict[str, Any] = field(default_factory=dict)


@contextmanager
def stub(
    verdicts: Path, latency_ms: float, log: Path | None = None, kind: str = "async"
) -> Iterator[Stub]:
    """The loopback stub (``kind``: ``async``, one asyncio loop; ``thread``, a thread per
    connection) in its own process. On exit ``stats`` holds the requests it answered and its
    CPU seconds from ready to stop."""
    cmd = [sys.executable, str(STUBS[kind]), "--verdicts", str(verdicts)]
    cmd += ["--latency-ms", str(latency_ms)] + (["--log", str(log)] if log else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ready = proc.stdout.readline().split()
    if len(ready) != 2 or ready[0] != "PORT":
        proc.kill()
        sys.exit(f"the stub did not start: {ready}")
    running = Stub(f"http://127.0.0.1:{ready[1]}/v1")
    try:
        yield running
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
        for line in rest.splitlines():
            if line.startswith("STATS "):
                running.stats = json.loads(line[6:])
