"""matrix.html in headless Chromium: the heatmap renders, a click opens a cell's detail, nothing a
kernel name carries can run, and a screenshot is kept as a CI artifact.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
ended by NUL on fds 3 and 4), so the test needs no driver package. CI installs Debian's chromium
in .ci/run; elsewhere the test skips unless a chromium is on PATH (or PORTCHECK_CHROMIUM names one).
Screenshots go to $PORTCHECK_ARTIFACTS (default reports/artifacts/).
"""
import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from portcheck import cli
from tests.support.report_records import runtime, two_vendors_and_compile, write

ROOT = Path(__file__).resolve().parents[2]
XSS = "<img src=x onerror=document.title='pwned'><script>document.title='pwned'</script>"


def chromium() -> str | None:
    explicit = os.environ.get("PORTCHECK_CHROMIUM")
    if explicit:
        return explicit
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


pytestmark = pytest.mark.skipif(chromium() is None, reason="chromium is not installed (CI installs Debian's "
                                                           "chromium in .ci/run; set PORTCHECK_CHROMIUM to use another)")


class DevTools:
    """A headless Chromium and one page, spoken to over --remote-debugging-pipe."""

    def __init__(self, exe: str, profile: Path):
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--no-default-browser-check", "--hide-scrollbars", "--remote-debugging-pipe",
                 f"--user-data-dir={profile}", "about:blank"]
        # the shell puts our stdin pipe on fd 3 (Chromium reads) and our stdout pipe on fd 4 (it writes)
        self.proc = subprocess.Popen(["sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null', exe, *flags],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buf, self.next_id, self.events = b"", 0, []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium exited (status {self.proc.poll()})")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, params: dict | None = None, *, page: bool = False, timeout: float = 30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if page:
            msg["sessionId"] = self.session
        self.proc.stdin.write(json.dumps(msg).encode() + b"\0")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_event(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def js(self, expression: str):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, page=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                   "clickCount": 1}, page=True)

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def browser(tmp_path):
    b = DevTools(chromium(), tmp_path / "profile")
    b.call("Page.enable", page=True)
    b.call("Emulation.setDeviceMetricsOverride", {"width": 1500, "height": 1000, "deviceScaleFactor": 1,
                                                  "mobile": False}, page=True)
    yield b
    b.close()


def artifacts() -> Path:
    out = Path(os.environ.get("PORTCHECK_ARTIFACTS") or ROOT / "reports" / "artifacts")
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_heatmap_renders_and_a_cell_opens_its_detail(browser, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = two_vendors_and_compile()
    runs["amd"].append(runtime(XSS, "fp16", "rocm", "gfx942", "fail", 2.0, message=XSS,
                               failing={"dtype": "fp16", "seed": 5, "note": XSS}))
    paths = [write(tmp_path / name / "results.jsonl", recs) for name, recs in runs.items()]
    assert cli.main(["report", *map(str, paths), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    capsys.readouterr()
    page = tmp_path / "out" / "matrix.html"

    browser.call("Page.navigate", {"url": page.as_uri()}, page=True)
    browser.wait_event("Page.loadEventFired")

    # the heatmap is laid out, its cells are coloured, and nothing from a kernel name ran
    shape = browser.js("""(() => {
        const t = document.getElementById('heatmap-accuracy'), r = t.getBoundingClientRect();
        const cells = [...t.querySelectorAll('td.c')], links = t.querySelectorAll('td.c a');
        const colours = new Set([...t.querySelectorAll('td.c')].map(td => getComputedStyle(td).backgroundColor));
        return {w: r.width, h: r.height, cells: cells.length, links: links.length, colours: colours.size,
                rows: t.tBodies[0].rows.length, scripts: document.scripts.length,
                imgs: document.images.length, title: document.title,
                names: [...t.querySelectorAll('tbody th')].map(th => th.textContent)};
    })()""")
    assert shape["w"] > 600 and shape["h"] > 100, shape
    assert shape["rows"] == 5 and shape["cells"] == 5 * 10 and shape["links"] == 4 * 10 + 1
    assert shape["colours"] >= 4                      # pass, fail, compiled-only, empty
    assert shape["scripts"] == 0 and shape["imgs"] == 0 and shape["title"] != "pwned"
    assert XSS in shape["names"]                       # shown as text, not parsed as HTML
    shot = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"}, page=True)["data"])
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20000
    (artifacts() / "matrix.png").write_bytes(shot)

    # click the failing AMD cell: its detail panel opens with provenance and the failing input
    target = browser.js("""(() => {
        const th = [...document.querySelectorAll('#heatmap-accuracy tbody tr')]
            .find(tr => tr.cells[0].textContent === 'softmax' && tr.cells[1].textContent === 'fp16');
        const heads = [...document.querySelectorAll('#heatmap-accuracy thead tr:last-child th')].map(h => h.textContent);
        const a = th.cells[2 + heads.indexOf('gfx942')].querySelector('a');
        a.scrollIntoView({block: 'center'});
        const r = a.getBoundingClientRect();
        const id = a.getAttribute('href').slice(1);
        return {x: r.x + r.width / 2, y: r.y + r.height / 2, id: id,
                before: getComputedStyle(document.getElementById(id)).display};
    })()""")
    assert target["before"] == "none"
    browser.click(target["x"], target["y"])
    opened = browser.js(f"""(() => {{
        const d = document.getElementById({json.dumps(target['id'])}), r = d.getBoundingClientRect();
        return {{hash: location.hash, display: getComputedStyle(d).display, w: r.width, h: r.height,
                 text: d.innerText}};
    }})()""")
    assert opened["hash"] == "#" + target["id"]
    assert opened["display"] == "block" and opened["w"] > 300 and opened["h"] > 300
    assert "softmax fp16 on gfx942 (amd)" in opened["text"]
    assert '"seed": 77' in opened["text"] and "amd-box" in opened["text"]
    assert "portcheck run --target rocm --kernel softmax --dtype fp16" in opened["text"]

    shot = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"}, page=True)["data"])
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 20000
    (artifacts() / "matrix-detail.png").write_bytes(shot)

    # the close link hides it again
    browser.js("document.querySelector('.detail:target .close').click()")
    assert browser.js(f"getComputedStyle(document.getElementById({json.dumps(target['id'])})).display") == "none"
