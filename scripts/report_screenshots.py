"""Screenshots of a 2,000-row report and of the HTML diff page, in headless Chromium.

Builds 2,000 replica rows of the health demo (benchmarks/replicate.py: real demo rows and their
authored verdicts, a throwaway replay cassette), scores them in replay, scores the demo batch
twice (normal and ``cassettes-worse/``) for the diff page, and writes PNGs to ``--out``
(default ``docs/screenshots``). Needs ``chromium`` (Debian package). Offline.

    .venv/bin/python scripts/report_screenshots.py
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def shoot(chromium: str, page: Path, png: Path, height: int, profile: Path) -> None:
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={profile}", f"--window-size=1280,{height}", "--hide-scrollbars",
         f"--screenshot={png}", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


def main() -> None:
    from benchmarks.replicate import make_replica
    from rubric_engine.engine import ScoreOptions, score
    from rubric_engine.report.render.html import render_diff_html
    from rubric_engine.report.run import run_diff
    from rubric_engine.rubric.versions import RubricRegistry
    from rubric_engine.store.task_store import TaskStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--rows", type=int, default=2000)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        replica = make_replica(tmp / "replica", args.rows)
        big = score(ScoreOptions(inputs=[replica.rows], rubric=ROOT / "rubrics" / "health_cs.yaml",
                                 draft=True, store=tmp / "big.sqlite", out=tmp / "big",
                                 cassettes=replica.cassettes))  # fmt: skip
        store = tmp / "demo.sqlite"
        with TaskStore(store) as opened:
            RubricRegistry(opened).publish(ROOT / "rubrics" / "health_cs.yaml")
        ids = [
            score(
                ScoreOptions(
                    inputs=[ROOT / "cases" / "health_consult_zh.jsonl"],
                    rubric="health_cs",
                    store=store,
                    out=tmp / name,
                    cassettes=ROOT / folder,
                )
            ).task_id
            for name, folder in (("base", "cassettes"), ("worse", "cassettes-worse"))
        ]
        diff_page = tmp / "diff.html"
        diff_page.write_text(render_diff_html(run_diff(store, ids[0], ids[1])), encoding="utf-8")
        shoot(chromium, big.files.html, args.out / "report-2000-first-screen.png", 900, tmp / "p1")
        shoot(chromium, big.files.html, args.out / "report-2000-full.png", 6000, tmp / "p2")
        shoot(chromium, diff_page, args.out / "diff-page.png", 1400, tmp / "p3")
    print(f"wrote {args.out}/report-2000-first-screen.png, report-2000-full.png, diff-page.png")


if __name__ == "__main__":
    main()
