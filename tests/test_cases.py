"""Eval cases in the shapes of docs/cases.md, ``--judge none``, and more input adapters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.engine import ScoreOptions, score
from rubric_engine.engine.task import rules_only_rubric
from rubric_engine.errors import DatasetError
from rubric_engine.judge.prompt import render_dialogue
from rubric_engine.rubric.case_level import case_requirements
from rubric_engine.rules.evidence import evidence_from_row
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data"


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def rules_only(tmp_path: Path, *inputs: Path) -> dict[str, Any]:
    result = score(
        ScoreOptions(
            inputs=list(inputs),
            judge="none",
            store=tmp_path / "store.sqlite",
            out=tmp_path / "out",
        )
    )
    return result.report


# -- diagnosis cases with trace fixtures, no judge ---------------------------------------------


def fixture(answer: str, verdict: str | None, summary: list[str], tools: list[str], ms: int) -> Any:
    verifier: dict[str, Any] = {"tool_trace_summary": [{"tool_name": t} for t in summary]}
    if verdict is not None:
        verifier["verdict"] = verdict
    return {
        "session": {
            "answer": answer,
            "totalDurationMs": ms,
            "selfEvaluation": {"verifier_evaluation": verifier},
        },
        "toolInvocations": [{"toolName": t, "success": True} for t in tools],
    }


@pytest.fixture()
def diagnosis_file(tmp_path: Path) -> Path:
    """A case file the project has never seen, in the eval/cases + eval/fixtures layout."""
    base = tmp_path / "eval"
    common = {
        "requiredEvidenceTools": ["lookup_knowledge", "query_logs", "query_metrics"],
        "allowedVerdicts": ["PASS", "LOW_CONFID"],
        "forbiddenAnswerKeywords": ["无证据确定"],
    }
    cases = [
        {
            "id": "cache-avalanche",
            "title": "Redis cache avalanche",
            "question": "缓存集中失效后数据库被打满，原因是什么？",
            "traceFixture": "cache-avalanche.json",
            "expectedRootCauseKeywords": ["缓存", "过期", "数据库"],
            "minKeywordMatches": 2,
            **common,
        },
        {
            "id": "mq-backlog",
            "title": "MQ consumer backlog",
            "question": "消息队列积压，为什么？",
            "traceFixture": "mq-backlog.json",
            "expectedRootCauseKeywords": ["消费者", "积压"],
            **common,
        },
        {
            "id": "dns-flap",
            "title": "DNS resolution flapping",
            "question": "域名解析时好时坏？",
            "traceFixture": "dns-flap.json",
            "expectedRootCauseKeywords": ["ＤＮＳ", "ttl"],
            "minKeywordMatches": 1,
            **common,
        },
    ]
    write_json(base / "cases" / "diagnosis-cases.json", cases)
    fixtures = base / "fixtures"
    # tools seen only through the verifier's summary still count as evidence (docs/cases.md)
    write_json(
        fixtures / "cache-avalanche.json",
        fixture(
            "大量缓存 key 同一时刻过期，请求全部打到数据库。",
            "PASS",
            ["query_metrics"],
            ["lookup_knowledge", "query_logs"],
            6100,
        ),
    )
    # the verifier never ran: no verdict; one tool missing; a forbidden phrase
    write_json(
        fixtures / "mq-backlog.json",
        fixture("无证据确定，但消费者线程池太小导致积压。", None, [], ["query_logs"], 2400),
    )
    write_json(
        fixtures / "dns-flap.json",
        fixture(
            "DNS 记录的 TTL 过短且上游解析不稳定。",
            "LOW_CONFID",
            [],
            ["lookup_knowledge", "query_logs", "query_metrics"],
            3500,
        ),
    )
    return base / "cases" / "diagnosis-cases.json"


def test_diagnosis_cases_run_without_a_judge_and_report_as_docs_cases_says(
    tmp_path: Path, diagnosis_file: Path
) -> None:
    report = rules_only(tmp_path, diagnosis_file)
    rules = report["rules"]
    results = {r["caseId"]: r for r in rules["results"]}
    # each case rule in the report says what it checks (its ID is only a hash)
    texts = {r["id"]: r["text"] for r in report["requirements"] if r["category"] == "CASE"}
    assert texts and all(t and t.startswith("rule ") for t in texts.values())
    assert any("requiredEvidenceTools" in t for t in texts.values())
    assert {k: rules[k] for k in rules if k != "results"} == {
        "totalCases": 3,
        "passedCases": 2,
        "passRate": 0.6667,
        "verdictDistribution": {"LOW_CONFID": 1, "NONE": 1, "PASS": 1},
        "averageToolCallCount": 2.0,
        "averageDurationMs": 4000.0,
    }
    cache = results["cache-avalanche"]
    assert (cache["passed"], cache["failedChecks"], cache["verdict"]) == (True, [], "PASS")
    assert (cache["matchedKeywordCount"], cache["requiredKeywordCount"]) == (3, 3)
    assert cache["evidenceCoverage"] == {
        "lookup_knowledge": True,
        "query_logs": True,
        "query_metrics": True,
    }
    assert (cache["toolCallCount"], cache["durationMs"]) == (2, 6100)
    mq = results["mq-backlog"]
    assert mq["passed"] is False and mq["verdict"] is None
    assert mq["failedChecks"] == [
        "requiredEvidenceTools: missing evidence tool(s): lookup_knowledge, query_metrics",
        "allowedVerdicts: the trace has no verifier verdict",
        "forbiddenAnswerKeywords: forbidden keyword(s) present: 无证据确定",
    ]
    assert mq["evidenceCoverage"] == {
        "lookup_knowledge": False,
        "query_logs": True,
        "query_metrics": False,
    }
    assert (mq["matchedKeywordCount"], mq["requiredKeywordCount"]) == (2, 2)
    dns = results["dns-flap"]  # full-width keyword "ＤＮＳ" matches the answer's "DNS"
    assert dns["passed"] is True and dns["matchedKeywordCount"] == 2


def test_judge_none_imports_no_llm_library_and_needs_no_cassettes(
    tmp_path: Path, diagnosis_file: Path
) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from rubric_engine.engine import ScoreOptions, score\n"
        f"score(ScoreOptions(inputs=[Path({str(diagnosis_file)!r})], judge='none',"
        f" cassettes=Path({str(tmp_path / 'no-such-folder')!r}),"
        f" store=Path({str(tmp_path / 's.sqlite')!r}), out=Path({str(tmp_path / 'o')!r})))\n"
        "print(sorted(m for m in ('litellm', 'instructor', 'openai') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert done.stdout.strip() == "[]"


def test_cli_judge_none_prints_failed_checks(tmp_path: Path, diagnosis_file: Path) -> None:
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    result = CliRunner().invoke(
        app,
        [
            "score",
            str(diagnosis_file),
            "--judge",
            "none",
            "--store",
            str(tmp_path / "s.sqlite"),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "rule checks: 2/3 cases passed" in result.output
    assert "mq-backlog" in result.output
    markdown = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert "## Rule checks" in markdown and "query_metrics ✗" in markdown


def test_missing_fixture_is_named_with_the_places_looked(tmp_path: Path) -> None:
    path = write_json(tmp_path / "cases.json", [{"id": "x", "traceFixture": "nope.json"}])
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    message = info.value.problems[0].message
    assert message.startswith("case x: trace fixture 'nope.json' not found")
    assert "fixtures/nope.json" in message and "../fixtures/nope.json" in message


def test_unknown_diagnosis_field_is_named(tmp_path: Path) -> None:
    write_json(tmp_path / "fixtures" / "f.json", fixture("a", "PASS", [], [], 1))
    path = write_json(
        tmp_path / "cases.json", [{"id": "x", "traceFixture": "f.json", "requiredTools": ["a"]}]
    )
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    problem = info.value.problems[0]
    assert problem.field == "requiredTools"
    assert problem.message.startswith("case x: unknown field 'requiredTools'")


# -- eval cases: the general eval-case schema ---------------------------------------------------

SEED_000_YAML = """\
case_id: refund_eligibility_001
case_version: v3
dataset_id: refund_regression_set
dataset_version: v8
title: 签收超过 7 天但用户声称质量问题
scenario: 退款申请
user_task: 判断退款资格
ability_tags: [意图理解, RAG, 工具调用, 业务规则]
risk_level: P1
difficulty: Medium
source: 线上日志改写
input: "我这个耳机签收十天了，但有质量问题，能不能退？"
context: {order_status: signed, signed_days: 10, category: 耳机, user_authenticated: true}
environment: {knowledge_base: refund_policy, tools: [order_lookup, refund_eligibility_check]}
expected_behavior:
  - 识别用户不是普通 7 天无理由退货，而是质量问题售后。
  - 查询订单和退款资格。
negative_behavior:
  - 未查询订单就承诺退款。
expected_tool_sequence: [order_lookup, refund_eligibility_check]
rubric: refund_policy_faithfulness_v1
evaluator_config:
  rule_checks: [no_privacy_leak]
  judge: {rubric: refund_policy_faithfulness_v1}
metadata:
  dataset_role: regression
  tags: [refund, quality_issue]
  owner: ai_eval_team
  review_status: approved
  usage_rights_status: approved_for_evaluation
messages:
  - {role: user, content: "我这个耳机签收十天了，但有质量问题，能不能退？"}
  - role: assistant
    content: null
    tool_calls: [{id: c1, name: order_lookup, arguments: {order_id: A1}}]
  - {role: tool, tool_call_id: c1, content: "{\\"status\\": \\"signed\\"}"}
  - {role: assistant, content: "质量问题可以申请售后质检，我已为您查询订单，联系人 13912345678。"}
"""


def test_eval_case_yaml_becomes_a_row_with_case_requirements_and_checks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(SEED_000_YAML, encoding="utf-8")
    source = DialogueSource(path)
    assert source.validate() == 1
    row = next(iter(source))
    assert row.row_id == "refund_eligibility_001"
    derived = case_requirements(row.expected_behavior, row.negative_behavior)
    assert [r.id[:14] for r in derived] == ["CASE_EXPECTED_"] * 2 + ["CASE_NEGATIVE_"]
    assert {
        k: row.metadata[k]
        for k in (
            "risk_level",
            "difficulty",
            "dataset_role",
            "owner",
            "review_status",
            "usage_rights_status",
            "case_version",
        )
    } == {
        "risk_level": "P1",
        "difficulty": "Medium",
        "dataset_role": "regression",
        "owner": "ai_eval_team",
        "review_status": "approved",
        "usage_rights_status": "approved_for_evaluation",
        "case_version": "v3",
    }
    assert [c.type for c in row.expected] == ["privacy", "tool_sequence"]
    report = rules_only(tmp_path, path)["rules"]["results"][0]
    # no_privacy_leak: a phone number the user never gave; the eligibility check never ran
    assert report["failedChecks"][0].startswith("no_privacy_leak: personal data")
    assert report["failedChecks"][1].startswith("expected_tool_sequence: subset match failed")


@pytest.mark.parametrize(
    ("change", "field", "needle"),
    [
        (("risk_level: P1", "risk_level: P5"), "risk_level", "'P0', 'P1', 'P2' or 'P3'"),
        (("difficulty: Medium", "difficulty: Tricky"), "difficulty", "'Hard Negative'"),
        (("  owner: ai_eval_team\n", ""), "metadata.owner", "is required"),
        (
            ("rule_checks: [no_privacy_leak]", "rule_checks: [no_pii]"),
            "evaluator_config.rule_checks[0]",
            "valid names: no_privacy_leak",
        ),
        (("scenario: 退款申请", "scenaro: 退款申请"), "scenaro", "unknown field"),
    ],
)
def test_eval_case_errors_name_the_case_the_field_and_the_choices(
    tmp_path: Path, change: tuple[str, str], field: str, needle: str
) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(SEED_000_YAML.replace(*change), encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    problems = {p.field: p.message for p in info.value.problems}
    assert field in problems, problems
    assert problems[field].startswith("case refund_eligibility_001: ")
    assert needle in problems[field]


def test_eval_case_problems_name_the_line_of_their_field(tmp_path: Path) -> None:
    """A YAML case spans many lines: each problem names its field's line (every problem named
    the case's first line), a missing field its mapping's line, in a list of cases too."""

    def line(text: str, needle: str) -> int:
        return next(n for n, t in enumerate(text.splitlines(), 1) if needle in t)

    case = SEED_000_YAML.replace("difficulty: Medium", "difficulty: Tricky")
    case = case.replace("  owner: ai_eval_team\n", "")
    path = tmp_path / "case.yaml"
    path.write_text(case, encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    where = {p.field: p.where for p in info.value.problems}
    assert where["difficulty"] == f"{path}:{line(case, 'difficulty: Tricky')}", where
    assert where["metadata.owner"] == f"{path}:{line(case, 'metadata:')}", where
    other = SEED_000_YAML.replace("case_id: refund_eligibility_001", "case_id: second")
    other = other.replace("risk_level: P1", "risk_level: P9")
    cases = "- " + SEED_000_YAML.replace("\n", "\n  ").rstrip() + "\n- "
    cases += other.replace("\n", "\n  ").rstrip() + "\n"
    path.write_text(cases, encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    (problem,) = info.value.problems
    assert problem.field == "risk_level" and problem.message.startswith("case second: ")
    assert problem.where == f"{path}:{line(cases, 'risk_level: P9')}", problem


def test_a_misspelt_eval_case_field_names_the_field_it_likely_is_and_the_valid_ones(
    tmp_path: Path,
) -> None:
    """``risk_levl: P1`` said "unknown field 'risk_levl'; valid fields here: see docs/cases.md"
    beside "risk_level: is required": the user had to find the list in the docs and match
    the two. It now suggests the field and lists the valid ones, as a pack's fields do."""
    path = tmp_path / "case.yaml"
    path.write_text(SEED_000_YAML.replace("risk_level: P1", "risk_levl: P1"), encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    message = {p.field: p.message for p in info.value.problems}["risk_levl"]
    assert "unknown field 'risk_levl' (did you mean 'risk_level'?); valid fields here: " in message
    assert "case_id, case_version, " in message and "messages" in message
    assert "see docs/cases.md" not in message


# -- RAG and agent rows -------------------------------------------------------------------------


def test_rag_and_agent_rows(tmp_path: Path) -> None:
    rag = {
        "id": "rag-001",
        "category": "policy_lookup",
        "input": {"question": "客户购买的健康险是否包含住院津贴？保单号 P20240315-001"},
        "expected": {
            "must_contain_keywords": ["住院津贴", "200元/天", "30天"],
            "must_not_contain": ["免责", "不包含"],
            "reference_doc_id": "POL-HC-002-v3.pdf",
            "reference_answer": "包含住院津贴，标准为每天 200 元，最长 30 天",
        },
        "metadata": {"source": "客户业务专家 2026-05", "difficulty": "medium"},
        "output": {
            "answer": "包含住院津贴，标准为２００元/天，最长３０天。",
            "retrieved_docs": [{"doc_id": "POL-HC-001-v2.pdf"}],
        },
    }
    agent = {
        "id": "agent-claim-001",
        "category": "auto_settle_simple",
        "input": {"claim_id": "CLM-2026-001", "user_message": "我要报销上周的门诊医药费 580 元"},
        "expected": {
            "task_completed": True,
            "tool_calls": [
                {"tool": "get_policy", "params_must_include": ["P-OPD-001"]},
                {"tool": "validate_amount", "params_must_include": [580]},
                {"tool": "create_settlement", "must_appear": True},
            ],
            "tool_calls_must_not": ["transfer_funds"],
            "final_state": {"claim_status": "approved", "approved_amount": 580},
            "max_steps": 8,
            "max_cost_usd": 0.05,
        },
        "output": "已为您完成理赔，金额 580 元。",
        "trace": {
            "tool_calls": [
                {"name": "get_policy", "arguments": {"policy_id": "P-OPD-001"}},
                {"name": "validate_amount", "arguments": {"amount": 580}},
                {"name": "create_settlement", "arguments": {"claim_id": "CLM-2026-001"}},
            ],
            "total_cost_usd": 0.02,
            "final_state": {"claim_status": "approved", "approved_amount": 580},
        },
    }
    path = tmp_path / "rag_agent.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in (rag, agent)) + "\n")
    results = {r["caseId"]: r for r in rules_only(tmp_path, path)["rules"]["results"]}
    assert results["rag-001"]["failedChecks"] == [
        "reference_doc_id: POL-HC-002-v3.pdf not among retrieved documents (POL-HC-001-v2.pdf)"
    ]
    assert results["rag-001"]["matchedKeywordCount"] == 3  # full-width digits in the answer
    assert results["agent-claim-001"]["passed"] is True
    assert [c["type"] for c in results["agent-claim-001"]["checks"]] == [
        "forbidden_tools",
        "max_steps",
        "max_cost",
        "final_state",
        "tool_sequence",
    ]


def test_rag_agent_unknown_expected_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    row = {"id": "r", "input": "q", "output": "a", "expected": {"must_contains": ["x"]}}
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetError) as info:
        DialogueSource(path).validate()
    message = info.value.problems[0].message
    assert message.startswith("case r: unknown key(s) must_contains; valid: must_contain_keywords")


# -- tau-bench: expected actions as case checks -----------------------------------------------


def test_rules_only_tau_bench_agrees_with_the_recorded_reward(tmp_path: Path) -> None:
    # six real airline runs whose reward depends on actions only; three pass only because the
    # check ignores failed calls, extra nested arguments and the order of writes
    path = DATA / "airline_trajectories_rules_sample.json"
    rewards = {
        f"airline-{e['task_id']}-t{e['trial']}": e["reward"]
        for e in json.loads(path.read_text(encoding="utf-8"))
    }
    report = rules_only(tmp_path, path)
    passed = {r["caseId"]: r["passed"] for r in report["rules"]["results"]}
    assert passed == {rid: reward == 1.0 for rid, reward in rewards.items()}
    assert report["totals"]["checked"] == 6


def test_tau_bench_failed_calls_are_marked_in_the_trace() -> None:
    source = DialogueSource(DATA / "airline_trajectories_rules_sample.json")
    source.validate()
    row = next(r for r in source if r.row_id == "airline-11-t0")
    books = [c for c in evidence_from_row(row).tool_calls if c.name == "book_reservation"]
    assert [c.success for c in books] == [False, True]


# -- more adapters on real rows ---------------------------------------------------------------


def test_sharegpt_observations_name_their_function_call() -> None:
    source = DialogueSource(DATA / "glaive_toolcall_zh_sample.jsonl")
    assert source.validate() == 3
    rows = list(source)
    transcript = render_dialogue(rows[1], rules_only_rubric()).transcript
    assert transcript.count("TOOL RESULT (get_news)") == 2
    assert "TOOL RESULT (tool)" not in transcript
    assert [c.name for c in evidence_from_row(rows[0]).tool_calls] == ["generate_invoice"]


def test_otel_genai_spans_become_dialogues() -> None:
    source = DialogueSource(DATA / "otel_genai_spans.jsonl")
    assert source.validate() == 8
    rows = {r.row_id: r for r in source}
    weather = render_dialogue(rows["tool-call-span-2"], rules_only_rubric()).transcript
    assert (
        "TOOL CALL get_weather" in weather and "TOOL RESULT (get_weather):\nrainy, 57°F" in weather
    )
    assert evidence_from_row(rows["tool-call-span-2"]).final_answer.startswith(
        "The weather in Paris"
    )
    reasoning = rows["reasoning"]
    assert (
        "Alright, the user wants" not in render_dialogue(reasoning, rules_only_rubric()).transcript
    )
    assert rows["choices"].metadata["otelChoices"] == 2
    assert [m.role for m in rows["instructions"].messages][:2] == ["system", "system"]
    built_in = evidence_from_row(rows["built-in-tools"])
    assert [c.name for c in built_in.tool_calls] == ["code_interpreter"]
    assert built_in.final_answer.startswith("The generated random number is")


def test_otel_attributes_may_be_json_strings(tmp_path: Path) -> None:
    line = json.loads((DATA / "otel_genai_spans.jsonl").read_text(encoding="utf-8").splitlines()[0])
    flat = {"rowId": "s", **{k: json.dumps(v) for k, v in line["attributes"].items()}}
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(flat) + "\n")
    row = next(iter(DialogueSource(path)))
    assert [m.role for m in row.messages] == ["system", "user", "assistant"]


def test_judge_none_without_any_check_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from rubric_engine.errors import ConfigurationError

    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "assistant", "content": "hi"}]}) + "\n")
    with pytest.raises(ConfigurationError, match="there are none"):
        rules_only(tmp_path, path)
    assert not (tmp_path / "store.sqlite").exists()


def test_baseline_diff_of_two_rules_only_runs_names_lost_evidence(
    tmp_path: Path, diagnosis_file: Path
) -> None:
    from typer.testing import CliRunner

    from rubric_engine.cli import app

    def run_once(out: str) -> str:
        result = CliRunner().invoke(
            app,
            [
                "score",
                str(diagnosis_file),
                "--judge",
                "none",
                "--store",
                str(tmp_path / "s.sqlite"),
                "--out",
                str(tmp_path / out),
            ],
        )
        assert result.exit_code == 0, result.output
        return result.output.rsplit("task id: ", 1)[1].split()[0]

    baseline = run_once("base")
    # the agent changed: it stopped querying metrics and names fewer root-cause points
    write_json(
        diagnosis_file.parent.parent / "fixtures" / "cache-avalanche.json",
        fixture("大量请求打到数据库。", "PASS", [], ["lookup_knowledge", "query_logs"], 6100),
    )
    current = run_once("cur")
    result = CliRunner().invoke(
        app, ["diff", baseline, current, "--store", str(tmp_path / "s.sqlite"), "--format", "json"]
    )
    items = {(i["caseId"], i["metric"]): i for i in json.loads(result.output)["items"]}
    lost = items[("cache-avalanche", "evidenceCoverage.query_metrics")]
    assert (lost["type"], lost["baselineValue"], lost["currentValue"]) == (
        "REGRESSION",
        True,
        False,
    )
    keywords = items[("cache-avalanche", "matchedKeywordCount")]
    assert (keywords["type"], keywords["delta"]) == ("REGRESSION", -2)
    assert items[("cache-avalanche", "passed")]["type"] == "REGRESSION"


def test_eval_case_reads_the_same_from_jsonl(tmp_path: Path) -> None:
    import yaml

    case = yaml.safe_load(SEED_000_YAML)
    case["difficulty"] = "hard_negative"  # any case and `_` spelling of an enum value
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(case, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    row = next(iter(DialogueSource(path)))
    assert row.row_id == "refund_eligibility_001"
    assert row.metadata["difficulty"] == "Hard Negative"
    assert len(row.expected_behavior) == 2 and len(row.expected) == 2
