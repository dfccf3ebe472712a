"""The rowIds a run has taken so far, each with the place of its row, in flat arrays.

A run refuses a rowId that repeats across its input files (SPEC §8); the check keeps every
id until the last row is read. A ``dict[str, str]`` of id → place costs ~145 B a row (two
strings and a dict slot); :class:`SeenIds` keeps ~32 B plus the id's UTF-8 bytes (issue 18):

* the ids' bytes in one ``bytearray``, with each id's end offset in ``array('Q')``;
* each id's place packed in one ``array('Q')`` int: the place's text before and after its
  last number (``("path:", "")``, kept once in a small list) and that number, plus a flag for an id
  made from the file name (:data:`~rubric_engine.dialogue.readers.GENERATED`);
* a lookup in two tiers (LSM-style): a small dict of the newest ids, moved every
  :data:`FLUSH_EVERY` ids into sorted ``array('Q')`` runs of ``hash32 << 32 | id index``,
  searched with :mod:`bisect`. Runs of like size are merged, so there are about
  log2(ids / FLUSH_EVERY) of them. A hash match is confirmed against the id's bytes, so a
  collision only costs a comparison, never a false duplicate.
* before the runs, a Bloom filter of the flushed ids (two bits an id in a ``bytearray`` of
  256 KiB from the first flush, doubled to keep :data:`FILTER_BITS_PER_ID` bits an id: at
  most ~1.4 % false positives): a new id — nearly every id a run asks about — is answered
  without a search of the runs (a bisect of each, ~0.4 µs a run). A bit that is not set
  proves the id was never flushed; a set one sends the id to the runs as before.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from heapq import merge

#: newest ids kept in a dict before they move to a sorted run (bounds that dict's memory)
FLUSH_EVERY = 4096

#: the Bloom filter's size: bits an id (it doubles when more ids are flushed), and at first
FILTER_BITS_PER_ID = 16
_FILTER_FIRST_BITS = 1 << 21  # 256 KiB: 131,072 ids before it first doubles

_LOW32 = 0xFFFF_FFFF
_MIX = 0x9E37_79B1  # Fibonacci hashing: the second bit from the high bits of hash * _MIX
#: a place's parts in its packed int: number << 30 | template << 2 | numbered << 1 | generated
_TEMPLATE_BITS = 28
_NUMBER_LIMIT = 1 << (64 - 2 - _TEMPLATE_BITS)
#: a place's last number (no leading zero, so it is written back the same) and what follows
_LAST_NUMBER = re.compile(r"(0|[1-9][0-9]*)([^0-9]*)\Z")
_DIGITS = "0123456789"
_ASCII_DIGITS = frozenset(_DIGITS)


def _hash32(row_id: str) -> int:
    """32 bits of ``row_id``'s hash (randomized per process: fine, runs live in one)."""
    return hash(row_id) & _LOW32


def _encode(row_id: str) -> bytes:
    # surrogatepass: a JSON "\ud800" escape gives a str UTF-8 cannot strictly hold
    return row_id.encode("utf-8", "surrogatepass")


class SeenIds:
    """rowIds taken so far → the place of the first row that gave each (``path:line``).

    Answers what the readers ask (:func:`~rubric_engine.dialogue.readers._checked_rows`):
    ``row_id in seen``, :meth:`first` and :meth:`add`. Memory: about 32 B an id plus its
    UTF-8 bytes, and at most :data:`FLUSH_EVERY` ids held as Python strings.
    """

    def __init__(self, flush_every: int = FLUSH_EVERY) -> None:
        self._flush_every = flush_every
        self._bytes = bytearray()
        self._ends = array("Q")
        self._places = array("Q")
        self._templates: list[tuple[str, str]] = []  # a place's text before/after its number
        self._template_index: dict[tuple[str, str], int] = {}
        self._newest: dict[str, int] = {}
        self._runs: list[array[int]] = []
        #: the last template ``(text, "")`` whose text does not end in a digit, and its index:
        #: the place of the next row of the same file is that text and a line number
        self._last: tuple[str, int] | None = None
        self._filter = bytearray()  # made at the first flush
        self._filter_shift = 32  # 32 - log2(bits of the filter)
        self._filter_mask = 0  # bits of the filter - 1

    def __len__(self) -> int:
        return len(self._ends)

    def __contains__(self, row_id: object) -> bool:
        return isinstance(row_id, str) and self._index(row_id) is not None

    def first(self, row_id: str) -> tuple[str, bool] | None:
        """Where ``row_id`` was first taken and whether that row's id was made from its
        file name and line (it had no rowId); ``None`` if it was not taken."""
        index = self._index(row_id)
        if index is None:
            return None
        packed = self._places[index]
        before, after = self._templates[(packed >> 2) & ((1 << _TEMPLATE_BITS) - 1)]
        number = str(packed >> (2 + _TEMPLATE_BITS)) if packed & 2 else ""
        return before + number + after, bool(packed & 1)

    def add(self, row_id: str, where: str, generated: bool = False) -> None:
        """Take ``row_id`` for the row at ``where``; ``generated``: its id was made from the
        file name and line. Not checked here: the caller asks ``row_id in seen`` first
        (an id added twice would answer with its second place)."""
        index = len(self._ends)
        self._bytes += row_id.encode("utf-8", "surrogatepass")  # _encode, without its call
        self._ends.append(len(self._bytes))
        self._places.append(self._pack(where, generated))
        self._newest[row_id] = index
        if len(self._newest) >= self._flush_every:
            self._flush()

    def _pack(self, where: str, generated: bool) -> int:
        last = self._last
        if last is not None and where.startswith(last[0]):  # the file of the row before
            digits = where[len(last[0]) :]
            # what the general path below finds in it: its digits, without a leading zero
            if digits.isdigit() and digits.isascii() and (digits[0] != "0" or digits == "0"):
                number = int(digits)
                if number < _NUMBER_LIMIT:
                    return number << (2 + _TEMPLATE_BITS) | last[1] << 2 | 2 | int(generated)
        if where[-1:].isdigit() and where[-1:].isascii():  # ``path:line``: what the regex finds
            digits = where[len(where.rstrip(_DIGITS)) :]
            text = digits.lstrip("0") or "0"
            number, start, after = int(text), len(where) - len(text), ""
        elif found := _LAST_NUMBER.search(where):
            number, start, after = int(found.group(1)), found.start(), found.group(2)
        else:
            number, start, after = _NUMBER_LIMIT, 0, ""
        if number < _NUMBER_LIMIT:
            template, numbered = (where[:start], after), 1
        else:  # no number to take out: the text is kept whole
            template, number, numbered = (where, ""), 0, 0
        t = self._template_index.get(template)
        if t is None:
            t = self._template_index[template] = len(self._templates)
            if t >= 1 << _TEMPLATE_BITS:
                raise OverflowError("more than 2**28 distinct row places")
            self._templates.append(template)
        if numbered and not template[1] and template[0][-1:] not in _ASCII_DIGITS:
            self._last = (template[0], t)
        return number << (2 + _TEMPLATE_BITS) | t << 2 | numbered << 1 | int(generated)

    def _index(self, row_id: str) -> int | None:
        index = self._newest.get(row_id)
        if index is not None or not self._runs:
            return index
        found = _hash32(row_id)
        bit = found & self._filter_mask
        if not self._filter[bit >> 3] & 1 << (bit & 7):
            return None  # never flushed
        bit = (found * _MIX & _LOW32) >> self._filter_shift
        if not self._filter[bit >> 3] & 1 << (bit & 7):
            return None
        key = found << 32
        encoded: bytes | None = None
        for run in self._runs:
            i = bisect_left(run, key)
            while i < len(run) and run[i] >> 32 == key >> 32:
                candidate = run[i] & _LOW32
                encoded = encoded if encoded is not None else _encode(row_id)
                if self._id_bytes(candidate) == encoded:
                    return candidate
                i += 1
        return None

    def _id_bytes(self, index: int) -> bytearray:
        start = self._ends[index - 1] if index else 0
        return self._bytes[start : self._ends[index]]

    def _flush(self) -> None:
        """Move the newest ids into a sorted run; merge runs of like size (fewer lookups)."""
        if len(self._ends) > _LOW32:
            raise OverflowError("more than 2**32 rowIds in one run")
        hashes = [_hash32(r) for r in self._newest]
        run = array(
            "Q", sorted(h << 32 | i for h, i in zip(hashes, self._newest.values(), strict=True))
        )
        self._newest.clear()
        runs = self._runs
        runs.append(run)
        while len(runs) > 1 and len(runs[-2]) <= len(runs[-1]):
            newer = runs.pop()
            older = runs.pop()
            runs.append(array("Q", merge(older, newer)))  # streamed: no list of ints
        if len(self._ends) * FILTER_BITS_PER_ID > self._filter_mask + 1:
            self._new_filter()  # every id taken so far is in a run now
        else:
            self._mark(hashes)

    def _mark(self, hashes: list[int] | array[int]) -> None:
        """Set the filter's two bits of each of ``hashes``."""
        bits, mask, shift = self._filter, self._filter_mask, self._filter_shift
        for found in hashes:
            bit = found & mask
            bits[bit >> 3] |= 1 << (bit & 7)
            bit = (found * _MIX & _LOW32) >> shift
            bits[bit >> 3] |= 1 << (bit & 7)

    def _new_filter(self) -> None:
        """A filter of at least :data:`FILTER_BITS_PER_ID` bits for each id taken (a power of
        two, at most 2**32 bits), marked with every id of the runs."""
        size = _FILTER_FIRST_BITS
        while size < len(self._ends) * FILTER_BITS_PER_ID and size < 1 << 32:
            size *= 2
        self._filter = bytearray(size >> 3)
        self._filter_mask, self._filter_shift = size - 1, 33 - size.bit_length()
        for run in self._runs:
            self._mark([packed >> 32 for packed in run])
