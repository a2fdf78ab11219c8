"""A static site of the store: one index.html with runs, per-op trend charts (inline SVG), the
regressions of every caliber, the vendor table and A/B results. No network and no server needed
(open it from file://): styles, the sorting script and charts are inline.

Tables sort by a click on their header; a link can carry a sort: index.html#sort=TABLE_ID:COLUMN:desc."""

from __future__ import annotations

import html
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from sqlalchemy import select

from zlbench.ab.pairing import name_shared_keys, op_with_test
from zlbench.report.ab import LISTED_BELOW, headline
from zlbench.results.schema import short_dtype
from zlbench.errors import UsageError
from zlbench.store import schema as S
from zlbench.store.db import Store
from zlbench.history.query import intervals_by_run, iter_rows, list_runs, medians_by_run, short_version

MAX_CALIBERS = 6  # trend sections (the calibers with the most runs)
MAX_CHARTS = 400
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}h3{font-size:1.05em;margin:.8em 0 .3em}
table{border-collapse:collapse;font-size:.85em;margin:.4em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:left}
th{background:#f3f3f3;cursor:pointer;user-select:none}th[data-dir=asc]:after{content:" \\25B2"}
th[data-dir=desc]:after{content:" \\25BC"}td.num{text-align:right;font-variant-numeric:tabular-nums}
.regression{color:#b00}.improvement{color:#070}.note{color:#555;font-size:.9em}
.charts{display:flex;flex-wrap:wrap;gap:10px}.chart{border:1px solid #eee;padding:4px}
nav a{margin-right:1em}
"""

SCRIPT = """
function zlSort(table, col, dir){
  var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
  rows.sort(function(x, y){
    var a = x.cells[col].getAttribute('data-v') || x.cells[col].textContent,
        b = y.cells[col].getAttribute('data-v') || y.cells[col].textContent,
        na = parseFloat(a), nb = parseFloat(b);
    var r = (!isNaN(na) && !isNaN(nb)) ? na - nb : a.localeCompare(b);
    return dir === 'asc' ? r : -r;
  });
  rows.forEach(function(r){ body.appendChild(r); });
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, i){
    if (i === col) th.setAttribute('data-dir', dir); else th.removeAttribute('data-dir');
  });
}
document.querySelectorAll('table.sortable').forEach(function(table){
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, i){
    th.addEventListener('click', function(){
      zlSort(table, i, th.getAttribute('data-dir') === 'asc' ? 'desc' : 'asc');
    });
  });
});
var m = /#sort=([\\w-]+):(\\d+):(asc|desc)/.exec(location.hash);
if (m && document.getElementById(m[1])) zlSort(document.getElementById(m[1]), parseInt(m[2], 10), m[3]);
"""


def esc(v) -> str:
    return html.escape("" if v is None else str(v))


def _cell(v, fmt: Optional[str] = None) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        text = format(v, fmt) if fmt else str(v)
        return f'<td class="num" data-v="{v}">{esc(text)}</td>'
    return f"<td>{esc(v if v is not None else '-')}</td>"


def table(table_id: str, headers: Sequence[str], rows: Sequence[Sequence[str]], css: str = "sortable") -> str:
    """rows: lists of ready <td> cells."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    return f'<table id="{table_id}" class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def trend_svg(title: str, runs: Sequence[Mapping], lines: Mapping[str, Mapping[int, float]],
              width: int = 340, height: int = 170,
              bars: Optional[Mapping[str, Mapping[int, Tuple[float, float]]]] = None) -> str:
    """One chart: x = the caliber's runs in order, y = latency relative to the row's median over
    the runs (1.0 = typical; above = slower), one line per dtype (geometric mean over its shapes);
    bars: per dtype and run, the run's process-level interval on the same scale (a vertical bar)."""
    pad_l, pad_r, pad_t, pad_b = 44, 8, 18, 22
    bars = bars or {}
    values = [v for line in lines.values() for v in line.values()]
    values += [v for per in bars.values() for ci in per.values() for v in ci]
    # A ratio's axis is logarithmic: 2x and 0.5x lie as far from 1, and padding never reads below
    # zero (a linear one padded an 8x point's axis down to -0.48x and squashed the rest near 1).
    # At least +-5% shown: run-to-run noise of 1-2% must not fill the chart and look like a change.
    logs = [math.log(v) for v in values if v > 0]
    lo, hi = min(logs + [math.log(0.95)]), max(logs + [math.log(1.05)])
    span = hi - lo
    lo, hi = math.exp(lo - 0.08 * span), math.exp(hi + 0.08 * span)
    n = len(runs)
    pos = {r["run_id"]: i for i, r in enumerate(runs)}

    def x(i):
        return pad_l + (width - pad_l - pad_r) * (i / max(n - 1, 1))

    def y(v):
        v = max(v, lo)  # a value <= 0 (none is a ratio) sits at the bottom
        return pad_t + (height - pad_t - pad_b) * (1 - math.log(v / lo) / math.log(hi / lo))

    parts = [f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
             f'<text x="{pad_l}" y="12" font-size="11" font-weight="bold">{esc(title)}</text>',
             f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" stroke="#999" '
             'stroke-dasharray="3,3"/>',
             f'<text x="2" y="{y(hi) + 8:.1f}" font-size="9">{hi:.2f}x</text>',
             f'<text x="2" y="{y(lo):.1f}" font-size="9">{lo:.2f}x</text>',
             f'<text class="x-axis" x="{pad_l}" y="{height - 6}" font-size="9">{esc(_when(runs[0]))}</text>',
             f'<text class="x-axis" x="{width - pad_r}" y="{height - 6}" font-size="9" text-anchor="end">'
             f'{esc(_when(runs[-1]))}</text>']
    for color, (label, line) in zip(COLORS * 10, sorted(lines.items())):
        pts = sorted((pos[rid], v) for rid, v in line.items() if rid in pos)
        path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in pts)
        parts.append(f'<polyline class="series" data-dtype="{esc(label)}" fill="none" stroke="{color}" '
                     f'stroke-width="1.5" points="{path}"/>')
        for i, v in pts:
            r = runs[i]
            ci = bars.get(label, {}).get(r["run_id"])
            if ci:
                parts.append(f'<line class="ci" x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(ci[0]):.1f}" '
                             f'y2="{y(ci[1]):.1f}" stroke="{color}" stroke-width="1" opacity="0.7"/>')
            note = f", interval {ci[0]:.3f}x..{ci[1]:.3f}x" if ci else ""
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.2" fill="{color}"><title>{esc(label)} '
                         f'run {r["run_id"]} {r["created"]:%Y-%m-%d %H:%M} corpus {short_version(r.get("corpus_commit"), 10)}'
                         f': {v:.3f}x{note}</title></circle>')
    legend_x = pad_l + 4
    for color, label in zip(COLORS * 10, sorted(lines)):
        parts.append(f'<text x="{legend_x}" y="{pad_t + 10}" font-size="9" fill="{color}">{esc(label)}</text>')
        legend_x += 7 * len(label) + 10
    parts.append("</svg>")
    return "".join(parts)


def _when(run: Mapping) -> str:
    """An x-axis end: the run, its date and the corpus commit it measured."""
    commit = short_version(run.get("corpus_commit") or run.get("zlbench_commit"), 7) if (
        run.get("corpus_commit") or run.get("zlbench_commit")) else ""
    return f'run {run["run_id"]} {run["created"]:%Y-%m-%d}' + (f" @{commit}" if commit else "")


def _nested():
    return defaultdict(lambda: defaultdict(lambda: defaultdict(list)))


def _trend_lines(rows: Iterable[dict], ci_rows: Iterable[dict] = ()) -> Tuple[Dict, Dict]:
    """(lines, bars): op -> dtype -> run_id -> the geometric mean over shapes of latency / the row's
    median over the runs; and of the run's interval bounds on the same scale, where every shape of
    that dtype carries one in that run (ci_rows: the rows again, with latency_lo and latency_hi)."""
    acc, bar_acc = _nested(), _nested()
    cis = intervals_by_run(ci_rows)
    for key, per_run in medians_by_run(rows).items():
        med = statistics.median(per_run.values())
        label = short_dtype(key[1]) + ("" if key[4] == "main" else f" {key[4]}")
        for rid, v in per_run.items():
            acc[key[0]][label][rid].append(math.log(v / med))
            ci = cis.get(key, {}).get(rid)
            bar_acc[key[0]][label][rid].append(ci and (math.log(ci[0] / med), math.log(ci[1] / med)))
    lines = {op: {dt: {rid: math.exp(sum(v) / len(v)) for rid, v in per.items()} for dt, per in by_dt.items()}
             for op, by_dt in acc.items()}
    bars = {op: {dt: {rid: (math.exp(sum(c[0] for c in v) / len(v)), math.exp(sum(c[1] for c in v) / len(v)))
                      for rid, v in per.items() if all(v)} for dt, per in by_dt.items()}
            for op, by_dt in bar_acc.items()}
    return lines, bars


def build_site(store: Store, out: Path, k: int = 3, threshold: float = 0.05) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = list_runs(store)
    by_caliber: Dict[str, List[dict]] = defaultdict(list)
    for r in runs:
        by_caliber[r["caliber"]].append(r)
    # The calibers with a series (two runs or more), the one with the most runs first.
    series = sorted((c for c, rs in by_caliber.items() if len(rs) >= 2), key=lambda c: -len(by_caliber[c]))
    sections = [_runs_section(runs), _trends_section(store, series, by_caliber),
                _regressions_section(store, series, by_caliber, k, threshold), _vendors_section(store),
                _ab_section(store, runs)]
    nav = ('<nav><a href="#runs-section">Runs</a><a href="#trends">Trends</a><a href="#regressions-section">'
           'Regressions</a><a href="#vendors-section">Vendors</a><a href="#ab">A/B</a></nav>')
    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>zlbench history</title>'
            f"<style>{STYLE}</style></head><body><h1>zlbench history</h1><p class=\"note\">Store {esc(store.shown)}: "
            f"{len(runs)} run(s), {len(by_caliber)} caliber(s).</p>{nav}{''.join(sections)}"
            f"<script>{SCRIPT}</script></body></html>\n")
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


def _runs_section(runs: List[dict]) -> str:
    return '<h2 id="runs-section">Runs</h2>' + table("runs", [
        "id", "created (UTC)", "kind", "backend", "device", "timer", "corpus commit", "zlbench commit", "triton",
        "torch", "caliber", "nodes", "not ok", "path"], [
        [_cell(r["run_id"]), f'<td data-v="{r["created"].isoformat()}">{r["created"]:%Y-%m-%d %H:%M}</td>',
         _cell(r["kind"]), _cell(r["backend"]), _cell(r["device_name"]), _cell(r["timer"]),
         _cell(short_version(r["corpus_commit"], 10)), _cell(short_version(r["zlbench_commit"], 10)),
         _cell(r["triton_version"]), _cell(r["torch_version"]), _cell(r["caliber"][:10]), _cell(r["nodes"]),
         _cell(r["not_ok"]), _cell(r["path"])] for r in reversed(runs)])


def _trends_section(store: Store, series: List[str], by_caliber: Mapping[str, List[dict]]) -> str:
    """Charts of the MAX_CALIBERS calibers with the most runs, MAX_CHARTS charts at most over all of them."""
    trend_parts, charts = [], 0
    for cal in series[:MAX_CALIBERS]:
        cruns = by_caliber[cal]
        ids = [r["run_id"] for r in cruns]
        fields = ("run_id", "op", "dtype", "shape", "node", "side", "latency", "status", "markers")
        lines, bars = _trend_lines(iter_rows(store, ids, fields=fields),
                                   iter_rows(store, ids, fields=fields + ("latency_lo", "latency_hi")))
        svgs = []
        for op in sorted(lines):
            if charts >= MAX_CHARTS:
                break
            svgs.append(f'<div class="chart">{trend_svg(op, cruns, lines[op], bars=bars.get(op))}</div>')
            charts += 1
        head = cruns[-1]
        trend_parts.append(f"<h3>Caliber {cal[:10]}: {esc(head['backend'])}, {esc(head['device_name'])}, timer "
                           f"{esc(head['timer'])}, {len(cruns)} runs</h3><div class=\"charts\">{''.join(svgs)}</div>")
    return ('<h2 id="trends">Trends</h2><p class="note">Latency of each operator relative to its typical '
            "value (median over the caliber's runs; 1.0 = typical, above = slower), one line per dtype, "
            "geometric mean over shapes. A vertical bar through a point: that run's process-level interval "
            "(95%, for the value another run would report; runs with timer.processes >= 2), on the same scale. "
            "Hover a point for its run.</p>"
            + ("".join(trend_parts) or "<p>No caliber has two runs yet.</p>"))


def _regressions_section(store: Store, series: List[str], by_caliber: Mapping[str, List[dict]], k: int,
                         threshold: float) -> str:
    from zlbench.history import regressions as R

    reg_rows = []
    for cal in series:
        if len(by_caliber[cal]) < 2 * k:
            continue
        result = R.regressions(store, caliber=cal, k=k, threshold=threshold)
        for f in result["steps"]:
            reg_rows.append([_cell(cal[:10]), _cell(op_with_test(f)), _cell(f["dtype"]), _cell(f["shape"]), _cell(f["side"]),
                             f'<td class="{f["kind"]}">{esc(f["kind"])}</td>', _cell(f["change_pct"], "+.1f"),
                             _cell(f["before_ms"], ".5g"), _cell(f["after_ms"], ".5g"),
                             _cell(f["baseline_change_pct"], "+.1f"), _cell(f["noise_pct"], ".1f"),
                             _cell(f["first_run"]), _cell(f["first_created"][:16]), _cell(f["changed"])])
    return (f'<h2 id="regressions-section">Regressions</h2><p class="note">Over each caliber with at least '
            f"{2 * k} runs, by date: median of the {k} runs after a split vs the {k} before, a step of at "
            f"least {threshold:.0%} and 3x the runs' robust spread (one outlier never counts); named by the "
            "first run after it and what changed there.</p>"
            + (table("regressions", ["caliber", "op", "dtype", "shape", "side", "step", "change %",
                                     "before ms", "after ms", "torch change %", "noise %", "first run",
                                     "first created", "what changed"], reg_rows)
               if reg_rows else "<p>No persistent step.</p>"))


def _vendors_section(store: Store) -> str:
    """The vendor table of the newest corpus commit, or why there is none."""
    from zlbench.history import vendors as V

    try:
        ven = V.vendors(store)
        labels = ven["summary"]["vendors"]
        vrows = []
        for e in ven["rows"]:
            cells = [_cell(op_with_test(e)), _cell(e["dtype"]), _cell(e["shape"])]
            for label in labels:
                v = e["vendors"].get(label) or {}
                cells += [_cell(v.get("speedup"), ".3f"), _cell(v.get("latency_ms"), ".4g")]
            vrows.append(cells)
        headers = ["op", "dtype", "shape"] + [f"{l} {x}" for l in labels for x in ("speedup", "ms")]
        return (f'<h2 id="vendors-section">Vendors</h2><p class="note">Corpus commit '
                f'{esc(ven["summary"]["corpus_commit"][:12])}: each backend\'s speedup over its own torch and '
                "its latency, from its newest run of that commit.</p>" + table("vendors", headers, vrows))
    except UsageError as e:
        return f'<h2 id="vendors-section">Vendors</h2><p>{esc(e)}</p>'


def _ab_section(store: Store, runs: List[dict]) -> str:
    """Every A/B run in the store, newest first: its summary line and its rows (folded)."""
    with store.begin("reading A/B results") as conn:
        summaries = [dict(r._mapping) for r in conn.execute(select(S.ab_summaries))]
        ab_rows = defaultdict(list)
        for r in conn.execute(select(S.ab_rows)):
            ab_rows[r.run_id].append(dict(r._mapping))
    run_by_id = {r["run_id"]: r for r in runs}
    ab_parts = []
    for sm in sorted(summaries, key=lambda s: -s["run_id"]):
        run = run_by_id.get(sm["run_id"])
        if run is None:
            continue
        ab_parts.append(_ab_part(sm, run, ab_rows.get(sm["run_id"], [])))
    return '<h2 id="ab">A/B results</h2>' + ("".join(ab_parts) or "<p>No A/B run recorded.</p>")


def _ab_part(sm: Mapping, run: Mapping, rows: List[dict]) -> str:
    rows_html = table(f"ab-{sm['run_id']}", ["op", "dtype", "shape", "rounds", "A ms", "B ms", "change %",
                                             "CI lo %", "CI hi %", "q", "live", "verdict"], [
        [_cell(op_with_test(t)), _cell(t["dtype"]), _cell(t["shape"]), _cell(t["rounds"]), _cell(t["a_ms"], ".5g"),
         _cell(t["b_ms"], ".5g"), _cell(t["change_pct"], "+.2f"), _cell(t["ci_lo_pct"], "+.2f"),
         _cell(t["ci_hi_pct"], "+.2f"), _cell(t["q"], ".3g"), _cell(t["live"]), _cell(t["verdict"])]
        for t in name_shared_keys(rows)])
    try:  # ab.md's own head: liveness, the overall line with its interval, verdicts, stops, caveats
        # (the rows it lists below the head are in the run dir's ab.md; the store keeps the paired ones)
        head = "".join(f"<p>{markdown_line(line.replace(LISTED_BELOW, 'listed in its ab.md'))}</p>"
                       for line in headline(sm["summary"] or {}))
    except Exception:  # noqa: BLE001 - a summary of an older zlbench (or hand-edited) must not lose the page
        o = (sm["summary"] or {}).get("overall") or {}
        verdicts = ", ".join(f"{k2}: {v}" for k2, v in sorted(((sm["summary"] or {}).get("verdicts") or {}).items()))
        gm = "-" if o.get("geomean") is None else f"{(o['geomean'] - 1) * 100:+.2f}%"
        head = (f"<p>Liveness: <b>{esc(sm['liveness'])}</b>; overall B/A latency {gm}; "
                f"verdicts: {esc(verdicts) or '-'}.</p>")
    return (f"<h3>Run {sm['run_id']} ({run['created']:%Y-%m-%d %H:%M}, {esc(run['backend'])}): "
            f"{esc(sm['label_a'])} vs {esc(sm['label_b'])}</h3>{head}"
            f"<details><summary>rows</summary>{rows_html}</details>")


def markdown_line(line: str) -> str:
    """One line of ab.md as HTML: escaped, its **bold** and `code` kept."""
    text = esc(line)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)
