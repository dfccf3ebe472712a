"""Write the two-reviewers-and-a-lead **scenario** label file of the calibration demo.

Not a real review: a deterministic scenario built on the demo task's judge results, so the
calibration walk-through (docs/calibration.md) shows every part of the method on the shipped
airline batch. Two expert reviewers, ``mia`` and ``noah``, label every common requirement of
every row blind (``sawJudgeVerdict: false``), plus each row's intent and score; the lead,
``lena``, adjudicates every requirement they disagree on. The file is made as follows, and each
line's ``reason`` says which rule made it:

- a reviewer's status is the judge's, except
  - ``COMMON_NO_FABRICATED_INFO`` on the first six rows (in rowId order) the judge found
    FOLLOWED: both reviewers find it VIOLATED (the judge misses invented facts: a systematic
    error the alternative annotator test should catch on this red line);
  - independent disagreements drawn with ``random.Random(28)``: each other (row, requirement)
    pair is flipped (met ↔ unmet) with probability 0.05 for mia and 0.08 for noah;
- a reviewer's score is the judge's final score, capped at 1 on the six rows above (the red
  line's cap), and one point lower or higher (within 1–5) on a row with probability 0.1;
- a reviewer's intent is the judge's; noah picks another intent on two rows;
- the lead, where mia and noah differ on a requirement: VIOLATED when either found a red line
  (critical requirement) violated, otherwise mia's status.

    python scripts/make_review_scenario.py reports/demo-airline/rows.jsonl \\
        --rubric rubrics/airline_cs.yaml --out cases/labels/airline_two_reviewers.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import yaml

FABRICATED = "COMMON_NO_FABRICATED_INFO"
FLIP = {"FOLLOWED": "VIOLATED", "VIOLATED": "FOLLOWED", "PARTIAL": "FOLLOWED"}


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return sorted(rows, key=lambda r: r["rowId"])


def scenario(rows: list[dict[str, Any]], rubric: dict[str, Any]) -> list[dict[str, Any]]:
    """The scenario's label lines (see the module docstring)."""
    rng = random.Random(28)
    common = [r["id"] for r in rubric["commonRequirements"]]
    critical = {r["id"] for r in rubric["commonRequirements"] if r.get("critical")}
    intents = [i["key"] for i in rubric["intents"]]
    missed = [
        row["rowId"]
        for row in rows
        if any(
            b["requirementId"] == FABRICATED and b["status"] == "FOLLOWED"
            for b in row["referenceBasis"]
        )
    ][:6]
    out: list[dict[str, Any]] = []
    changed_intent = {rows[3]["rowId"], rows[11]["rowId"]}
    for row in rows:
        basis = {b["requirementId"]: b["status"] for b in row["referenceBasis"]}
        given: dict[str, dict[str, str]] = {}
        for name, rate in (("mia", 0.05), ("noah", 0.08)):
            common_fields = {"rowId": row["rowId"], "reviewer": name, "role": "expert",
                             "sawJudgeVerdict": False}  # fmt: skip
            score = row["finalScore"]
            if row["rowId"] in missed:
                score = min(score, 1)
            elif rng.random() < 0.1:
                score = min(5, max(1, score + rng.choice((-1, 1))))
            intent = row["intentKey"]
            if name == "noah" and row["rowId"] in changed_intent:
                intent = next(k for k in intents if k != intent)
            out.append({**common_fields, "intentKey": intent, "score": score,
                        "reason": "scenario: the row's intent and score"})  # fmt: skip
            given[name] = {}
            for rid in common:
                status = basis.get(rid)
                if status is None:
                    continue
                reason = "scenario: as the judge"
                if rid == FABRICATED and row["rowId"] in missed:
                    status, reason = "VIOLATED", "scenario: an invented fact the judge missed"
                elif status in FLIP and rng.random() < rate:
                    status, reason = FLIP[status], "scenario: this reviewer's own reading"
                given[name][rid] = status
                out.append({**common_fields, "requirementId": rid, "status": status,
                            "reason": reason})  # fmt: skip
        for rid, mine in given["mia"].items():
            theirs = given["noah"].get(rid)
            if theirs is None or theirs == mine:
                continue
            decided = "VIOLATED" if rid in critical and "VIOLATED" in (mine, theirs) else mine
            out.append({"rowId": row["rowId"], "requirementId": rid, "status": decided,
                        "reviewer": "lena", "role": "adjudicator", "source": "adjudication",
                        "sawJudgeVerdict": False,
                        "reason": "scenario: the lead decides between mia and noah"})  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", type=Path, help="rows.jsonl of the scored demo airline task")
    parser.add_argument("--rubric", type=Path, default=Path("rubrics/airline_cs.yaml"))
    parser.add_argument("--out", type=Path, required=True)
    ns = parser.parse_args()
    rubric = yaml.safe_load(ns.rubric.read_text(encoding="utf-8"))
    lines = scenario(_rows(ns.rows), rubric)
    ns.out.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    print(f"wrote {len(lines)} label(s) to {ns.out}")


if __name__ == "__main__":
    main()
