"""The built wheel is the `rubric-engine` distribution and works outside the repository.

Guards the rename: `rubric-eval` on the public index is an unrelated project,
so the wheel must be named `rubric-engine`, keep the `rubric-eval` command, ship the prompt
templates and the `py.typed` marker, and run from a folder that is not the checkout.
"""

from __future__ import annotations

import email
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{built.stderr[-2000:]}")
    (found,) = out.glob("*.whl")
    return found


def test_wheel_is_rubric_engine_with_the_rubric_eval_command(wheel: Path) -> None:
    assert wheel.name.startswith("rubric_engine-")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(zf.read(f"{dist_info}/METADATA"))
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
    assert meta["Name"] == "rubric-engine"
    assert "rubric-eval = rubric_engine.cli:main" in entry_points
    assert "rubric_engine/py.typed" in names
    assert "rubric_engine/_data/prompts/judge_v1/system.j2" in names


def test_installed_wheel_runs_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = (
        "import rubric_engine, rubric_engine.judge.prompt as p, sys;"
        "print(rubric_engine.__file__);"
        "print(p.load_prompt('judge_v1').hash)"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    module_file, prompt_hash = ran.stdout.split()
    assert Path(module_file).is_relative_to(target)
    assert prompt_hash.startswith("sha256:")
    helped = subprocess.run(
        [sys.executable, "-m", "rubric_engine.cli", "--help"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert helped.returncode == 0, helped.stderr
    assert "score" in helped.stdout
