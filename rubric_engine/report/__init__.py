"""Reports: the typed report, aggregation, metrics, gate, diff; renderers in ``render``.

The modules are pure (:mod:`~rubric_engine.report.model`, ``aggregate``, ``accumulate``, ``slices``,
``clusters``, ``outcome``, ``metrics``, ``gate``, ``diff`` and the renderers) except
:mod:`~rubric_engine.report.stored`, the one edge that reads the store and writes report files.
Its names are re-exported here for existing callers, imported on first use so that importing a
pure module (``rubric_engine.report.aggregate``) does not load the store and ``sqlite3``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubric_engine.report.stored import (
        ReportFiles,
        ReportRow,
        StoredTask,
        StreamedTask,
        diff_side,
        html_report,
        load_task,
        report_for_task,
        report_from_task,
        report_row,
        stream_report,
        task_section,
        write_reports,
    )

__all__ = [
    "ReportFiles",
    "ReportRow",
    "StoredTask",
    "StreamedTask",
    "diff_side",
    "html_report",
    "load_task",
    "report_for_task",
    "report_from_task",
    "report_row",
    "stream_report",
    "task_section",
    "write_reports",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("rubric_engine.report.stored"), name)
    raise AttributeError(f"module 'rubric_engine.report' has no attribute {name!r}")
