"""Router / classification metrics (docs/ci.md): rows with ``metadata.expectedRoute`` and
the agent's ``route`` give per-class precision/recall/F1, macro F1 and the confusion pairs;
gate metrics ``router.macroF1`` and ``router.recall.<CLASS>``; a suite bounds a costly pair.
The figures are checked against scikit-learn's definitions computed by hand here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubric_engine.cli import app
from rubric_engine.report.outcome import EXACT
from rubric_engine.report.router import router_section

runner = CliRunner()
ROUTES = [  # (expected, predicted)
    ("claim_intake", "claim_intake"), ("claim_intake", "general_query"),
    ("claim_intake", "claim_intake"), ("general_query", "general_query"),
    ("general_query", "claim_intake"), ("general_query", "general_query"),
    ("billing", "billing"), ("billing", None),
]  # fmt: skip


def test_per_class_figures_and_macro_f1() -> None:
    meta = [{"expectedRoute": t, "route": p} for t, p in ROUTES] + [{"other": 1}]
    section = router_section(meta, EXACT)
    assert section is not None and section.rows == 8
    by = {c.label: c for c in section.classes}
    # claim_intake: tp 2, predicted 3, expected 3 -> p 2/3, r 2/3, f1 2/3
    assert by["claim_intake"].precision == pytest.approx(2 / 3)
    assert by["claim_intake"].recall == pytest.approx(2 / 3)
    # billing: tp 1, predicted 1, expected 2 -> p 1, r 0.5, f1 2/3
    assert (by["billing"].precision, by["billing"].recall) == (1.0, 0.5)
    assert section.macro_f1 == pytest.approx((2 / 3 + 2 / 3 + 2 / 3) / 3)
    assert section.accuracy == pytest.approx(5 / 8)
    pairs = [(c.expected, c.predicted, c.rows) for c in section.confusions]
    assert ("claim_intake", "general_query", 1) in pairs and ("billing", "(none)", 1) in pairs
    assert router_section([{"x": 1}], EXACT) is None  # no section, report bytes unchanged


@pytest.fixture
def routed(tmp_path: Path) -> Path:
    path = tmp_path / "routed.jsonl"
    rows = [
        {"rowId": f"r{i}", "messages": [{"role": "user", "content": "我的车出事故了"},
                                        {"role": "assistant", "content": "好的"}],
         "expected": [{"type": "must_not_contain", "keywords": ["错误"]}],
         "metadata": {"expectedRoute": t, **({"route": p} if p else {})}}
        for i, (t, p) in enumerate(ROUTES)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def test_gate_and_suite_read_the_router_figures(routed: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    result = runner.invoke(app, ["score", str(routed), "--judge", "none", "--store", str(store),
                                 "--out", str(tmp_path / "o")])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "o" / "report.json").read_text("utf-8"))
    assert report["router"]["macroF1"] == round(2 / 3, 4)
    task = result.output.split("task id: ")[1].split()[0]
    gate = runner.invoke(app, ["gate", task, "--store", str(store), "-t", "router.macroF1>=0.6",
                               "-t", "router.recall.billing>=0.8"])  # fmt: skip
    assert gate.exit_code == 7 and "router.recall.billing>=0.8 fails" in gate.output
    assert "router.macroF1>=0.6 holds" in gate.output
    suite = tmp_path / "rubric-eval.yaml"
    suite.write_text(f"""name: routing
store: {store}
datasets:
  - name: intents
    tier: golden
    inputs: ["{routed}"]
    judge: none
    thresholds: ["router.macroF1>=0.6"]
    costlyConfusions:
      - {{expected: claim_intake, predicted: general_query, maxRows: 0}}
      - {{expected: general_query, predicted: claim_intake, maxRows: 1}}
""", encoding="utf-8")  # fmt: skip
    ci = runner.invoke(app, ["ci", "--suite", str(suite), "--out", str(tmp_path / "ci")])
    assert ci.exit_code == 7, ci.output
    assert re.search(
        r"✗  intents: confusion claim_intake → general_query +1 row\(s\) +<= 0", ci.output
    )
    assert "✓  intents: confusion general_query → claim_intake" in ci.output
    assert "[routing: macro F1, per-class recall, costly confusions]" in ci.output
