"""The results store keeps up: writing a 10,000-row run, and `history compare --latest` over a
store of 100 such runs, on SQLite (the default store) or any --url.

    python benchmarks/store.py [--rows 10000] [--runs 100] [--out DIR] [--all-commands]

The newest run has 10 rows 30% slower; compare should call exactly those `slower`.
Run dirs are synthetic but in the run-dir format (run_identity.json, rows.jsonl, ops_status.csv),
written once under --out (default: a temporary folder) and recorded through the same
zlbench.store.record_run a finished run calls. Prints JSON: seconds per step."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.history_runs import identity, row, write_run  # noqa: E402  (the tests' run-dir writer)
from zlbench.history.__main__ import main as history  # noqa: E402
from zlbench.store import record_run  # noqa: E402


def make_run(root: Path, i: int, n_rows: int, rng: random.Random, slower: bool = False) -> Path:
    """n_rows rows: ops x 3 dtypes x shapes, latency with 2% lognormal noise, one commit per run.
    slower: op000's float16 rows (10) are 30% slower, for compare to find."""
    shapes_per_op = 10
    n_ops = max(1, n_rows // (3 * shapes_per_op))
    rows = []
    for o in range(n_ops):
        for dtype in ("torch.float16", "torch.bfloat16", "torch.float32"):
            for s in range(shapes_per_op):
                if len(rows) >= n_rows:
                    break
                base = 0.01 * (1 + o % 7) * (2 ** s)
                step = 1.3 if slower and o == 0 and dtype == "torch.float16" else 1.0
                rows.append(row(f"op{o:03d}", f"[[{2 ** (s + 6)},{1024}]]", base * step * rng.lognormvariate(0, 0.02),
                                base * 1.1 * rng.lognormvariate(0, 0.02), dtype=dtype))
    commit = hashlib.sha1(f"commit {i}".encode()).hexdigest()
    ident = identity(corpus_commit=commit, zlbench_commit=commit,
                     created=f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}T02:00:00+0000",
                     ops=sorted({r["op"] for r in rows}))
    return write_run(root / "zl_runs" / f"run{i:03d}", ident, rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--url", help="store URL (default: an SQLite file under --out); e.g. a PostgreSQL database")
    ap.add_argument("--all-commands", action="store_true", help="also time `regressions` and `html` over the store")
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="zlbench-store-bench-"))
    rng = random.Random(0)
    t0 = time.perf_counter()
    dirs = [make_run(root, i, args.rows, rng, slower=i == args.runs - 1) for i in range(args.runs)]
    make_s = time.perf_counter() - t0
    url = args.url or f"sqlite:///{root / 'zl_runs' / 'zlbench.db'}"
    times = []
    quiet = contextlib.redirect_stderr(io.StringIO())
    for d in dirs:
        t = time.perf_counter()
        with quiet:
            record_run(d, url)
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    with quiet:
        record_run(dirs[-1], url)  # the same run again: a no-op
    rewrite_s = time.perf_counter() - t
    out = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(out), quiet:
        code = history(["compare", "--latest", "--url", url, "--format", "json"])
    compare_s = time.perf_counter() - t
    assert code == 0, "compare failed"
    result = json.loads(out.getvalue())
    extra = {}
    if args.all_commands:  # the commands that read the whole series, for the record
        for name, argv in (("regressions_s", ["regressions", "--url", url, "--format", "json"]),
                           ("html_s", ["html", "--url", url, "--out", str(root / "site")])):
            t = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()), quiet:
                assert history(argv) == 0, name
            extra[name] = round(time.perf_counter() - t, 2)
    print(json.dumps({
        "rows_per_run": args.rows, "runs": args.runs, "machine": f"{platform.machine()}, "
        f"{__import__('os').cpu_count()} cores, Python {platform.python_version()}",
        "write_first_run_s": round(times[0], 3), "write_median_run_s": round(sorted(times)[len(times) // 2], 3),
        "write_last_run_s": round(times[-1], 3), "rewrite_unchanged_run_s": round(rewrite_s, 3),
        "compare_latest_s": round(compare_s, 3), "compared_rows": len(result["rows"]),
        "noise_sources": result["summary"]["noise_sources"], "verdicts": result["summary"]["verdicts"],
        "store": "postgresql" if url.startswith("postgres") else "sqlite",
        "store_mb": round((root / "zl_runs" / "zlbench.db").stat().st_size / 2 ** 20, 1) if not args.url else None,
        "making_run_dirs_s": round(make_s, 1), **extra,
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
