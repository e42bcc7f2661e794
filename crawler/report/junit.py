"""``junit``: JUnit XML for CI test dashboards (Jenkins, GitLab, Azure, GitHub actions).

One ``<testsuite name="crawler">``: a passing ``<testcase>`` per crawled page
(classname and name are the page URL), and per (source page, broken link) a
``<testcase>`` whose classname is the page and name the link, failing with
the reason as ``message`` and the failure kind as ``type``; its text says
where the page writes the link (``at page:line:column``). The shape follows
the Jenkins xUnit plugin's ``junit-10.xsd``; tests validate against it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from crawler.report._common import SEED_SOURCE, by_source, iso, reason
from crawler.report.model import BrokenEdge, Format, ReportData

# Characters XML 1.0 cannot carry at all, even escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def render(data: ReportData) -> str:
    """The report as a JUnit XML document."""
    pages = data.need_pages()
    groups = dict(by_source(data.edges))
    suite = ET.Element(
        "testsuite",
        {
            "name": "crawler",
            "tests": str(len(pages) + len(data.edges)),
            "failures": str(len(data.edges)),
            "errors": "0",
            "skipped": "0",
            "time": f"{max(data.crawl.elapsed_s, 0.0):.3f}",
            "timestamp": iso(data.crawl.started_at) or "",
        },
    )
    properties = ET.SubElement(suite, "properties")
    _property(properties, "crawl_id", str(data.crawl.id))
    _property(properties, "state", data.crawl.state)
    for seed in data.crawl.seeds:
        _property(properties, "seed", seed)
    page_set = set(pages)
    sources = sorted(page_set | set(groups), key=lambda s: (s is not None, s or ""))
    for source in sources:
        classname = _safe(source if source is not None else SEED_SOURCE)
        if source in page_set:
            ET.SubElement(suite, "testcase", {"classname": classname, "name": classname})
        for edge in groups.get(source, []):
            _failing_case(suite, classname, edge)
    ET.indent(suite)
    body = ET.tostring(suite, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _failing_case(suite: ET.Element, classname: str, edge: BrokenEdge) -> None:
    case = ET.SubElement(suite, "testcase", {"classname": classname, "name": _safe(edge.url)})
    failure = ET.SubElement(
        case,
        "failure",
        {"message": _safe(reason(edge.status, edge.error)), "type": _safe(edge.kind)},
    )
    linked = f"linked as <{'>, <'.join(edge.elements)}>" if edge.elements else "a seed"
    if edge.line is not None:  # the classname is the page; a local file's source names the line
        linked += f" at {edge.shown_source}"
    failure.text = _safe(
        f"{edge.url}\nstatus: {edge.status if edge.status is not None else 'no response'}\n"
        f"error: {reason(edge.status, edge.error)}\n{linked}"
    )


def _property(parent: ET.Element, name: str, value: str) -> None:
    ET.SubElement(parent, "property", {"name": name, "value": _safe(value)})


def _safe(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


FORMAT = Format("junit", render, "application/xml", needs=frozenset({"pages"}))
