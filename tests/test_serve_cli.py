"""`rubric-eval serve` as a command: loopback by default and said so, a warning elsewhere, and
the web packages never loaded by other commands (`--help` stays fast)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rubric_engine.cli.serve_cmd import bind_notice, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
)
def test_only_loopback_addresses_count_as_this_machine_only(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    text, warning = bind_notice(host, 8765, "s.sqlite")
    assert warning is not loopback
    assert ("loopback only" in text) is loopback
    assert ("warning: " in text and "reachable from other machines" in text) is not loopback


def test_the_cli_loads_no_web_package_until_serve_runs() -> None:
    code = (
        "import sys; from rubric_engine.cli import app; "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'multipart', 'rubric_engine.serve') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_serve_refuses_a_missing_store(tmp_path: object) -> None:
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    result = CliRunner().invoke(app, ["serve", "--store", f"{tmp_path}/none.sqlite"])
    assert result.exit_code == 3 and "no task store here" in result.output
