"""The one error hierarchy of rubric-eval.

Mistakes in input (rubric packs, dialogue files, options) and broken environments raise a
subclass of :class:`RubricEvalError`. Per-row judge failures are *not* exceptions: they become
``JUDGE_ERROR`` rows (see :mod:`rubric_engine.judge`), and the batch goes on.

Every message names the thing, where it is (``file:line`` or a field path), the valid choices
and the fix; all problems of a file are reported at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """What every ``rubric-eval`` command returns: the one table of exit codes.

    ``score`` uses 4–6, 8 and 9, ``gate`` 7; the shell's conventions give 130 (Ctrl-C) and 141 (the
    reader of stdout went away, ``| head``).
    """

    OK = 0
    #: anything unexpected (a bug: please report it with the traceback)
    UNEXPECTED = 1
    #: bad input or options: nothing was scored
    BAD_INPUT = 2
    #: the task store is missing, locked or holds something unexpected
    STORE = 3
    #: a replay ran but some rows had no cassette entry (they are JUDGE_ERROR rows)
    CASSETTE_MISS = 4
    #: no row could be scored (every row JUDGE_ERROR, or the judge was unreachable)
    NOTHING_SCORED = 5
    #: a budget (``--max-calls`` / ``--max-cost``) stopped ``score``
    BUDGET = 6
    #: a ``gate`` check failed, or the task is incomplete
    GATE_FAILED = 7
    #: the provider refused the credentials (HTTP 401/403); ``score`` stopped at once
    CREDENTIALS_REFUSED = 8
    #: the rows are judged and stored, but the report files could not be written (a full
    #: disk, a folder in the way): not 2, which says nothing was scored; ``rubric-eval report
    #: TASK --out DIR`` writes them from the store
    REPORT_NOT_WRITTEN = 9
    #: interrupted (Ctrl-C); finished rows are kept
    INTERRUPTED = 130
    #: stdout was closed early (SIGPIPE), like other Unix tools
    BROKEN_PIPE = 141


#: one line per exit code, for machine-read summaries (``--json``); the comments above say more
_MEANINGS = {
    ExitCode.OK: "done",
    ExitCode.UNEXPECTED: "unexpected error (a bug: please report it)",
    ExitCode.BAD_INPUT: "bad input or options: nothing was scored",
    ExitCode.STORE: "the task store is missing, locked or holds something unexpected",
    ExitCode.CASSETTE_MISS: "some rows had no cassette entry (they are JUDGE_ERROR rows)",
    ExitCode.NOTHING_SCORED: "no row could be scored",
    ExitCode.BUDGET: "a budget (--max-calls / --max-cost) stopped the run",
    ExitCode.GATE_FAILED: "a check failed, or the task is incomplete",
    ExitCode.CREDENTIALS_REFUSED: "the provider refused the credentials (HTTP 401/403)",
    ExitCode.REPORT_NOT_WRITTEN: "rows stored, but the report files were not written",
    ExitCode.INTERRUPTED: "interrupted; finished rows are kept",
    ExitCode.BROKEN_PIPE: "stdout was closed early",
}


def exit_meaning(code: int) -> str:
    """The one-line meaning of an exit code of :class:`ExitCode` (``"unknown"`` otherwise)."""
    try:
        return _MEANINGS[ExitCode(code)]
    except ValueError:
        return "unknown exit code"


@dataclass(frozen=True)
class Problem:
    """One problem found in an input file.

    Attributes:
        where: ``file:line`` when the line is known, else the file name.
        field: dotted/indexed field path inside the record (``intents[2].requirements[0].id``),
            or ``""`` for the record as a whole.
        message: what is wrong, with the valid choices and the fix.
    """

    where: str
    field: str
    message: str

    def __str__(self) -> str:
        location = f"{self.where}: {self.field}" if self.field else self.where
        return f"{location}: {self.message}"


def format_loc(loc: tuple[str | int, ...] | list[str | int]) -> str:
    """A field path as people write it: ``intents[1].requirements[0].id``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class RubricEvalError(Exception):
    """Base of every error rubric-eval raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code: int = ExitCode.UNEXPECTED


class InputError(RubricEvalError):
    """A file or option the user gave is wrong. Carries every problem found, not only the first."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, summary: str, problems: list[Problem] | None = None) -> None:
        self.summary = summary
        self.problems = list(problems or [])
        lines = [summary, *(f"  - {p}" for p in self.problems)]
        super().__init__("\n".join(lines))


class RubricError(InputError):
    """A rubric pack failed validation (docs/rubric-packs.md)."""


class DatasetError(InputError):
    """A dialogue file has malformed rows (docs/inputs.md). Raised before any judge call."""


class StoreError(RubricEvalError):
    """The task store is missing, locked, or holds something unexpected."""

    exit_code = ExitCode.STORE


class TaskNotFoundError(StoreError):
    """No task with the given id exists in the store (a wrong argument, hence exit code 2)."""

    exit_code = ExitCode.BAD_INPUT


class CassetteError(RubricEvalError):
    """A cassette file is malformed or lacks its provenance (docs/judges.md)."""

    exit_code = ExitCode.BAD_INPUT


class ConfigurationError(RubricEvalError):
    """Options that cannot work together, or a missing prompt template or credential."""

    exit_code = ExitCode.BAD_INPUT


class JudgeCallError(RubricEvalError):
    """A command that makes one model call of its own (``rubric draft``, ``actions
    --summarize``) got no valid answer: the call failed, or every answer failed its checks
    after the re-asks. Nothing was written."""

    exit_code = ExitCode.NOTHING_SCORED


class CassetteMissError(JudgeCallError):
    """Such a command's replay found no cassette entry for its request."""

    exit_code = ExitCode.CASSETTE_MISS
