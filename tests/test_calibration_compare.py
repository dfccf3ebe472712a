"""How calibration pairs two sides (pure): what is compared, what is excluded and counted,
how reviewers merge, red-flag scope, omissions."""

from __future__ import annotations

from rubric_engine.calibration.compare import calibrate_views
from rubric_engine.calibration.views import RowView, by_reviewer, view_of_labels
from rubric_engine.labels.model import Label, LabelStatus

F, V, P = LabelStatus.FOLLOWED, LabelStatus.VIOLATED, LabelStatus.PARTIAL
NA, U = LabelStatus.NOT_APPLICABLE, LabelStatus.UNSURE


def lab(row: str, req: str, status: LabelStatus, who: str = "a", **extra: object) -> Label:
    return Label.model_validate(
        {"rowId": row, "requirementId": req, "status": status, "reviewer": who, **extra}
    )


def test_not_applicable_unsure_and_one_sided_requirements_stay_outside_and_are_counted() -> None:
    ref = {"r": RowView("r", {"A": V, "B": NA, "C": U, "D": F, "E": P, "G": NA})}
    judge = {"r": RowView("r", {"A": P, "B": NA, "C": V, "D": NA, "E": F})}
    result = calibrate_views(ref, judge)
    assert result["overall"]["n"] == 2  # A (unmet/unmet) and E (unmet/met)
    assert (result["overall"]["tp"], result["overall"]["fn"]) == (1, 1)
    assert result["excluded"] == {
        "applicabilityDisagreements": 1,
        "bothNotApplicable": 1,
        "notJudgedByJudge": 1,
        "unsure": 1,
    }


def test_an_adjudication_wins_over_reviewers_and_alpha_measures_them() -> None:
    labels = [
        lab("r1", "A", V, "ann"),
        lab("r1", "A", F, "bob"),
        lab("r1", "A", F, "chair", source="adjudication"),
        lab("r2", "A", V, "ann"),
        lab("r2", "A", V, "bob"),
    ]
    merged = view_of_labels(labels, order=("ann", "bob"))
    assert merged["r1"].statuses["A"] is F and merged["r2"].statuses["A"] is V
    judge = {"r1": RowView("r1", {"A": F}), "r2": RowView("r2", {"A": V})}
    result = calibrate_views(merged, judge, reviewers=by_reviewer(labels))
    assert result["overall"]["accuracy"] == 1.0
    alpha = result["krippendorffAlpha"]
    assert alpha["reviewerCount"] == 3 and alpha["reviewers"] is not None
    assert alpha["reviewers"] < 1  # ann and bob disagree on r1


def test_a_reviewer_who_stated_no_flags_speaks_only_for_the_red_lines_they_labelled() -> None:
    ref = {
        "r": RowView("r", {"A": V}, red_flag_types=frozenset({"X"}), flag_scope=frozenset({"X"}))
    }
    judge = {"r": RowView("r", {"A": V}, red_flag_types=frozenset({"X", "Y"}))}
    flags = calibrate_views(ref, judge)["redFlags"]
    assert [t["type"] for t in flags["types"]] == ["X"]  # Y is not counted as a false flag
    assert flags["overall"]["recall"] == 1.0


def test_omission_is_a_row_where_the_judge_listed_nothing_unmet() -> None:
    ref = {"r1": RowView("r1", {"A": V, "B": F}), "r2": RowView("r2", {"A": V})}
    judge = {"r1": RowView("r1", {"A": F, "B": F}), "r2": RowView("r2", {"A": F, "C": P})}
    om = calibrate_views(ref, judge)["omission"]
    assert (om["rowsWithViolation"], om["omitted"], om["rows"]) == (2, 1, ["r1"])


def test_the_plan_flags_a_requirement_the_task_never_shows_unmet() -> None:
    ref = {f"r{i}": RowView(f"r{i}", {"A": V if i < 3 else F, "B": F}) for i in range(10)}
    judge = {f"r{i}": RowView(f"r{i}", {"A": V if i < 4 else F, "B": F}) for i in range(10)}
    result = calibrate_views(ref, judge, half_width=0.1)
    plans = {r["id"]: r["plan"] for r in result["requirements"]}
    assert plans["B"]["tooRare"] is True and plans["B"]["labelsNeeded"] is None
    assert plans["A"]["labelsNeeded"] > 10 and plans["A"]["tooRare"] is True  # 10 rows only
    assert result["plan"]["tooRare"] == ["A", "B"]
