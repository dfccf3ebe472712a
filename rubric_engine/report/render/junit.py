"""JUnit XML for gate results, the format CI systems show as test results (docs/ci.md).

One ``<testsuite>`` per gate run; one ``<testcase>`` per check, named by the check (the threshold
as written, or ``noRegression: case medgpt-3 finalScore``); a failed check carries a
``<failure>`` with the message and detail. Pure string building with the standard library.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from rubric_engine.report.gate import GateCheck, GateResult


def junit_xml(suite: str, checks: Sequence[GateCheck]) -> str:
    """``<testsuites>`` XML text with an XML declaration and a final newline."""
    failures = sum(1 for c in checks if not c.passed)
    root = ET.Element(
        "testsuites", name="rubric-eval", tests=str(len(checks)), failures=str(failures)
    )
    node = ET.SubElement(
        root, "testsuite", name=suite, tests=str(len(checks)), failures=str(failures), errors="0"
    )
    for check in checks:
        case = ET.SubElement(
            node, "testcase", classname=f"rubric-eval.gate.{_kind(check)}", name=check.name
        )
        if check.passed:
            ET.SubElement(case, "system-out").text = check.message
        else:
            failure = ET.SubElement(case, "failure", message=check.message, type="GateFailure")
            failure.text = check.detail or check.message
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def gate_junit(result: GateResult) -> str:
    """The JUnit XML of a whole gate run."""
    return junit_xml(result.suite, result.checks)


def _kind(check: GateCheck) -> str:
    return "regression" if check.name.startswith("noRegression") else "threshold"
