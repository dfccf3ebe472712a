"""The calibration of a judge against reviewers' labels, counted one row at a time (pure given
the seed).

:class:`CalibrationTally` is fed every judged row of the task (:meth:`~CalibrationTally.observe`,
for the judge's observed violation rates) and every labelled row (:meth:`~CalibrationTally.add`,
a :class:`~.views.RowUnit`); :meth:`~CalibrationTally.result` gives the JSON-ready calibration
(docs/calibration.md "Figures"). It keeps counters, tables of counts and a few numbers per
labelled row, never the rows or the labels, so a task of a million rows calibrates in the
memory of a small one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rubric_engine.calibration.agreement import AlphaTally
from rubric_engine.calibration.alt_fields import AltTestOptions, FieldTally
from rubric_engine.calibration.binary import Confusion, ratio
from rubric_engine.calibration.blocks import PairTally, block, unmet
from rubric_engine.calibration.correction import MIN_PAIRS, labels_needed, rogan_gladen
from rubric_engine.calibration.leniency import LengthTally
from rubric_engine.calibration.row_fields import FlagTally, IntentTally, OmissionTally, ScoreTally
from rubric_engine.calibration.views import RowUnit, RowView, natural_key
from rubric_engine.rubric.model import EvalRubric

__all__ = ["CalibrationTally"]


class CalibrationTally:
    """Counts of one calibration (see the module docstring).

    Args:
        rubric: requirement categories, red lines, intent order and score scale when known.
        half_width: when given, add the label-count plan for intervals of ±half_width.
        seed: the bootstrap's seed.
        alt_test: the alternative annotator test's parameters.
    """

    def __init__(
        self,
        rubric: EvalRubric | None = None,
        *,
        half_width: float | None = None,
        seed: int = 0,
        alt_test: AltTestOptions | None = None,
    ) -> None:
        self.rubric = rubric
        self.half_width = half_width
        self.seed = seed
        self.alt_options = alt_test or AltTestOptions()
        self.reqs = rubric.requirements_by_id if rubric is not None else {}
        types = list(rubric.red_flag_types) if rubric is not None else []
        scale = (rubric.score_scale.min, rubric.score_scale.max) if rubric is not None else None
        self.pairs = PairTally(self._category)
        self.flags = FlagTally(types)
        self.intents = IntentTally()
        self.scores = ScoreTally(scale)
        self.omission = OmissionTally()
        self.fields = FieldTally(types)
        self.length = LengthTally()
        self.alpha = {
            "reviewers": AlphaTally(),
            "withJudge": AlphaTally(),
            "adjudicated": AlphaTally(),
        }
        self.reviewer_names: set[str] = set()
        self.adjudicator_names: set[str] = set()
        self.observed: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # unmet, applicable
        self.judged = 0
        self.labelled = 0
        self.no_verdict = 0

    def _category(self, rid: str) -> str:
        if rid in self.reqs:
            return str(self.reqs[rid].category)
        return "CASE" if rid.startswith("CASE_") else "(unknown)"  # case-level IDs

    def observe(self, judge: RowView) -> None:
        """One judged row of the whole task (labelled or not)."""
        self.judged += 1
        for rid, status in judge.statuses.items():
            found = unmet(status)
            if found is not None:
                self.observed[rid][0] += int(found)
                self.observed[rid][1] += 1

    def add(self, unit: RowUnit) -> None:
        """One labelled row."""
        self.labelled += 1
        self.reviewer_names.update(unit.reviewers)
        self.adjudicator_names.update(unit.adjudicators)
        self._add_alpha(unit)
        if unit.judge is None:
            self.no_verdict += 1
            return
        ref, judge = unit.reference, unit.judge
        self.pairs.add(ref, judge)
        self.flags.add(ref, judge)
        self.intents.add(ref, judge)
        self.scores.add(ref, judge)
        self.omission.add(ref, judge)
        self.fields.add(unit.reviewers, judge)
        self.length.add(unit.answer_chars, unit.reviewers, judge)

    def _add_alpha(self, unit: RowUnit) -> None:
        """Krippendorff's α over (row, requirement) units of the reviewers' met/unmet values:
        among reviewers, with the judge as one more rater, and with the adjudicators."""
        rids = dict.fromkeys(rid for v in unit.reviewers.values() for rid in v.statuses)
        for rid in rids:
            values: list[float | str] = [
                float(u)
                for v in unit.reviewers.values()
                if (u := unmet(v.statuses.get(rid))) is not None
            ]
            self.alpha["reviewers"].add(values)
            theirs = None if unit.judge is None else unmet(unit.judge.statuses.get(rid))
            self.alpha["withJudge"].add([*values, *([float(theirs)] if theirs is not None else [])])
            decided = [
                float(u)
                for v in unit.adjudicators.values()
                if (u := unmet(v.statuses.get(rid))) is not None
            ]
            self.alpha["adjudicated"].add([*values, *decided])

    def _requirements(self) -> list[dict[str, Any]]:
        by_req = self.pairs.requirements
        order = [*self.reqs, *sorted(set(by_req) - set(self.reqs), key=natural_key)]
        out = []
        for rid in order:
            if rid not in by_req and rid not in self.observed:
                continue
            figures = block(by_req.get(rid, Confusion()), self.seed)
            unmet_n, applicable = self.observed.get(rid, (0, 0))
            rate = ratio(unmet_n, applicable)
            entry = {
                "id": rid,
                "category": self._category(rid),
                "critical": bool(self.reqs[rid].critical) if rid in self.reqs else None,
                **figures,
                "tooFew": figures["n"] < MIN_PAIRS,
                "observedViolationRate": rate,
                "correctedViolationRate": None
                if rate is None
                else rogan_gladen(rate, figures["recallUnmet"], figures["tnr"]),
            }
            if self.half_width is not None:
                entry["plan"] = self._plan(rate, figures, applicable)
            out.append(entry)
        return out

    def _plan(self, rate: float | None, figures: dict[str, Any], applicable: int) -> dict[str, Any]:
        assert self.half_width is not None
        plan: dict[str, Any] = labels_needed(
            rate, self.half_width, tpr=figures["recallUnmet"], tnr=figures["tnr"]
        )
        needed = plan["labelsNeeded"]
        plan["available"] = applicable
        plan["tooRare"] = bool(plan["tooRare"] or (isinstance(needed, int) and needed > applicable))
        plan["labelled"] = figures["n"]
        return plan

    def result(self) -> dict[str, Any]:
        """The calibration (docs/calibration.md "Figures"), JSON-ready."""
        overall = block(self.pairs.overall, self.seed)
        overall["tooFew"] = overall["n"] < MIN_PAIRS
        requirements = self._requirements()
        total_unmet = sum(a for a, _ in self.observed.values())
        total_applicable = sum(b for _, b in self.observed.values())
        rate = ratio(total_unmet, total_applicable)
        intent_order = list(self.rubric.intents_by_key) if self.rubric is not None else []
        by_intent = self.pairs.intents
        excluded = dict(self.pairs.excluded)
        if self.no_verdict:
            excluded["noVerdictToCompare"] = self.no_verdict
        result: dict[str, Any] = {
            "seed": self.seed,
            "rows": {
                "reference": self.labelled,
                "judge": self.judged,
                "compared": self.pairs.rows_compared,
            },
            "overall": overall,
            "excluded": dict(sorted(excluded.items())),
            "requirements": requirements,
            "intents": [
                {"intentKey": k, **block(by_intent[k], self.seed, boot=False)}
                for k in [*intent_order, *sorted(set(by_intent) - set(intent_order))]
                if k in by_intent
            ],
            "categories": [
                {"category": k, **block(v, self.seed, boot=False)}
                for k, v in sorted(self.pairs.categories.items())
            ],
            "redFlags": self.flags.result(),
            "intentAgreement": self.intents.result(),
            "scores": self.scores.result(),
            "omission": self.omission.result(),
            "violationRate": {
                "observed": rate,
                "corrected": None
                if rate is None
                else rogan_gladen(rate, overall["recallUnmet"], overall["tnr"]),
            },
            "krippendorffAlpha": self._alpha(),
        }
        alt = self.fields.alt_test(self.alt_options)
        if alt is not None:
            for entry in alt.get("status", {}).get("requirements", ()):
                entry["critical"] = (
                    bool(self.reqs[entry["id"]].critical) if entry["id"] in self.reqs else None
                )
            result["altTest"] = alt
        baseline = self.fields.baseline()
        if baseline is not None:
            result["reviewerBaseline"] = baseline
        length = self.length.result()
        if length is not None:
            result["lengthLeniency"] = length
        if self.half_width is not None:
            result["plan"] = {
                "halfWidth": self.half_width,
                "level": 0.95,
                "tooRare": [r["id"] for r in requirements if r["plan"]["tooRare"]],
            }
        return result

    def _alpha(self) -> dict[str, Any]:
        reviewers = len(self.reviewer_names)
        return {
            "reviewers": self.alpha["reviewers"].alpha() if reviewers >= 2 else None,
            "withJudge": self.alpha["withJudge"].alpha() if reviewers else None,
            "withAdjudication": self.alpha["adjudicated"].alpha()
            if reviewers and self.adjudicator_names
            else None,
            "reviewerCount": reviewers,
            "adjudicatorCount": len(self.adjudicator_names),
        }
