"""matrix.html: one self-contained page (no script, no external file) with two heatmaps of
kernel x dtype against arch: accuracy (worst error over its tolerance) and speed (fraction of the
roofline). Each cell links to a detail panel with its records' provenance, failing input,
diagnosis, tolerance formula and replay command, opened by CSS `:target`, so it works with scripts off.

Every string from a record goes through `esc`; the page's Content-Security-Policy forbids
scripts outright, so even a missed escape could not run one.
"""
from __future__ import annotations

import json
import math

from .grid import PASSED, Cell, ResultGrid, number, roofline, timing, vendor_of
from .markdown import EVIDENCE_MARK, VERDICT_MARK, evidence_text, ratio_text
from .output import html_escape as esc

EVIDENCE_TEXT = {"gpu": "ran on the GPU", "interpreter": "ran in Triton's CPU interpreter",
                 "as-arch": "ran this arch's launch configuration on another device (--as-arch)",
                 "compile": "compiled only"}
_GREEN, _YELLOW, _RED = (26, 152, 80), (254, 224, 139), (215, 48, 39)
VERDICT_COLOR = {"fail": _RED, "xpass": (244, 109, 67), "error": (165, 0, 38), "xfail": (178, 171, 210),
                 "skip": (224, 224, 224)}
COMPILED_COLOR = (158, 202, 225)


def _mix(a, b, t: float) -> tuple:
    return tuple(round(x + (y - x) * t) for x, y in zip(a, b))


def _rgb(c) -> str:
    return f"rgb({c[0]},{c[1]},{c[2]})"


def accuracy_color(verdict: str, ratio) -> tuple:
    """pass: green (no error) to yellow (at the tolerance); other verdicts their own colour."""
    if verdict != "pass":
        return VERDICT_COLOR.get(verdict, (224, 224, 224))
    r = number(ratio)
    t = 0.0 if r is None or math.isnan(r) else min(1.0, max(0.0, r)) ** 0.5
    return _mix(_GREEN, _YELLOW, t)


def speed_color(fraction: float) -> tuple:
    f = min(1.0, max(0.0, fraction))
    return _mix(_RED, _YELLOW, f / 0.5) if f < 0.5 else _mix(_YELLOW, _GREEN, (f - 0.5) / 0.5)


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#222;background:#fafafa}
h1{font-size:1.4rem;margin:0 0 .3rem}h2{font-size:1.15rem;margin:1.6rem 0 .5rem}
table{border-collapse:collapse}th,td{padding:2px 6px;border:1px solid #ddd;text-align:left}
.heatmap td.c{padding:0;min-width:4.2rem;text-align:center;position:relative}
.heatmap td.c a{display:block;padding:4px 3px;color:#111;text-decoration:none}
.heatmap td.c a:hover,.heatmap td.c a:focus{outline:2px solid #000;outline-offset:-2px}
.heatmap td.ev-compile{background-image:repeating-linear-gradient(45deg,rgba(255,255,255,.55) 0 3px,transparent 3px 7px)}
.heatmap td.ev-interpreter a{outline:2px dotted #444;outline-offset:-4px}
.heatmap td.ev-as-arch a{outline:2px dashed #444;outline-offset:-4px}
.heatmap td.empty{background:#fff}
.heatmap sup{font-size:.65rem;color:#333;margin-left:1px}
.heatmap th.vendor{text-align:center;background:#eee}
.legend span.sw{display:inline-block;width:1.1rem;height:.9rem;vertical-align:middle;border:1px solid #999;margin:0 .25rem 0 .8rem}
.detail{display:none}
.detail:target{display:block;position:fixed;top:0;right:0;width:min(46rem,94vw);height:100vh;overflow:auto;
 background:#fff;border-left:3px solid #333;box-shadow:-6px 0 18px rgba(0,0,0,.25);padding:1rem 1.4rem;box-sizing:border-box}
.detail .close{float:right;font-size:1.3rem;text-decoration:none}
.detail .rec{border-top:1px solid #ccc;margin-top:.8rem;padding-top:.5rem}
.detail pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;padding:.4rem;margin:.3rem 0}
.detail table{margin:.3rem 0}.muted{color:#666}.bad{color:#a50026;font-weight:600}
code{background:#f0f0f0;padding:0 .2rem;word-break:break-all}
"""


class _Page:
    def __init__(self, m: ResultGrid):
        self.m = m
        self.ids: dict[tuple, str] = {}
        for i, key in enumerate(sorted(m.cells, key=m._sort)):
            self.ids[key] = f"d-{i}"
        self.superseded = {}
        for s in m.superseded:
            self.superseded.setdefault(id(s.kept), []).append(s)

    # ---- heatmaps ----
    def heatmap(self, name: str, render, rows) -> str:
        m = self.m
        vendors: list[tuple[str, int]] = []
        for a in m.archs:
            v = vendor_of(a)
            if vendors and vendors[-1][0] == v:
                vendors[-1] = (v, vendors[-1][1] + 1)
            else:
                vendors.append((v, 1))
        out = [f'<table class="heatmap" id="heatmap-{name}"><thead>',
               '<tr><th rowspan="2">kernel</th><th rowspan="2">dtype</th>'
               + "".join(f'<th class="vendor" colspan="{n}">{esc(v)}</th>' for v, n in vendors) + "</tr>",
               "<tr>" + "".join(f"<th>{esc(a)}</th>" for a in m.archs) + "</tr></thead><tbody>"]
        for case, dtype in rows:
            cells = "".join(render(m.cell(case, dtype, a), (case, dtype, a)) for a in m.archs)
            out.append(f"<tr><th>{esc(case)}</th><td>{esc(dtype)}</td>{cells}</tr>")
        out.append("</tbody></table>")
        return "\n".join(out)

    def _td(self, key, color, text, title, evidence) -> str:
        classes = ["c", f"ev-{evidence[0]}"]   # styled by the strongest evidence: GPU, interpreter, compile
        marks = "".join(EVIDENCE_MARK[e] for e in evidence)
        return (f'<td class="{" ".join(classes)}" style="background-color:{_rgb(color)}">'
                f'<a href="#{self.ids[key]}" title="{esc(title)}">{esc(text)}<sup>{marks}</sup></a></td>')

    def accuracy_td(self, c: Cell | None, key) -> str:
        if c is None:
            return '<td class="c empty"></td>'
        acc, comp = c.accuracy(), c.compiled()
        ev = c.evidence()
        where = f"{key[0]} {key[1]} on {key[2]}"
        if acc is not None:
            verdict = acc["verdict"]
            if comp is not None and comp["verdict"] not in PASSED and verdict in PASSED:
                verdict = comp["verdict"]   # a compile failure on the arch outranks a passing run
            text = VERDICT_MARK[verdict]
            if acc["worst_ratio"] is not None and verdict in ("pass", "fail", "xfail", "xpass"):
                text = ratio_text(acc["worst_ratio"]) if verdict == "pass" else f"{text} {ratio_text(acc['worst_ratio'])}"
            title = (f"{where}: {acc['verdict']}, worst error {ratio_text(acc['worst_ratio']) or '-'} of the "
                     f"tolerance ({ratio_text(acc['max_ulp']) or '-'} ULP); "
                     + ", ".join(EVIDENCE_TEXT[e] for e in ev))
            return self._td(key, accuracy_color(verdict, acc["worst_ratio"]), text, title, ev)
        if comp is not None:
            if comp["verdict"] == "skip":   # nothing built: the case declares no launch here
                return self._td(key, (224, 224, 224), "skip", f"{where}: nothing compiled ({comp['skipped']} "
                                "skipped record(s))", ev)
            ok = comp["verdict"] in PASSED and not comp["over_cap"]
            text = "built" if ok else ("over cap" if comp["verdict"] in PASSED else VERDICT_MARK[comp["verdict"]])
            title = (f"{where}: compiled only ({comp['variants'] - comp['failed']}/{comp['variants']} "
                     "variants built); no accuracy evidence on this arch")
            return self._td(key, COMPILED_COLOR if ok else _RED, text, title, ev)
        return self._td(key, (240, 240, 240), "bench", f"{where}: benchmark only", ev)

    def speed_td(self, c: Cell | None, key) -> str:
        s = c.speed() if c is not None else None
        if s is None:
            return '<td class="c empty"></td>'
        title = (f"{key[0]} {key[1]} on {key[2]}: {100 * s['fraction']:.1f}% of the {s['basis']}"
                 f" (weakest of {s['specs']} spec(s); median {s['median_ms']:.4g} ms)")
        return self._td(key, speed_color(s["fraction"]), f"{100 * s['fraction']:.0f}%", title, ["gpu"])

    # ---- details ----
    def detail(self, key, c: Cell) -> str:
        case, dtype, arch = key
        out = [f'<article class="detail" id="{self.ids[key]}" role="dialog" aria-label="{esc(case)} {esc(dtype)} on {esc(arch)}">',
               '<a class="close" href="#top" title="close">&times;</a>',
               f"<h3>{esc(case)} {esc(dtype)} on {esc(arch)} ({esc(c.vendor)})</h3>",
               "<p>Evidence: " + "; ".join(esc(EVIDENCE_TEXT[e]) for e in c.evidence())
               + f". Cell verdict: <b>{esc(VERDICT_MARK.get(c.status(), c.status()))}</b>.</p>"]
        for e in c.entries:
            out.append(self.record(e))
        out.append("</article>")
        return "\n".join(out)

    def record(self, e) -> str:
        r = e.record
        cls = "bad" if r["verdict"] not in PASSED else ""
        out = ['<section class="rec">',
               f'<h4>{esc(r["kind"])} on {esc(r["target"])}/{esc(r["arch"])}'
               + (f" [{esc(r['variant'])}]" if r.get("variant") else "")
               + f': <span class="{cls}">{esc(VERDICT_MARK.get(r["verdict"], r["verdict"]))}</span> '
               f'<span class="muted">({esc(EVIDENCE_TEXT.get(r["evidence"], r["evidence"]))})</span></h4>']
        if r.get("message"):
            out.append(f"<pre>{esc(r['message'])}</pre>")
        forced = r.get("as_arch") or {}
        if forced:
            out.append(f"<p>{esc(forced['arch'])}'s launch configuration ran on {esc(forced['local'])}"
                       + (f" (checked once for {esc(', '.join(forced['stands_for']))})"
                          if len(forced["stands_for"]) > 1 else "") + "; "
                       + esc("; ".join(forced.get("notes", []) + forced.get("skipped", [])) or "nothing changed")
                       + "</p>")
        if r.get("diagnosis"):
            out.append('<p>Likely causes, strongest first:</p><ol class="diagnosis">' + "".join(
                f"<li><b>{esc(f['cause'])}</b> <span class=\"muted\">({esc(evidence_text(f))}; "
                f"{esc(f['kind'])}, score {f['score']:.2g})</span></li>" for f in r["diagnosis"]) + "</ol>")
        if r.get("failing_input") is not None:
            out.append("<p>Failing input:</p><pre class=\"failing-input\">"
                       f"{esc(json.dumps(r['failing_input'], indent=1, sort_keys=True, default=str))}</pre>")
        if r.get("reproduce"):
            out.append(f"<p>Replay: <code>{esc(r['reproduce'])}</code></p>")
        metrics = dict(r.get("metrics") or {})
        if r.get("examples"):
            metrics["examples checked"] = r["examples"]
        if r.get("time_ms") is not None:
            metrics["median time (ms)"] = r["time_ms"]
        if metrics:
            out.append(_kv("metrics", metrics))
        for name, tol in (r.get("tolerance") or {}).items():
            if tol:
                out.append(f"<p>Tolerance <code>{esc(name)}</code>: {esc(tol.get('formula'))}</p>")
        if r.get("bench"):
            b = r["bench"]
            frac, basis = roofline(b)
            if frac is not None:
                out.append(f"<p>Roofline: {100 * frac:.1f}% of the {esc(basis)}.</p>")
            t = timing(b)
            if t is not b:
                out.append(_kv("timing (ms)", {k: v for k, v in t.items() if not isinstance(v, (dict, list))}))
            out.append(_kv("benchmark", {k: v for k, v in b.items() if not isinstance(v, (dict, list))}))
            if isinstance(r["bench"].get("baselines"), dict) and r["bench"]["baselines"]:
                out.append(f"<pre>{esc(json.dumps(r['bench']['baselines'], indent=1, sort_keys=True, default=str))}</pre>")
        if r.get("lints"):
            out.append("<ul>" + "".join(f"<li>{esc(x.get('severity', ''))} <b>{esc(x.get('rule'))}</b>: "
                                        f"{esc(x.get('message'))}</li>" for x in r["lints"]) + "</ul>")
        o = r.get("override")
        if o:
            out.append(f"<p>Override in force: {esc(o.get('action'))} &mdash; {esc(o.get('reason'))} "
                       f"({esc(o.get('link'))}; expires {esc(o.get('expires'))})</p>")
        out.append(_kv("provenance", {**(r.get("provenance") or {}), "source": e.where()}))
        for s in self.superseded.get(id(e), ()):
            out.append(f"<p class=\"muted\">Newer result wins: {esc(s.describe())}</p>")
        out.append("</section>")
        return "\n".join(out)


def _kv(caption: str, items: dict) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(_fmt(v))}</td></tr>" for k, v in items.items())
    return f'<table class="kv"><caption class="muted">{esc(caption)}</caption>{rows}</table>'


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, default=str)
    return "-" if v is None else str(v)


def render(m: ResultGrid, title: str = "portcheck report") -> str:
    page = _Page(m)
    hosts = sorted({(e.record.get("provenance") or {}).get("host") or "?" for e in m.entries})
    counts = "; ".join(f"{k}: " + ", ".join(f"{n} {VERDICT_MARK[v]}" for v, n in m.counts(k).items())
                       for k in ("runtime", "compile", "bench") if m.counts(k))
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{esc(title)}</title><style>{CSS}</style></head>",
             f'<body id="top"><h1>{esc(title)}</h1>',
             f"<p>{len(m.sources)} input(s) from {len(hosts)} host(s) ({esc(', '.join(hosts))}); {esc(counts)}."
             + (f" Newer results replaced {len(m.superseded)} older one(s)." if m.superseded else "") + "</p>",
             '<p class="legend">Evidence: <b>G</b> ran on the GPU; <b>I</b> (dotted) ran in Triton\'s CPU '
             "interpreter, which checks the algorithm, not the GPU's low-precision arithmetic; <b>X</b> (dashed) "
             "ran this arch's launch configuration on another device (--as-arch: its tiling and masking, not its "
             "arithmetic); <b>C</b> "
             "(striped) compiled only. Click a cell for its provenance, failing input, likely causes and replay command.</p>",
             "<h2>Accuracy: worst error over its tolerance</h2>",
             '<p class="legend">'
             + "".join(f'<span class="sw" style="background:{_rgb(c)}"></span>{esc(label)}' for label, c in (
                 ("0", _GREEN), ("1 (at tolerance)", _YELLOW), ("FAIL", _RED), ("ERROR", VERDICT_COLOR["error"]),
                 ("xfail (override)", VERDICT_COLOR["xfail"]), ("compiled only", COMPILED_COLOR)))
             + "</p>",
             page.heatmap("accuracy", page.accuracy_td, m.rows) if m.rows else "<p>no results</p>"]
    speed_rows = [r for r in m.rows if any((m.cell(*r, a) is not None and m.cell(*r, a).bench) for a in m.archs)]
    parts.append("<h2>Speed: fraction of the roofline</h2>")
    if speed_rows:
        parts += ['<p class="legend">The weakest benchmarked spec of each cell, against the ceiling measured '
                  "in the same run (or the datasheet peak where none was measured: see the cell)."
                  + "".join(f'<span class="sw" style="background:{_rgb(speed_color(f))}"></span>{p}'
                            for f, p in ((0.0, "0%"), (0.5, "50%"), (1.0, "100%"))) + "</p>",
                  page.heatmap("speed", page.speed_td, speed_rows)]
    else:
        parts.append("<p class=\"muted\">No benchmark records in these results (run <code>portcheck bench</code> "
                     "on a GPU).</p>")
    parts.append(f"<h2>Overrides in force ({len(m.overrides)})</h2>")
    if m.overrides:
        parts.append("<ul>" + "".join(
            f"<li>{esc(o['action'])} <b>{esc(o['case'])}</b> on {esc(o.get('target', '*'))}/{esc(o.get('arch', '*'))} "
            f"{esc(o.get('dtype', '*'))}: {esc(o['reason'])} <span class=\"muted\">({esc(o.get('link'))}; expires "
            f"{esc(o['expires'])}; applied to {esc(o.get('applied', 0))} record(s); from {esc(o.get('source'))})</span></li>"
            for o in m.overrides) + "</ul>")
    if m.superseded:
        parts.append(f"<h2>Superseded results ({len(m.superseded)})</h2><ul>"
                     + "".join(f"<li>{esc(s.describe())}</li>" for s in m.superseded) + "</ul>")
    parts.append("<h2>Inputs</h2><ul>" + "".join(f"<li><code>{esc(s)}</code></li>" for s in m.sources) + "</ul>")
    parts.append('<div id="details">')
    parts += [page.detail(key, m.cells[key]) for key in sorted(m.cells, key=m._sort)]
    parts += ["</div>", "</body></html>", ""]
    return "\n".join(parts)
