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
    from .run import report

    try:
        return report(args.run_dir, f"zlbench run {args.run_dir.name} (collected)")
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code

if __name__ == "__main__":
    sys.exit(main())
