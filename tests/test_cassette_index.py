"""The cassette index stays small and reads entries through one handle per file."""

from __future__ import annotations

import hashlib
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.errors import CassetteError
from rubric_engine.judge.cassettes.index import CassetteIndex
from tests.conftest import CASSETTES


def _attempts(index: CassetteIndex, key: str) -> tuple[list[dict[str, Any]], str] | None:
    """``(attempts, where)`` of what a replay reads for ``key`` (:meth:`replayed`)."""
    found = index.replayed(key)
    return None if found is None else (found[0], found[1])


def _replicated(folder: Path, copies: int) -> list[str]:
    """The health demo cassette with every entry repeated under new keys; returns the keys."""
    lines = (CASSETTES / "health_cs" / "health_consult_zh.jsonl").read_text("utf-8").splitlines()
    keys, out = [], []
    for n in range(copies):
        for line in lines:
            entry = json.loads(line)
            entry["key"] = "sha256:" + hashlib.sha256(f"{n}-{entry['key']}".encode()).hexdigest()
            keys.append(entry["key"])
            out.append(json.dumps(entry, ensure_ascii=False))
    (folder / "health_cs").mkdir(parents=True)
    (folder / "health_cs" / "big.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    return keys


def test_the_index_keeps_a_few_dozen_bytes_per_entry(tmp_path: Path) -> None:
    keys = _replicated(tmp_path, 40)  # 1,040 entries of ~2 KB each
    tracemalloc.start()
    index = CassetteIndex.load(tmp_path)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(index) == len(keys)
    assert held / len(keys) < 100, f"{held / len(keys):.0f} bytes per entry"
    assert index.get(keys[-1]) is not None and keys[-1] in index


def _open_under(folder: Path) -> int:
    """How many of this process's descriptors are open on files under ``folder`` (counting
    every descriptor would count what earlier tests left for the collector to close)."""
    fds = Path("/proc/self/fd")
    targets = []
    for fd in os.listdir(fds):
        try:
            targets.append(os.readlink(fds / fd))
        except OSError:  # closed since it was listed (the listing's own descriptor)
            continue
    return sum(1 for t in targets if t.startswith(str(folder) + os.sep))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")
def test_entries_are_read_through_one_handle_per_file(tmp_path: Path) -> None:
    keys = _replicated(tmp_path, 4)
    index = CassetteIndex.load(tmp_path)
    entries = [index.get(k) for k in keys * 3]
    assert all(e is not None and e.key == k for e, k in zip(entries, keys * 3, strict=True))
    assert _open_under(tmp_path) == 1  # the one cassette file, opened once for every read
    index.close()
    assert _open_under(tmp_path) == 0


def test_provenance_and_kind_without_reading_the_entry(tmp_path: Path) -> None:
    keys = _replicated(tmp_path, 1)
    index = CassetteIndex.load(tmp_path)
    entry = index.get(keys[0])
    assert entry is not None
    assert index.provenance(keys[0]) == entry.provenance
    assert index.kind(keys[0]) == "authored" and index.kind("sha256:" + "0" * 64) is None
    assert index.provenance(None) is None
    assert index.provenance_counts() == {"authored": len(keys)}
    assert "no entry for row 'nope'" in index.explain_miss("nope", {})
    # the same key parts under another key (an edited key): the reason was left empty
    said = index.explain_miss(entry.row_id, entry.key_parts)
    assert said.endswith("its key no longer matches its parts (edited by hand?): record the "
                         "row again with --mode record"), said  # fmt: skip
    assert f"another key ({entry.key})" in said, said


def _entry(key: str, row: str, content: str = '{"score": 4}') -> dict[str, Any]:
    return {
        "format": "rubric-eval-cassette/1",
        "key": key,
        "rowId": row,
        "keyParts": {"model": "m", "messagesHash": "sha256:1"},
        "provenance": {"kind": "authored", "author": "t", "authoredAt": "now", "method": "hand"},
        "attempts": [{"response": {"choices": [{"message": {"content": content}}]}}],
    }


def test_a_replay_reads_the_attempts_a_whole_line_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:meth:`CassetteIndex.replayed` against :meth:`get`, on lines in and out of the
    writer's form: another
    spacing or member order, a second ``key`` or ``attempts`` member (``json.loads`` keeps
    the last), a key spelled with an escape, a nested ``attempts``, a BOM, a backslash in the
    provenance; and two keys sharing the 128 bits the index keeps (``sha256:`` keys are
    indexed by their first 32 hex digits), so the whole key decides."""
    half = "ab" * 16
    key = {n: f"sha256:{half}{n:032x}" for n in range(14)}  # every one shares the 128 bits
    writer = _entry(key[0], "r0")
    lines = [
        "\ufeff" + json.dumps(writer, ensure_ascii=False),  # the writer's form, after a BOM
        json.dumps(_entry(key[1], "r1"), separators=(",", ":")),
        json.dumps(dict(reversed(list(_entry(key[2], "r2").items())))),  # attempts first
        # the writer's form with a second key member: json.loads keeps the last one
        json.dumps(_entry(key[3], "r3"))[:-1] + f', "key": "{key[4]}"' + "}",
        json.dumps(_entry(key[11], "r11")).replace('"rowId"', f'"key": "{key[12]}", "rowId"'),
        json.dumps(_entry(key[5], "r5")).replace(
            '"rowId"', f'"k\\u0065y": "{key[6]}", "rowId"'
        ),  # the same, spelled with an escape, before attempts
        json.dumps(_entry(key[7], "r7"))[:-3] + ', "attempts": 1}]}',  # a nested attempts
        json.dumps(_entry(key[8], "r8"))[:-1] + ', "attempts": [{"response": {"n": 2}}]}',
        json.dumps(
            {**_entry(key[9], "r9"), "provenance": {**writer["provenance"], "author": 'a"b'}}
        ),
        json.dumps(_entry(key[10], "r10", content='{"score": 5}  \\u00e9 中文')),
    ]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = CassetteIndex.load(tmp_path)
    for n, k in key.items():
        entry = index.get(k)
        found = _attempts(index, k)
        assert found == (None if entry is None else (entry.attempts, entry.where)), n
    assert index.get(key[3]) is None and index.get(key[4]) is not None  # the last key member
    assert index.get(key[5]) is None and index.get(key[6]) is not None
    assert index.get(key[11]) is None and index.get(key[12]) is not None
    assert _attempts(index, key[8]) == ([{"response": {"n": 2}}], f"{tmp_path / 'c.jsonl'}:8")


def test_blank_lines_are_the_ascii_spaces_a_strip_removes(tmp_path: Path) -> None:
    """The load skips a line of ASCII whitespace only (``bytes.isspace``, the bytes
    ``bytes.strip`` removes); a line of other space (U+001C, U+00A0) is not blank: it is
    refused as JSON, as before."""
    entry = json.dumps(_entry("sha256:" + "1" * 64, "r1"))
    (tmp_path / "c.jsonl").write_text(f" \t\r\n\x0b\x0c\n\n{entry}\n  \n", encoding="utf-8")
    index = CassetteIndex.load(tmp_path)
    found = index.get("sha256:" + "1" * 64)
    assert len(index) == 1 and found is not None and found.where.endswith("c.jsonl:4")
    for space in ("\x1c", "\u00a0"):
        (tmp_path / "c.jsonl").write_text(f"{entry}\n{space}\n", encoding="utf-8")
        with pytest.raises(CassetteError, match=r"c\.jsonl:2: not valid JSON"):
            CassetteIndex.load(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"provenance": {"kind": "authored", "author": "t"}},
            "authored provenance lacks authoredAt, method",
        ),
        (
            {"provenance": {"kind": "recorded", "provider": "p", "model": "", "recordedAt": 1}},
            "recorded provenance lacks model",
        ),
        ({"key": ""}, "missing key"),
        ({"rowId": None, "keyParts": {}}, "missing rowId"),
        ({"keyParts": {}}, "missing keyParts"),
    ],
)
def test_an_entry_without_a_field_is_refused_naming_it(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    """The load names the first missing field of an entry, in the order checked: the
    provenance's fields (all of them), then key, rowId, keyParts."""
    (tmp_path / "c.jsonl").write_text(
        json.dumps({**_entry("sha256:" + "1" * 64, "r1"), **change}) + "\n", encoding="utf-8"
    )
    with pytest.raises(CassetteError) as refused:
        CassetteIndex.load(tmp_path)
    assert str(refused.value) == f"{tmp_path / 'c.jsonl'}:1: {message}"


def test_a_reply_holding_a_lone_surrogate_is_written_escaped_and_reads_back(
    tmp_path: Path,
) -> None:
    """A recorded reply with half of a UTF-16 pair (a provider's ``\\udfff`` escape, decoded)
    cannot be written as UTF-8: its line is written with ASCII escapes, in the writer's form,
    and replays the same attempts."""
    from rubric_engine.judge.cassettes.cassette import CassetteEntry

    fields = _entry("sha256:" + "c" * 64, "r0", content='{"score": 4} 中文 \udfff')
    entry = CassetteEntry(
        fields["key"], fields["rowId"], fields["keyParts"], fields["provenance"],
        fields["attempts"],
    )  # fmt: skip
    line = entry.to_json()
    assert line.isascii() and "\\udfff" in line and "\\u4e2d" in line
    (tmp_path / "c.jsonl").write_text(line + "\n", encoding="utf-8")
    index = CassetteIndex.load(tmp_path)
    found = index.replayed(entry.key)
    assert found is not None and found[0] == fields["attempts"]
    whole = _entry(entry.key, "r0", content="中文")["attempts"]
    plain = CassetteEntry(entry.key, entry.row_id, entry.key_parts, entry.provenance, whole)
    assert "中文" in plain.to_json()  # UTF-8 kept otherwise


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda text: b"    " + text, id="moved-by-4-bytes"),
        # the same length, every line still an entry in the writer's form: only the bytes
        # tell (each row was scored from the edited file, without a word)
        pytest.param(
            lambda text: text.replace(b'score\\": 1', b'score\\": 4'), id="same-length-edit"
        ),
    ],
)
def test_a_cassette_changed_during_a_replay_fails_its_rows_and_resume_scores_them(
    tmp_path: Path, edit: Any
) -> None:
    """A cassette file rewritten in place after the index loaded it (4 bytes put in front:
    every line the index knows is now at another place) made every row's lookup raise a
    JSONDecodeError, an ExceptionGroup traceback with exit 1. Each row now fails as a
    cassette miss naming the change, the batch ends, and once the file is back `--resume`
    scores every row."""
    import shutil

    from rubric_engine.engine import ScoreOptions, score
    from tests.conftest import CASES, RUBRICS

    cassettes = tmp_path / "cassettes"
    shutil.copytree(CASSETTES, cassettes)
    file = cassettes / "health_cs" / "health_consult_zh.jsonl"
    original = file.read_bytes()

    def rewrite(task_id: str, rows: int) -> None:
        with file.open("r+b") as f:  # in place: the index's open handle reads the new bytes
            f.write(edit(original))

    options = ScoreOptions(
        inputs=[CASES / "health_consult_zh.jsonl"],
        rubric=RUBRICS / "health_cs.yaml",
        draft=True,
        cassettes=cassettes,
        store=tmp_path / "s.sqlite",
        out=tmp_path / "out",
    )
    changed = {  # the rows whose line the edit changed (a shift changes every line)
        json.loads(line)["rowId"]
        for line, edited in zip(
            original.splitlines(), edit(original).lstrip().splitlines(), strict=True
        )
        if line != edited or edit(original)[:1] == b" "
    }
    assert changed
    first = score(options, on_start=rewrite)
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    failed = {r["rowId"] for r in rows if r["status"] == "JUDGE_ERROR"}
    assert len(rows) == 26 and failed == changed, (failed, changed)
    assert all("was changed during the run" in r["error"]["message"] for r in rows if r["error"]), (
        rows
    )
    file.write_bytes(original)
    resume = ScoreOptions(resume=first.task_id, store=options.store, out=options.out)
    again = score(resume)
    rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    assert again.task_id == first.task_id and len(rows) == 26
    assert "JUDGE_ERROR" not in {r["status"] for r in rows}
