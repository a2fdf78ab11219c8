"""Offline: `history compare`'s overall line over pairs of archived plain runs of one caliber (null
comparisons: the same files, settings and machine, minutes apart). For each pair, both run dirs go
into a temporary SQLite store and this checkout's compare_runs() reports them; one Markdown table
row per pair, then how many intervals left out 0 (about 1 in 20 is what a 95% interval allows)
and how many pairs a `--fail-on slower` gate (the default) would fail.

    python3 benchmarks/gpu/overall_plain23.py [--reaggregate] <folders holding plain run dirs (run_identity.json)>

--reaggregate: each run's rows as this checkout's process_stats.aggregate() makes them from its
process_rows.jsonl (copies in a temporary folder), not as the zlbench that ran it wrote them.

Runs are grouped by caliber within each folder named on the command line (one archive each), so
runs of different sessions never pair. Nothing is written into the run dirs."""
import itertools
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from zlbench.history.compare import compare_runs  # noqa: E402
from zlbench.history.query import list_runs  # noqa: E402
from zlbench.store.db import Store  # noqa: E402
from zlbench.store.ingest import caliber_of, run_dir_record, write_record  # noqa: E402


def plain_runs(folder: Path):
    """Plain run dirs below folder (one side, processes >= 2), outermost copy of each."""
    for ident in sorted(folder.rglob("run_identity.json")):
        run = ident.parent
        if (run.parent / "run_identity.json").is_file() or not (run / "rows.jsonl").is_file():
            continue
        identity = json.loads(ident.read_text())
        if list(identity.get("sides") or {}) != ["main"]:
            continue
        yield run, caliber_of(identity), (identity.get("versions") or {}).get("zlbench_commit")


def reaggregated(run: Path, into: Path) -> Path:
    """A copy of the run dir's tables whose rows.jsonl this checkout aggregates from its processes."""
    from zlbench.results.process_stats import aggregate

    copy = into / run.name
    copy.mkdir(parents=True)
    for name in ("run_identity.json", "ops_status.csv", "plan.json"):
        if (run / name).is_file():
            shutil.copy(run / name, copy / name)
    processes = int(json.loads((run / "plan.json").read_text()).get("processes") or 1)
    rows = [json.loads(x) for x in (run / "process_rows.jsonl").read_text().splitlines() if x.strip()]
    (copy / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in aggregate(rows, processes)))
    return copy


def overall(run_a: Path, run_b: Path, again: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp, Store(f"sqlite:///{tmp}/s.db") as store:
        if again:
            run_a, run_b = reaggregated(run_a, Path(tmp) / "a"), reaggregated(run_b, Path(tmp) / "b")
        for run in (run_a, run_b):
            write_record(store, run_dir_record(run))
        runs = sorted(list_runs(store), key=lambda r: (r["created"], r["run_id"]))
        by_path = {Path(r["path"]).resolve(): r for r in runs}
        summary = compare_runs(store, by_path[run_a.resolve()], by_path[run_b.resolve()])["summary"]
        store.engine.dispose()
    return summary


def pct(x):
    return f"{(x - 1) * 100:+.2f}%"


def main(folders) -> None:
    again = "--reaggregate" in folders
    folders = [f for f in folders if f != "--reaggregate"]
    count = defaultdict(lambda: [0, 0, 0])  # one zlbench commit or two -> [pairs, leaving out 0, gate failed]
    print("| archive | A | B | one zlbench | rows | overall | 95% interval | resampled | gate (slower, lost in B) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for folder in map(Path, folders):
        groups = defaultdict(list)
        for run, caliber, commit in plain_runs(folder):
            groups[caliber].append((run, commit))
        for runs in groups.values():
            for (a, commit_a), (b, commit_b) in itertools.combinations(sorted(runs), 2):
                try:
                    if again and not all((r / "process_rows.jsonl").is_file() for r in (a, b)):
                        continue
                    summary = overall(a, b, again)
                    o = summary["overall"]
                except Exception as e:  # a run dir this checkout cannot read: say so, go on
                    print(f"{a} {b}: skipped ({e!r})", file=sys.stderr)
                    continue
                if o["lo"] is None:
                    continue
                out = o["lo"] > 1 or o["hi"] < 1
                same = commit_a == commit_b
                count[same][0] += 1
                count[same][1] += out
                count[same][2] += summary["gate_exit"] == 1
                print(f"| {folder.name[:11]} | {a.name} | {b.name} | {'yes' if same else 'no'} | {o['rows']} | "
                      f"{pct(o['geomean'])} | {pct(o['lo'])} .. {pct(o['hi'])}{' **excludes 0**' if out else ''} | "
                      f"{o.get('resampled')} | {summary['gate_exit']} ({summary['failing_rows'] - summary['lost_rows']}, "
                      f"{summary['lost_rows']}) |")
    for same, (pairs, out, failed) in sorted(count.items(), reverse=True):
        print(f"\n{'Pairs of one zlbench commit' if same else 'Pairs of two (main before a change and after)'}: "
              f"{out} of {pairs} intervals leave out 0; a --fail-on slower gate fails {failed}.")


if __name__ == "__main__":
    main(sys.argv[1:])
