"""constraints.txt pins every package the test install asks for (docs/security.md "The supply
chain"): README's test command installs from it alone, so a dependency added to pyproject.toml
without regenerating it is missing on a fresh machine."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import ROOT


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _wanted(extras: dict[str, list[str]], base: list[str], extra: str) -> set[str]:
    names: set[str] = {_name(r) for r in base}
    for requirement in extras[extra]:
        own = re.fullmatch(r"rubric-engine\[([^\]]+)\]", requirement)
        if own:
            for inner in own.group(1).split(","):
                names |= _wanted(extras, [], inner.strip())
        else:
            names.add(_name(requirement))
    return names


def test_every_package_of_the_test_extra_is_pinned_in_constraints() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = _wanted(project["optional-dependencies"], project["dependencies"], "test")
    text = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    pinned = {_name(m) for m in re.findall(r"^([A-Za-z0-9_.\-\[\], ]+)==", text, re.MULTILINE)}
    missing = sorted(wanted - pinned)
    assert not missing, (
        f"constraints.txt lacks {missing}: regenerate it with the command in docs/security.md"
    )
