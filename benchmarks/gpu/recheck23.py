"""Offline: what `history compare`'s recheck would do for gates that fail over repeat runs.

A failing `--fail-on slower` gate between two plain runs A and B of one caliber and one zlbench
commit (a null comparison: the same files, settings and machine, minutes apart) prints a command
that measures the failing rows' ops again into a new run C of B's settings; the gate's reader then
compares A with C. Over archived runs, C is each third run of the group: the recheck clears the
failure where none of B's failing rows is slower again in A against C.

    python3 benchmarks/gpu/recheck23.py [--reaggregate] <folders holding plain run dirs>

--reaggregate: rows as this checkout aggregates them from each run's process_rows.jsonl."""
import itertools
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from overall_plain23 import plain_runs, reaggregated  # noqa: E402
from zlbench.history.compare import compare_runs  # noqa: E402
from zlbench.history.query import list_runs  # noqa: E402
from zlbench.store.db import Store  # noqa: E402
from zlbench.store.ingest import run_dir_record, write_record  # noqa: E402


def slower_rows(run_a: Path, run_b: Path, again: bool) -> set:
    """The rows a --fail-on slower gate of B against A fails on (B's lost rows aside)."""
    with tempfile.TemporaryDirectory() as tmp, Store(f"sqlite:///{tmp}/s.db") as store:
        if again:
            run_a, run_b = reaggregated(run_a, Path(tmp) / "a"), reaggregated(run_b, Path(tmp) / "b")
        for run in (run_a, run_b):
            write_record(store, run_dir_record(run))
        by_path = {Path(r["path"]).resolve(): r for r in list_runs(store)}
        result = compare_runs(store, by_path[run_a.resolve()], by_path[run_b.resolve()])
        store.engine.dispose()
    return {(t["op"], t["dtype"], t["shape"], t["node"], t["side"]) for t in result["rows"] if t["verdict"] == "slower"}


def main(argv) -> None:
    again = "--reaggregate" in argv
    failing = cleared = 0
    for folder in (Path(a) for a in argv if a != "--reaggregate"):
        groups = defaultdict(list)
        for run, caliber, commit in plain_runs(folder):
            if not again or (run / "process_rows.jsonl").is_file():
                groups[(caliber, commit)].append(run)
        for runs in groups.values():
            gates = {(a, b): slower_rows(a, b, again) for a, b in itertools.permutations(sorted(runs), 2)}
            for (a, b), rows in gates.items():
                if not rows:
                    continue
                for c in runs:
                    if c in (a, b):
                        continue
                    failing += 1
                    again_slower = rows & gates[(a, c)]
                    cleared += not again_slower
                    print(f"| {folder.name[:11]} | {a.name} | {b.name} | {len(rows)} | {c.name} | "
                          f"{len(again_slower)} | {'cleared' if not again_slower else 'fails again'} |")
    print(f"\n{failing} (failing gate, third run) cases of repeat runs; the recheck clears {cleared}.")


if __name__ == "__main__":
    main(sys.argv[1:])
