"""`zlbench collect RUN_DIR`: gather what finished (Slurm jobs submitted with
launcher.wait=false, or a run killed midway) into the run dir's tables and summary."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from zlbench.errors import UsageError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="zlbench collect", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--store-url", default=os.environ.get("ZLBENCH_STORE_URL", "default"),
                        help="results store to write the collected run into (default: zl_runs/zlbench.db "
                             "beside the run dirs, or $ZLBENCH_STORE_URL; none: off)")
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    from zlbench.report.run_report import report

    from zlbench.store import record_or_warn

    try:
        if args.run_dir.is_file():  # rows.jsonl, summary.md, ...: its folder is meant
            raise UsageError(f"{args.run_dir} is a file, not a run dir. Fix: zlbench collect {args.run_dir.parent}")
        code = int(report(args.run_dir, " (collected)", fail_on=_fail_on(args.run_dir)))
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code
    record_or_warn(args.run_dir, args.store_url)
    return code


def _fail_on(run_dir: Path):
    """The run's own fail_on (from its identity), so collect exits as the run would have."""
    from zlbench.results.rundir import read_identity

    try:
        return read_identity(run_dir).get("fail_on")
    except UsageError:
        return None


if __name__ == "__main__":
    sys.exit(main())
