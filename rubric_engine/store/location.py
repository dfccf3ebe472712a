"""Parse ``--store`` values: a SQLite file path or a PostgreSQL URL.

A URL must not become a :class:`~pathlib.Path`: ``Path("postgresql://h/db")`` collapses the
``//`` and the URL is lost, so the CLI parses ``--store`` with :func:`parse_location`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from rubric_engine.errors import ConfigurationError, StoreError

#: URL schemes libpq accepts for a connection string
SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class PostgresUrl:
    """A PostgreSQL store, named by its libpq connection URL.

    ``str()`` hides a password written in the URL (messages and suggested commands print it);
    :attr:`url` is the full value handed to libpq.
    """

    url: str

    def __str__(self) -> str:
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))


StoreLocation = Path | PostgresUrl


def is_postgres(text: object) -> bool:
    """A ``postgresql://`` or ``postgres://`` URL (a string or a :class:`PostgresUrl`)."""
    return isinstance(text, PostgresUrl) or (
        isinstance(text, str) and text.lower().startswith(SCHEMES)
    )


def parse_location(value: str | Path | PostgresUrl) -> StoreLocation:
    """``--store`` text → a :class:`Path` (SQLite file) or a :class:`PostgresUrl`.

    ``sqlite:PATH`` (the form ``store migrate --from`` uses) is accepted as a plain path.

    Raises:
        ConfigurationError: a ``scheme://`` other than PostgreSQL's (a mistyped URL would
            otherwise become a local folder named after it, silently).
    """
    if isinstance(value, PostgresUrl | Path):
        return value
    if is_postgres(value):
        return PostgresUrl(value)
    if (scheme := re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", value)) and scheme[1] != "sqlite":
        raise ConfigurationError(
            f"--store {value!r}: {scheme[1]}:// is not a store this engine opens; use a SQLite "
            "file path (or sqlite:PATH), or a PostgreSQL URL postgresql://USER@HOST:PORT/DB "
            "(postgres:// also works)"
        )
    if value.startswith("sqlite:"):
        value = value.removeprefix("sqlite:").removeprefix("//")
    return Path(value)


def store_exists(location: StoreLocation) -> bool:
    """A SQLite file that exists, or a PostgreSQL database that holds a store's tables.

    Raises:
        StoreError: the path is a folder (a store is a file); the PostgreSQL server cannot be
            reached (the message says how to fix it).
    """
    if isinstance(location, Path):
        if location.is_dir():
            raise folder_given(location)
        return location.is_file()
    from rubric_engine.store.postgres import has_store

    return has_store(location)


def folder_given(path: Path) -> StoreError:
    """The error for ``--store FOLDER``: a SQLite store is one file, so name one inside it."""
    return StoreError(
        f"{path} is a folder; --store takes the path of a store file, e.g. {path / 'store.sqlite'}"
    )
