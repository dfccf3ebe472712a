"""The floor: the least work a replay of one row needs, as a baseline measured in the same run.

Per row: read the input line (one ``json.loads``) and the row's cassette line (one
``json.loads``); validate the verdict from the reply text with the engine's verdict model (one
pydantic ``model_validate_json``); expand the basis (the rubric's applicable requirements for
the verdict's intent, each VIOLATED, PARTIAL, NOT_APPLICABLE when not observable, else
FOLLOWED — ``normalize`` in its simplest form); one SQLite insert of the result and the input
line (WAL, ``synchronous=NORMAL`` as the engine's store, a commit every ``--commit-every``
rows); one JSON line out. The
cassette is read in row order (``replicate.make_replica`` writes it so), so no key is worked
out. Prints one JSON line: rows, CPU and wall seconds of the loop and of the whole process.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

STARTED, STARTED_CPU = time.perf_counter(), time.process_time()
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def status(requirement: Any, unmet: set[str], partial: set[str]) -> str:
    if not requirement.observable_in_data:
        return "NOT_APPLICABLE"
    rid = requirement.id
    return "VIOLATED" if rid in unmet else "PARTIAL" if rid in partial else "FOLLOWED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("--rows", "--cassette", "--rubric", "--work"):
        parser.add_argument(name, type=Path, required=True)
    parser.add_argument("--commit-every", type=int, default=25)
    args = parser.parse_args()

    from rubric_engine.rubric.loader import load_rubric
    from rubric_engine.verdict.model import verdict_model

    rubric = load_rubric(args.rubric)
    model = verdict_model(rubric)
    args.work.mkdir(parents=True, exist_ok=True)
    for old in args.work.glob("floor.sqlite*"):  # each run starts from an empty store
        old.unlink()
    db = sqlite3.connect(args.work / "floor.sqlite")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE rows (row_id TEXT PRIMARY KEY, score INT, result TEXT, row TEXT)")
    loop_wall, loop_cpu, count = time.perf_counter(), time.process_time(), 0
    with (
        args.rows.open(encoding="utf-8") as rows,
        args.cassette.open(encoding="utf-8") as cassette,
        (args.work / "rows.jsonl").open("w", encoding="utf-8") as out,
    ):
        for line, entry_line in zip(rows, cassette, strict=True):
            row, entry = json.loads(line), json.loads(entry_line)
            assert entry["rowId"] == row["rowId"], "the cassette is not in row order"
            content = entry["attempts"][-1]["response"]["choices"][0]["message"]["content"]
            verdict = model.model_validate_json(content, context={"row_id": row["rowId"]})
            unmet = set(verdict.unmet_requirement_ids)
            partial = set(verdict.partial_requirement_ids)
            basis = [
                {"requirementId": r.id, "status": status(r, unmet, partial)}
                for r in rubric.applicable_requirements(verdict.intent_key)
            ]
            score = verdict.score
            result = json.dumps(
                {
                    "rowId": row["rowId"],
                    "intentKey": verdict.intent_key,
                    "score": score,
                    "redFlagTypes": verdict.red_flag_types,
                    "referenceBasis": basis,
                },
                ensure_ascii=False,
            )
            db.execute("INSERT INTO rows VALUES (?,?,?,?)", (row["rowId"], score, result, line))
            count += 1
            if count % args.commit_every == 0:
                db.commit()
            out.write(result + "\n")
    db.commit()
    db.close()
    now, cpu = time.perf_counter(), time.process_time()
    figures = {"rows": count, "loop_wall_s": now - loop_wall, "loop_cpu_s": cpu - loop_cpu}
    figures |= {"startup_cpu_s": loop_cpu - STARTED_CPU, "process_wall_s": now - STARTED}
    status_lines = Path("/proc/self/status").read_text().splitlines()
    (hwm,) = (line.split()[1] for line in status_lines if line.startswith("VmHWM:"))
    figures["peak_mb"] = int(hwm) / 1024  # this process's own peak (VmHWM, reset by exec)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
