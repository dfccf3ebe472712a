"""The shortcuts of a row's cassette key and reading give the same bytes and values as the
long way: the key must stay byte-identical, so that every recorded cassette still hits.

- the messages digest that keeps the hash state after the system message equals the digest
  of the whole list;
- the static key parts a judge works out once per template equal the ones worked out per row,
  in every output mode, with ``--system-as-user`` and with case requirement IDs;
- a reply's JSON read by the decoder built once equals ``json.loads`` with the duplicate-key
  hook (values, duplicates, errors and their positions);
- a plain usage read by the short path equals the full reading;
- the provenance table and the line decoding of the cassette index are unchanged.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rubric_engine.judge.backends import CallKey
from rubric_engine.judge.cassettes.cassette import (
    _digest,
    _dumps,
    _text,
    key_parts,
    messages_digest,
    static_key_parts,
)
from rubric_engine.judge.cassettes.index import _provenance_key
from rubric_engine.judge.instructor_judge import InstructorJudge
from rubric_engine.judge.usage import read_usage
from rubric_engine.verdict.reply_scan import _load
from tests.test_judge_equivalence import ScriptBackend, request

#: text with what JSON escapes or keeps: quotes, backslashes, controls, line separators,
#: non-BMP characters and lone surrogates
TEXT = st.text(
    st.characters(codec=None, categories=None)
    | st.sampled_from(['"', "\\", "\n", "\t", "\x00", "\x7f", "\u2028", "\ud800", "é", "🙂"])
)


@settings(max_examples=400, deadline=None)
@given(role=TEXT, content=TEXT)
def test_messages_after_a_kept_first_one_digest_as_the_whole_list(role: str, content: str) -> None:
    message = {"role": role, "content": content}
    messages = [{"role": "system", "content": "the rubric"}, message, message]
    assert _outcome(messages_digest, messages) == _outcome(_digest, messages)


def _outcome(digest: Any, messages: Any) -> Any:
    try:
        return digest(messages)
    except UnicodeEncodeError as exc:  # a lone surrogate has no UTF-8: no key, either way
        return type(exc), exc.reason


@pytest.mark.parametrize("mode", ["json", "schema", "tools"])
@pytest.mark.parametrize("as_user", [False, True])
@pytest.mark.parametrize("case_ids", [(), ("CASE_EXPECTED_0000AAAA",)])
def test_the_judges_static_key_parts_are_the_rows_own(
    mini_rubric: Any, mode: Any, as_user: bool, case_ids: tuple[str, ...]
) -> None:
    judge = InstructorJudge(
        ScriptBackend([]),
        mini_rubric,
        "openai/stub-judge",
        output_mode=mode,
        system_as_user=as_user,
        params={"temperature": 0.3, "seed": 7},
    )
    for req in (request(mini_rubric, case_ids), request(mini_rubric, case_ids)):
        kwargs, static = judge._first_request(req)
        assert kwargs == judge.request_kwargs(req)
        full = key_parts(kwargs, req.rubric_hash, req.prompt_hash)
        if static is not None:
            assert static == static_key_parts(kwargs)
        fast = CallKey.of(kwargs, req, static)
        assert list(fast.parts.items()) == list(full.items())  # key order kept (record mode)
        assert fast == CallKey.of(kwargs, req)
    # json mode (the recorded cassettes' mode) takes the shortcut
    assert (static is not None) == (mode == "json")


def _reference_load(text: str) -> tuple[Any, tuple[str, ...]]:
    """judge_reply._load as it was: ``json.loads`` with a hook recording repeated keys."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items):
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    duplicates.append(key)
                seen.add(key)
        return out

    return json.loads(text, object_pairs_hook=pairs), tuple(dict.fromkeys(duplicates))


JSONISH = st.lists(
    st.sampled_from(["{", "}", "[", "]", '"a"', '"b"', ":", ",", "1", '"x"', " ", "\ufeff", "NaN"]),
    max_size=14,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(
    st.one_of(
        JSONISH,
        st.recursive(
            st.none() | st.integers() | TEXT,
            lambda inner: st.lists(inner) | st.dictionaries(TEXT, inner),
        ).map(json.dumps),
    )
)
def test_a_reply_is_read_as_json_loads_with_the_duplicate_hook_reads_it(text: str) -> None:
    try:
        expected: Any = _reference_load(text)
    except json.JSONDecodeError as exc:
        expected = ("error", exc.msg, exc.pos)
    try:
        got: Any = _load(text)
    except json.JSONDecodeError as exc:
        got = ("error", exc.msg, exc.pos)
    assert repr(got) == repr(expected)  # repr: NaN compares unequal to itself


COUNT = st.one_of(
    st.none(), st.integers(-3, 10**6), st.booleans(), st.floats(0, 9), st.text(max_size=2)
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "total_tokens"]), COUNT)
)
def test_a_plain_usage_reads_as_the_full_reading(usage: dict[str, Any]) -> None:
    # an unknown key sends the same counts down the full reading, which ignores it
    assert read_usage(usage) == read_usage({**usage, "unknown": None})


PROVENANCE = st.dictionaries(
    st.sampled_from(["kind", "author", "method", "at"]),
    st.one_of(st.sampled_from(["a", "b", "1"]), st.sampled_from([1, 1.0, True, None])),
)


@settings(max_examples=400, deadline=None)
@given(PROVENANCE, PROVENANCE)
def test_provenances_are_told_apart_as_their_canonical_json(a: Any, b: Any) -> None:
    assert (_provenance_key(a) == _provenance_key(b)) == (_dumps(a) == _dumps(b))


@given(st.binary(max_size=40), st.booleans())
def test_a_line_is_decoded_as_utf_8_sig_decodes_it(raw: bytes, bom: bool) -> None:
    raw = codecs.BOM_UTF8 + raw if bom else raw
    try:
        expected: Any = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        expected = (exc.start, exc.reason)
    try:
        got: Any = _text(raw)
    except UnicodeDecodeError as exc:
        got = (exc.start, exc.reason)
    assert got == expected


def _reference_answer_sources(index: Any, keys: list[str | None]) -> Any:
    """scoring/run.py's answer sources and kinds as they were: a provenance lookup per key."""
    from collections import Counter

    seen: Counter[tuple[tuple[str, str], ...]] = Counter()
    for key in keys:
        prov = index.provenance(key)
        if prov is None:
            continue
        if prov.get("kind") == "recorded":
            source = {
                "kind": "recorded",
                "by": f"{prov.get('provider')}/{prov.get('model')}",
                "at": str(prov.get("recordedAt") or ""),
            }
        else:
            source = {
                "kind": str(prov.get("kind")),
                "by": str(prov.get("author") or ""),
                "method": str(prov.get("method") or ""),
            }
        seen[tuple(source.items())] += 1
    kinds = Counter(k for k in map(index.kind, keys) if k)
    return [{**dict(items), "rows": n} for items, n in seen.most_common()], dict(
        sorted(kinds.items())
    )


PROVENANCES = [
    {"kind": "authored", "author": "a", "authoredAt": "t", "method": "m1"},
    {"kind": "authored", "author": "a", "authoredAt": "t2", "method": "m1"},  # same source
    {"kind": "recorded", "provider": "p", "model": "m", "recordedAt": "r1"},
    {"kind": "recorded", "model": "m", "provider": "p", "recordedAt": "r1"},  # same, reordered
    {"kind": "authored", "author": "b", "authoredAt": "t", "method": "m2"},
]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=30))
def test_answer_sources_in_one_pass_are_the_per_key_ones(tmp_path_factory: Any, picks: Any) -> None:
    from rubric_engine.engine.run import answer_sources, replay_extra
    from rubric_engine.judge.cassettes.index import CassetteIndex

    folder = tmp_path_factory.mktemp("cassettes")
    lines = []
    for n, prov in enumerate(PROVENANCES):
        entry = {
            "format": "rubric-eval-cassette/1",
            "key": f"sha256:{n:064x}",
            "rowId": f"r{n}",
            "keyParts": {"model": "m"},
            "provenance": prov,
            "attempts": [{"response": {"choices": []}}],
        }
        lines.append(json.dumps(entry))
    (folder / "c.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = CassetteIndex.load(folder)
    keys: list[str | None] = [
        f"sha256:{p:064x}" if p < len(PROVENANCES) else (None if p == 5 else "sha256:" + "f" * 64)
        for p in picks
    ]
    sources, kinds = _reference_answer_sources(index, keys)
    replay = type("Replay", (), {"index": index})()
    store = type(
        "Store",
        (),
        {  # a task asked once per row: its rows' keys are its answers'
            "cassette_keys": lambda self, task_id: iter(keys),
            "answer_cassette_keys": lambda self, task_id: None,
        },
    )()
    assert answer_sources(replay, keys) == sources
    assert replay_extra(replay, store, "task") == {
        "cassettes": kinds,
        "answerSources": sources,
        "latency": "recorded",
    }


LINE_PROVENANCE = st.fixed_dictionaries(
    {"kind": st.just("authored"), "author": st.sampled_from(["a", "b"])},
    optional={"method": st.sampled_from(["m", 1, 1.0, True, "1"])},
).map(lambda p: {**p, "authoredAt": "t", "method": p.get("method", "m")})


@settings(max_examples=100, deadline=None)
@given(st.lists(LINE_PROVENANCE, min_size=1, max_size=12))
def test_the_index_numbers_each_provenance_as_its_canonical_json(
    tmp_path_factory: Any, provenances: list[dict[str, Any]]
) -> None:
    """The index's provenance table is one provenance per canonical JSON, the first seen, and
    each entry names its own (the load reads a line's key and provenance only)."""
    from rubric_engine.judge.cassettes.index import CassetteIndex

    folder = tmp_path_factory.mktemp("cassettes")
    lines = [
        json.dumps(
            {
                "format": "rubric-eval-cassette/1",
                "key": "sha256:" + f"{n:02x}" * 32,
                "rowId": f"r{n}",
                "keyParts": {"model": "m"},
                "provenance": prov,
                "attempts": [{"response": {"choices": []}}],
            }
        )
        for n, prov in enumerate(provenances)
    ]
    (folder / "c.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = CassetteIndex.load(folder)
    first: dict[str, dict[str, Any]] = {}
    for prov in provenances:
        first.setdefault(_dumps(prov), prov)
    assert [_dumps(p) for p in index._provenances] == list(first)
    for n, prov in enumerate(provenances):
        assert index.provenance("sha256:" + f"{n:02x}" * 32) == first[_dumps(prov)]
        assert _dumps(index.provenance("sha256:" + f"{n:02x}" * 32)) == _dumps(prov)


JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
LINE_TEXT = st.one_of(
    JSON_VALUE.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.tuples(
        st.sampled_from(["", " ", "\t", "\ufeff", "\x0b"]),
        JSON_VALUE.map(json.dumps),
        st.sampled_from(["", " ", "\n", "\r\n", " x", "{}", ",", "\x0c"]),
    ).map("".join),
    JSON_VALUE.map(json.dumps).map(lambda t: t[: len(t) // 2]),  # a torn line
    TEXT,
)


def _decoded(loads: Any, text: str) -> Any:
    try:
        return "value", json.dumps(loads(text))  # NaN is NaN: compare its JSON
    except Exception as exc:  # the same error, message and position
        return "error", type(exc), str(exc)


@settings(max_examples=600, deadline=None)
@given(LINE_TEXT)
def test_a_reply_with_any_space_around_it_is_read_as_the_duplicate_hook_reads_it(
    text: str,
) -> None:
    """:func:`_load` calls the decoder's scanner directly: leading and trailing space of every
    kind, extra data and torn texts read (or fail) as before."""
    expected = _decoded(lambda t: _reference_load(t)[0], text)
    assert _decoded(lambda t: _load(t)[0], text) == expected
