"""The rowIds a run has taken so far, each with the place of its row.

A run refuses a rowId that repeats across its input files (a task knows its rows by rowId:
resume, labels and diffs match rows by it); the check
keeps every id until the last row is read. A ``dict`` of id → place grows by ~150 B a row,
some 150 MB at a million rows, so :class:`SeenIds` keeps them in a private temporary SQLite
database instead (on disk, deleted when closed; the rowId is its primary key): memory stays
at SQLite's page cache (a few MB) however many rows a run has.
"""

from __future__ import annotations

from rubric_engine.store.scratch import scratch_database


def _blob(text: str) -> bytes:
    # surrogatepass: a JSON "\ud800" escape, or a path's undecodable byte, gives a str that
    # UTF-8 cannot strictly hold; it is stored and given back as it was
    return text.encode("utf-8", "surrogatepass")


class SeenIds:
    """rowIds taken so far → the place of the first row that gave each (``path:line``).

    Answers what the readers ask (:func:`~rubric_engine.dialogue.readers._checked_rows`):
    :meth:`claim`, and ``row_id in seen`` / :meth:`first`.
    """

    def __init__(self) -> None:
        self._db = scratch_database(
            "CREATE TABLE seen (row_id BLOB PRIMARY KEY, place BLOB NOT NULL, "
            "generated INTEGER NOT NULL) WITHOUT ROWID"
        )
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, row_id: object) -> bool:
        return isinstance(row_id, str) and self.first(row_id) is not None

    def first(self, row_id: str) -> tuple[str, bool] | None:
        """Where ``row_id`` was first taken and whether that row's id was made from its
        file name and line (it had no rowId); ``None`` if it was not taken."""
        found = self._db.execute(
            "SELECT place, generated FROM seen WHERE row_id = ?", (_blob(row_id),)
        ).fetchone()
        if found is None:
            return None
        return bytes(found[0]).decode("utf-8", "surrogatepass"), bool(found[1])

    def claim(self, row_id: str, where: str, generated: bool = False) -> tuple[str, bool] | None:
        """Take ``row_id`` for the row at ``where`` (``generated``: its id was made from the
        file name and line); if it was taken already, keep the first place and return it
        (as :meth:`first` gives it)."""
        added = self._db.execute(
            "INSERT OR IGNORE INTO seen (row_id, place, generated) VALUES (?, ?, ?)",
            (_blob(row_id), _blob(where), int(generated)),
        ).rowcount
        if added:
            self._count += 1
            return None
        return self.first(row_id)

    def close(self) -> None:
        """Drop the ids (also done when the object is collected)."""
        self._db.close()

    def __del__(self) -> None:
        self.close()
