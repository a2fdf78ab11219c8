"""Analysis of benchmarks/gpu/timing13.sh (issue 13 items 1-3) from the run dirs it leaves (RUNS/<name>/)
and FlagGems' own log (RUNS/native_cudagraph.log). Missing runs are skipped and said so.

    python benchmarks/gpu/timing13_analysis.py RUNS [RUNS ...] [--json out.json] [--md out.md] [--rows out.txt]

RUNS: the runs/ folder of runs.tgz (several: the calls' archives extracted side by side, each with
its wall.txt and clocks.json beside its runs/).

Reports, over FlagGems rows (the alternative's latency) and torch rows (latency_base) of the 8 op
files, float16:
- run-to-run relative difference |b/a - 1| of each row over every pair of runs of one setting:
  p50 / p90 / max, all rows and rows >= 20 us (graph adaptive, graph fixed, direct, each target_rel);
- agreement of timer=graph (median of its runs) with FlagGems' --mode cudagraph, rows >= 20 us in
  FlagGems' log: ratio zlbench / FlagGems, p10 / p50 / p90;
- wall of each run (wall.txt), a plain pass against FlagGems' cudagraph mode;
- how timing calls stopped, samples per call, CI half-width; samples discarded for clocks and the
  clocks seen; the clock reader of every process; bimodal rows;
- the wall / precision trade-off of timer.target_rel (0.003, default, 0.01) and of fixed vs adaptive.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Optional

FILES = ("test_exp.py", "test_gelu.py", "test_sum.py", "test_softmax.py", "test_layer_norm.py", "test_bmm.py",
         "test_cumsum.py", "test_topk.py")
SUB_FILES = ("test_exp.py", "test_softmax.py", "test_bmm.py", "test_topk.py")
FAMILY = {"test_exp.py": "pointwise", "test_gelu.py": "pointwise", "test_sum.py": "reduction",
          "test_softmax.py": "reduction", "test_layer_norm.py": "reduction", "test_bmm.py": "blas",
          "test_cumsum.py": "other", "test_topk.py": "other"}
GROUPS = {"graph": "graph_{}", "fixed": "fixed_{}", "direct": "direct_{}", "target_0.003": "target_0.003_{}",
          "target_0.01": "target_0.01_{}"}
SIDES = (("flaggems", "latency", None), ("torch", "latency_base", "timing_base"))
BIMODAL = "BENCHMARK_BIMODAL"
SAMPLING = ("stop_reason", "samples", "ci_rel", "spread_rel", "min_ms", "samples_discarded", "sm_mhz", "mem_mhz",
            "mode_lo_ms", "mode_hi_ms", "mode_hi_share")


def file_of(row: dict) -> str:
    return (row.get("node") or "").split("::")[0].rsplit("/", 1)[-1]


def key(row: dict):
    return (str(row.get("op")), str(row.get("dtype")), str(row.get("shape")))


def load_run(run_dir: Path, files=FILES) -> Optional[Dict[tuple, dict]]:
    path = run_dir / "rows.jsonl"
    if not path.is_file():
        return None
    out = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("status") == "ok" and r.get("latency") and file_of(r) in files and "float16" in str(r.get("dtype")):
            out[key(r)] = r
    return out


def pct(values: List[float], q: float) -> Optional[float]:
    if not values:
        return None
    s = sorted(values)
    i = q * (len(s) - 1)
    lo, hi = int(i), min(int(i) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


def spread(values: List[float]) -> dict:
    return {"rows": len(values), "p50_pct": _p(pct(values, 0.5)), "p90_pct": _p(pct(values, 0.9)),
            "max_pct": _p(max(values) if values else None)}


def _p(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(100 * x, 3)


def run_to_run(runs: List[Dict[tuple, dict]], field: str, min_ms: float = 0.0) -> dict:
    """|b/a - 1| of every row present in both runs of every pair, pooled over pairs."""
    diffs = []
    for a, b in itertools.combinations(runs, 2):
        for k in a.keys() & b.keys():
            x, y = a[k].get(field), b[k].get(field)
            if x and y and x > 0 and y > 0 and min(x, y) >= min_ms:
                diffs.append(abs(y / x - 1))
    return spread(diffs)


def calls(runs: List[Dict[tuple, dict]]):
    """(row, side, sampling facts) of every timing call."""
    for run in runs:
        for r in run.values():
            yield r, "flaggems", {k: r.get(k) for k in SAMPLING}
            if r.get("timing_base"):
                yield r, "torch", r["timing_base"]


def sampling_summary(runs: List[Dict[tuple, dict]]) -> dict:
    cs = [f for _, _, f in calls(runs)]
    samples = [f["samples"] for f in cs if f.get("samples")]
    cis = [f["ci_rel"] for f in cs if f.get("ci_rel") is not None]
    discarded = [f["samples_discarded"] for f in cs if f.get("samples_discarded") is not None]
    sms = [f["sm_mhz"] for f in cs if f.get("sm_mhz")]
    mems = [f["mem_mhz"] for f in cs if f.get("mem_mhz")]
    return {
        "timing_calls": len(cs),
        "stop_reasons": dict(collections.Counter(f.get("stop_reason") for f in cs)),
        "samples_median": statistics.median(samples) if samples else None,
        "samples_p90": pct(samples, 0.9),
        "ci_rel_median_pct": _p(statistics.median(cis)) if cis else None,
        "ci_rel_p90_pct": _p(pct(cis, 0.9)),
        "samples_discarded": sum(discarded) if discarded else None,
        "calls_with_discards": sum(1 for d in discarded if d),
        "calls_with_clock_reading": len(discarded),
        "sm_mhz_range": [min(sms), max(sms)] if sms else None,
        "mem_mhz_range": [min(mems), max(mems)] if mems else None,
        "bimodal_calls": {side: sum(1 for _, s, f in calls(runs) if s == side and f.get("mode_lo_ms") is not None)
                          for side, _, _ in SIDES},
        "bimodal_rows_marked": sum(1 for run in runs for r in run.values() if BIMODAL in (r.get("markers") or [])),
        "throttled_rows": sum(1 for run in runs for r in run.values()
                              if "BENCHMARK_CLOCK_THROTTLED" in (r.get("markers") or [])),
    }


def bimodal_examples(runs: List[Dict[tuple, dict]], limit: int = 12) -> List[dict]:
    out = []
    for r, side, f in calls(runs):
        if f.get("mode_lo_ms") is not None and len(out) < limit:
            out.append({"op": r["op"], "shape": r["shape"], "side": side, "lo_us": round(1000 * f["mode_lo_ms"], 3),
                        "hi_us": round(1000 * f["mode_hi_ms"], 3), "hi_share": f["mode_hi_share"],
                        "samples": f.get("samples"), "timer": r.get("timer_used")})
    return out


def readers(find, names: List[str]) -> dict:
    seen = collections.Counter()
    for name in names:
        ident = find(name) / "run_identity.json"
        if ident.is_file():
            for p in json.loads(ident.read_text()).get("processes") or []:
                c = p.get("clocks") or {}
                seen[c.get("reader") or f"none ({c.get('why')})"] += 1
    return dict(seen)


def walls(paths: List[Path]) -> Dict[str, float]:
    out = {}
    for path in paths:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            m = re.match(r"^(\S+) ([\d.]+) rc=(\d+)", line)
            if m:
                out[m.group(1)] = float(m.group(2))
    return out


def agreement(graph_runs: List[Dict[tuple, dict]], native: Path, min_ms: float = 0.02) -> dict:
    from zlbench.results.flaggems_log import rows_from_log

    nat = {key(r): r for r in rows_from_log(native) if r.get("status") == "ok" and "float16" in str(r.get("dtype"))}
    out = {"native_rows": len(nat)}
    for side, field, _ in SIDES:
        ratios = []
        for k, n in nat.items():
            ours = [run[k][field] for run in graph_runs if k in run and run[k].get(field)]
            if ours and n.get(field) and n[field] >= min_ms:
                ratios.append(statistics.median(ours) / n[field])
        out[side] = {"rows": len(ratios), "p10": _r(pct(ratios, 0.1)), "p50": _r(pct(ratios, 0.5)),
                     "p90": _r(pct(ratios, 0.9)), "min": _r(min(ratios) if ratios else None),
                     "max": _r(max(ratios) if ratios else None)}
    return out


def _r(x):
    return None if x is None else round(x, 4)


def per_family(runs: List[Dict[tuple, dict]]) -> dict:
    out = {}
    for fam in sorted(set(FAMILY.values())):
        sub = [{k: r for k, r in run.items() if FAMILY.get(file_of(r)) == fam} for run in runs]
        out[fam] = run_to_run(sub, "latency")
    return out


def analyze(roots: List[Path]) -> dict:
    w = walls([r.parent / "wall.txt" for r in roots])

    def find(name: str) -> Path:
        return next((r / name for r in roots if (r / name).exists()), roots[0] / name)

    out = {"missing": [], "groups": {}}
    loaded = {}
    for group, pattern in GROUPS.items():
        files = SUB_FILES if group.startswith("target") else FILES
        names = [pattern.format(i) for i in (1, 2, 3)]
        runs = [(n, load_run(find(n), files)) for n in names]
        present = [(n, r) for n, r in runs if r is not None]
        out["missing"] += [n for n, r in runs if r is None and find(n).exists()]
        if not present:
            continue
        loaded[group] = [r for _, r in present]
        g = {"runs": [n for n, _ in present], "rows_per_run": [len(r) for _, r in present],
             "wall_s": [w.get(n) for n, _ in present], "readers": readers(find, [n for n, _ in present]),
             "sampling": sampling_summary(loaded[group])}
        if len(present) >= 2:
            g["run_to_run"] = {side: {"all": run_to_run(loaded[group], field),
                                      "from_20us": run_to_run(loaded[group], field, 0.02)}
                               for side, field, _ in SIDES}
            g["run_to_run_flaggems_by_family"] = per_family(loaded[group])
        g["bimodal_examples"] = bimodal_examples(loaded[group])
        out["groups"][group] = g
    # The default's figures on the targets' files, for the target_rel trade-off.
    if "graph" in loaded:
        sub = [{k: r for k, r in run.items() if file_of(r) in SUB_FILES} for run in loaded["graph"]]
        out["graph_on_target_files"] = {"run_to_run_flaggems": run_to_run(sub, "latency"),
                                        "sampling": sampling_summary(sub)}
    native = find("native_cudagraph.log")
    nat_wall = w.get("native_cudagraph")
    for group in ("graph", "fixed"):  # adaptive graph timing, and the default (fixed)
        if not native.is_file() or group not in loaded:
            continue
        key = "" if group == "graph" else "_fixed"
        out[f"agreement_graph{key}_vs_native_cudagraph_from_20us"] = agreement(loaded[group], native)
        walls_ = [x for x in (w.get(GROUPS[group].format(i)) for i in (1, 2, 3)) if x]
        if nat_wall and walls_:
            out[f"wall_graph{key}_pass_over_native_cudagraph"] = round(statistics.median(walls_) / nat_wall, 3)
    clocks = next((r.parent / "clocks.json" for r in roots if (r.parent / "clocks.json").is_file()), None)
    if clocks is not None:
        try:
            out["clock_check"] = json.loads(clocks.read_text())
        except ValueError as e:
            out["clock_check"] = {"unreadable": str(e)}
    kt = load_run(find("clocks_kernel_timer"), FILES)
    if kt:
        out["kernel_timer_run"] = {"readers": readers(find, ["clocks_kernel_timer"]),
                                   "sampling": sampling_summary([kt])}
    return out


def markdown(res: dict) -> str:
    lines = ["# timing13: adaptive stopping, clocks, bimodal rows (FlagGems, float16, core shapes)", ""]
    head = ["setting", "runs", "wall s", "FG rows p50/p90/max %", "FG >=20us p90/max %", "torch p90/max %",
            "stops", "samples med", "CI med/p90 %", "discarded", "SM MHz", "bimodal (FG/torch)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, g in res["groups"].items():
        rr = g.get("run_to_run") or {}
        fg, fg20, t = (rr.get("flaggems") or {}).get("all") or {}, (rr.get("flaggems") or {}).get("from_20us") or {}, \
            (rr.get("torch") or {}).get("all") or {}
        s = g["sampling"]
        lines.append("| " + " | ".join(str(x) for x in [
            name, len(g["runs"]), "/".join(str(x) for x in g["wall_s"]),
            f"{fg.get('p50_pct')}/{fg.get('p90_pct')}/{fg.get('max_pct')}", f"{fg20.get('p90_pct')}/{fg20.get('max_pct')}",
            f"{t.get('p90_pct')}/{t.get('max_pct')}",
            ", ".join(f"{k} {v}" for k, v in s["stop_reasons"].items()), s["samples_median"],
            f"{s['ci_rel_median_pct']}/{s['ci_rel_p90_pct']}", s["samples_discarded"], s["sm_mhz_range"],
            f"{s['bimodal_calls']['flaggems']}/{s['bimodal_calls']['torch']}"]) + " |")
    lines.append("")
    for k in ("agreement_graph_vs_native_cudagraph_from_20us", "wall_graph_pass_over_native_cudagraph",
              "agreement_graph_fixed_vs_native_cudagraph_from_20us", "wall_graph_fixed_pass_over_native_cudagraph",
              "graph_on_target_files", "kernel_timer_run", "missing"):
        if k in res:
            lines += [f"- **{k}**: `{json.dumps(res[k])}`"]
    for name, g in res["groups"].items():
        if g.get("run_to_run_flaggems_by_family"):
            lines.append(f"- {name} by family (FlagGems rows): `{json.dumps(g['run_to_run_flaggems_by_family'])}`")
        if g.get("bimodal_examples"):
            lines.append(f"- {name} bimodal examples: `{json.dumps(g['bimodal_examples'])}`")
        lines.append(f"- {name} clock readers: `{json.dumps(g['readers'])}`")
    if "clock_check" in res:
        lines += ["", "## clock_check.py", "", "```json", json.dumps(res["clock_check"], indent=1), "```"]
    return "\n".join(lines) + "\n"


def row_table(roots: List[Path]) -> str:
    """Per FlagGems row: the largest pairwise |b/a - 1| of fixed, graph and direct (FlagGems and torch
    side), with graph's and direct's SM clock per run: which rows make the tails."""
    def find(name: str) -> Path:
        return next((r / name for r in roots if (r / name).exists()), roots[0] / name)

    groups = {g: [x for x in (load_run(find(GROUPS[g].format(i))) for i in (1, 2, 3)) if x]
              for g in ("fixed", "graph", "direct")}
    base = next((g[0] for g in groups.values() if g), {})

    def worst(runs, k, field):
        vals = [r[k][field] for r in runs if k in r and r[k].get(field)]
        return max((abs(b / a - 1) for a, b in itertools.combinations(vals, 2)), default=None)

    def f(x):
        return "     -" if x is None else f"{100 * x:6.2f}"

    head = (f"{'op':10s} {'shape':38s} {'us':>8s}  max pairwise %: FG fixed graph direct | torch fixed graph direct"
            " | SM MHz graph / direct")
    lines = [head]
    for k, r in base.items():
        lines.append(f"{k[0]:10s} {k[2][:38]:38s} {1000 * r['latency']:8.2f}  "
                     + " ".join(f(worst(groups[g], k, "latency")) for g in groups) + " | "
                     + " ".join(f(worst(groups[g], k, "latency_base")) for g in groups) + " | "
                     + " / ".join(str([x[k].get("sm_mhz") for x in groups[g] if k in x]) for g in ("graph", "direct")))
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", type=Path, nargs="+")
    p.add_argument("--json", type=Path)
    p.add_argument("--md", type=Path)
    p.add_argument("--rows", type=Path, help="per-row table of the largest run-to-run differences")
    args = p.parse_args(argv)
    res = analyze(args.runs)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    text = markdown(res)
    if args.md:
        args.md.write_text(text)
    if args.rows:
        args.rows.write_text(row_table(args.runs))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
