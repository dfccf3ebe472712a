"""What one label file says per (row, requirement, reviewer) and per (row, reviewer), kept to
refuse a line that repeats an earlier one (docs/calibration.md).

A file holds one label per (row, requirement, reviewer), and one intent, set of red-flag types
and score per (row, reviewer). Checking that keeps every key until the file's last line: a
``dict`` grew by ~200 B a label (200 MB at a million), so :class:`FileKeys` keeps them in a
private temporary SQLite database (on disk, deleted when closed), as
:mod:`rubric_engine.dialogue.seen_ids` keeps a run's rowIds: memory stays at SQLite's page
cache whatever the file's size.
"""

from __future__ import annotations

import json

from rubric_engine.errors import Problem
from rubric_engine.labels.model import Label
from rubric_engine.store.scratch import scratch_database


class FileKeys:
    """The keys of the labels of one file read so far; :meth:`problems` checks the next."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._db = scratch_database(
            "CREATE TABLE judged (row_id TEXT, requirement_id TEXT, reviewer TEXT, "
            "line INTEGER NOT NULL, PRIMARY KEY (row_id, requirement_id, reviewer)) WITHOUT ROWID;"
            "CREATE TABLE row_level (row_id TEXT, reviewer TEXT, line INTEGER NOT NULL, "
            "intent_key TEXT, red_flag_types TEXT, score REAL, PRIMARY KEY (row_id, reviewer)) "
            "WITHOUT ROWID"
        )

    def problems(self, number: int, lab: Label) -> list[Problem]:
        """Add the label of line ``number``; what it repeats or contradicts of an earlier
        line: the same requirement of a row by the same reviewer, or another intent, red-flag
        types or score for a row and reviewer (what both lines give is compared)."""
        problems = []
        history = (
            " (this line supersedes another: a `labels export --all` file holds each label's "
            "history; import an export made without --all, which holds the current labels only)"
            if lab.supersedes is not None
            else ""
        )
        if lab.requirement_id is not None:
            key = (lab.row_id, lab.requirement_id, lab.reviewer)
            first = self._db.execute(
                "SELECT line FROM judged WHERE row_id=? AND requirement_id=? AND reviewer=?", key
            ).fetchone()
            if first is not None:
                problems.append(
                    Problem(
                        f"{self.path}:{number}",
                        "requirementId",
                        f"{lab.requirement_id} of row {lab.row_id} by {lab.reviewer} is already "
                        f"labelled on line {first[0]}; keep one line (an edit of a stored "
                        f"label is a new import, which supersedes it){history}",
                    )
                )
            self._db.execute("INSERT OR REPLACE INTO judged VALUES (?, ?, ?, ?)", (*key, number))
        flags = None if lab.red_flag_types is None else json.dumps(sorted(lab.red_flag_types))
        values = (lab.intent_key, flags, lab.score)
        if values == (None, None, None):
            return problems
        first = self._db.execute(
            "SELECT line, intent_key, red_flag_types, score FROM row_level "
            "WHERE row_id=? AND reviewer=?",
            (lab.row_id, lab.reviewer),
        ).fetchone()
        if first is None:
            self._db.execute(
                "INSERT INTO row_level VALUES (?, ?, ?, ?, ?, ?)",
                (lab.row_id, lab.reviewer, number, *values),
            )
            return problems
        if any(
            a is not None and b is not None and a != b
            for a, b in zip(first[1:], values, strict=True)
        ):
            problems.append(
                Problem(
                    f"{self.path}:{number}",
                    "",
                    f"row {lab.row_id} by {lab.reviewer}: intentKey/redFlagTypes/score differ "
                    f"from line {first[0]}; a row has one of each per reviewer{history}",
                )
            )
        merged = tuple(a if b is None else b for a, b in zip(first[1:], values, strict=True))
        self._db.execute(
            "UPDATE row_level SET intent_key=?, red_flag_types=?, score=? "
            "WHERE row_id=? AND reviewer=?",
            (*merged, lab.row_id, lab.reviewer),
        )
        return problems

    def close(self) -> None:
        """Drop the keys (also done when the object is collected)."""
        self._db.close()

    def __del__(self) -> None:
        self.close()
