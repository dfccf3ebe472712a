"""Every cassette entry under a folder, found by key in bounded memory (docs/judges.md).

A replay looks each row's answer up by its request key. The index keeps, for each key, where
its entry's line is (file, byte offset, length, line number, CRC-32) and which provenance it
has, in a private temporary SQLite database with the key as its primary key (on disk, deleted
when closed, as :mod:`rubric_engine.dialogue.seen_ids` keeps a run's rowIds): memory stays at
SQLite's page cache and the table of distinct provenances however large the cassettes are,
where keeping a key a row in memory grew with them (docs/scale.md). An entry is read back
from its file when asked for, through one open handle per file (at most
:data:`MAX_OPEN_FILES`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rubric_engine.errors import CassetteError
from rubric_engine.judge.cassettes.cassette import (
    CassetteChanged,
    CassetteEntry,
    _dumps,
    _entry_from,
    _loads,
    _objects_at,
    _text,
)
from rubric_engine.store.scratch import scratch_database

#: cassette files an index keeps open at once (one handle each)
MAX_OPEN_FILES = 32
_TEXT = frozenset({str})
#: a later line with a key already loaded replaces the earlier one (its place in file order,
#: ``first``, stays the earlier one's)
_UPSERT = (
    "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
    "file = excluded.file, offset = excluded.offset, length = excluded.length, "
    "line = excluded.line, crc = excluded.crc, provenance = excluded.provenance"
)
#: where an entry's line is: what :meth:`CassetteIndex._found` selects
_PLACE = "file, offset, length, line, crc, provenance"


def _blob(text: str) -> bytes:
    # surrogatepass: a JSON "\ud800" escape gives a str that UTF-8 cannot strictly hold
    return text.encode("utf-8", "surrogatepass")


def _provenance_key(provenance: dict[str, Any]) -> Any:
    """What tells provenances apart: their sorted items when every key and value is text
    (then equal exactly when their canonical JSON is), else the canonical JSON itself."""
    if _TEXT.issuperset(map(type, provenance)) and _TEXT.issuperset(map(type, provenance.values())):
        return tuple(sorted(provenance.items()))
    return _dumps(provenance)


class CassetteIndex:
    """Every entry under a folder, by key (a later duplicate replaces an earlier one); see the
    module docstring. The rowId → keys table that explains a miss is built on the first miss.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: list[Path] = []
        self.replaced = 0  # entries superseded by a later one with the same key
        self.torn: list[str] = []  # half-written last lines, skipped
        self._provenances: list[dict[str, Any]] = []  # distinct, first seen
        self._count = 0
        self._row_keys = False  # the rowId table is built
        self._handles: dict[int, int] = {}  # file number -> open descriptor
        self._db = scratch_database(
            "CREATE TABLE entries (key BLOB PRIMARY KEY, file INTEGER NOT NULL, "
            "offset INTEGER NOT NULL, length INTEGER NOT NULL, line INTEGER NOT NULL, "
            "crc INTEGER NOT NULL, provenance INTEGER NOT NULL, first INTEGER NOT NULL) "
            "WITHOUT ROWID"
        )

    @classmethod
    def load(
        cls, root: Path, problems: list[str] | None = None, strict: bool = False
    ) -> CassetteIndex:
        """Read ``root/**/*.jsonl``; ``problems`` collects bad lines instead of raising.

        Args:
            strict: a line whose JSON names a key twice in one object (two ``response``
                members of an attempt, two ``attempts``…) is a bad line too: a replay reads
                it as ``json.loads`` does, the last value winning, so which one was meant is
                ambiguous. For ``cassette check``; a run's load does not pay for the walk.

        Raises:
            CassetteError: a line is not JSON, not an entry, or lacks provenance.
        """
        index = cls(root)
        index._db.executemany(_UPSERT, index._lines(problems, strict))
        (index._count,) = index._db.execute("SELECT COUNT(*) FROM entries").fetchone()
        return index

    def _lines(self, problems: list[str] | None, strict: bool) -> Iterator[tuple[Any, ...]]:
        """A row of the ``entries`` table for each entry line, in file order (counting the
        lines whose key an earlier line had in :attr:`replaced`)."""
        numbers: dict[Any, int] = {}  # a provenance's :func:`_provenance_key` -> its number
        lines = 0
        for path in sorted(self.root.rglob("*.jsonl")):
            self.files.append(path)
            file = len(self.files) - 1
            # the lines as checked entries: only the key and provenance are kept
            for (offset, size, n), entry, crc in _objects_at(path, problems, self.torn, strict):
                provenance = entry["provenance"]
                number = numbers.setdefault(_provenance_key(provenance), len(numbers))
                if number == len(self._provenances):
                    self._provenances.append(provenance)
                yield _blob(str(entry["key"])), file, offset, size, n, crc, number, lines
                lines += 1
        (count,) = self._db.execute("SELECT COUNT(*) FROM entries").fetchone()
        self.replaced = lines - count

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._found(key) is not None

    def __del__(self) -> None:
        self.close()
        self._db.close()

    def close(self) -> None:
        """Close the open cassette files (reopened if the index is read again)."""
        handles, self._handles = self._handles, {}
        for fd in handles.values():
            os.close(fd)

    def _found(self, key: str) -> tuple[int, int, int, int, int, int] | None:
        """``(file, offset, length, line, crc, provenance)`` of the entry under ``key``."""
        return self._db.execute(  # type: ignore[no-any-return]
            f"SELECT {_PLACE} FROM entries WHERE key = ?", (_blob(key),)
        ).fetchone()

    def get(self, key: str) -> CassetteEntry | None:
        """The entry stored under ``key``, read from its file, or ``None``."""
        found = self._found(key)
        return None if found is None else self._read(*found[:4])

    def replayed(self, key: str) -> tuple[list[dict[str, Any]], str] | None:
        """``(entry.attempts, entry.where)`` of :meth:`get`'s entry for ``key``, or ``None``
        as :meth:`get` gives it; what a replay reads of an entry.

        Raises:
            CassetteChanged: the line no longer reads as it did at load (its CRC-32 differs,
                or it is no longer an entry): its file was changed during the run.
        """
        found = self._found(key)
        if found is None:
            return None
        file, offset, length, line, crc, _ = found
        raw = self._raw(file, offset, length)
        where = f"{self.files[file]}:{line}"
        try:
            if zlib.crc32(raw) != crc:  # edited in place, same length
                raise CassetteError("its bytes differ")
            entry = _entry_from(_loads(_text(raw)), where)
            if entry.key != key:
                raise CassetteError(f"its key is now {entry.key}")
        except (ValueError, CassetteError) as exc:  # JSON and UTF-8 errors too
            raise CassetteChanged(
                f"cassette {where} no longer reads as it did when the run loaded it "
                f"({exc}); a cassette file was changed during the run: put it back, "
                "then `rubric-eval score --resume TASK` judges this row again"
            ) from None
        return entry.attempts, entry.where

    def _raw(self, file: int, offset: int, length: int) -> bytes:
        fd = self._handles.get(file)
        if fd is None:
            if len(self._handles) >= MAX_OPEN_FILES:  # a folder of many small cassettes
                self.close()
            fd = self._handles[file] = os.open(self.files[file], os.O_RDONLY)
        return os.pread(fd, length, offset)

    def _read(self, file: int, offset: int, length: int, line: int) -> CassetteEntry:
        raw = self._raw(file, offset, length)
        return _entry_from(_loads(_text(raw)), f"{self.files[file]}:{line}")

    def entries(self) -> Iterator[CassetteEntry]:
        """Every entry in force (later duplicates replace earlier ones), read one at a time, in
        the order their keys first appear."""
        places = self._db.execute("SELECT file, offset, length, line FROM entries ORDER BY first")
        for place in places:
            yield self._read(*place)

    def provenance(self, key: str | None) -> dict[str, Any] | None:
        """The provenance of the entry under ``key`` (without reading the entry), or ``None``."""
        found = self._found(key) if key is not None else None
        return None if found is None else self._provenances[found[5]]

    def provenance_rows(self, keys: Iterable[str | None]) -> list[tuple[dict[str, Any], int]]:
        """How many of ``keys`` each provenance answered: ``(provenance, keys)`` in the order
        the provenances first answer one (as :meth:`provenance` of each key, counted in one
        pass; a key without an entry, or ``None``, counts for none)."""
        counts: dict[int, int] = {}
        for key in keys:
            found = self._found(key) if key is not None else None
            if found is not None:
                counts[found[5]] = counts.get(found[5], 0) + 1
        return [(self._provenances[number], n) for number, n in counts.items()]

    def kind(self, key: str | None) -> str | None:
        """The provenance kind (``recorded`` / ``authored``) of the entry under ``key``."""
        found = self.provenance(key)
        return None if found is None else str(found["kind"])

    def explain_miss(self, row_id: str, parts: dict[str, str], model_flag: str = "--model") -> str:
        """Say which key part differs from the nearest entry recorded for the same row;
        ``model_flag`` names the judge's model in the advice (``--judge`` for a panel's judge,
        where ``--model`` is refused)."""
        candidates = self._row_entries(row_id)
        if not candidates:
            return f"no entry for row {row_id!r} under {self.root}"

        def differing(entry: CassetteEntry) -> list[str]:
            names = dict.fromkeys([*parts, *entry.key_parts])  # a sample part may be on one side
            return [k for k in names if entry.key_parts.get(k) != parts.get(k)]

        best = min(candidates, key=lambda e: len(differing(e)))
        differ = differing(best)
        hints = {
            "promptHash": "the prompt template changed",
            "rubricHash": "the rubric content changed",
            "model": f"the model differs (cassette has {best.key_parts.get('model')!r}; pass "
            f"{model_flag} {best.key_parts.get('model')} to replay it"
            + (" as this judge of the panel)" if model_flag == "--judge" else ")"),
            "paramsHash": "sampling parameters differ (temperature, max tokens …)",
            "schemaHash": "the verdict schema or output mode differs",
            "messagesHash": "the dialogue or rendered prompt differs",
            "sample": f"no answer for sample {parts.get('sample', '1')} of this row (record "
            "it with --mode record --samples K, or author it with `cassette author --sample N`)",
        }
        if not differ:  # its keyParts match: the key itself was edited
            return (
                f"an entry for row {row_id!r} exists at {best.where} with the same key parts "
                f"but another key ({best.key}); its key no longer matches its parts (edited by "
                "hand?): record the row again with --mode record"
            )
        return f"an entry for row {row_id!r} exists at {best.where} but " + "; ".join(
            hints.get(k, k) for k in differ
        )

    def provenance_counts(self) -> dict[str, int]:
        """Entries in force by provenance kind (``recorded`` / ``authored``)."""
        counts: dict[str, int] = {}
        query = "SELECT provenance, COUNT(*) FROM entries GROUP BY provenance"
        for number, n in self._db.execute(query):
            kind = str(self._provenances[number]["kind"])
            counts[kind] = counts.get(kind, 0) + n
        return counts

    def _row_entries(self, row_id: str) -> list[CassetteEntry]:
        """The entries recorded for ``row_id``, in the order their keys first appear."""
        if not self._row_keys:  # every entry read once, on the first miss
            self._db.execute("CREATE TABLE row_keys (row_id BLOB, first INTEGER, key BLOB)")
            self._db.executemany(
                "INSERT INTO row_keys VALUES (?, ?, ?)",
                ((_blob(e.row_id), n, _blob(e.key)) for n, e in enumerate(self.entries())),
            )
            self._db.execute("CREATE INDEX row_keys_by_row ON row_keys (row_id, first)")
            self._row_keys = True
        query = "SELECT key FROM row_keys WHERE row_id = ? ORDER BY first"
        found = self._db.execute(query, (_blob(row_id),)).fetchall()
        keys = [bytes(key).decode("utf-8", "surrogatepass") for (key,) in found]
        return [entry for key in keys if (entry := self.get(key)) is not None]
