"""Where a task store lives and how it is opened: one SQLite file, or a PostgreSQL database.

``--store`` (or ``$RUBRIC_EVAL_STORE``) takes either a file path (SQLite, the embedded default
for one person on one machine) or a ``postgresql://`` / ``postgres://`` URL (a team store shared
by many machines, issue 16). Both backends hold the same tables, created by one ordered list of
migrations (:mod:`rubric_engine.stores.migrations`), and give :class:`rubric_engine.store.TaskStore`
the same small interface (:class:`rubric_engine.stores.backend.Backend`).
"""

from __future__ import annotations

from rubric_engine.stores.location import (
    PostgresUrl,
    StoreLocation,
    is_postgres,
    parse_location,
    store_exists,
)

__all__ = ["PostgresUrl", "StoreLocation", "is_postgres", "parse_location", "store_exists"]
