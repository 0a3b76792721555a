"""Regime-classification reports and compute cards.

* :func:`build_report` -- ``planner report``: report.md, a self-contained report.html,
  regimes.json and every figure as PNG and SVG;
* :func:`card_fields` / :func:`rich_card` -- one run's compute card (``runners card``).

Submodules: ``data`` (records, surrogate fits, frontiers), ``figures`` (matplotlib),
``document`` (what the report says), ``render`` (markdown/HTML), ``browser`` (checks a
report in headless Chromium). Importing this package is cheap: matplotlib and torch load
only when a report is built.
"""

from __future__ import annotations

from planner.report.build import ReportResult, build_report
from planner.report.cards import card_fields, rich_card

__all__ = ["ReportResult", "build_report", "card_fields", "rich_card"]
