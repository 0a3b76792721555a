"""Open a report in headless Chromium and say what a reader would see.

Drives the system Chromium (Debian's ``chromium``) over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages separated by NUL bytes on fds 3 and 4), so it
needs no websocket library, no driver download and no network port. Used by the browser
test and usable by hand::

    python -m planner.report.browser reports/x/report.html --screenshot /tmp/shot.png
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BrowserError", "PageCheck", "check_page", "find_chromium"]

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# Flags that work in containers as root and keep the browser off the network.
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
    "--remote-debugging-pipe",
)

# Collected in the page after load: every <img>, whether it decoded and its natural size.
_PROBE = """
(async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  return JSON.stringify({
    title: document.title,
    figures: document.querySelectorAll('figure').length,
    text: document.body ? document.body.innerText.slice(0, 2000) : '',
    images: imgs.map(i => ({figure: i.dataset.figure || i.alt, complete: i.complete,
                            naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight})),
  });
})()
"""


class BrowserError(RuntimeError):
    """The browser could not be started or did not answer."""


@dataclass
class PageCheck:
    """What the page did: its images, console output, requests and screenshots."""

    title: str = ""
    text: str = ""
    figures: int = 0
    images: list[dict[str, Any]] = field(default_factory=list)
    console: list[dict[str, str]] = field(default_factory=list)  # every console message
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    screenshots: list[Path] = field(default_factory=list)
    url: str = ""  # the page's own URL (file:)

    @property
    def broken_images(self) -> list[dict[str, Any]]:
        return [i for i in self.images if not i["complete"] or i["naturalWidth"] <= 0]

    @property
    def external_requests(self) -> list[str]:
        """Requests that left the file: anything but the page itself and data: URLs. A
        sibling ``file:`` counts: a self-contained page that needs one breaks when copied alone."""
        return [u for u in self.requests if not u.startswith("data:") and u.split("#")[0] != self.url]


def find_chromium() -> str | None:
    """``RACE_CHROMIUM`` if set, else the first Chromium/Chrome on PATH."""
    env = os.environ.get("RACE_CHROMIUM")
    if env:
        return env if Path(env).exists() else shutil.which(env)
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class _Pipe:
    """DevTools protocol over the browser's fds 3 (we write) and 4 (we read)."""

    def __init__(self, binary: str, user_dir: str, log: Any) -> None:
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()
        # Park the child's ends above 3/4 so the dup2s below cannot clobber each other.
        hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def child_fds() -> None:  # runs in the child between fork and exec
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        try:
            self.proc = subprocess.Popen(
                [binary, *FLAGS, f"--user-data-dir={user_dir}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                preexec_fn=child_fds, close_fds=False,
            )
        finally:
            os.close(hi_r)
            os.close(hi_w)
        self._next = 0
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        with os.fdopen(self._r, "rb", buffering=0) as fh:
            while chunk := fh.read(65536):
                buf += chunk
                *msgs, buf = buf.split(b"\0")
                for m in msgs:
                    self._inbox.put(json.loads(m))
        self._inbox.put(None)  # the browser closed its end

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            got = self._get(deadline, method)
            if got.get("id") == self._next:
                if "error" in got:
                    raise BrowserError(f"{method}: {got['error'].get('message', got['error'])}")
                return got.get("result", {})
            self.events.append(got)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        deadline = time.monotonic() + timeout
        while True:
            got = self._get(deadline, method)
            self.events.append(got)
            if got.get("method") == method:
                return got

    def _get(self, deadline: float, what: str) -> dict[str, Any]:
        left = deadline - time.monotonic()
        try:
            got = self._inbox.get(timeout=max(left, 0.01))
        except queue.Empty:
            raise BrowserError(f"browser did not answer {what} in time") from None
        if got is None:
            raise BrowserError(f"browser exited while waiting for {what}")
        return got

    def close(self) -> None:
        try:
            os.write(self._w, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)


def _describe(ev: dict[str, Any]) -> tuple[str, str] | None:
    """(level, text) of a console-ish event, or None for other events."""
    m, p = ev.get("method"), ev.get("params", {})
    if m == "Runtime.consoleAPICalled":
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
        return ("error" if p.get("type") in ("error", "assert") else p.get("type", "log"), text)
    if m == "Runtime.exceptionThrown":
        d = p.get("exceptionDetails", {})
        return ("error", d.get("exception", {}).get("description") or d.get("text", "exception"))
    if m == "Log.entryAdded":
        e = p.get("entry", {})
        return (e.get("level", "info"), f"{e.get('text', '')} {e.get('url', '')}".strip())
    if m == "Network.loadingFailed":
        return ("error", f"load failed: {p.get('errorText', '')}")
    return None


def check_page(
    html: str | Path,
    screenshot: str | Path | None = None,
    *,
    chromium: str | None = None,
    width: int = 1280,
    height: int = 900,
    timeout: float = 60.0,
    max_full_height: int = 16000,
) -> PageCheck:
    """Load ``html`` in headless Chromium and report images, console and requests.

    With ``screenshot``, saves the first screen there and the whole page (up to
    ``max_full_height`` pixels) next to it as ``<stem>-full.png``.
    """
    binary = chromium or find_chromium()
    if not binary:
        raise BrowserError("no Chromium found; install Debian's `chromium` or set RACE_CHROMIUM")
    page = Path(html).resolve()
    with tempfile.TemporaryDirectory(prefix="race-chromium-") as user_dir:
        log_path = Path(user_dir) / "browser.log"
        with open(log_path, "wb") as log:
            pipe = _Pipe(binary, str(Path(user_dir) / "profile"), log)
            try:
                return _run(pipe, page, screenshot, width, height, timeout, max_full_height)
            except BrowserError as exc:
                tail = log_path.read_text(errors="replace")[-800:] if log_path.exists() else ""
                raise BrowserError(f"{exc}; browser log tail: {tail}") from None
            finally:
                pipe.close()


def _run(pipe: _Pipe, page: Path, screenshot: str | Path | None, width: int, height: int,
         timeout: float, max_full_height: int) -> PageCheck:
    target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["targetId"]
    sid = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        pipe.call(f"{domain}.enable", session=sid)
    pipe.call("Emulation.setDeviceMetricsOverride",
              {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=sid)
    pipe.events.clear()
    pipe.call("Page.navigate", {"url": page.as_uri()}, session=sid, timeout=timeout)
    pipe.wait_event("Page.loadEventFired", timeout=timeout)
    res = pipe.call("Runtime.evaluate", {"expression": _PROBE, "awaitPromise": True, "returnByValue": True},
                    session=sid, timeout=timeout)
    if "exceptionDetails" in res:
        raise BrowserError(f"page probe failed: {res['exceptionDetails'].get('text')}")
    probe = json.loads(res["result"]["value"])
    out = PageCheck(title=probe["title"], text=probe["text"], figures=probe["figures"], images=probe["images"],
                    url=page.as_uri())
    if screenshot is not None:
        shot = Path(screenshot)
        shot.parent.mkdir(parents=True, exist_ok=True)
        first = pipe.call("Page.captureScreenshot", {"format": "png"}, session=sid, timeout=timeout)
        shot.write_bytes(base64.b64decode(first["data"]))
        size = pipe.call("Page.getLayoutMetrics", session=sid)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": width, "height": min(int(size["height"]), max_full_height), "scale": 1}
        full = pipe.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip},
                         session=sid, timeout=timeout)
        full_path = shot.with_name(f"{shot.stem}-full.png")
        full_path.write_bytes(base64.b64decode(full["data"]))
        out.screenshots = [shot, full_path]
    # Late console messages (after load) arrive as events interleaved with the calls above.
    for ev in pipe.events:
        if ev.get("sessionId") not in (None, sid):
            continue
        if ev.get("method") == "Network.requestWillBeSent":
            out.requests.append(ev["params"]["request"]["url"])
        described = _describe(ev)
        if described:
            level, text = described
            out.console.append({"level": level, "text": text})
            if level == "error":
                out.errors.append(text)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Check a report in headless Chromium.")
    ap.add_argument("html")
    ap.add_argument("--screenshot", default=None)
    args = ap.parse_args(argv)
    res = check_page(args.html, args.screenshot)
    print(json.dumps({"title": res.title, "figures": res.figures, "images": len(res.images),
                      "broken_images": res.broken_images, "errors": res.errors,
                      "external_requests": res.external_requests,
                      "screenshots": [str(p) for p in res.screenshots]}, indent=2))
    return 1 if res.broken_images or res.errors or res.external_requests else 0


if __name__ == "__main__":
    raise SystemExit(main())
