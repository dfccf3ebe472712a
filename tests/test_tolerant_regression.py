"""The tolerant no-regression rule on the demo regression pair (``cassettes-worse/``): the
strict rule fails on every REGRESSION item, the tolerant one flags the large drop (mean score,
six rows re-judged lower) and lets each single-row move pass; its printed intervals match an
independent paired bootstrap written here with numpy from ``rows.jsonl`` and the same seed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.engine import ScoreOptions, score
from tests.conftest import CASES, CASSETTES, ROOT, RUBRICS

runner = CliRunner()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, Path, Path]:
    tmp = tmp_path_factory.mktemp("tolerant")
    store = tmp / "s.sqlite"
    assert runner.invoke(app, ["rubric", "publish", str(RUBRICS / "health_cs.yaml"),
                               "--store", str(store)]).exit_code == 0  # fmt: skip
    ids = []
    for name, cassettes in (("base", CASSETTES), ("worse", ROOT / "cassettes-worse")):
        result = score(
            ScoreOptions(inputs=[CASES / "health_consult_zh.jsonl"], rubric="health_cs",
                         store=store, out=tmp / name, cassettes=cassettes)
        )  # fmt: skip
        ids.append(result.task_id)
    return store, ids[0], ids[1], tmp / "base" / "rows.jsonl", tmp / "worse" / "rows.jsonl"


def gate(store: Path, base: str, cur: str, *extra: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["gate", cur, "--store", str(store), "--baseline", base, "--no-regression", *extra]
    )
    return result.exit_code, result.output


def test_strict_fails_as_before_tolerant_flags_only_the_large_drop(
    pair: tuple[Path, str, str, Path, Path],
) -> None:
    store, base, cur, _, _ = pair
    code, out = gate(store, base, cur)
    # 17 regressions since main's critical PARTIAL = VIOLATED rule lowered the baseline's scores
    assert code == 7 and "gate failed: 1 of 18 check(s) hold" in out
    # that rule also made the mean-score drop 0.19 (was 0.31): a minimum effect of 0.15 for it
    code, out = gate(
        store, base, cur, "--regression-rule", "tolerant", "--min-effect", "score=0.15"
    )
    assert code == 7, out
    failing = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(failing) == 1 and "meanScore 1.6923 → 1.5000" in failing[0], out
    # one more row with a red flag, one row's questions card: within noise, they pass
    # (medgpt-42's SAFETY_OMISSION is now in the baseline too: critical PARTIAL = VIOLATED)
    assert re.search(r"PASS .*redFlags\.CARD_VIOLATION .*below the minimum effect", out)
    assert re.search(r"PASS .*passRate 0\.0385 → 0\.0000", out)
    assert "11 case regression(s) in 4 row(s)" in out and "not counted" in out
    # a larger minimum effect for scores lets the mean-score drop pass too
    code, out = gate(store, base, cur, "--regression-rule", "tolerant", "--min-effect", "score=0.5")
    assert code == 0, out


def _independent(base_rows: Path, cur_rows: Path, seed: int, b_count: int) -> tuple[float, float]:
    """Paired bootstrap of the mean final score, from the rows files alone."""

    def scores(path: Path) -> dict[str, float]:
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
        return {r["rowId"]: float(r["finalScore"]) for r in rows}

    b, c = scores(base_rows), scores(cur_rows)
    ids = list(c)
    bv, cv = np.array([b[i] for i in ids]), np.array([c[i] for i in ids])
    idx = np.random.default_rng(seed).integers(0, len(ids), size=(b_count, len(ids)))
    boot = cv[idx].mean(axis=1) - bv[idx].mean(axis=1)
    low, high = np.quantile(boot, [0.025, 0.975])
    return float(low), float(high)


@pytest.mark.parametrize("seed", [0, 7])
def test_printed_interval_matches_an_independent_bootstrap(
    pair: tuple[Path, str, str, Path, Path], seed: int
) -> None:
    store, base, cur, base_rows, cur_rows = pair
    code, out = gate(store, base, cur, "--regression-rule", "tolerant", "--bootstrap-seed",
                     str(seed), "--resamples", "3000", "--min-effect", "score=0.15")  # fmt: skip
    assert code == 7, out
    found = re.search(r"meanScore .*interval \[([-+.\d]+), ([-+.\d]+)\]", out)
    assert found, out
    low, high = _independent(base_rows, cur_rows, seed, 3000)
    assert (float(found.group(1)), float(found.group(2))) == (round(low, 4), round(high, 4))


def test_tolerant_options_are_checked(pair: tuple[Path, str, str, Path, Path]) -> None:
    store, base, cur, _, _ = pair
    code, out = gate(store, base, cur, "--regression-rule", "lenient")
    assert code == 2 and "strict or tolerant" in out
    code, out = gate(store, base, cur, "--regression-rule", "tolerant", "--alpha", "1.5")
    assert code == 2 and "--alpha" in out
    code, out = gate(store, base, cur, "--regression-rule", "tolerant", "--min-effect", "x")
    assert code == 2 and "NAME=DROP" in out
    code, out = gate(store, base, cur, "--confirm-with", base)
    assert code == 2 and "tolerant" in out


def test_case_regressions_count_when_a_repeat_run_confirms_them(
    pair: tuple[Path, str, str, Path, Path],
) -> None:
    store, base, cur, _, _ = pair
    # the worse task itself as its own repeat: every case regression holds
    code, out = gate(store, base, cur, "--regression-rule", "tolerant", "--confirm-with", cur,
                     "--min-effect", "score=0.5")  # fmt: skip
    assert code == 7 and "medgpt-24" in out and out.count("held on the repeat run") == 11
    assert "held on the repeat run" in out
    # the baseline as the repeat: none holds, all are noise
    code, out = gate(store, base, cur, "--regression-rule", "tolerant", "--confirm-with", base,
                     "--min-effect", "score=0.5")  # fmt: skip
    assert code == 0 and "did not hold on the repeat run" in out, out
