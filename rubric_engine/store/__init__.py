"""The task store: SQLite or PostgreSQL, migrations, work queue, task names and states.

``--store`` (or ``$RUBRIC_EVAL_STORE``) takes either a file path (SQLite, the embedded default for
one person on one machine) or a ``postgresql://`` / ``postgres://`` URL (a team store shared by many
machines; docs/stores.md). Both backends hold the same tables, created by one ordered list of
migrations (:mod:`rubric_engine.store.migrations`), and give
:class:`rubric_engine.store.task_store.TaskStore` the same small interface
(:class:`rubric_engine.store.backend.Backend`).
"""

from __future__ import annotations

from rubric_engine.store.location import (
    PostgresUrl,
    StoreLocation,
    is_postgres,
    parse_location,
    store_exists,
)

__all__ = ["PostgresUrl", "StoreLocation", "is_postgres", "parse_location", "store_exists"]
