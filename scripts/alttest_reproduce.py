"""Reproduce the alternative annotator test's published figures with `rubric-eval calibrate`.

The authors of "The Alternative Annotator Test for LLM-as-a-Judge" (Calderon, Reichart & Dror,
ACL 2025) publish their datasets and a notebook whose outputs give, per dataset and LLM, the
winning rate ω and the advantage probability ρ (``alt_test_example.ipynb``). Their repository
has no licence, so nothing of it is copied here: give this script the path of a checkout and it
reads the notebook's dataset list, ε per dataset and printed figures, converts each dataset to
label files (categories as row labels' ``intentKey``, numbers as ``score``; one file of all
human annotators, one per LLM), runs

    rubric-eval calibrate --judge-labels LLM.jsonl --labels HUMANS.jsonl --alt-test \\
        --epsilon E --format json

and compares ``altTest.intent`` / ``altTest.score`` with the published figures to 2 decimals.

    python scripts/alttest_reproduce.py PATH/TO/AltTest [--out FOLDER] [--dataset NAME]...

Exit status 0 when every figure matches, 1 otherwise. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: the notebook's printed line per dataset and LLM
PUBLISHED = re.compile(
    r"^(?P<dataset>\S+) (?P<llm>\S+) \[(PASSED|FAILED)\]:\s+Winning Rate=(?P<w>[0-9.]+)\s+"
    r"Advantage Probability=(?P<p>[0-9.]+)$"
)


def notebook(
    checkout: Path,
) -> tuple[dict[str, str], dict[str, float], dict[tuple[str, str], tuple[float, float]]]:
    """(scoring per dataset, ε per dataset, published (ω, ρ) per (dataset, LLM)) as the
    notebook's code cells define them and its outputs print them."""
    cells = json.loads((checkout / "alt_test_example.ipynb").read_text(encoding="utf-8"))["cells"]
    scoring: dict[str, str] = {}
    epsilons: dict[str, float] = {}
    published: dict[tuple[str, str], tuple[float, float]] = {}
    for cell in cells:
        source = "".join(cell.get("source", ()))
        for name, target in (
            ("datasets_scoring_functions", scoring),
            ("datasets_epsilons", epsilons),
        ):
            found = re.search(rf"^{name} = (\{{.*?\}})", source, re.S | re.M)
            if found:
                target.update(ast.literal_eval(found.group(1)))
        for output in cell.get("outputs", ()):
            for line in "".join(output.get("text", ())).splitlines():
                match = PUBLISHED.match(line.strip())
                if match:
                    key = (match["dataset"], match["llm"])
                    published[key] = (float(match["w"]), float(match["p"]))
    return scoring, epsilons, published


def _label(instance: str, reviewer: str, value: Any, field: str) -> str:
    return json.dumps({"rowId": instance, "reviewer": reviewer, field: value}, ensure_ascii=False)


def convert(folder: Path, field: str, out: Path) -> tuple[Path, dict[str, Path]]:
    """HUMANS.jsonl (every annotator) and one LLM file per model, as label files."""
    humans = json.loads((folder / "human_annotations.json").read_text(encoding="utf-8"))
    llms = json.loads((folder / "llm_annotations.json").read_text(encoding="utf-8"))
    out.mkdir(parents=True, exist_ok=True)
    human_file = out / "HUMANS.jsonl"
    human_file.write_text(
        "".join(
            _label(i, f"annotator-{a}", v, field) + "\n"
            for a, given in humans.items()
            for i, v in given.items()
        ),
        encoding="utf-8",
    )
    judges = {}
    for llm, answers in llms.items():
        path = out / f"LLM-{llm}.jsonl"
        path.write_text(
            "".join(_label(i, f"judge:{llm}", v, field) + "\n" for i, v in answers.items()),
            encoding="utf-8",
        )
        judges[llm] = path
    return human_file, judges


def rubric_eval() -> str:
    beside = Path(sys.executable).parent / "rubric-eval"
    return str(beside) if beside.exists() else (shutil.which("rubric-eval") or "rubric-eval")


def calibrate(judge: Path, humans: Path, epsilon: float) -> dict[str, Any]:
    command = [
        rubric_eval(), "calibrate", "--judge-labels", str(judge), "--labels", str(humans),
        "--alt-test", "--epsilon", str(epsilon), "--format", "json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of the authors' AltTest repository")
    parser.add_argument(
        "--out", type=Path, help="keep the label files here (default: a temp folder)"
    )
    parser.add_argument("--dataset", action="append", help="only these datasets (repeatable)")
    ns = parser.parse_args(argv)
    scoring, epsilons, published = notebook(ns.checkout)
    work = ns.out or Path(tempfile.mkdtemp(prefix="alttest-"))
    rows, mismatches = [], 0
    for dataset, metric in scoring.items():
        if ns.dataset and dataset not in ns.dataset:
            continue
        field = "intentKey" if metric == "accuracy" else "score"
        key = "intent" if field == "intentKey" else "score"
        humans, judges = convert(ns.checkout / "data" / dataset, field, work / dataset)
        for llm, path in judges.items():
            test = calibrate(path, humans, epsilons[dataset])["altTest"][key]
            ours = (round(test["winningRate"], 2), round(test["advantageProbability"], 2))
            paper = published.get((dataset, llm))
            same = paper is not None and all(
                abs(a - b) < 0.005 for a, b in zip(ours, paper, strict=True)
            )
            mismatches += not same
            shown = "—" if paper is None else f"{paper[0]:.2f} / {paper[1]:.2f}"
            rows.append(
                f"| {dataset} | {llm} | {key} | {epsilons[dataset]:g} | {test['instances']} | "
                f"{shown} | {ours[0]:.2f} / {ours[1]:.2f} | {'yes' if same else 'NO'} |"
            )
    print("| dataset | LLM | field | ε | instances | published ω / ρ | calibrate ω / ρ | equal |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    print("\n".join(rows))
    print(f"\n{len(rows) - mismatches} of {len(rows)} equal to 2 decimals; label files in {work}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
