"""Checked rows kept on disk between the input check and the run, so memory stays flat.

The whole input is checked before the first judge call (every broken row reported with its
line), and each row is parsed from its source shape exactly once, in that check. Holding the
parsed rows until the run takes them made peak memory grow with the input (~5 KB per row);
a :class:`RowSpool` writes each checked row to an anonymous temporary file instead (deleted
when closed, and by the OS if the process dies) and reads them back in order, one at a time,
as the run takes them. A row comes back equal to the row written: JSON (pydantic's own dump
and validation of :class:`DialogueRow`, about 13 µs a row) for rows read from JSON-shaped
sources, whose values JSON holds exactly; ``pickle`` for rows whose values may not be JSON
(YAML: dates, binary).
"""

from __future__ import annotations

import base64
import pickle
import tempfile
from collections.abc import Iterator

from rubric_engine.dialogue.model import DialogueRow

_CHUNK = 1 << 16
_TO_JSON = DialogueRow.__pydantic_serializer__.to_json
#: what ``DialogueRow.model_validate_json`` calls, without its wrapper (every row of a run)
_FROM_JSON = DialogueRow.__pydantic_validator__.validate_json


class RowSpool:
    """An append-then-read file of rows, in the order added.

    Iterating gives the rows from the first; iterations are independent (each keeps its own
    place), so a run may read the rows more than once (batch mode's passes).
    """

    def __init__(self) -> None:
        # closed by close() (Inputs.close) or when collected; the OS deletes it either way
        self._file = tempfile.TemporaryFile(prefix="rubric-eval-rows-")  # noqa: SIM115
        self.count = 0

    def add(self, row: DialogueRow, exact_json: bool = True) -> None:
        """Append ``row``. ``exact_json``: its values are JSON values (a JSON, JSONL or CSV
        source), so the JSON form gives the row back exactly; else it is pickled."""
        if exact_json:  # pydantic's JSON bytes (model_dump_json's text, without decoding it)
            self._file.write(b"J" + _TO_JSON(row, round_trip=True) + b"\n")
        else:
            self._file.write(b"P" + base64.b64encode(pickle.dumps(row)) + b"\n")
        self.count += 1

    def __iter__(self) -> Iterator[DialogueRow]:
        self._file.flush()
        position, rest = 0, b""
        while True:
            self._file.seek(position)  # another iteration may have moved the file's place
            chunk = self._file.read(_CHUNK)
            if not chunk:
                break
            position += len(chunk)
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                yield _row(line)
        if rest:
            yield _row(rest)

    def close(self) -> None:
        self._file.close()


def _row(line: bytes) -> DialogueRow:
    if line[:1] == b"J":
        row = _FROM_JSON(line[1:])
        assert type(row) is DialogueRow
        return row
    row = pickle.loads(base64.b64decode(line[1:]))  # our own file, written above
    assert isinstance(row, DialogueRow)
    return row
