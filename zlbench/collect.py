"""`python -m zlbench.collect RUN_DIR`: gather what finished (Slurm jobs submitted with
launcher.wait=false, or a run killed midway) into the run dir's tables and summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import UsageError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zlbench.collect", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    from .results.rundir import collect
    from .report.summary import render_summary
    import json

    try:
        rows, status = collect(args.run_dir)
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code
    identity = json.loads((args.run_dir / "run_identity.json").read_text())
    text = render_summary(rows, status, f"zlbench run {args.run_dir.name} (collected)", identity)
    (args.run_dir / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
