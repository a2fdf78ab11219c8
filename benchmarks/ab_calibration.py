"""A/B calibration on the CPU demo corpus (issue: A/B experiments), three runs side by side:

1. the demo's real switch (DEMO_GEMS_FUSED_SOFTMAX) with 10 rounds: softmax rows should be found;
2. an A/A run (same value on both sides): the share of rows flagged after BH (target <= 5%);
3. a dead axis (a variable nothing reads): must come out unknown/inconclusive, never a difference.

    python benchmarks/ab_calibration.py [--rounds 10] [--ops softmax,exp,add,layer_norm]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGGED = ("faster", "slower", "changed below threshold")


def run(run_dir: Path, *args):
    res = subprocess.run([sys.executable, "-m", "zlbench", f"hydra.run.dir={run_dir}", "progress=none", *args],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(res.stderr[-3000:])
    ab = json.loads((run_dir / "ab.json").read_text())
    rows = ab["rows"]
    s = ab["summary"]
    return {
        "liveness": s["liveness"], "rows": len(rows), "verdicts": s["verdicts"],
        "flagged": sum(r["verdict"] in FLAGGED for r in rows),
        "flagged_share": round(sum(r["verdict"] in FLAGGED for r in rows) / max(1, len(rows)), 3),
        "overall_pct": None if s["overall"]["geomean"] is None else round((s["overall"]["geomean"] - 1) * 100, 2),
        "softmax_flagged": sum(r["verdict"] in FLAGGED for r in rows if r["op"] == "softmax"),
        "softmax_rows": sum(r["op"] == "softmax" for r in rows),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--ops", default="softmax,exp,add,layer_norm")
    args = p.parse_args()
    common = [f"ops=[{args.ops}]", f"ab.rounds={args.rounds}"]
    out = {"rounds": args.rounds, "ops": args.ops,
           "machine": f"{os.cpu_count()} cores, python {platform.python_version()}", "date": time.strftime("%Y-%m-%d")}
    with tempfile.TemporaryDirectory() as tmp:
        out["real_switch"] = run(Path(tmp) / "real", "ab=demo_fused_softmax", *common)
        out["a_a"] = run(Path(tmp) / "aa", "ab=demo_fused_softmax", "ab.aa=true", *common)
        out["dead_axis"] = run(Path(tmp) / "dead", "ab=env", "ab.var=ZL_NOTHING_READS_THIS", *common)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
