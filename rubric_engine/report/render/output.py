"""Where report files go: checked before any judge call, written atomically.

A report folder given as an existing file, ``/dev/null`` or a folder holding a *folder* named
like a report file used to end in a traceback after every judge call was paid for. These
checks run before the first call (:func:`check_report_folder`), and every file is written to
a temporary name beside its place and renamed over it (:func:`write_atomic`), so a run killed
while writing leaves the previous file or the new one, never half of one; a report's files are
written whole first and then moved in together (:func:`write_report_files`), so a folder never
mixes two runs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

from rubric_engine.errors import ConfigurationError

#: the files a report folder holds
REPORT_FILES = ("report.json", "report.md", "report.html", "rows.jsonl")


def check_report_folder(folder: Path, flag: str = "--out") -> None:
    """Create ``folder`` if needed and prove every report file can be written in it.

    Raises:
        ConfigurationError: ``folder`` is a file (or a device such as ``/dev/null``), a
            report file's name inside it is a folder, or it cannot be written (the operating
            system's reason); each names the path and the fix.
    """
    if folder.exists() and not folder.is_dir():
        raise ConfigurationError(
            f"report folder {folder} is a file, not a folder; {flag} takes the folder that "
            f"will hold {', '.join(REPORT_FILES)} (e.g. reports/run1)"
        )
    taken = [name for name in REPORT_FILES if (folder / name).is_dir()]
    if taken:
        raise ConfigurationError(
            f"report folder {folder}: {', '.join(taken)} inside it is a folder, where the "
            "report file of that name must go; move it away or pass another folder"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".rubric-eval-write-test"):
            pass
    except OSError as exc:
        raise ConfigurationError(
            f"report folder {folder} cannot be written ({exc.strerror or exc}); "
            f"pass a folder you can write to as {flag}"
        ) from exc


def check_output_file(path: Path, flag: str = "--out") -> None:
    """A single output file (``rubric schema --out``): not a folder, in an existing folder.

    Raises:
        ConfigurationError: ``path`` is a folder, or its folder does not exist.
    """
    if path.is_dir():
        raise ConfigurationError(
            f"{flag} {path} is a folder; {flag} takes a file path, e.g. {path / 'schema.json'}"
        )
    if not path.parent.is_dir():
        raise ConfigurationError(
            f"{flag} {path}: the folder {path.parent} does not exist; create it or pass "
            "another path"
        )


def write_output(
    path: Path,
    text: str | Iterable[str],
    flag: str = "--out",
    make_folder: bool = True,
) -> None:
    """Write one output file a command was asked for (``export --out``, ``labels export
    --out`` …): atomically (:func:`write_atomic`: a failure mid-way, a full disk, leaves the
    file as it was and no temporary file), and every failure a message naming the path.

    Args:
        make_folder: create the file's folder when missing (else refuse it, naming it).

    Raises:
        ConfigurationError: an empty path, a folder, a missing folder (``make_folder=False``),
            or the operating system's reason it cannot be written (read-only, full).
    """
    check_output(path, flag, make_folder)
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise unwritable(path, flag, exc) from exc


def check_output(path: Path, flag: str = "--out", make_folder: bool = True) -> None:
    """:func:`write_output`'s checks of ``path``, before anything is written.

    Raises:
        ConfigurationError: see :func:`write_output`.
    """
    if str(path) in ("", "."):  # typer reads --out "" as the current folder
        raise ConfigurationError(f"{flag} is empty; give a file path, e.g. {flag} out.csv")
    if path.is_dir():
        raise ConfigurationError(f"{flag} {path} is a folder; give a file path in it")
    if not make_folder and not path.parent.is_dir():
        raise ConfigurationError(
            f"{flag} {path}: the folder {path.parent} does not exist; create it or give "
            "another path"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(path, flag, exc) from exc


def unwritable(path: Path, flag: str, exc: OSError) -> ConfigurationError:
    """The message of a file the operating system would not let be written."""
    return ConfigurationError(
        f"{flag} {path}: cannot write it ({exc.strerror or exc}); nothing was changed there. "
        "Give a file path in a folder you can write to (and free space)"
    )


#: bytes buffered before each write to the file: report files run to tens of MB (rows.jsonl
#: ~2.7 KB a row), and 1 MiB writes took a fifth less CPU than the default 8 KiB
WRITE_BUFFER = 1 << 20


def write_atomic(path: Path, text: str | Iterable[str], newline: str | None = None) -> None:
    """Write ``text`` (UTF-8; a string, or chunks written one by one so a long file is never
    held whole) to ``path`` through a temporary file renamed over it.

    The temporary file is ``.NAME.PID.XXXX.tmp`` beside ``path``; one left by a process that no
    longer runs (killed while writing) is removed on the next write of that file, and named in
    a :class:`LeftoverFilesWarning`. The file gets the permissions a plain ``open`` would give
    it (``0666`` less the umask), not the temporary file's ``0600``.

    A character device (``/dev/null``, ``/dev/stdout``) is written directly: it cannot be
    renamed over and holds no half-written state. ``newline`` is :func:`open`'s (``""``: the
    text's own line ends, as the ``csv`` module writes them).

    Raises:
        OSError: the folder cannot be written.
    """
    chunks = [text] if isinstance(text, str) else text
    if path.exists() and not path.is_file() and not path.is_dir():
        with path.open("w", encoding="utf-8", newline=newline) as device:
            device.writelines(chunks)
        return
    _remove_orphans(path.parent, [f".{path.name}.*.tmp"])
    handle, temp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"
    )
    try:
        out = os.fdopen(handle, "w", encoding="utf-8", buffering=WRITE_BUFFER, newline=newline)
        _write_chunks(out, temp, chunks)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


#: the folder a report's files are written into before they replace the old set
STAGING = ".rubric-eval-staging"


def write_report_files(folder: Path, files: Sequence[tuple[str, str | Iterable[str]]]) -> None:
    """Replace report files in ``folder`` as one set: each is written whole into a staging
    folder inside it (``.rubric-eval-staging.PID.XXXX``), and only when every one is written
    are they moved over the old ones, in the order given (``report.json`` last). A failure or
    a kill while writing leaves the previous set as it was, never a folder mixing two runs; the
    staging folder is removed on every normal exit, and one a killed writer left is removed by
    the next write and named in a :class:`LeftoverFilesWarning`.

    Raises:
        OSError: the folder cannot be written (a full disk).
    """
    names = [name for name, _ in files]
    _remove_orphans(folder, [f"{STAGING}.*", *(f".{name}.*.tmp" for name in names)])
    staging = Path(tempfile.mkdtemp(dir=folder, prefix=f"{STAGING}.{os.getpid()}."))
    try:
        for name, text in files:
            chunks = [text] if isinstance(text, str) else text
            staged = staging / name
            handle = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            out = os.fdopen(handle, "w", encoding="utf-8", buffering=WRITE_BUFFER)
            _write_chunks(out, staged, chunks)
        for name in names:
            os.replace(staging / name, folder / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_chunks(out: TextIO, path: str | Path, chunks: Iterable[str]) -> None:
    """Write ``chunks`` to ``out`` (the file ``path``), close it and give the file the
    permissions a plain ``open`` gives (``0666`` less the umask)."""
    try:
        with out:
            out.writelines(chunks)
        os.chmod(path, 0o666 & ~_umask())
    except BaseException:
        # a generator of chunks stopped halfway (a full disk) is closed now, while what it
        # reads (a store cursor) is open, not when collected after the store has closed
        close = getattr(chunks, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
        raise


@functools.cache
def _umask() -> int:
    """The process's umask, read once: reading it means setting it, which is not safe to do
    on every write while other threads may be creating files."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


class LeftoverFilesWarning(UserWarning):
    """Temporary files or folders a killed writer left beside an output were removed."""


def _remove_orphans(folder: Path, patterns: Sequence[str]) -> None:
    """Delete the temporary files and staging folders in ``folder`` matching ``patterns``
    (``.NAME.PID.…`` / ``.rubric-eval-staging.PID.…``) whose writer no longer runs, and name
    them in a :class:`LeftoverFilesWarning`. A live writer's are never touched."""
    removed: list[str] = []
    for pattern in patterns:
        prefix = pattern.split("*", 1)[0]
        for left in sorted(folder.glob(pattern)):
            pid = left.name[len(prefix) :].split(".", 1)[0]
            if not pid.isdigit() or int(pid) == os.getpid() or _running(int(pid)):
                continue
            size = _size(left)
            with contextlib.suppress(OSError):
                if left.is_dir():
                    shutil.rmtree(left)
                else:
                    left.unlink()
                removed.append(f"{left.name} ({size:,} bytes)")
    if removed:
        warnings.warn(
            LeftoverFilesWarning(
                f"removed {len(removed)} temporary item(s) a killed writer left in {folder}: "
                f"{', '.join(removed)}"
            ),
            stacklevel=3,
        )


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a live process of another user
    return True


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
