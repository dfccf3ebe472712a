"""``labels import FILE`` without ``--task``: a label file checked whole, then stored a chunk
at a time, never held in memory (docs/calibration.md, docs/scale.md).

The file is read twice. The first pass checks every line (:func:`~rubric_engine.labels.io.
label_stream`: the line itself and its repeats) and every label against the rubric version it
names (:func:`~rubric_engine.labels.io.check_label_rubric`), and stores nothing. The second
reads it again and stores its labels :data:`CHUNK` at a time
(:func:`~rubric_engine.labels.store.store_labels`) in one transaction: the file is stored
whole or not at all, a line that reads otherwise the second time included. Memory holds one
chunk of labels and the rubric versions named, whatever the file's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rubric_engine.errors import ConfigurationError, InputError, Problem
from rubric_engine.labels.io import (
    check_label_rubric,
    label_stream,
    refuse_problems,
    reviewer_case_problems,
)
from rubric_engine.labels.model import Label
from rubric_engine.labels.pins import RubricPins
from rubric_engine.labels.store import reviewer_order, store_labels

if TYPE_CHECKING:
    from rubric_engine.rubric.model import EvalRubric
    from rubric_engine.store.backend import Backend
    from rubric_engine.store.task_store import TaskStore

#: labels stored per :func:`~rubric_engine.labels.store.store_labels` call
CHUNK = 1000


@dataclass
class Imported:
    """What an import stored: labels added (``superseding`` of them an earlier label),
    lines that changed nothing, and the field names kept under ``metadata``."""

    added: int = 0
    superseding: int = 0
    unchanged: int = 0
    unknown_fields: dict[str, None] = field(default_factory=dict)


def import_label_file(store: TaskStore, path: Path, source: str | None = None) -> Imported:
    """Check every label of ``path`` against the rubric versions they name, then store them
    all (append-only), or none (see the module docstring).

    Args:
        source: every label's ``source`` instead of the file's.

    Raises:
        InputError: a line's problems, a repeated line, a label the rubric version it names
            refuses, or a reviewer named like another but for case; every problem listed.
        ConfigurationError: labels that name no rubric key.
        StoreError: the database refused the write (nothing is stored).
    """
    from rubric_engine.labels.store import labels_transaction

    db = store.backend
    rubrics = _Rubrics(store)
    first = _Pass(path, source, rubrics)
    for _ in first.labels():  # the first pass: nothing stored
        pass
    twins = [
        problem
        for key, names in first.reviewers.items()
        for problem in reviewer_case_problems(path, key, names, reviewer_order(db, key))
    ]
    if twins:
        raise InputError(f"{path}: {len(twins)} problem(s); nothing was imported", twins)
    imported = Imported()
    with labels_transaction(db):
        chunk: list[Label] = []
        for label in _Pass(path, source, rubrics).labels():
            chunk.append(label)
            if len(chunk) == CHUNK:
                _store(db, chunk, imported)
                chunk = []
        _store(db, chunk, imported)
    return imported


def _store(db: Backend, chunk: list[Label], imported: Imported) -> None:
    outcome = store_labels(db, chunk)
    imported.added += len(outcome.added)
    imported.superseding += sum(1 for lab in outcome.added if lab.supersedes)
    imported.unchanged += outcome.unchanged
    for lab in chunk:
        imported.unknown_fields.update(dict.fromkeys(lab.metadata))


class _Pass:
    """One read of the file: its labels, checked and filled in, as they come; when the last
    has been read, what was wrong is raised (the file's own problems first, then labels
    without a rubric key, then what the rubric versions refuse)."""

    def __init__(self, path: Path, source: str | None, rubrics: _Rubrics) -> None:
        self.path, self.source, self.rubrics = path, source, rubrics
        self.problems: list[Problem] = []  # the lines' own
        self.refused: list[Problem] = []  # by the rubric versions named
        self.unpinned: list[str] = []  # rowIds of labels that name no rubric key
        self.pins_of: dict[tuple[str, int], RubricPins] = {}
        #: rubricKey → the reviewers of its labels, first-seen order
        self.reviewers: dict[str, dict[str, None]] = {}

    def labels(self) -> Iterator[Label]:
        read = False
        for line, lab in label_stream(self.path, self.problems):
            read = True
            if self.source is not None:
                lab = lab.model_copy(update={"source": self.source})
            if lab.rubric_key is None:
                self.unpinned.append(lab.row_id)
                continue
            where = f"{self.path}:{line}"
            found = self.rubrics.of(lab)
            filled = check_label_rubric(lab, found, where, self.pins_of, self.refused)
            self.reviewers.setdefault(lab.rubric_key, {})[lab.reviewer] = None
            if filled is not None and not self.problems and not self.refused:
                yield filled
        if self.problems and self.refused:  # one run names them all
            raise InputError(
                f"{self.path}: {len(self.problems) + len(self.refused)} problem(s), in its lines "
                "and against the stored rubric versions; nothing was imported",
                [*self.problems, *self.refused],
            )
        refuse_problems(self.path, self.problems, any_label=read)
        if self.unpinned:
            raise ConfigurationError(
                f"{self.path}: {len(self.unpinned)} label(s) name no rubricKey (e.g. row "
                f"{self.unpinned[0]}); pass --task TASK to check them against a task and "
                "take its rubric, or add rubricKey (and rubricVersion) to each line"
            )
        if self.refused:
            raise InputError(
                f"{self.path}: {len(self.refused)} problem(s) against the stored rubric "
                "versions; nothing was imported",
                self.refused,
            )


class _Rubrics:
    """Each (rubricKey, rubricVersion) labels name → its stored pack, or why there is none,
    looked up once.

    A label that names no version is checked against the key's newest version (a requirement
    ID valid there is taken as valid; a task check, ``--task``, is exact).
    """

    def __init__(self, store: TaskStore) -> None:
        from rubric_engine.rubric.versions import RubricRegistry

        self.registry = RubricRegistry(store)
        self.found: dict[tuple[str | None, int | None], EvalRubric | str] = {}

    def of(self, lab: Label) -> EvalRubric | str:
        from rubric_engine.rubric.versions import LifecycleError

        ref = (lab.rubric_key, lab.rubric_version)
        if ref in self.found:
            return self.found[ref]
        try:
            text = str(lab.rubric_key) if lab.rubric_version is None else f"{ref[0]}@{ref[1]}"
            version = self.registry.lookup(text)
            if lab.rubric_hash is not None and lab.rubric_hash != version.content_hash:
                self.found[ref] = (
                    f"rubricHash {lab.rubric_hash!r} is not {version.ref}'s "
                    f"({version.content_hash}); label under the version you reviewed"
                )
            else:
                self.found[ref] = version.rubric()
        except LifecycleError as exc:
            self.found[ref] = str(exc)
        return self.found[ref]
