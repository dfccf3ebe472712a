"""Label sets made elsewhere, turned into label files (docs/calibration.md).

- **LLM-Rubric** (Hashemi et al., ACL 2024; ``microsoft/LLM-Rubric`` ``data/real_data``): the
  human rating of one question per dialogue (a row-level ``score``; 0 = the question did not
  apply, skipped) and the gpt-3.5 judge's answer distribution for the same question, read as
  the expected answer (rounded to the nearest whole point, halves up: a label's score is a
  whole point), the argmax or a sample. ``sample`` repeats the repository's baseline
  script: probabilities that sum to less than 1 have the shortfall spread over the first three
  answers, and one answer per line of the whole file is drawn, in file order, with numpy's
  legacy generator seeded 4076609 (its default), so the published ``sample_llm`` figures
  come out exactly.
- **tau2-bench** results files: each simulation's recorded LLM-judge verdict per
  natural-language assertion (``reward_info.nl_assertions[].met``) as a requirement label on
  the case-level requirement the engine derives from that assertion's text (``CASE_EXPECTED_…``,
  :func:`rubric_engine.rubric.case_level.case_requirements`), rowId as the tau2 reader gives it.
- **HealthBench** graded runs: the grader's ``criteria_met`` per rubric item; a criterion with
  positive points is FOLLOWED when met, one with negative points (an undesirable behaviour) is
  VIOLATED when met. rowId = ``prompt_id:completion_id``, requirementId = ``HB_`` + 8 hex digits
  of the criterion text's SHA-256.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from rubric_engine.errors import InputError
from rubric_engine.labels.model import Label, LabelStatus
from rubric_engine.rubric.case_level import case_requirements

__all__ = ["healthbench_labels", "llm_rubric_labels", "tau2_labels"]

LLM_RUBRIC_SEED = 4076609  # compute_machine_baseline.py's default
_ANSWERS = ("answer1_prob", "answer2_prob", "answer3_prob", "answer4_prob")


def _tsv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle, delimiter="\t"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from exc


def expected_point(expected: float) -> float:
    """The judge's expected answer as a label score: the nearest whole point, halves rounded up
    (a label's score is a whole point; 2.5 → 3)."""
    return float(math.floor(expected + 0.5))


def llm_rubric_labels(
    folder: Path,
    *,
    question: str = "Q0",
    answer: Literal["expected", "argmax", "sample"] = "expected",
    seed: int = LLM_RUBRIC_SEED,
) -> tuple[list[Label], list[Label]]:
    """(human labels, judge labels) of one LLM-Rubric question, one row-level score each.

    Raises:
        InputError: the folder lacks the two TSV files, or ``question`` is not Q0–Q8.
    """
    import numpy as np

    humans = _tsv(folder / "human_judges_real_convs_FIXED_ANON.tsv")
    machine = _tsv(folder / "gpt-3.5-turbo-16k_real_evaluations_FIXED.tsv")
    valid = [f"Q{i}" for i in range(9)]
    if question not in valid:
        raise InputError(f"--question {question!r} is not valid; valid: {', '.join(valid)}")
    rng = np.random.RandomState(seed)
    judged: dict[str, float] = {}
    exact: dict[str, float] = {}  # the expected answer before rounding
    for row in machine:
        probs = np.array([float(row[c]) for c in _ANSWERS])
        if probs.sum() < 1.0:
            probs[:3] += (1.0 - probs.sum()) / 3
        drawn = float(rng.choice([1.0, 2.0, 3.0, 4.0], p=probs))  # one draw per line, in order
        if row["criterion"] != question:
            continue
        exact[row["text_id"]] = float(probs @ np.array([1.0, 2.0, 3.0, 4.0]))
        value = {
            "expected": expected_point(exact[row["text_id"]]),
            "argmax": float(probs.argmax() + 1),
            "sample": drawn,
        }[answer]
        judged[row["text_id"]] = value
    human_labels, judge_labels = [], []
    for row in humans:
        rating = float(row[question])
        if rating not in (1.0, 2.0, 3.0, 4.0) or row["text_id"] not in judged:
            continue
        human_labels.append(
            Label(
                row_id=row["text_id"],
                score=rating,
                reviewer=f"annotator-{row['annotator_id']}",
                role="human judge",
                reason=f"LLM-Rubric {question}",
            )
        )
        judge_labels.append(
            Label(
                row_id=row["text_id"],
                score=judged[row["text_id"]],
                reviewer="gpt-3.5-turbo-16k",
                role="judge",
                reason=f"LLM-Rubric {question}, {answer} answer",
                metadata={"expectedAnswer": exact[row["text_id"]]} if answer == "expected" else {},
            )
        )
    return human_labels, judge_labels


def _load_json(path: Path) -> Any:
    if path.is_dir():
        raise InputError(f"{path} is a folder; give the results file inside it (a .json file)")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: cannot read it as JSON ({exc})") from exc


def tau2_labels(path: Path, reviewer: str = "tau2-nl-assertion-judge") -> list[Label]:
    """The recorded nl-assertion verdicts of a tau2 results file as requirement labels.

    Raises:
        InputError: not a tau2 ``{tasks, simulations}`` file.
    """
    data = _load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise InputError(f"{path}: not a tau2-bench results file (no 'simulations' list)")
    name = path.name.lower()
    domain = "airline" if "airline" in name else "retail" if "retail" in name else "tau2"
    trials = Counter(sim.get("task_id") for sim in data["simulations"])
    out = []
    for sim in data["simulations"]:
        tid = sim.get("task_id")
        row_id = f"{domain}-{tid}" + (f"-t{sim.get('trial', 0)}" if trials[tid] > 1 else "")
        for verdict in (sim.get("reward_info") or {}).get("nl_assertions") or []:
            text = verdict.get("nl_assertion")
            if not text:
                continue
            (requirement,) = case_requirements((text,), ())
            out.append(
                Label(
                    row_id=row_id,
                    requirement_id=requirement.id,
                    status=LabelStatus.FOLLOWED if verdict.get("met") else LabelStatus.VIOLATED,
                    reviewer=reviewer,
                    role="judge",
                    reason=verdict.get("justification"),
                    saw_judge_verdict=False,
                )
            )
    return out


def healthbench_requirement_id(criterion: str) -> str:
    """``HB_`` + the first 8 hex digits (upper case) of the criterion's SHA-256."""
    return "HB_" + hashlib.sha256(criterion.strip().encode("utf-8")).hexdigest()[:8].upper()


def healthbench_labels(path: Path, reviewer: str = "healthbench-grader") -> list[Label]:
    """The grader's verdicts of a HealthBench graded-runs JSONL file as requirement labels.

    Raises:
        InputError: a line is not JSON or has no ``rubric_items``.
    """
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items = row["rubric_items"]
        except (ValueError, KeyError) as exc:
            raise InputError(f"{path}:{number}: not a graded HealthBench row ({exc})") from exc
        row_id = f"{row['prompt_id']}:{row.get('completion_id') or number}"
        for item in items:
            met, points = bool(item["criteria_met"]), float(item["points"])
            unmet = (not met) if points > 0 else met
            out.append(
                Label(
                    row_id=row_id,
                    requirement_id=healthbench_requirement_id(item["criterion"]),
                    status=LabelStatus.VIOLATED if unmet else LabelStatus.FOLLOWED,
                    reviewer=reviewer,
                    role="judge",
                    reason=item.get("explanation"),
                )
            )
    return out
