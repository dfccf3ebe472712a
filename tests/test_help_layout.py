"""Help in an 80-column terminal: every option named in full, defaults early in the text, and
square brackets in help text (``rubric-engine[parquet]``) printed, not taken for markup."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from rubric_engine.cli import app
from tests.test_cli import run


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under ``command`` (typer's own click: groups have ``commands``)."""
    yield path, command
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))


def test_every_help_fits_80_columns_with_names_and_brackets_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    root = typer.main.get_command(app)
    checked = 0
    for path, command in _commands(root):
        code, out = run(*path, "--help")
        assert code == 0, (path, out)
        assert max(len(line) for line in out.splitlines()) <= 80, path
        flat = " ".join(out.split())
        for param in command.params:
            if getattr(param, "hidden", False):
                continue  # kept only to say where an old option went (serve's queue settings)
            for name in [n for n in (*param.opts, *param.secondary_opts) if n.startswith("-")]:
                assert name in out, (path, name)  # never cut to `--batch-max-reque…`
            for bracketed in re.findall(r"\[[\w-]+\]", getattr(param, "help", None) or ""):
                assert bracketed in flat, (path, bracketed)
        for bracketed in re.findall(r"\w\[[\w-]+\]", command.help or ""):
            assert bracketed in flat, (path, bracketed)
        checked += 1
    assert checked > 30


def test_export_help_keeps_the_install_hint_and_transport_names_its_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _, out = run("export", "--help")
    assert "pip install 'rubric-engine[parquet]'" in " ".join(out.split())
    _, out = run("score", "--help")
    transport = " ".join(out.split("--transport", 1)[1].split())
    assert transport.split(":")[0].startswith("<str> direct (the default")
