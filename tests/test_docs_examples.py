"""Every runnable shell example of README.md and docs/ runs, and prints what the page says.

The convention (CONTRIBUTING.md "Documentation"): a runnable example is a fenced block with
info string ``console``. Lines starting with ``$ `` are commands (a trailing ``\\`` continues a
command on the next line); the lines after a command, up to the next ``$ ``, are its expected
output, compared like a doctest with ELLIPSIS and whitespace normalised (the standard library's
:class:`doctest.OutputChecker`), so a page writes the figures that matter and ``...`` for what
varies. A command's output is what a terminal shows: stdout and stderr together.

All ``console`` blocks of one Markdown file run in order, each command in ``bash``, in one
scratch folder holding copies of the repository's ``rubrics/``, ``cases/``, ``cassettes*/``,
``prompts/`` and ``examples/``, with this venv's ``rubric-eval`` and ``python`` first on
``PATH``, ``HOME`` in the scratch folder and no store but the fresh default one. A command
ending in ``&`` starts a background process: its expected lines (if any) are awaited as it
prints them (a server saying it listens), and it is killed when the file's blocks end. The
loopback ports a page names (``127.0.0.1:PORT``, ``--port PORT``) are each replaced by a port free
at run time, so two pages, or two checkouts on one machine, never meet on one port.
"""

from __future__ import annotations

import doctest
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

COPIED = ("rubrics", "cases", "prompts", "examples")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
COMMAND_TIMEOUT_S = 120
#: how long a background command may take to print its expected lines (a server starting)
READY_TIMEOUT_S = 30


@dataclass(frozen=True)
class Example:
    """One command of a ``console`` block and the output the page expects of it."""

    line: int  # 1-based line of the ``$ `` in the Markdown file
    command: str
    expected: str

    @property
    def background(self) -> bool:
        return self.command.rstrip().endswith("&")


def examples(text: str) -> list[Example]:
    """The commands of every ``console`` block of a Markdown text, in order."""
    found: list[Example] = []
    lines = text.splitlines()
    inside = False
    command: list[str] = []
    output: list[str] = []
    start = 0

    def close() -> None:
        if command:
            found.append(Example(start, "\n".join(command), "".join(f"{o}\n" for o in output)))
        command.clear()
        output.clear()

    n = 0
    while n < len(lines):
        line = lines[n]
        if not inside:
            inside = line.strip() == "```console"
        elif line.strip() == "```":
            close()
            inside = False
        elif line.startswith("$ "):
            close()
            start = n + 1
            command.append(line[2:])
            while command[-1].endswith("\\") and n + 1 < len(lines):
                n += 1
                command.append(lines[n])
        elif command:
            output.append(line)
        n += 1
    return found


#: a loopback port a page names: in a URL or as a server's --port
PORT = re.compile(r"(?<=127\.0\.0\.1:)\d{4,5}\b|(?<=--port )\d{4,5}\b")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def with_free_ports(text: str) -> str:
    """``text`` with each loopback port it names replaced, everywhere, by a port free now."""
    ports = {port: str(_free_port()) for port in set(PORT.findall(text))}
    return PORT.sub(lambda m: ports[m.group()], text)


def pages() -> list[Path]:
    """The Markdown files with at least one ``console`` block."""
    candidates = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")]
    return [p for p in candidates if p.exists() and "```console" in p.read_text(encoding="utf-8")]


def _scratch(folder: Path) -> dict[str, str]:
    """Copy the repository's data into ``folder``; the environment the commands run in."""
    for name in COPIED:
        shutil.copytree(ROOT / name, folder / name)
    for cassettes in ROOT.glob("cassettes*"):
        if cassettes.is_dir():
            shutil.copytree(cassettes, folder / cassettes.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUBRIC_EVAL_")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(folder),
        COLUMNS="80",  # what rich prints to a pipe (its width when stdout is not a terminal)
        TERM="dumb",
        NO_COLOR="1",
        PYTHONIOENCODING="utf-8",
    )
    return env


def _run(example: Example, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-c", example.command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=COMMAND_TIMEOUT_S,
        text=True,
        encoding="utf-8",
    )
    return done.stdout


def _start(example: Example, cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Start a background command; read as many lines as the page expects of it."""
    process = subprocess.Popen(
        ["bash", "-c", f"exec {example.command.rstrip()[:-1]}"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
    )
    assert process.stdout is not None
    wanted = example.expected.count("\n")
    got: list[str] = []
    reader = _lines_within(process, READY_TIMEOUT_S)
    while len(got) < wanted:
        line = next(reader, None)
        if line is None:
            break
        got.append(line)
    return process, "".join(got)


def _lines_within(process: subprocess.Popen[str], timeout_s: float) -> Iterator[str]:
    """Lines of a process's output until ``timeout_s`` passes or it closes its output."""
    import selectors
    import time

    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(process.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not sel.select(left):
                return
            line = process.stdout.readline()
            if not line:
                return
            yield line


def _mismatch(page: Path, example: Example, got: str) -> str:
    report = doctest.OutputChecker().output_difference(
        doctest.Example(example.command, example.expected), got, FLAGS
    )
    return f"{page.relative_to(ROOT)}:{example.line}: $ {example.command}\n{report}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_of_a_page_print_what_it_says(page: Path, tmp_path: Path) -> None:
    env = _scratch(tmp_path)
    checker = doctest.OutputChecker()
    background: list[subprocess.Popen[str]] = []
    try:
        for example in examples(with_free_ports(page.read_text(encoding="utf-8"))):
            if example.background:
                process, got = _start(example, tmp_path, env)
                background.append(process)
            else:
                got = _run(example, tmp_path, env)
            if not checker.check_output(example.expected, got, FLAGS):
                pytest.fail(_mismatch(page, example, got), pytrace=False)
    finally:
        for process in background:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


def test_a_page_is_parsed_into_commands_and_their_output() -> None:
    text = (
        "intro\n```console\n$ echo one\none\n$ echo a \\\n  b\na b\n```\n"
        "```text\n$ not run\n```\n```console\n$ serve --port 1 &\nlistening\n```\n"
    )
    assert examples(text) == [
        Example(3, "echo one", "one\n"),
        Example(5, "echo a \\\n  b", "a b\n"),
        Example(13, "serve --port 1 &", "listening\n"),
    ]
    assert examples(text)[2].background


def test_a_command_whose_output_differs_from_the_page_fails(tmp_path: Path) -> None:
    # the comparison the page test makes: figures that differ fail, "..." covers what varies
    got = _run(Example(1, "echo 'task 42 · mean score 1.69'", ""), tmp_path, dict(os.environ))
    checker = doctest.OutputChecker()
    assert checker.check_output("task ... · mean score 1.69\n", got, FLAGS)
    assert not checker.check_output("task ... · mean score 1.70\n", got, FLAGS)


def test_no_page_hides_a_shell_example_the_test_would_not_run() -> None:
    # a ```bash (or sh, shell) block is not run by the page test: only README's two set-up
    # commands may use it (CI runs those); anything else runnable is a ```console block
    found = []
    for page in [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip() in ("```bash", "```sh", "```shell", "```zsh"):
                found.append(f"{page.relative_to(ROOT)}:{n}")
    assert found == ["README.md:14", "README.md:20"], found


def test_the_ports_a_page_names_are_swapped_for_free_ones_consistently() -> None:
    text = (
        "$ stub --port 18765 &\nlistening on http://127.0.0.1:18765\n"
        "$ score --api-base http://127.0.0.1:18765/v1 --port-file 1"
    )
    swapped = with_free_ports(text)
    ports = set(PORT.findall(swapped))
    assert len(ports) == 1 and "18765" not in swapped
    assert swapped.replace(ports.pop(), "18765") == text


def test_the_pages_state_the_stores_commit_cadence() -> None:
    """The commit cadence the pages promise is the store's (a kill loses what it had not
    committed: docs/judges.md "Long runs", docs/judge-replies.md, docs/stability.md)."""
    from rubric_engine.store.task_store import COMMIT_EVERY_ROWS, COMMIT_INTERVAL_S

    every = f"every {COMMIT_EVERY_ROWS} rows"
    clock = f"{COMMIT_INTERVAL_S:g} s"
    for name in ("judges.md", "judge-replies.md", "stability.md"):
        text = " ".join((ROOT / "docs" / name).read_text("utf-8").split())
        assert every in text and clock in text, name
        assert not re.search(r"every \d+ rows", text.replace(every, "")), name
