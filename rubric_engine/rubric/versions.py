"""Rubric versions and their lifecycle, kept in the task store (docs/rubric-packs.md).

A pack *file* is always a draft. ``publish`` freezes one version: it validates the file and
records the version's canonical content hash and full snapshot in the store's
``rubric_versions`` table. From then on:

- publishing the same key and version with the same content is a no-op; with different content
  it is refused (publish a new version instead);
- ``score --rubric KEY`` uses the highest PUBLISHED version, ``KEY@N`` exactly version N;
- ``retire`` moves a PUBLISHED version to RETIRED: it cannot start new tasks, while every task
  that used it keeps its own snapshot and its report rebuilds unchanged;
- a RETIRED version is never published again.

Every write runs in one serialized transaction (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a
transaction holding an advisory lock, :meth:`rubric_engine.store.backend.Backend.exclusive`),
so two processes publishing into one store at once are serialized: one wins, the other sees the
winner's row and gets the refusal (or the no-op) it would have got running second.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_engine import DEFAULT_STORE
from rubric_engine.errors import InputError, RubricError, StoreError
from rubric_engine.rubric.loader import load_rubric, parse_rubric
from rubric_engine.rubric.model import KEY_PATTERN, EvalRubric, RubricStatus
from rubric_engine.store.location import StoreLocation, parse_location, store_exists
from rubric_engine.store.task_store import TaskStore, decode_column

_REF = re.compile(KEY_PATTERN[:-1] + r"(?:@(?P<version>[0-9]+))?$")
_PACK_SUFFIXES = (".yaml", ".yml", ".json")


class LifecycleError(InputError):
    """A lifecycle rule refused the request (docs/rubric-packs.md); the message says what
    to do instead."""


@dataclass(frozen=True)
class RubricVersion:
    """One row of the registry. ``snapshot`` is the full pack without ``status``."""

    key: str
    version: int
    status: RubricStatus
    content_hash: str
    snapshot: dict[str, Any]
    source: str | None
    published_at: str
    retired_at: str | None

    @property
    def ref(self) -> str:
        return f"{self.key}@{self.version}"

    def rubric(self) -> EvalRubric:
        """The pack as stored, with its current status.

        Raises:
            StoreError: the stored snapshot no longer validates or no longer matches the content
                hash recorded at publication (the store was edited by hand).
        """
        where = f"published {self.ref}"
        return verified_snapshot({**self.snapshot, "status": self.status}, self.content_hash, where)


@dataclass(frozen=True)
class PublishOutcome:
    version: RubricVersion
    created: bool  #: False: the same content was already published under this version


def verified_snapshot(snapshot: dict[str, Any], recorded_hash: str, where: str) -> EvalRubric:
    """Parse a stored snapshot and check it against the hash recorded when it was stored.

    Raises:
        StoreError: the snapshot does not validate or its content hash differs; the message gives
            both hashes. Nothing is rebuilt from altered rules.
    """
    try:
        rubric = parse_rubric(snapshot, source=where)
    except RubricError as exc:
        raise StoreError(
            f"{where}: the stored rubric snapshot no longer validates, so the store was changed "
            f"after it was written; nothing is rebuilt from it. Restore the store from a backup."
            f"\n{exc}"
        ) from exc
    found = rubric.content_hash()
    if found != recorded_hash:
        raise StoreError(
            f"{where}: the stored rubric snapshot does not match the hash recorded when it was "
            f"stored (recorded {recorded_hash}, now {found}): the store was changed afterwards. "
            "Nothing is rebuilt from altered rules; restore the store from a backup or re-run."
        )
    return rubric


def parse_ref(text: str) -> tuple[str, int | None]:
    """``KEY`` → (key, None); ``KEY@N`` → (key, N).

    Raises:
        LifecycleError: not of that form.
    """
    found = _REF.match(text)
    if found is None:
        raise LifecycleError(
            f"{text!r} is neither a pack file nor a rubric reference; write KEY or KEY@VERSION "
            "(e.g. airline_cs or airline_cs@2), or give the path of an existing pack file"
        )
    version = found.group("version")
    return text.split("@", 1)[0], int(version) if version else None


def looks_like_file(text: str) -> bool:
    """A path-like ``--rubric`` value: it exists, has a directory part or a pack suffix."""
    return Path(text).exists() or "/" in text or "\\" in text or text.endswith(_PACK_SUFFIXES)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _describe(versions: list[RubricVersion]) -> str:
    return ", ".join(f"v{v.version} {v.status}" for v in versions) or "none"


class RubricRegistry:
    """Published and retired rubric versions in one task store.

    Raises (every method): StoreError when the store fails, e.g. a SQLite store stays locked by
    another writer for longer than its 30 s busy timeout.
    """

    #: the name serialized registry writes lock on (PostgreSQL advisory lock)
    LOCK = "rubric-eval rubric registry"

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self._db = store.backend

    # -- reading -----------------------------------------------------------------------------

    def versions(self, key: str | None = None) -> list[RubricVersion]:
        """Every stored version (of ``key``), by key then version number."""
        query = "SELECT * FROM rubric_versions"
        args: tuple[Any, ...] = ()
        if key is not None:
            query += " WHERE rubric_key=?"
            args = (key,)
        cursor = self._db.execute(query + " ORDER BY rubric_key, version", args)
        names = [d[0] for d in cursor.description]
        return [self._version(dict(zip(names, row, strict=True))) for row in cursor.fetchall()]

    @staticmethod
    def _version(data: dict[str, Any]) -> RubricVersion:
        return RubricVersion(
            key=data["rubric_key"],
            version=data["version"],
            status=RubricStatus(data["status"]),
            content_hash=data["content_hash"],
            snapshot=decode_column(
                data["snapshot"], f"rubric version {data['rubric_key']}@{data['version']}"
            ),
            source=data["source"],
            published_at=data["published_at"],
            retired_at=data["retired_at"],
        )

    def get(self, key: str, version: int) -> RubricVersion:
        """Raises: LifecycleError: no such version; lists the versions there are."""
        for found in self.versions(key):
            if found.version == version:
                return found
        raise LifecycleError(f"{key}@{version} is not in {self._store.path}; {self._known(key)}")

    def _known(self, key: str) -> str:
        versions = self.versions(key)
        if versions:
            return f"{key} has: {_describe(versions)}"
        keys = sorted({v.key for v in self.versions()})
        listed = f"published keys: {', '.join(keys)}" if keys else "nothing is published yet"
        return (
            f"no version of {key!r} was published here ({listed}); publish one with "
            "`rubric-eval rubric publish FILE`"
        )

    def resolve(self, ref: str) -> RubricVersion:
        """The version ``score`` may use for ``KEY`` (highest PUBLISHED) or ``KEY@N``.

        Raises:
            LifecycleError: unknown key or version; the version is RETIRED (names the published
                alternatives); no version of the key is PUBLISHED.
        """
        key, version = parse_ref(ref)
        if version is not None:
            found = self.get(key, version)
            if found.status is RubricStatus.RETIRED:
                live = [v for v in self.versions(key) if v.status is RubricStatus.PUBLISHED]
                instead = (
                    f"use one of the published versions: {', '.join(v.ref for v in live)}"
                    if live
                    else "no version of it is published now; publish a new version first"
                )
                raise LifecycleError(
                    f"{found.ref} is RETIRED (since {found.retired_at}) and cannot start new "
                    f"tasks; {instead}. Old tasks that used it stay readable."
                )
            return found
        published = [v for v in self.versions(key) if v.status is RubricStatus.PUBLISHED]
        if not published and not self.versions(key):
            raise LifecycleError(self._known(key))
        if not published:
            raise LifecycleError(f"no PUBLISHED version of {key!r}; {self._known(key)}")
        return published[-1]

    def lookup(self, ref: str) -> RubricVersion:
        """For reading (show, diff): ``KEY@N`` whatever its status; ``KEY`` the highest
        PUBLISHED version, else the highest of any status.

        Raises:
            LifecycleError: unknown key or version.
        """
        key, version = parse_ref(ref)
        if version is not None:
            return self.get(key, version)
        versions = self.versions(key)
        if not versions:
            raise LifecycleError(f"{key!r} is not in {self._store.path}; {self._known(key)}")
        published = [v for v in versions if v.status is RubricStatus.PUBLISHED]
        return (published or versions)[-1]

    def task_counts(self) -> dict[tuple[str, int], int]:
        """How many tasks used each (key, version)."""
        rows = self._db.execute(
            "SELECT t.rubric_key, t.rubric_version, COUNT(*) FROM tasks t JOIN rubric_versions v "
            "ON t.rubric_key = v.rubric_key AND t.rubric_version = v.version "
            "AND t.rubric_hash = v.content_hash WHERE t.rubric_status != 'DRAFT' "
            "GROUP BY t.rubric_key, t.rubric_version"
        )
        return {(key, version): int(n) for key, version, n in rows}

    # -- writing -----------------------------------------------------------------------------

    def publish(self, path: Path, rubric: EvalRubric | None = None) -> PublishOutcome:
        """Validate the pack file and freeze its version.

        Args:
            rubric: the file as :func:`load_for_publish` already read it, if it did.

        Raises:
            RubricError: the file does not validate (every problem listed).
            LifecycleError: the version is already published with other content, or is RETIRED,
                or the file itself says RETIRED.
        """
        rubric = rubric if rubric is not None else load_for_publish(path)
        new_hash = rubric.content_hash()
        with self._db.exclusive(self.LOCK):
            existing = [v for v in self.versions(rubric.key) if v.version == rubric.version]
            if existing:
                return self._republish(path, rubric, existing[0], new_hash)
            snapshot = rubric.snapshot()
            snapshot.pop("status", None)
            self._db.execute(
                "INSERT INTO rubric_versions VALUES (?,?,?,?,?,?,?,?)",
                (
                    rubric.key,
                    rubric.version,
                    str(RubricStatus.PUBLISHED),
                    new_hash,
                    json.dumps(snapshot, ensure_ascii=False, sort_keys=True),
                    path.name,
                    _now(),
                    None,
                ),
            )
        return PublishOutcome(self.get(rubric.key, rubric.version), created=True)

    def _republish(
        self, path: Path, rubric: EvalRubric, existing: RubricVersion, new_hash: str
    ) -> PublishOutcome:
        taken = max(v.version for v in self.versions(rubric.key))
        existing.rubric()  # a stored snapshot edited by hand is an error, not "already published"
        if existing.content_hash != new_hash:
            raise LifecycleError(
                f"{path}: {existing.ref} is already {existing.status} with different content "
                f"(stored {existing.content_hash[:19]}…, this file {new_hash[:19]}…). A published "
                f"version is frozen: set `version: {taken + 1}` in the file and publish that "
                f"(`rubric-eval rubric diff {existing.ref} {path}` shows what changed)"
            )
        if existing.status is RubricStatus.RETIRED:
            raise LifecycleError(
                f"{path}: {existing.ref} was retired on {existing.retired_at} and is not "
                f"published again; set `version: {taken + 1}` in the file and publish that"
            )
        return PublishOutcome(existing, created=False)

    def retire(self, ref: str) -> tuple[RubricVersion, bool]:
        """Move ``KEY@N`` from PUBLISHED to RETIRED; returns (version, changed).

        Raises:
            LifecycleError: no version number given, or no such version.
        """
        key, version = parse_ref(ref)
        if version is None:
            raise LifecycleError(f"retire needs an exact version: {key}@N ({self._known(key)})")
        with self._db.exclusive(self.LOCK):
            found = self.get(key, version)
            if found.status is RubricStatus.RETIRED:
                return found, False
            self._db.execute(
                "UPDATE rubric_versions SET status=?, retired_at=? "
                "WHERE rubric_key=? AND version=?",
                (str(RubricStatus.RETIRED), _now(), key, version),
            )
        return self.get(key, version), True


def load_for_publish(path: Path) -> EvalRubric:
    """Validate a pack file for ``publish``, before any store is opened or created.

    Raises:
        RubricError: the file does not validate (every problem, "nothing was published").
        LifecycleError: the file says RETIRED.
    """
    try:
        rubric = load_rubric(path)
    except RubricError as exc:
        raise RubricError(f"{exc.summary}; nothing was published", exc.problems) from exc
    if rubric.status is RubricStatus.RETIRED:
        raise LifecycleError(
            f"{path}: the file says status RETIRED, but a file is a draft to publish; set "
            "`status: DRAFT` (retiring is done in the store: `rubric-eval rubric retire KEY@N`)"
        )
    return rubric


def rubric_for_scoring(ref: str | Path, store_path: str | StoreLocation, draft: bool) -> EvalRubric:
    """Resolve ``score --rubric``: a published ``KEY``/``KEY@N`` from the store, or a file draft.

    Returns the pack with the status the task records: PUBLISHED for a store version, DRAFT for a
    file (whatever the file says).

    Raises:
        LifecycleError: a file without ``draft``; a RETIRED or unknown version; no store yet.
        RubricError: the file does not validate.
        StoreError: the store cannot be opened, or a stored snapshot was altered.
    """
    text, store_path = str(ref), parse_location(store_path)
    if looks_like_file(text):
        path = Path(text)
        rubric = load_rubric(path)
        if not draft:
            store_opt = "" if store_path == DEFAULT_STORE else f" --store {store_path}"
            raise LifecycleError(
                f"{path} is a pack file, i.e. a draft. Publish it and score the published "
                f"version (`rubric-eval rubric publish {path}{store_opt}`, then "
                f"`--rubric {rubric.key}`), "
                "or pass --draft for a trial run (the task and its report are marked draft)"
                + _same_as_published(rubric, store_path)
            )
        return rubric.model_copy(update={"status": RubricStatus.DRAFT})
    if draft:
        raise LifecycleError(
            f"--draft is for a pack file; {text!r} names a version in the store. Drop --draft, "
            "or give the draft's file path"
        )
    parse_ref(text)
    if not store_exists(store_path):
        raise LifecycleError(
            f"no store at {store_path}, so nothing is published there; publish first "
            f"(`rubric-eval rubric publish FILE --store {store_path}`) or pass --store PATH"
        )
    with TaskStore(store_path) as store:
        return RubricRegistry(store).resolve(text).rubric()


def rubric_at(ref: str | Path, store_path: str | StoreLocation) -> tuple[EvalRubric, str]:
    """For reading: a pack file (as written) or a stored version; returns (pack, label).

    Raises:
        RubricError: the file does not validate. LifecycleError: unknown reference or no store.
        StoreError: a stored snapshot was altered.
    """
    text, store_path = str(ref), parse_location(store_path)
    if looks_like_file(text):
        rubric = load_rubric(Path(text))
        return rubric, f"{text} ({rubric.key} v{rubric.version}, file)"
    parse_ref(text)
    if not store_exists(store_path):
        raise LifecycleError(
            f"no store at {store_path}, so {text!r} cannot be looked up; publish first or pass "
            "--store PATH"
        )
    with TaskStore(store_path) as store:
        found = RubricRegistry(store).lookup(text)
        return found.rubric(), f"{found.ref} ({found.status})"


def _same_as_published(rubric: EvalRubric, store_path: StoreLocation) -> str:
    if not store_exists(store_path):
        return ""
    with TaskStore(store_path) as store:
        for found in RubricRegistry(store).versions(rubric.key):
            if found.content_hash == rubric.content_hash():
                use = "" if found.status is RubricStatus.RETIRED else f": use --rubric {found.ref}"
                return f". This file's content is {found.status} as {found.ref}{use}"
    return ""
