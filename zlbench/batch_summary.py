"""`python -m zlbench.batch_summary PATH [--ab PATH_B]`: summarize a run dir or a FlagGems result
log; with --ab, pair two runs (or logs) and compare the same implementation across them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Tuple

from zlbench.errors import UsageError
from zlbench.exitcodes import Exit


def load(path: Path, skip_bad_lines: bool = False) -> Tuple[List[dict], List[dict], str]:
    """(rows, status rows, label) of a run dir or a result log."""
    from zlbench.results.flaggems_log import rows_from_log
    from zlbench.results.rundir import PLAN_FILE, load_rows, load_status

    if path.is_dir():
        if not (path / PLAN_FILE).exists() and not (path / "rows.jsonl").exists():
            logs = sorted(path.glob("result_*.log")) + sorted(path.glob("run.log"))
            if logs:
                return load(logs[0], skip_bad_lines)
            raise UsageError(f"{path} is neither a zlbench run dir nor holds a FlagGems result log.")
        return load_rows(path), load_status(path), path.name
    if not path.exists():
        raise UsageError(f"{path} does not exist. Fix: pass a run dir or a result log.")
    skipped: Optional[List[int]] = [] if skip_bad_lines else None
    rows = rows_from_log(path, skipped)
    if skipped:
        print(f"zlbench: skipped {len(skipped)} malformed line(s) of {path}: "
              f"{', '.join(map(str, skipped))}", file=sys.stderr)
    status = {}
    for r in rows:
        s = status.setdefault(r["op"], {"op": r["op"], "test_node": "", "side": "main", "status": "ok",
                                        "reason": ""})
        if r["status"] != "ok":
            s["status"], s["reason"] = r["status"], r.get("reason") or ""
    return rows, list(status.values()), path.name


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zlbench.batch_summary", description=__doc__)
    parser.add_argument("path", type=Path, help="run dir, run.log, or FlagGems result_*.log")
    parser.add_argument("--ab", type=Path, help="second run (side B) to pair with PATH (side A)")
    parser.add_argument("--out", type=Path, help="folder for ab.md/ab.csv/ab.json/ab.png (with --ab)")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="in a result log, skip malformed record lines (counted) instead of refusing the log")
    parser.add_argument("--threshold", type=float, default=0.02,
                        help="relative change below which a difference is 'below threshold' (default 0.02)")
    parser.add_argument("--allow-dead", action="store_true",
                        help="exit 0 even when the A/B axis is not live (default: exit 3, as a run does)")
    args = parser.parse_args(argv)
    try:
        rows_a, status_a, label_a = load(args.path, args.skip_bad_lines)
        if args.ab is None:
            from zlbench.report.summary import render_summary

            print(render_summary(rows_a, status_a, f"summary of {label_a}"))
            return 0
        from zlbench.report.ab import compare, write
        from zlbench.results.rundir import load_artifacts

        rows_b, _, label_b = load(args.ab, args.skip_bad_lines)
        art = [load_artifacts(p) if p.is_dir() else {} for p in (args.path, args.ab)]
        # One side per run dir (a multirun sweep): its artifacts are under its only side.
        art_a, art_b = (next(iter(a.values()), {}) if len(a) == 1 else {} for a in art)
        result = compare(rows_a, rows_b, label_a, label_b, threshold=args.threshold,
                         artifacts_a=art_a, artifacts_b=art_b)
        if args.out is not None:
            write(result, args.out)
        print(result["markdown"])
        if result["summary"]["liveness"] == "not live" and not args.allow_dead:
            print("zlbench: the A/B axis is NOT LIVE (identical kernels on both sides); exit 3 as a run "
                  "would (--allow-dead to accept).", file=sys.stderr)
            return int(Exit.DEAD_AXIS)
        return 0
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
