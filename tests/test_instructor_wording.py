"""The engine's own request preparation is instructor's, byte for byte, and a replay imports
neither instructor nor the openai SDK.

:meth:`InstructorAdapter.prepare_pair` words a system + user request the way instructor's
JSON, JSON_SCHEMA and TOOLS handlers do, so the cassette keys and the requests on the wire
stay the ones recorded; a change of instructor's wording (an upgrade) fails here, naming the
mode, before any cassette misses.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.judge.instructor_adapter import InstructorAdapter
from rubric_engine.judge.output_modes import OUTPUT_MODE_NAMES
from rubric_engine.rubric.loader import load_rubric
from rubric_engine.verdict.model import verdict_model

ROOT = Path(__file__).resolve().parent.parent
PACKS = ("airline_cs", "health_cs")


def _kwargs(system: str, user: str, **params: Any) -> dict[str, Any]:
    return {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "model": "openai/gpt-4o-mini",
        "temperature": 0.0,
        "max_tokens": 1024,
        **params,
    }


@pytest.mark.parametrize("evidence", [False, True])
@pytest.mark.parametrize("pack", PACKS)
@pytest.mark.parametrize("mode", OUTPUT_MODE_NAMES)
def test_own_preparation_is_instructors_byte_for_byte(mode: Any, pack: str, evidence: bool) -> None:
    """Same keys in the same order, same text: the JSON dump of both is one string."""
    model = verdict_model(load_rubric(ROOT / "rubrics" / f"{pack}.yaml"), evidence)
    adapter = InstructorAdapter(model, mode)
    for kwargs in (
        _kwargs('规则 "quoted" \\ back\nslash', "rowId: r-1\n对话"),
        _kwargs("s", "u", seed=7, top_p=0.5),
    ):
        before = copy.deepcopy(kwargs)
        ours = adapter.prepare_pair(kwargs)
        theirs = adapter.instructor_prepare(kwargs)
        assert ours is not None
        assert json.dumps(ours, ensure_ascii=False) == json.dumps(theirs, ensure_ascii=False), mode
        ids = ["REQ_A", "REQ_B"]
        assert json.dumps(adapter.constrain(ours, ids, None)) == json.dumps(
            adapter.constrain(theirs, ids, None)
        )
        assert kwargs == before  # the caller's request is not changed


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "u"}],
        [{"role": "system", "content": ""}, {"role": "user", "content": "u"}],
        [{"role": "system", "content": "s"}, {"role": "user", "content": ""}],
        [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}],
        [{"role": "system", "content": "s", "name": "x"}, {"role": "user", "content": "u"}],
        [{"role": "system", "content": [{"type": "text", "text": "s"}]}, {"role": "user"}],
        [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "user"}],
    ],
)
def test_other_requests_are_left_to_instructor(messages: list[dict[str, Any]]) -> None:
    """Whatever is not the engine's own system + user text pair is not imitated: ``prepare``
    hands it to instructor (whose result it then is)."""
    adapter = InstructorAdapter(verdict_model(load_rubric(ROOT / "rubrics" / "health_cs.yaml")))
    kwargs = {"messages": messages, "model": "openai/gpt-4o-mini"}
    assert adapter.prepare_pair(kwargs) is None
    assert adapter.prepare(kwargs) == adapter.instructor_prepare(kwargs)
    assert adapter.prepare_pair({**_kwargs("s", "u"), "strict": True}) is None


def test_a_replay_imports_neither_instructor_nor_the_openai_sdk(tmp_path: Path) -> None:
    """A one-row replay of a demo row, in a fresh interpreter: scored from the cassette, and
    ``sys.modules`` holds no ``instructor``, ``openai`` or ``litellm`` afterwards."""
    row = (ROOT / "cases" / "health_consult_zh.jsonl").read_text("utf-8").splitlines()[0]
    (tmp_path / "one.jsonl").write_text(row + "\n", encoding="utf-8")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from rubric_engine.engine import ScoreOptions, score\n"
        f"root = Path({str(ROOT)!r}); work = Path({str(tmp_path)!r})\n"
        "options = ScoreOptions(inputs=[work / 'one.jsonl'],"
        " rubric=root / 'rubrics/health_cs.yaml', draft=True, mode='replay',"
        " cassettes=root / 'cassettes', store=work / 's.sqlite',"
        " out=work / 'out')\n"
        "result = score(options)\n"
        "print(result.report['totals']['scored'])\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'instructor', 'openai', 'litellm'})) or '-')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    scored, imported = out.stdout.split()[-2:]
    assert scored == "1"
    assert imported == "-"
