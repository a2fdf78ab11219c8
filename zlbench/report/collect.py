"""`zlbench collect RUN_DIR`: gather what finished (Slurm jobs submitted with
launcher.wait=false, or a run killed midway) into the run dir's tables and summary. Of a run still
measuring on this host it says so and exits 4 (not every node measured), leaving the store alone."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from zlbench.errors import UsageError, VerbParser


def main(argv=None) -> int:
    parser = VerbParser(prog="zlbench collect", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--store-url", default=None,
                        help="results store to write the collected run into (default: $ZLBENCH_STORE_URL, else "
                             "the run's own store.url, else zl_runs/zlbench.db beside the run dirs; none: off)")
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    from zlbench.report.run_report import report

    from zlbench.store import record_or_warn

    try:
        if args.run_dir.exists() and not args.run_dir.is_dir():
            from zlbench.results.rundir import IDENTITY_FILE

            if (args.run_dir.parent / IDENTITY_FILE).is_file() or args.run_dir.name in (
                    IDENTITY_FILE, "plan.json", "rows.jsonl", "ops_status.csv", "summary.md"):  # its folder is meant
                raise UsageError(f"{args.run_dir} is a file, not a run dir. Fix: zlbench collect {args.run_dir.parent}")
            raise UsageError(f"{args.run_dir} is not a run dir (collect rebuilds a run dir's tables from its events). "
                             f"Fix: pass a run dir; a result log is read with `zlbench summary {args.run_dir}`.")
        if not (args.run_dir / "units").is_dir() and _measured(args.run_dir):
            # Tables are made from the units' events: without them every node would read unmeasured.
            raise UsageError(f"{args.run_dir} holds tables but no units/ (the events they are made from: a copy "
                             "of the tables?); collecting would rewrite every node as not measured, so its "
                             f"tables are left as they are. Fix: collect the run dir the run wrote, or read "
                             f"these with `zlbench summary {args.run_dir}`.")
        from zlbench.results.rundir import live_run

        running = live_run(args.run_dir)
        suffix = " (collected while the run was still running)" if running else " (collected)"
        code = int(report(args.run_dir, suffix, fail_on=_fail_on(args.run_dir), running=running or ""))
        if running:
            from zlbench.exitcodes import Exit

            print(f"[zlbench] {args.run_dir} is still being measured ({running}): these tables hold what "
                  "finished so far; the run writes its own, and records itself in the store, when it ends.",
                  file=sys.stderr)
            return int(Exit.CUT) if code in (Exit.OK, Exit.NOT_OK) else code  # not every node measured yet
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code
    record_or_warn(args.run_dir, args.store_url or _store_url(args.run_dir))
    return code


def _store_url(run_dir: Path) -> str:
    """Where the run recorded itself (its store.url: none stays none), unless ZLBENCH_STORE_URL says
    otherwise or the URL was written with its password masked."""
    from zlbench.results.rundir import read_identity

    if os.environ.get("ZLBENCH_STORE_URL"):
        return os.environ["ZLBENCH_STORE_URL"]
    try:
        url = (read_identity(run_dir).get("provenance") or {}).get("store_url") or "default"
    except UsageError:
        return "default"
    return "default" if ":***@" in url else url


def _measured(run_dir: Path) -> bool:
    """Whether the run dir's ops_status.csv says some node was measured (or failed): a table the
    events, if gone, could not rebuild. A run whose job has not started (launcher.wait=false) has
    only placeholders there, and no units/ yet."""
    import csv

    try:
        with open(run_dir / "ops_status.csv", encoding="utf-8") as f:
            return any(r.get("status") != "interrupted" or (r.get("rows") or "0") != "0" for r in csv.DictReader(f))
    except OSError:
        return False


def _fail_on(run_dir: Path):
    """The run's own fail_on (from its identity), so collect exits as the run would have."""
    from zlbench.results.rundir import read_identity

    try:
        return read_identity(run_dir).get("fail_on")
    except UsageError:
        return None


if __name__ == "__main__":
    sys.exit(main())
