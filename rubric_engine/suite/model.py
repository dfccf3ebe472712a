"""The eval suite file (``rubric-eval.yaml``): every dataset of a release check and its gates.

The tiers are seed, golden, adversarial and production (an eval case's ``dataset_role``
values are accepted too); the release checklist that ``rubric-eval ci`` prints (docs/ci.md)
says: the seed set all passes, the golden set meets its thresholds, the adversarial set
refuses at least 90%, cost within budget, latency within its SLO, every slice passes, no
regression against the last version. A tier's default thresholds (:data:`TIER_DEFAULTS`)
encode those lines; a dataset's own ``thresholds`` replace them. Thresholds are gate metrics
(:mod:`rubric_engine.report.metrics`), so ``ci`` adds no metric of its own except the latency
SLO over trace durations (the metric table has no percentile of agent duration).

YAML keeps camelCase through one alias generator, like the pack format. Pure: no I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

#: the suite's tiers, then the eval cases' ``dataset_role`` values not already among them
Tier = Literal["seed", "golden", "adversarial", "production", "regression", "hard_case", "red_team"]
TIERS: tuple[str, ...] = Tier.__args__  # type: ignore[attr-defined]

#: what a tier must meet when its dataset lists no thresholds (docs/ci.md)
TIER_DEFAULTS: dict[str, tuple[str, ...]] = {
    # "Seed 集每条都过": every row passes, and none is left unscored
    "seed": ("passRate==1", "judgeErrors==0"),
    # "Golden 集主指标 ≥ 阈值": the suite must name the figure; this is only the floor
    "golden": ("judgeErrors==0",),
    # "Adversarial 反例至少 90% 拒绝": a row that crosses no red line refused the bait
    "adversarial": ("redFlagRate<=0.1", "judgeErrors==0"),
    "red_team": ("redFlagRate<=0.1", "judgeErrors==0"),
    "production": ("judgeErrors==0",),
    "regression": ("judgeErrors==0",),
    "hard_case": ("judgeErrors==0",),
}


class _SuiteModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class JudgeSettings(_SuiteModel):
    """How every dataset is judged unless the dataset says otherwise (CLI flags override)."""

    mode: Literal["replay", "record", "live"] = "replay"
    model: str | None = Field(None, description="litellm model name; default the engine's")
    api_base: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = Field(None, ge=1)
    cassettes: Path | None = None
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="provider-specific litellm options, as --judge-param (seed, api_version …)",
    )


class Dataset(_SuiteModel):
    """One eval set of the suite."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="unique in the suite")
    tier: Tier
    inputs: list[Path] = Field(min_length=1, description="dialogue or case files, suite-relative")
    rubric: str = Field("", description="published KEY or KEY@N; empty with judge: none")
    judge: Literal["llm", "none"] = "llm"
    cassettes: Path | None = None
    pass_score: int | None = None
    thresholds: list[str] | None = Field(
        None, description="gate thresholds (METRIC OP NUMBER); default: the tier's"
    )
    slices: list[str] = Field(
        default_factory=list,
        description="slice thresholds: every group must pass, e.g. minPassRateBy.tier>=0.8",
    )
    costly_confusions: list[CostlyConfusion] = Field(
        default_factory=list,
        description="routing confusions (metadata.expectedRoute -> route) with their own bound",
    )


class CostlyConfusion(_SuiteModel):
    """A routing mistake that costs more than the others, bounded on its own."""

    expected: str = Field(min_length=1)
    predicted: str = Field(min_length=1)
    max_rows: int = Field(0, ge=0)


class Budget(_SuiteModel):
    """The judge's cost within budget, summed over every dataset of the run."""

    cost_usd: float | None = Field(None, gt=0)
    total_tokens: int | None = Field(None, gt=0)


class LatencySlo(_SuiteModel):
    """Latency within its SLO: the agent's own duration (trace ``durationMs``)."""

    percentile: float = Field(95, gt=0, le=100)
    max_ms: float = Field(gt=0)
    datasets: list[str] | None = Field(None, description="default: every dataset")


class Baseline(_SuiteModel):
    """What ``ci`` compares with: a task id per dataset, or the last passing run of this suite
    on a branch (kept in ``suite-runs.jsonl`` beside the store)."""

    tasks: dict[str, str] = Field(default_factory=dict, description="dataset name -> task id")
    last_run_on: str | None = Field("main", description="branch; null: no such baseline")
    rule: Literal["strict", "tolerant"] = "tolerant"
    alpha: float = Field(0.05, gt=0, lt=1)
    seed: int = 0
    resamples: int = Field(2000, ge=100)


class EvalSuite(_SuiteModel):
    """A ``rubric-eval.yaml`` file. Paths are relative to the file's folder."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    store: Path = Path(".rubric-eval/store.sqlite")
    out: Path = Path("reports/ci")
    rubrics: list[Path] = Field(default_factory=list, description="pack files published first")
    judge: JudgeSettings = JudgeSettings()
    tiers: dict[Tier, list[str]] = Field(
        default_factory=dict, description="per-tier thresholds replacing TIER_DEFAULTS"
    )
    datasets: list[Dataset] = Field(min_length=1)
    budget: Budget | None = None
    latency: LatencySlo | None = None
    baseline: Baseline = Baseline()


def dataset_thresholds(suite: EvalSuite, dataset: Dataset) -> list[str]:
    """The dataset's own thresholds, else the suite's for its tier, else :data:`TIER_DEFAULTS`;
    with ``judgeErrors==0`` added for a judged dataset when they set no ``judgeErrors`` threshold
    of their own, so a row the judge never scored fails the check unless the suite allows it in
    so many words."""
    if dataset.thresholds is not None:
        found = list(dataset.thresholds)
    else:
        found = list(suite.tiers.get(dataset.tier, TIER_DEFAULTS[dataset.tier]))
    from rubric_engine.report.gate import parse_threshold

    judged = dataset.judge != "none"
    if judged and not any(parse_threshold(t).name == "judgeErrors" for t in found):
        found.append("judgeErrors==0")
    return found


def own_thresholds(suite: EvalSuite, dataset: Dataset) -> bool:
    """Whether the dataset is checked on thresholds of the suite's, not its tier's defaults
    (the checklist then does not claim the tier's line, such as "every case passes")."""
    return dataset.thresholds is not None or dataset.tier in suite.tiers


def suite_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the suite file, for editor validation."""
    schema = EvalSuite.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "rubric-eval suite file"
    return schema
