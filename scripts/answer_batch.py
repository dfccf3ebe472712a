"""Answer a batch input file from cassettes: a stand-in for running it on your own engine.

    python scripts/answer_batch.py requests-001.jsonl --cassettes cassettes > results.jsonl

Each request line gets the cassette response recorded for its row (the ``rowId:`` line of its
user message) at its attempt number (from the ``custom_id``), written as an OpenAI batch
output line. A request with no such response gets an error line. This is how the tests show
that ``batch export`` → any runner → ``batch import`` gives the rows a replay gives.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rubric_engine.batch.lines import parse_custom_id
from rubric_engine.judge.cassettes.cassette import read_entries
from rubric_engine.testing.openai_stub import row_id_of


def answer(requests: Path, cassettes: Path) -> list[dict[str, object]]:
    by_row = {}
    for path in sorted(cassettes.rglob("*.jsonl")):
        for entry in read_entries(path):
            if "sample" not in entry.key_parts:  # a batch request is a row's first ask
                by_row.setdefault(entry.row_id, entry)
    out: list[dict[str, object]] = []
    for n, raw in enumerate(requests.read_text(encoding="utf-8").splitlines()):
        line = json.loads(raw)
        cid = parse_custom_id(line["custom_id"])
        entry = by_row.get(row_id_of(line["body"]) or "")
        if cid is None or entry is None or cid.attempt >= len(entry.attempts):
            out.append(
                {
                    "id": f"req-{n}",
                    "custom_id": line["custom_id"],
                    "response": None,
                    "error": {"code": "no_answer", "message": "no cassette response"},
                }
            )
            continue
        body = entry.attempts[cid.attempt]["response"]
        out.append(
            {
                "id": f"req-{n}",
                "custom_id": line["custom_id"],
                "response": {"status_code": 200, "request_id": f"req-{n}", "body": body},
                "error": None,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requests", type=Path)
    parser.add_argument("--cassettes", type=Path, default=Path("cassettes"))
    args = parser.parse_args()
    for line in answer(args.requests, args.cassettes):
        sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
