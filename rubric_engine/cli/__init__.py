"""``rubric-eval`` command line: parse options, call the library, map errors to exit codes.

Exit codes: 0 done; 2 bad input or options (nothing scored); 3 store problem; 4 replay ran but
some rows had no cassette entry (they are JUDGE_ERROR rows; the message says how to record
them; 4 is reported even when every row missed); 5 no row could be scored (every row
JUDGE_ERROR, or the first rows all failed to reach the judge and the run stopped); 6 a budget
stopped ``score``; 7 a ``gate`` check failed; 8 the provider refused the credentials; 9 the rows
are stored but the report files could not be written; 130 interrupted (finished rows are kept);
141 the reader of stdout went away (``| head``), like other Unix tools; 1 anything unexpected.
Heavy modules are imported inside commands so ``--help`` is fast.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys

from rubric_engine.cli._app import app
from rubric_engine.errors import ExitCode

__all__ = ["COMMAND_MODULES", "app", "main"]

#: Each module registers its commands on import; this order is the order `--help` lists them in.
#: A new command module goes here.
COMMAND_MODULES = (
    "score_cmd",
    "report_cmd",
    "verify_cmd",
    "export_cmd",
    "gate_cmd",
    "ci_cmd",
    "emit_cmd",
    "trend_cmd",
    "rubric_cmd",
    "actions_cmd",
    "tools_cmd",
    "labels_cmd",
    "calibrate_cmd",
    "store_cmd",
    "work_cmd",
    "serve_cmd",
    "reviewers_cmd",
    "queue_cmd",
    "batch_cmd",
)
for _name in COMMAND_MODULES:
    importlib.import_module(f"rubric_engine.cli.{_name}")


def main() -> None:
    """Console-script entry point."""
    import signal

    # `rubric-eval … | head` closes stdout early: end quietly like other Unix tools (exit 141)
    # instead of a BrokenPipeError traceback; the task was already stored by then
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    read_dotenv()
    try:
        app()
    except KeyboardInterrupt:  # a Ctrl-C after the command handled its own (exit 130)
        sys.exit(ExitCode.INTERRUPTED)
    except OSError as exc:
        if not _stdout_failed(exc):
            _unexpected(exc)
        # `report … > /dev/full`: what was printed could not be written; what the command
        # stored is kept (the store is written before anything is printed about it)
        with contextlib.suppress(OSError):
            sys.stderr.write(
                f"error: the command's output could not be written ({exc.strerror or exc}); "
                "anything it stored is kept: free space, or write to a file with --out where "
                "the command has it\n"
            )
        os._exit(ExitCode.REPORT_NOT_WRITTEN)  # stdout's buffer cannot be flushed either
    except Exception as exc:
        _unexpected(exc)
    finally:
        # the command has ended: a Ctrl-C from here on (pressed twice, or held down) would
        # only cut the exit short, killing the process by SIGINT after its last message
        signal.signal(signal.SIGINT, signal.SIG_IGN)


#: the one ``.env`` file the command line reads (docs/security.md)
DOTENV = ".env"


def read_dotenv() -> None:
    """Read ``.env`` in the current folder, if there is one, into the environment; variables
    already set win. No other ``.env`` is read: not a parent folder's, and not the one
    litellm's import would find above the virtualenv (``LITELLM_MODE=PRODUCTION`` is set
    before it is imported, rubric_engine/__init__.py)."""
    from pathlib import Path

    if Path(DOTENV).is_file():
        from dotenv import load_dotenv

        load_dotenv(DOTENV, override=False)


def _unexpected(exc: BaseException) -> None:
    """A bug's traceback, with every credential the run knows redacted, and exit 1."""
    import traceback

    from rubric_engine.judge.secrets import redact

    with contextlib.suppress(OSError):
        sys.stderr.write(redact("".join(traceback.format_exception(exc))))
        sys.stderr.write(
            "error: an unexpected error (a bug in rubric-eval: please report it with the "
            "traceback above; credentials in it are shown as [redacted])\n"
        )
    sys.exit(ExitCode.UNEXPECTED)


def _stdout_failed(exc: OSError) -> bool:
    """Whether ``exc`` is the printed output's write failing (a full disk or an I/O error
    under stdout: no file name), not a file a command writes (each of those has its own
    message: report files, the store, cassettes)."""
    import errno

    return exc.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT) and exc.filename is None
