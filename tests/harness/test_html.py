"""matrix.html without a browser: self-contained, every cell links to its detail, colours follow the
scales, evidence is marked. (tests/harness/test_html_chromium.py renders it in headless Chromium.)"""
import re
from html.parser import HTMLParser

from portcheck.reports import grid as merge
from portcheck.reports.html import COMPILED_COLOR, accuracy_color, render, speed_color
from tests.support.report_records import two_vendors_and_compile


class Page(HTMLParser):
    """Collects tags, ids, links and the cells of each heatmap."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.ids, self.links, self.cells, self.table = [], set(), [], {}, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "table" and a.get("id", "").startswith("heatmap-"):
            self.table = a["id"]
            self.cells[self.table] = []
        if tag == "td" and self.table and "c" in a.get("class", "").split():
            self.cells[self.table].append(a)
        if tag == "a" and "href" in a:
            self.links.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None


def matrix():
    return merge.from_records([r for rs in two_vendors_and_compile().values() for r in rs])


def test_page_is_self_contained():
    text = render(matrix(), "two vendors")
    p = Page(text)
    assert "script" not in p.tags and "link" not in p.tags and "img" not in p.tags
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)       # nothing fetched from outside
    assert "<style>" in text and text.startswith("<!doctype html>")


def test_every_cell_opens_its_detail():
    m = matrix()
    p = Page(render(m))
    acc = p.cells["heatmap-accuracy"]
    assert len(acc) == len(m.rows) * len(m.archs)
    details = [h[1:] for h in p.links if h.startswith("#d-")]
    assert details and all(d in p.ids for d in details)
    assert len(set(details)) == len(m.cells)          # one detail per cell, shared by both heatmaps
    assert len(p.cells["heatmap-speed"]) == len(m.archs)   # one benchmarked row


def test_colours_and_evidence_marks():
    text = render(matrix())
    p = Page(text)
    styles = [c["style"] for c in p.cells["heatmap-accuracy"] if "style" in c]
    fail = "rgb(%d,%d,%d)" % accuracy_color("fail", 3.5)
    built = "rgb(%d,%d,%d)" % COMPILED_COLOR
    assert sum(fail in s for s in styles) == 1
    assert sum(built in s for s in styles) == 40 - 4          # compile-only cells
    classes = [c["class"] for c in p.cells["heatmap-accuracy"] if "style" in c]
    assert sum("ev-gpu" in c for c in classes) == 4 and sum("ev-compile" in c for c in classes) == 36
    assert "rgb(%d,%d,%d)" % speed_color(0.91) in text
    assert accuracy_color("pass", 0.0) != accuracy_color("pass", 1.0)
    assert speed_color(0.0) == (215, 48, 39) and speed_color(1.0) == (26, 152, 80)


def test_detail_holds_provenance_failing_input_and_replay():
    text = render(matrix())
    detail = text.split('id="d-')[1:]
    amd = next(d for d in detail if "softmax fp16 on gfx942" in d.split("</h3>")[0])
    assert "Failing input" in amd and "&quot;seed&quot;: 77" in amd
    assert "portcheck run --target rocm --kernel softmax --dtype fp16" in amd
    assert "amd-box" in amd and "580.65" not in amd and "AMD Instinct MI300X" in amd
    assert "ran on the GPU" in amd and "compiled only" in amd
