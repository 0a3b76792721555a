"""The report in a real browser: headless Chromium (Debian's ``chromium``), driven over
the DevTools protocol by :mod:`planner.report.browser`.

Asserts every figure decoded (``naturalWidth > 0``), the console shows no errors, the page
asked for nothing outside itself, and saves screenshots. A control page with a broken
image and a console error proves the checks can fail. Skips only when no Chromium is
installed, and not in CI on a machine with apt-get (``.ci/run`` installs it through
``scripts/test.sh``), where a missing browser fails.
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import pytest
from test_report_support import built_report

from planner.report.browser import check_page, find_chromium

CHROMIUM = find_chromium()
# In CI on a Debian machine scripts/test.sh installs chromium, so a missing browser there is
# a broken install step, not a reason to skip: the tests then run and fail loudly.
INSTALLABLE = bool(os.environ.get("CI")) and shutil.which("apt-get") is not None
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not INSTALLABLE,
    reason="no Chromium on this machine (apt-get install chromium, or set RACE_CHROMIUM); "
    "scripts/test.sh installs it where apt-get is available",
)


@pytest.fixture(autouse=True)
def _browser_present() -> None:
    if CHROMIUM is None:
        pytest.fail("CI with apt-get but no chromium: the install step in scripts/test.sh failed")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_report_renders_in_chromium() -> None:
    built = built_report()
    shot = built.out / "screenshot.png"
    res = check_page(built.out / "report.html", shot)
    n_figures = len(list((built.out / "figures").glob("*.png")))
    assert res.figures == n_figures and len(res.images) == n_figures
    assert res.broken_images == [], res.broken_images
    assert all(i["naturalWidth"] >= 400 for i in res.images)  # real plots, not 1px stand-ins
    assert res.errors == [], res.errors
    assert res.external_requests == [], res.external_requests
    assert res.title.startswith("RACE regime report")
    assert "RACE regime report" in res.text and "SIMULATED" in res.text
    for path in res.screenshots:
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 20_000, path
    # Keep a copy where a person can look at it after the run (CI artefact or by hand).
    keep = os.environ.get("RACE_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for path in res.screenshots:
            shutil.copy(path, Path(keep) / path.name)
    print(f"screenshots: {', '.join(map(str, res.screenshots))}")


def test_checker_catches_broken_image_and_console_error(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'>"
        "<title>bad</title></head><body><figure><img src='missing.png' data-figure='gone'></figure>"
        "<script>console.error('boom from the page')</script></body></html>"
    )
    res = check_page(page)
    assert [i["figure"] for i in res.broken_images] == ["gone"]
    assert any("boom from the page" in e for e in res.errors)


def test_checker_counts_a_sibling_file_as_leaving_the_page(tmp_path: Path) -> None:
    # A self-contained page loads no file beside it: one that does breaks once copied alone,
    # yet file: requests passed as the page's own.
    png = tiny_png()
    (tmp_path / "sibling.png").write_bytes(png)
    page = tmp_path / "linked.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'>"
        "<title>linked</title></head><body><img src='sibling.png'>"
        f"<img src='data:image/png;base64,{base64.b64encode(png).decode()}'></body></html>"
    )
    res = check_page(page)
    assert res.broken_images == [] and len(res.images) == 2, res.images
    assert res.external_requests == [(tmp_path / "sibling.png").as_uri()], res.requests


def tiny_png() -> bytes:
    import io

    import matplotlib.image
    import numpy as np

    buf = io.BytesIO()
    matplotlib.image.imsave(buf, np.zeros((4, 4, 3)), format="png")
    return buf.getvalue()
