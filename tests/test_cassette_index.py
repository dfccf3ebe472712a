"""The cassette index stays small and reads entries through one handle per file (issue 18)."""

from __future__ import annotations

import hashlib
import json
import os
import tracemalloc
from pathlib import Path

from rubric_engine.cassette import CassetteIndex
from tests.conftest import CASSETTES


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


def test_entries_are_read_through_one_handle_per_file(tmp_path: Path) -> None:
    keys = _replicated(tmp_path, 4)
    index = CassetteIndex.load(tmp_path)
    before = len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else None
    entries = [index.get(k) for k in keys * 3]
    assert all(e is not None and e.key == k for e, k in zip(entries, keys * 3, strict=True))
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before + 1
    index.close()
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


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
