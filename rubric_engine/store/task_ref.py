"""Task names and tags (docs/commands.md): a task is referred to by its id, its name or a tag.

``score --name NAME --tag TAG …`` stores them in the task's ``extra`` JSON (``name``: text,
``tags``: a list of texts), so no column of the task table changes. Wherever a command takes a
task id it takes a reference, resolved by :func:`resolve_task`:

- a task id: that task;
- ``tag:TAG``: the newest task carrying TAG;
- anything else: the newest task of that name.

"Newest" is by creation time, so a name reused on every nightly run (``--name nightly``) always
means the latest run, and ``rubric-eval tasks`` lists the older ones with their ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rubric_engine.errors import ConfigurationError, TaskNotFoundError

__all__ = ["TAG_PREFIX", "check_name_and_tags", "resolve_task", "task_name", "task_tags"]

TAG_PREFIX = "tag:"
_ALLOWED = re.compile(r"^[\w.@+-][\w.@+ -]{0,79}$")


def check_name_and_tags(name: str | None, tags: Sequence[str]) -> dict[str, Any]:
    """What ``score`` stores in the task's ``extra``: ``{"name": …, "tags": […]}`` (keys only
    when given; tags de-duplicated in order).

    Raises:
        ConfigurationError: a name or tag that is empty, longer than 80 characters, starts
            with a space, holds other than letters, digits, ``. @ + - _`` and spaces, or a name
            that starts with ``tag:`` (it would read as a tag reference).
    """
    out: dict[str, Any] = {}
    for what, value in [("--name", name), *(("--tag", t) for t in tags)]:
        if value is None:
            continue
        if not _ALLOWED.match(value) or ":" in value:
            raise ConfigurationError(
                f"{what} {value!r} is not valid: use 1-80 letters, digits, '.', '@', '+', '-', "
                "'_' or spaces (no ':'), e.g. --name nightly-2026-12-01"
            )
    if name is not None:
        out["name"] = name
    if tags:
        out["tags"] = list(dict.fromkeys(tags))
    return out


def task_name(extra: dict[str, Any]) -> str | None:
    """The task's name from its ``extra`` JSON, or ``None``."""
    name = extra.get("name")
    return name if isinstance(name, str) else None


def task_tags(extra: dict[str, Any]) -> tuple[str, ...]:
    """The task's tags from its ``extra`` JSON (empty when none)."""
    tags = extra.get("tags")
    return tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()


def resolve_task(tasks: Sequence[Any], ref: str, where: str = "") -> str:
    """The id of the task ``ref`` names (see the module docstring).

    Args:
        tasks: the store's tasks (:class:`~rubric_engine.store.task_store.TaskRecord`), oldest
        first.
        ref: a task id, ``tag:TAG`` or a name.
        where: the store's path, for the message.

    Raises:
        TaskNotFoundError: no task has that id, tag or name; the known names and tags are listed.
    """
    if any(t.id == ref for t in tasks):
        return ref
    if ref.startswith(TAG_PREFIX):
        tag = ref[len(TAG_PREFIX) :]
        found = [t for t in tasks if tag in task_tags(t.extra)]
    else:
        found = [t for t in tasks if task_name(t.extra) == ref]
    if found:
        return str(max(found, key=lambda t: (t.created_at, t.id)).id)
    names = sorted({n for t in tasks if (n := task_name(t.extra))})
    tags = sorted({tag for t in tasks for tag in task_tags(t.extra)})
    known = (f"; names: {', '.join(names)}" if names else "") + (
        f"; tags: {', '.join(TAG_PREFIX + t for t in tags)}" if tags else ""
    )
    raise TaskNotFoundError(
        f"task {ref!r} not found{f' in {where}' if where else ''} (no task has that id, name "
        f"or tag{known}); `rubric-eval tasks --store PATH` lists the tasks"
    )


def resolve_in_store(store: Any, ref: str) -> str:
    """:func:`resolve_task` over an open :class:`~rubric_engine.store.task_store.TaskStore`; an id
    is
    checked first without reading every task."""
    try:
        return str(store.task(ref).id)
    except TaskNotFoundError:
        return resolve_task(store.tasks(), ref, str(store.path))
