"""JUnit XML for ``spanreplay check --junit-xml``: one testcase per replayed run.

The shape CI systems read (Jenkins, GitLab, GitHub Actions reporters, Azure):
``<testsuites>`` holding one ``<testsuite>``, a ``<testcase>`` per run with
``<failure>`` for a divergence and ``<error>`` for a run that could not be
judged, and the replayed code's own output in ``<system-out>``/``<system-err>``.
Text from traces and from the replayed code may hold characters XML 1.0 cannot
carry at all (ESC, NUL): they are written as visible escapes, never dropped
silently and never written raw (one such byte makes the whole report unreadable).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Case", "write_junit_xml"]

# Neither allowed nor escapable in XML 1.0: C0 controls but tab, newline and carriage
# return; lone surrogates; U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold written as ``\\xNN`` or ``\\uNNNN``."""
    return _NOT_XML.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


@dataclass(frozen=True)
class Case:
    """One testcase: a run and how its replay ended.

    Attributes:
        name: the run id.
        classname: groups the cases (``spanreplay.<agent>``).
        seconds: how long the replay took.
        failure: ``(kind, message, type, text)`` with kind ``failure`` or ``error``, or
            None for a run that passed.
        stdout: what the replayed code printed.
        stderr: what it wrote to stderr.
    """

    name: str
    classname: str
    seconds: float
    failure: tuple[str, str, str, str] | None = None
    stdout: str = ""
    stderr: str = ""


def write_junit_xml(
    path: str | os.PathLike[str], suite: str, cases: Sequence[Case], *, timestamp: datetime, seconds: float
) -> None:
    """Write ``cases`` as one JUnit test suite named ``suite`` to ``path``."""
    failures = sum(1 for c in cases if c.failure is not None and c.failure[0] == "failure")
    errors = sum(1 for c in cases if c.failure is not None and c.failure[0] == "error")
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": str(errors), "time": f"{seconds:.3f}"}
    root = ET.Element("testsuites", {"name": xml_text(suite), **counts})
    element = ET.SubElement(
        root,
        "testsuite",
        {"name": xml_text(suite), **counts, "skipped": "0", "timestamp": timestamp.isoformat(timespec="seconds")},
    )
    for case in cases:
        node = ET.SubElement(
            element,
            "testcase",
            {"classname": xml_text(case.classname), "name": xml_text(case.name), "time": f"{case.seconds:.3f}"},
        )
        if case.failure is not None:
            kind, message, kind_name, text = case.failure
            failed = ET.SubElement(node, kind, {"message": xml_text(message), "type": xml_text(kind_name)})
            failed.text = xml_text(text)
        if case.stdout:
            ET.SubElement(node, "system-out").text = xml_text(case.stdout)
        if case.stderr:
            ET.SubElement(node, "system-err").text = xml_text(case.stderr)
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
