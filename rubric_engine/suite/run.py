"""``rubric-eval ci`` as a library call: publish, score every dataset, gate it all at once.

The edge of the suite package: it publishes the suite's packs, scores each dataset through
:func:`rubric_engine.engine.score`, reads each task back with exact figures, builds the
release checklist (:mod:`rubric_engine.suite.checklist`) and records the run in
``suite-runs.jsonl`` beside the store, which is where "the last run of this suite on the main
branch" is found next time (keep the store's folder as the CI artifact).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_engine.report.gate import check_parameters, parse_threshold, slice_fields
from rubric_engine.report.model import Report
from rubric_engine.report.noise import NoiseOptions, case_checks, paired_bootstrap
from rubric_engine.report.render.junit import junit_xml
from rubric_engine.report.stored import StoredTask, diff_side, report_from_task
from rubric_engine.suite.checklist import (
    ITEMS,
    CheckLine,
    confusion_lines,
    dataset_lines,
    ordered,
    shown,
)
from rubric_engine.suite.model import Dataset, EvalSuite, dataset_thresholds, own_thresholds

HISTORY = "suite-runs.jsonl"


@dataclass
class SuiteResult:
    """A ``ci`` run: the task of each dataset and the checklist lines in order."""

    suite: str
    tasks: dict[str, str]
    lines: list[CheckLine] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(line.passed for line in self.lines)

    def junit(self) -> str:
        return junit_xml(f"rubric-eval ci {self.suite}", [x.as_gate_check() for x in self.lines])


def current_branch(folder: Path) -> str | None:
    """The CI's branch (GitHub's ``GITHUB_HEAD_REF``/``GITHUB_REF_NAME``), else git's."""
    for name in ("GITHUB_HEAD_REF", "GITHUB_REF_NAME", "CI_COMMIT_REF_NAME"):
        if os.environ.get(name):
            return os.environ[name]
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=folder, capture_output=True,
            text=True, timeout=10, check=False,
        )  # fmt: skip
    except OSError:
        return None
    return found.stdout.strip() or None if found.returncode == 0 else None


def last_run(store: Path, suite: str, branch: str) -> dict[str, str]:
    """Dataset → task of the last *passing* run of ``suite`` on ``branch`` ({} when none)."""
    history = store.parent / HISTORY
    if not history.is_file():
        return {}
    found: dict[str, str] = {}
    for line in history.read_text("utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("suite") == suite and entry.get("branch") == branch and entry.get("passed"):
            found = dict(entry["tasks"])
    return found


def _score(
    suite: EvalSuite, dataset: Dataset, on_start: Callable[[Dataset, str], None] | None
) -> str:
    from rubric_engine.engine import ScoreOptions, score

    judge = suite.judge
    options: dict[str, Any] = {
        "inputs": dataset.inputs,
        "rubric": dataset.rubric,
        "judge": dataset.judge,
        "store": suite.store,
        "out": suite.out / dataset.name,
    }
    if dataset.judge == "llm":
        options["mode"] = judge.mode
        cassettes = dataset.cassettes or judge.cassettes
        options.update({k: v for k, v in (
            ("cassettes", cassettes), ("model", judge.model), ("api_base", judge.api_base),
            ("api_key_env", judge.api_key_env), ("concurrency", judge.concurrency),
        ) if v is not None})  # fmt: skip
        options["judge_params"] = dict(judge.params)
    started = None if on_start is None else lambda task, _rows: on_start(dataset, task)
    return score(ScoreOptions(**options), on_start=started).task_id


def run_suite(
    suite: EvalSuite,
    *,
    branch: str | None = None,
    on_dataset: Callable[[Dataset, str], None] | None = None,
    on_start: Callable[[Dataset, str], None] | None = None,
) -> SuiteResult:
    """Publish the suite's packs, score every dataset, and check everything.

    Args:
        branch: the branch this run is on (for the baseline and the history); default
            :func:`current_branch`.
        on_dataset: called with each dataset and its task id once scored.
        on_start: called with each dataset and its task id once the task is stored, before
            its rows are judged (what an interrupted run names).

    Raises:
        RubricEvalError: what ``score`` or ``rubric publish`` raise (bad input: exit 2, …), or a
            threshold parameter unknown to a dataset's task (the valid ones listed).
    """
    from rubric_engine.report.run import _load
    from rubric_engine.rubric.versions import RubricRegistry, load_for_publish
    from rubric_engine.store.task_store import TaskStore

    suite.store.parent.mkdir(parents=True, exist_ok=True)
    for pack in suite.rubrics:
        loaded = load_for_publish(pack)
        with TaskStore(suite.store) as opened:
            RubricRegistry(opened).publish(pack, loaded)
    branch = branch or current_branch(Path.cwd())
    baselines = dict(last_run(suite.store, suite.name, suite.baseline.last_run_on or "")
                     if suite.baseline.last_run_on else {})  # fmt: skip
    baselines.update(suite.baseline.tasks)
    result = SuiteResult(suite.name, {})
    stored: dict[str, tuple[Dataset, StoredTask, Report]] = {}
    for dataset in suite.datasets:
        task_id = _score(suite, dataset, on_start)
        result.tasks[dataset.name] = task_id
        if on_dataset is not None:
            on_dataset(dataset, task_id)
        task = _load(suite.store, task_id)
        parsed = [parse_threshold(t) for t in [*dataset_thresholds(suite, dataset),
                                               *dataset.slices]]  # fmt: skip
        report = report_from_task(
            task, pass_score=dataset.pass_score, by=slice_fields(parsed), exact=True
        )
        check_parameters(parsed, report)
        stored[dataset.name] = (dataset, task, report)
        own = own_thresholds(suite, dataset)
        result.lines += dataset_lines(dataset.name, dataset.tier, report, parsed, own)
        result.lines += confusion_lines(dataset.name, report, dataset.costly_confusions)
    result.lines += _budget_lines(suite, stored)
    result.lines += _latency_lines(suite, stored)
    result.lines += _regression_lines(suite, stored, baselines)
    result.lines = ordered(result.lines)
    _record(suite, branch, result)
    return result


def _budget_lines(suite: EvalSuite, stored: dict[str, Any]) -> list[CheckLine]:
    if suite.budget is None:
        return []
    lines = []
    reports: list[tuple[Dataset, Report]] = [(d, r) for d, _, r in stored.values()]
    if suite.budget.cost_usd is not None:
        unknown = [d.name for d, r in reports if r.usage.cost_usd is None
                   and d.judge == "llm" and r.task.judge_mode != "replay"]  # fmt: skip
        spent = sum(r.usage.cost_usd or 0.0 for _, r in reports)
        ok = not unknown and spent <= suite.budget.cost_usd
        note = (f"cost unknown for {', '.join(unknown)} (no price for the model)" if unknown
                else "replayed calls cost nothing" if spent == 0 else "")  # fmt: skip
        lines.append(CheckLine(
            "cost", "suite: costUsd", ok, f"{spent:.4f} USD" + (f" ({note})" if note else ""),
            f"<= {suite.budget.cost_usd:g} USD",
            f"judge cost {spent:.4f} USD over {len(reports)} dataset(s), budget "
            f"{suite.budget.cost_usd:g} USD" + (f"; {note}" if note else ""),
        ))  # fmt: skip
    if suite.budget.total_tokens is not None:
        tokens = sum(r.usage.prompt_tokens + r.usage.completion_tokens for _, r in reports)
        ok = tokens <= suite.budget.total_tokens
        lines.append(CheckLine(
            "cost", "suite: totalTokens", ok, str(tokens), f"<= {suite.budget.total_tokens}",
            f"judge tokens {tokens} over {len(reports)} dataset(s), budget "
            f"{suite.budget.total_tokens}",
        ))  # fmt: skip
    return lines


def _latency_lines(suite: EvalSuite, stored: dict[str, Any]) -> list[CheckLine]:
    slo = suite.latency
    if slo is None:
        return []
    import numpy as np

    names = slo.datasets or list(stored)
    durations = [r.facts.duration_ms for n in names for r in stored[n][1].rows
                 if r.facts.duration_ms is not None]  # fmt: skip
    name = f"suite: agent duration p{slo.percentile:g}"
    if not durations:
        return [CheckLine("latency", name, False, "—", f"<= {slo.max_ms:g} ms",
                          f"no row of {', '.join(names)} records a trace duration (durationMs), "
                          "so the SLO cannot pass")]  # fmt: skip
    value = float(np.percentile(durations, slo.percentile))
    return [CheckLine(
        "latency", name, value <= slo.max_ms, f"{value:.0f} ms", f"<= {slo.max_ms:g} ms",
        f"agent duration p{slo.percentile:g} = {value:.0f} ms over {len(durations)} row(s) of "
        f"{', '.join(names)}; SLO {slo.max_ms:g} ms",
    )]  # fmt: skip


def _regression_lines(
    suite: EvalSuite, stored: dict[str, Any], baselines: dict[str, str]
) -> list[CheckLine]:
    from rubric_engine.report.diff import diff_tasks
    from rubric_engine.report.gate import check_no_regression
    from rubric_engine.report.noise import tolerant_checks
    from rubric_engine.report.run import _load

    if not baselines and suite.baseline.last_run_on is None:
        return []
    rule, base_cfg = suite.baseline.rule, suite.baseline
    noise = NoiseOptions(base_cfg.alpha, base_cfg.seed, base_cfg.resamples)
    lines = []
    for name, (dataset, task, _) in stored.items():
        baseline = baselines.get(name)
        if baseline is None:
            where = f"on {base_cfg.last_run_on}" if base_cfg.last_run_on else ""
            lines.append(CheckLine(
                "noRegression", f"{name}: noRegression", True, "no baseline", "0 regressions",
                f"{name}: no earlier passing run of suite {suite.name} {where} to compare with "
                "(the first run sets the baseline)",
            ))  # fmt: skip
            continue
        base = diff_side(_load(suite.store, baseline), pass_score=dataset.pass_score)
        cur = diff_side(task, pass_score=dataset.pass_score)
        diff = diff_tasks(base, cur)
        if rule == "tolerant":
            checks = tolerant_checks(paired_bootstrap(base, cur, noise), baseline, noise.alpha)
            checks += case_checks(diff, None)
        else:
            checks = check_no_regression(diff)
        failed = [c for c in checks if not c.passed]
        lines.append(CheckLine(
            "noRegression", f"{name}: noRegression ({rule})", not failed,
            f"{len(failed)} regression(s)", f"0 ({rule} rule vs task {baseline})",
            "; ".join(c.message for c in (failed or checks[:1])),
        ))  # fmt: skip
    return lines


def _record(suite: EvalSuite, branch: str | None, result: SuiteResult) -> None:
    entry = {
        "suite": suite.name,
        "branch": branch,
        "commit": os.environ.get("GITHUB_SHA"),
        "finishedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "passed": result.passed,
        "tasks": result.tasks,
    }
    with (suite.store.parent / HISTORY).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def checklist_rows(result: SuiteResult) -> list[list[str]]:
    """The checklist as table rows (header first): mark, check, figure, threshold."""
    rows = [["", "check", "figure", "threshold"]]
    item = None
    for line in result.lines:
        if line.item != item:
            item = line.item
            rows.append(["", f"[{ITEMS.get(item, item)}]", "", ""])
        rows.append(["✓" if line.passed else "✗", line.name, line.figure, line.threshold])
    return rows


def checklist_markdown(result: SuiteResult, reports: Path | None = None) -> str:
    """The checklist as GitHub-flavoured Markdown, for a CI step summary or a pull-request
    comment: the verdict line, the failed regressions, then every check in a table and each
    dataset's task (with its ``report.html`` under ``reports`` when given)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    failed = [x for x in result.lines if not x.passed]
    verdict = "failed" if failed else "passed"
    lines = [
        f"## rubric-eval ci: {cell(result.suite)} {verdict}",
        "",
        f"{len(result.lines) - len(failed)} of {len(result.lines)} check(s) hold"
        + (": ✗ " + ", ".join(cell(x.name) for x in failed) if failed else "."),
        "",
    ]
    regressions = [x for x in failed if x.item == "noRegression"]
    if regressions:
        lines += ["### Regressions", ""]
        lines += [f"- **{cell(x.name)}**: {cell(x.message)}" for x in regressions]
        lines.append("")
    lines += ["| | check | figure | threshold |", "|---|---|---|---|"]
    lines += [
        f"| {'✓' if x.passed else '✗'} | {cell(x.name)} | {cell(x.figure)} | {cell(x.threshold)} |"
        for x in result.lines
    ]
    lines += ["", "### Tasks", ""]
    for name, task in result.tasks.items():
        where = f" — `{reports / name / 'report.html'}`" if reports is not None else ""
        lines.append(f"- {cell(name)}: task `{task}`{where}")
    return "\n".join(lines) + "\n"


__all__ = [
    "HISTORY",
    "SuiteResult",
    "checklist_markdown",
    "checklist_rows",
    "last_run",
    "run_suite",
    "shown",
]
