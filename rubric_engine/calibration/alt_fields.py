"""The alternative annotator test and the reviewers as the baseline over every label field
(pure): requirement statuses, intents, red flags per type and scores, overall and per
requirement and red-flag type.

An instance is one value a reviewer can give: a requirement's status on a row (met or unmet:
FOLLOWED vs VIOLATED/PARTIAL; NOT_APPLICABLE and UNSURE give no value), a row's intent, a
red-flag type's presence on a row (within what the reviewer speaks for, ``RowView.flag_scope``)
or a row's score. Statuses, intents and flags are scored by accuracy, scores by negative RMSE
(:mod:`.alt_test`). Adjudications are not a reviewer: an adjudicator decided between the
reviewers after seeing them, so they are left out of both.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rubric_engine.calibration.alt_test import (
    DEFAULT_EPSILON,
    DEFAULT_FDR_Q,
    MIN_INSTANCES,
    AltTestTally,
    Scoring,
    alt_test_results,
    baseline_results,
)
from rubric_engine.calibration.blocks import unmet
from rubric_engine.calibration.views import RowView, natural_key

__all__ = ["FIELDS", "AltTestOptions", "FieldTally"]

#: the fields tested, in report order, with how each is scored
FIELDS: dict[str, Scoring] = {
    "status": "accuracy",
    "intent": "accuracy",
    "redFlags": "accuracy",
    "score": "neg_rmse",
}


@dataclass(frozen=True)
class AltTestOptions:
    """The alt-test's parameters (docs/calibration.md lists each default and its source)."""

    epsilon: float = DEFAULT_EPSILON
    q: float = DEFAULT_FDR_Q
    min_instances: int = MIN_INSTANCES


@dataclass
class FieldTally:
    """Alt-test counts per field, per requirement and per red-flag type, fed one row at a time.

    Attributes:
        flag_types: the rubric's red-flag types (what a reviewer with no stated flags and no
            rubric scope speaks for, with the types seen on the row).
    """

    flag_types: Sequence[str] = ()
    tallies: dict[tuple[str, str | None], AltTestTally] = field(default_factory=dict)

    def _add(self, key: tuple[str, str | None], values: Mapping[str, Hashable], judge: Any) -> None:
        if judge is None or len(values) < 2:
            return
        tally = self.tallies.setdefault(key, AltTestTally(FIELDS[key[0]]))
        tally.add(values, judge)

    def add(self, reviewers: Mapping[str, RowView], judge: RowView | None) -> None:
        """One row: each reviewer's own view and the judge's (``None``: nothing to compare)."""
        if judge is None or len(reviewers) < 2:
            return
        intents = {r: v.intent_key for r, v in reviewers.items() if v.intent_key}
        self._add(("intent", None), intents, judge.intent_key)
        scores = {r: v.score for r, v in reviewers.items() if v.score is not None}
        self._add(("score", None), scores, judge.score)
        for rid in dict.fromkeys(rid for v in reviewers.values() for rid in v.statuses):
            values = {
                r: u for r, v in reviewers.items() if (u := unmet(v.statuses.get(rid))) is not None
            }
            theirs = unmet(judge.statuses.get(rid))
            self._add(("status", None), values, theirs)
            self._add(("status", rid), values, theirs)
        if judge.red_flag_types is None:
            return
        stated = {r: v for r, v in reviewers.items() if v.red_flag_types is not None}
        seen = {t for v in stated.values() for t in v.red_flag_types or ()}
        every = [*self.flag_types, *sorted(seen | judge.red_flag_types - set(self.flag_types))]
        for t in every:
            flags = {
                r: t in (v.red_flag_types or ())
                for r, v in stated.items()
                if v.flag_scope is None or t in v.flag_scope
            }
            self._add(("redFlags", None), flags, t in judge.red_flag_types)
            self._add(("redFlags", t), flags, t in judge.red_flag_types)

    def reviewers(self) -> list[str]:
        """Every reviewer counted in some test."""
        return sorted({r for tally in self.tallies.values() for r in tally.reviewers})

    def _ordered(self) -> list[tuple[str, str | None]]:
        types = list(self.flag_types)

        def key(k: tuple[str, str | None]) -> tuple[int, int, int, Any]:
            name, sub = k
            if sub is None:
                return (list(FIELDS).index(name), 0, 0, ())
            rank = types.index(sub) if name == "redFlags" and sub in types else len(types)
            return (list(FIELDS).index(name), 1, rank, natural_key(sub))

        return sorted(self.tallies, key=key)

    def alt_test(self, options: AltTestOptions) -> dict[str, Any] | None:
        """The ``altTest`` object: per field the overall test, with per-requirement
        (``status.requirements``) and per-type (``redFlags.types``) tests; one FDR correction
        over all of them. ``None`` when no instance had two reviewers and a judge value."""
        if not self.tallies:
            return None
        keys = self._ordered()
        named = {_name(k): self.tallies[k] for k in keys}
        tested = alt_test_results(
            named, epsilon=options.epsilon, q=options.q, min_instances=options.min_instances
        )
        reviewers = self.reviewers()
        out: dict[str, Any] = {
            "epsilon": options.epsilon,
            "fdrQ": options.q,
            "minInstances": options.min_instances,
            "reviewers": reviewers,
            "warnings": (
                [
                    f"{len(reviewers)} reviewers: with fewer than 3 each is compared with one "
                    "other only, so one reviewer's habits decide (the paper advises 3 or more)"
                ]
                if len(reviewers) < 3
                else []
            ),
        }
        for name, sub in keys:
            test = tested[_name((name, sub))]
            if sub is None:
                out[name] = {**test, **_sub_lists(name)}
            else:
                entry = {"id" if name == "status" else "type": sub, **test}
                out.setdefault(name, {**_sub_lists(name)})[_SUB[name]].append(entry)
        return out

    def baseline(self) -> dict[str, Any] | None:
        """The ``reviewerBaseline`` object, shaped like ``altTest`` (no ε, no p-values)."""
        out: dict[str, Any] = {}
        for name, sub in self._ordered():
            found = baseline_results(self.tallies[(name, sub)])
            if found is None:
                continue
            if sub is None:
                out.setdefault(name, _sub_lists(name)).update(found)
            else:
                entry = {"id" if name == "status" else "type": sub, **found}
                out.setdefault(name, _sub_lists(name))[_SUB[name]].append(entry)
        return out or None


_SUB = {"status": "requirements", "redFlags": "types"}


def _sub_lists(name: str) -> dict[str, list[Any]]:
    return {_SUB[name]: []} if name in _SUB else {}


def _name(key: tuple[str, str | None]) -> str:
    return key[0] if key[1] is None else f"{key[0]}:{key[1]}"
