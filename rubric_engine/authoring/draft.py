"""``rubric-eval rubric draft POLICY.md… --model M``: ask a model for a pack proposal from
policy documents and write it as a DRAFT file (docs/authoring.md "From prose to a draft").

The request is rendered from ``prompts/draft_v1`` (the proposal's JSON Schema in the system
message, the policies in delimited data blocks in the user message) and sent through
:mod:`rubric_engine.judge.one_call`, so it replays from a cassette keyed like every judge call:
the key's ``rubricHash`` part is the hash of the policy files (what the answer is drawn from)
and ``promptHash`` the template's. Each answer is read and checked by
:mod:`rubric_engine.rubric.proposal` (the shape, every quote found in its file, the pack's own
checks) and re-asked with its problems. The file is a DRAFT with each rule's source lines as
comments; nothing is published.

:func:`author_draft` wraps a proposal written by hand into an ``authored`` cassette entry for
the same request, checked as a replay will check it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_engine.errors import CassetteError, InputError
from rubric_engine.formats.canonical import canonical_hash
from rubric_engine.formats.safe_yaml import load_documents
from rubric_engine.judge.backends import CallKey
from rubric_engine.judge.cassettes.authoring import USAGE_NOTE, authored_response
from rubric_engine.judge.cassettes.cassette import CassetteEntry
from rubric_engine.judge.one_call import Answered, CallSettings, ask, backend_for
from rubric_engine.judge.prompt import LANGUAGE_NAMES, PromptTemplate, block_tag, load_prompt
from rubric_engine.judge.protocol import JudgeRequest
from rubric_engine.rubric.loader import MAX_PACK_BYTES, parse_rubric_checked
from rubric_engine.rubric.model import BUILTIN_CATEGORIES, EvalRubric
from rubric_engine.rubric.pack_text import render_pack
from rubric_engine.rubric.proposal import (
    SCALE,
    DraftProposal,
    Located,
    PolicyText,
    pack_of,
    proposal_problems,
    proposal_schema,
    read_reply,
)

DRAFT_PROMPT = "draft_v1"
#: sampling of a draft call; part of the cassette key
DRAFT_PARAMS: dict[str, Any] = {
    "temperature": 0.0,
    "max_tokens": 16384,
    "response_format": {"type": "json_object"},
}
#: the policies a draft reads, in characters (a long handbook: draft it a chapter at a time)
MAX_POLICY_CHARS = 200_000


@dataclass(frozen=True)
class DraftRequest:
    """The request of a draft, and what its answers are checked against."""

    request: JudgeRequest
    kwargs: dict[str, Any]
    policies: dict[str, PolicyText]
    hashes: dict[str, str]  # file name → sha256 of its bytes


@dataclass(frozen=True)
class Draft:
    text: str
    rubric: EvalRubric
    answered: Answered[DraftProposal]


def read_policies(paths: Sequence[Path]) -> tuple[dict[str, PolicyText], dict[str, str]]:
    """The policy files by name, and each one's SHA-256.

    Raises:
        InputError: a file is missing, not UTF-8, named twice, or the files are too long.
    """
    policies: dict[str, PolicyText] = {}
    hashes: dict[str, str] = {}
    for path in paths:
        try:
            data = path.read_bytes()
            text = data.decode("utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read the policy ({exc}); pass UTF-8 text") from exc
        if path.name in policies:
            raise InputError(f"{path}: a second policy named {path.name}; rename one")
        policies[path.name] = PolicyText(path.name, text.replace("\r\n", "\n"))
        hashes[path.name] = "sha256:" + hashlib.sha256(data).hexdigest()
    total = sum(len(p.text) for p in policies.values())
    if total > MAX_POLICY_CHARS:
        raise InputError(
            f"the policies hold {total:,} characters; at most {MAX_POLICY_CHARS:,} are drafted "
            "at once: draft one chapter at a time and merge the packs"
        )
    return policies, hashes


def draft_request(
    paths: Sequence[Path], model: str, key: str, language: str, prompt: PromptTemplate
) -> DraftRequest:
    """The first request of a draft of ``paths`` (see the module docstring)."""
    policies, hashes = read_policies(paths)
    system = prompt.system.render(
        schema=proposal_schema(),
        categories=", ".join(BUILTIN_CATEGORIES),
        language=LANGUAGE_NAMES.get(language, language),
        scale_min=SCALE[0],
        scale_max=SCALE[1],
    ).strip()
    tag = block_tag(*(p.text for p in policies.values()))
    user = prompt.user.render(
        key=key,
        tag=tag,
        documents=[{"name": name, "text": p.text} for name, p in policies.items()],
    ).strip()
    messages = ({"role": "system", "content": system}, {"role": "user", "content": user})
    subject = canonical_hash(hashes)  # the policies drafted from, by name and content
    request = JudgeRequest(
        row_id="draft:" + "+".join(Path(n).stem for n in policies),
        messages=messages,
        case_requirement_ids=(),
        rubric_hash=subject,
        prompt_hash=prompt.hash,
    )
    kwargs = {"model": model, "messages": [dict(m) for m in messages], **DRAFT_PARAMS}
    return DraftRequest(request, kwargs, policies, hashes)


def reader(policies: dict[str, PolicyText]) -> Any:
    """The answer check of a draft: the proposal, or every problem it has."""

    def read(text: str) -> tuple[DraftProposal | None, list[str]]:
        proposal, problems = read_reply(text)
        if proposal is None:
            return None, problems
        problems, _ = proposal_problems(proposal, policies)
        return proposal, problems

    return read


def draft_pack(
    paths: Sequence[Path],
    model: str,
    key: str,
    language: str,
    settings: CallSettings,
    max_reasks: int = 2,
) -> Draft:
    """Ask for a proposal and write it as a DRAFT pack text that loads.

    Raises:
        InputError: a policy cannot be read.
        CassetteMissError / JudgeCallError: no valid answer (see
            :func:`~rubric_engine.judge.one_call.ask`).
        ConfigurationError: a bad mode or a missing cassette folder.
    """
    prompt = load_prompt(DRAFT_PROMPT)
    built = draft_request(paths, model, key, language, prompt)
    backend = backend_for(settings, model)
    answered = ask(backend, built.request, built.kwargs, reader(built.policies), max_reasks)
    _, found = proposal_problems(answered.value, built.policies)
    text, rubric = _pack_text(answered, found, built, model)
    return Draft(text, rubric, answered)


def _pack_text(
    answered: Answered[DraftProposal],
    found: dict[str, list[Located]],
    built: DraftRequest,
    model: str,
) -> tuple[str, EvalRubric]:
    data, comments = pack_of(answered.value, found)
    prov = answered.provenance or {}
    if prov.get("kind") == "authored":
        source = f"an authored answer replayed from a cassette ({prov.get('author')}: "
        source += f"{prov.get('method')})"
    elif prov.get("kind") == "recorded":
        source = f"a recorded answer of {prov.get('model')} replayed from a cassette"
    else:
        source = f"a live answer of {model}"
    header = [
        f"DRAFT of {data['key']}, proposed from the policy text by `rubric-eval rubric draft`:",
        f"{source}.",
        *(f"policy {name} ({digest})" for name, digest in built.hashes.items()),
        "Every rule quotes the policy lines it comes from (checked to exist in the file).",
        "Nothing is published: review each rule against its lines, run",
        "`rubric-eval rubric validate FILE --lint`, then `rubric-eval rubric publish FILE`.",
        "",
    ]
    text = render_pack(data, comments, header)
    documents = load_documents(text, MAX_PACK_BYTES)
    rubric, _ = parse_rubric_checked(documents[0][1], source="the drafted pack")
    return text, rubric


def author_draft(
    paths: Sequence[Path],
    proposal_path: Path,
    key: str,
    language: str,
    author: str,
    method: str,
    out: Path,
    model: str,
) -> CassetteEntry:
    """Write a hand-written proposal as the ``authored`` answer to the draft request of
    ``paths`` (appended to ``out``, keyed as a replay will key it).

    Raises:
        CassetteError: the proposal fails the checks a replay applies (all problems listed).
        InputError: a file cannot be read.
    """
    built = draft_request(paths, model, key, language, load_prompt(DRAFT_PROMPT))
    try:
        content = proposal_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{proposal_path}: cannot read the proposal ({exc})") from exc
    proposal, problems = reader(built.policies)(content)
    if proposal is None or problems:
        raise CassetteError(
            f"{proposal_path}: the proposal fails the draft checks:\n  - " + "\n  - ".join(problems)
        )
    key_of = CallKey.of(built.kwargs, built.request)
    raw = authored_response(model, key_of, built.kwargs["messages"], content)
    entry = CassetteEntry(
        key=key_of.key,
        row_id=built.request.row_id,
        key_parts=key_of.parts,
        provenance={
            "kind": "authored",
            "author": author,
            "method": method,
            "authoredAt": datetime.now(UTC).strftime("%Y-%m-%d"),
            "usage": USAGE_NOTE,
            "proposal": proposal_path.name,
        },
        attempts=[{"response": raw}],
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(entry.to_json() + "\n", encoding="utf-8")
    return entry
