"""The run's own A/B report at corpus scale (CPU): ab.md, ab.csv, ab.json and ab.png of N synthetic
rows, as `zlbench` writes them at the end of an interleaved run (zlbench.report.run_report.ab_report),
timed in steps: the comparison (pairing, statistics) and the writing (tables and the plot).

    python benchmarks/report_scale.py [--rows 480,3000] [--rounds 2] [--repeat 1] [--out results/x.json]
                                      [--against results/earlier.json]

Rows: N / 12 synthetic ops x 3 dtypes x 4 shapes, 1% noise, two ops 20% faster on B. Prints one JSON
object: per N the seconds of each step and ab.png's size in pixels (a forest plot grows with the rows,
the overview is fixed). Run it on two commits to compare them: --out on the first, --against that file
on the second prints each N's total against the earlier one (this / earlier)."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path


def synthetic_rows(n_rows: int, rounds: int, seed: int = 0):
    rng = random.Random(seed)
    out = []
    n_ops = max(1, n_rows // 12)
    for o in range(n_ops):
        for dtype in ("torch.float16", "torch.bfloat16", "torch.float32"):
            for s in range(4):
                base = 0.01 * (1 + s) * (1 + o % 5)
                for side, effect in (("off", 1.0), ("on", 0.8 if o in (7, 123) else 1.0)):
                    for r in range(rounds):
                        lat = base * effect * rng.lognormvariate(0, 0.01)
                        out.append({"op": f"op{o:03d}", "dtype": dtype, "shape": f"[[{64 << s},1024]]", "side": side,
                                    "round": r, "latency": lat, "latency_base": base, "speedup": base / lat,
                                    "status": "ok", "markers": [], "node": f"t_{o}.py::test_op{o:03d}"})
    return out


IDENTITY = {"config": {"ab": {"var": "X", "threshold": 0.02, "aa": False}, "isolate_caches": True},
            "sides": {"off": {"X": "0"}, "on": {"X": "1"}}, "switch_env": {}, "rounds": 2,
            "created": "2026-12-01T00:00:00", "timer": {"name": "graph"}}


def one(n_rows: int, rounds: int) -> dict:
    import matplotlib.image as mpimg

    from zlbench.report import ab as report_ab
    from zlbench.report import run_report

    rows = synthetic_rows(n_rows, rounds)
    with tempfile.TemporaryDirectory() as tmp:
        # Split as a run's report does it: the comparison, ab.write (tables and plot), the rest (before
        # 2026-12-01: a second plot drawn over ab.png at scale).
        spent = {"compare_s": 0.0, "write_s": 0.0}
        originals = {name: getattr(report_ab, name) for name in ("compare", "write")}

        def timed(name):
            def call(*a, **k):
                t = time.perf_counter()
                try:
                    return originals[name](*a, **k)
                finally:
                    spent[name + "_s"] += time.perf_counter() - t
            return call

        for name in originals:  # ab_report imports them from zlbench.report.ab when called
            setattr(report_ab, name, timed(name))
        t0 = time.perf_counter()
        try:
            identity = {**IDENTITY, "rounds": rounds}
            result = run_report.ab_report(Path(tmp), rows, ["off", "on"], identity)
            run_report.write_ab(result, Path(tmp), identity)
        finally:
            for name, f in originals.items():
                setattr(report_ab, name, f)
        total = time.perf_counter() - t0
        shape = mpimg.imread(Path(tmp) / "ab.png").shape[:2]
    return {"rows": len(result["rows"]), "total_s": round(total, 2), "compare_s": round(spent["compare_s"], 2),
            "write_s": round(spent["write_s"], 2), "rest_s": round(total - spent["compare_s"] - spent["write_s"], 2),
            "ab_png_px": list(shape),
            "ab_md_chars": len(result["markdown"])}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="480,3000", help="comma-separated row counts")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--out", type=Path)
    p.add_argument("--against", type=Path, help="an earlier --out: print this run's total over its total")
    args = p.parse_args(argv)
    out = {}
    for n in (int(x) for x in args.rows.split(",")):
        runs = [one(n, args.rounds) for _ in range(args.repeat)]
        out[str(n)] = {**runs[-1], "total_s": statistics.median(r["total_s"] for r in runs),
                       "totals_s": [r["total_s"] for r in runs]}
        print(f"{n} rows: {out[str(n)]}", file=sys.stderr)
    if args.against:
        earlier = json.loads(args.against.read_text(encoding="utf-8"))
        for n, now in out.items():
            if n in earlier:
                now["earlier_total_s"] = earlier[n]["total_s"]
                now["ratio"] = round(now["total_s"] / earlier[n]["total_s"], 3)
                print(f"{n} rows: {now['total_s']} s against {earlier[n]['total_s']} s: ratio {now['ratio']}",
                      file=sys.stderr)
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
