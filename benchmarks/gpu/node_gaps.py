"""Where a benchmark process' time goes per node: its wall, and the seconds before its shapes' captures
(the corpus making each shape's inputs: FlagGems' host draws showed there). RESULTS.md's tables of
set D (thirty-first and thirty-second sessions) come from this.

    python3 benchmarks/gpu/node_gaps.py RUN_DIR [RUN_DIR ...] [--unit main.r0.d0.s0] [--min-gap 0.7]

Per run dir, from units/<unit>/events.jsonl: each node's wall (start to end event) and the sum of
the gaps longer than --min-gap seconds that end in a `capture` event (a shape's capture starting).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict, List, Tuple


def node_gaps(events: List[dict], min_gap: float) -> Dict[str, Tuple[float, float]]:
    """node id -> (wall s, seconds in gaps > min_gap before capture events); nodes that ended."""
    out: Dict[str, Tuple[float, float]] = {}
    node, started, before, prev = None, 0.0, 0.0, None
    for e in events:
        if e["event"] == "start":
            node, started, before = str(e.get("node")), e["t"], 0.0
        elif node and e["event"] == "capture" and prev is not None and e["t"] - prev > min_gap:
            before += e["t"] - prev
        elif node and e["event"] == "end":
            out[node] = (e["t"] - started, before)
            node = None
        prev = e["t"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--unit", default="main.r0.d0.s0", help="the process (unit) to read")
    parser.add_argument("--min-gap", type=float, default=0.7, help="seconds: shorter gaps are not counted")
    args = parser.parse_args()
    for run_dir in args.run_dirs:
        path = run_dir / "units" / args.unit / "events.jsonl"
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        print(f"### {run_dir.name} ({args.unit})\n\n| node | wall (s) | before its captures (s) |\n|---|---|---|")
        for node, (wall, before) in node_gaps(events, args.min_gap).items():
            print(f"| {node.split('::')[-1]} | {wall:.1f} | {before:.1f} |")
        print()


if __name__ == "__main__":
    main()
