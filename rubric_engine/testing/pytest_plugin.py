"""The pytest plugin (entry point ``pytest11``): an ``assert_rubric`` fixture and
``--rubric-mode``.

The fixture is :func:`rubric_engine.testing.assertions.assert_rubric` with relative paths
(input files, pack files, cassettes) resolved against the pytest root folder, so a test reads
the same files wherever pytest is started. ``--rubric-mode replay`` (default) keeps every test
offline; ``record`` or ``live`` call the judge.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.testing.assertions import MODE_ENV
from rubric_engine.testing.assertions import assert_rubric as _assert_rubric


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rubric-eval")
    group.addoption(
        "--rubric-mode",
        choices=("replay", "record", "live"),
        default=None,
        help="judge mode for assert_rubric (default replay: offline, from cassettes)",
    )


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--rubric-mode", default=None)
    if mode:
        os.environ[MODE_ENV] = mode


@pytest.fixture
def assert_rubric(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``assert_rubric(rows_or_file_or_report, thresholds=[…], rubric=…)``; see
    :func:`rubric_engine.testing.assertions.assert_rubric`."""
    root = Path(request.config.rootpath)

    def rooted(value: Any) -> Any:
        if isinstance(value, str | Path) and not Path(value).is_absolute():
            candidate = root / value
            return candidate if candidate.exists() else value
        return value

    def check(source: Any, thresholds: Any = (), **kwargs: Any) -> Any:
        for key in ("rubric", "cassettes"):
            if key in kwargs:
                kwargs[key] = rooted(kwargs[key])
        kwargs.setdefault("cassettes", rooted("cassettes"))
        return _assert_rubric(rooted(source), thresholds, **kwargs)

    return check
