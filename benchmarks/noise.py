"""Run-to-run noise between two runs of the same rows: abs(log ratio) per row, for the alternative
("FlagGems rows": latency) and the torch baseline (latency_base). Accepts zlbench run dirs and
FlagGems result logs alike.

    python benchmarks/noise.py RUN_OR_LOG_1 RUN_OR_LOG_2 [MORE ...] [--min-us 5] [--json out.json]

With more than two runs, every pair is compared (one run's own drift shows up in all its pairs).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys

import numpy as np

from zlbench.report.batch_summary import load
from zlbench.ab.pairing import row_key


def noise(rows1, rows2, field, min_ms=0.0):
    a = {row_key(r): r.get(field) for r in rows1 if r.get("status") == "ok"}
    b = {row_key(r): r.get(field) for r in rows2 if r.get("status") == "ok"}
    keys = [k for k in a if k in b and a[k] and b[k] and a[k] > 0 and b[k] > 0 and a[k] >= min_ms]
    d = np.array([abs(math.log(b[k] / a[k])) for k in keys])
    if len(d) == 0:
        return {"rows": 0}
    return {"rows": int(len(d)), "median_pct": float(np.median(d) * 100),
            "p90_pct": float(np.percentile(d, 90) * 100), "max_pct": float(d.max() * 100)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("runs", nargs="+", metavar="RUN_OR_LOG", help="two or more")
    p.add_argument("--json")
    p.add_argument("--min-us", type=float, default=5.0, help="also report rows at least this long")
    args = p.parse_args(argv)
    from pathlib import Path

    if len(args.runs) < 2:
        p.error("give at least two runs to compare")
    loaded = [load(Path(r))[0] for r in args.runs]

    def pair(r1, r2):
        return {"flaggems_rows": noise(r1, r2, "latency"), "torch_rows": noise(r1, r2, "latency_base"),
                # Launch-bound rows (a kernel of ~1 us: 40 ns of jitter is 4%) apart from the rest.
                f"flaggems_rows_from_{args.min_us:g}us": noise(r1, r2, "latency", args.min_us / 1000)}

    if len(loaded) == 2:
        out = pair(*loaded)
    else:
        out = {f"{args.runs[i]} vs {args.runs[j]}": pair(loaded[i], loaded[j])
               for i, j in itertools.combinations(range(len(loaded)), 2)}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
