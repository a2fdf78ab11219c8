"""python -m zlbench.history VERB ...: the results store across runs.

  import RUN_DIR|LOG...   (re)build the store from run dirs or FlagGems result logs
  list                    runs, with filters
  compare A B | --latest  rows that changed beyond their own noise (their process-level intervals,
                          rounds or history); exit 1 when a row got slower (--fail-on)
  regressions             persistent steps over a caliber's runs, with the first commit after each;
                          exit 1 when it finds a regression (--fail-on), 2 when too few runs
                          to look for one
  vendors                 each backend's speedup and latency per op, dtype and shape
  html --out DIR          a static site (runs, trends, regressions, vendors, A/B results)

The store (--url before or after the verb): --url, else $ZLBENCH_STORE_URL, else the store runs write
beside their run dirs: ./zl_runs/zlbench.db, else the one zlbench.db up to 3 folders below the
current folder (hydra.run.dir=runs/x writes runs/zlbench.db); what it found is said on stderr
(history/where.py). `import` defaults to the store beside its first run dir."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import List, Optional

from tabulate import tabulate

from zlbench.errors import UsageError, VerbParser
from zlbench.exitcodes import Exit
from zlbench.history.where import ENV_URL, find_store


def store_url(arg: Optional[str]) -> str:
    url, note = find_store(arg)
    if note:
        print(f"[zlbench] {note}", file=sys.stderr)
    return url


def _date(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)")


def _at_least(least: float, kind=int):
    """An argparse type: a number (int or float) of at least `least` (-k 0 died in numpy)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value < least:
            raise argparse.ArgumentTypeError(f"{text!r} is not valid: it must be {'an integer' if kind is int else 'a number'} "
                                             f">= {least:g}")
        return value
    return parse


def _folder(text: str) -> Path:
    """An argparse type for --out: a folder (made if missing), never an existing file nor below one."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; --out takes a folder (made if missing)")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text} cannot be made: {parent} is a file, not a folder. Fix: pass a "
                                         "folder that exists or can be made there")
    return path


def _made(out: Path, option: str = "--out") -> Path:
    """The folder `option` names (--out; --url's store's), made with its parents; one that cannot be
    made (no right to, a file system that takes no folders such as /proc) is a usage error naming it
    and why."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        where = next((p for p in out.absolute().parents if p.exists()), out.absolute().anchor)
        raise UsageError(f"{option} {out}: cannot make that folder in {where} ({e.strerror or e}). Fix: pass "
                         f"{option} a folder you can write to (made if missing).")
    return out


def _emit(text: str, out: Optional[Path], name: str) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    _made(out)
    (out / name).write_text(text, encoding="utf-8")
    print(f"[zlbench] wrote {out / name}", file=sys.stderr)


def cmd_import(args) -> int:
    from zlbench.store import Store, default_url
    from zlbench.store.db import normalize_url, sqlite_file
    from zlbench.store.ingest import log_record, recorded_log_facts, rows_said, write_record

    url = (find_store(args.url, create=True)[0] if args.url or os.environ.get(ENV_URL)
           else default_url(Path(args.paths[0])))
    url = normalize_url(url)
    # A run dir or log named on the command line is imported whole or the import is refused (exit 2,
    # nothing written): it was meant. Below a folder, a run dir that cannot be read (a run still
    # measuring, one whose Slurm submission failed: run_identity.json and no tables yet; a damaged
    # one) is skipped, said and counted: one such dir imported nothing of a whole zl_runs.
    records, skipped = [], {}  # skipped: a log's index in records -> its malformed lines (--skip-bad-lines)
    passed: List[tuple] = []  # (run dir found below a folder, why it cannot be imported)
    for path in args.paths:
        if path.is_dir() and (path / "run_identity.json").is_file():
            records.append(_finished_run_record(path))
        elif path.is_dir():  # a folder of runs: every run dir below it
            found = sorted(p.parent for p in path.rglob("run_identity.json"))
            if not found:
                raise UsageError(f"{path} holds no zlbench run dir (no run_identity.json below it). Fix: pass "
                                 "run dirs, a folder of them (zl_runs), or FlagGems result_*.log files.")
            for run_dir in found:
                try:
                    records.append(_finished_run_record(run_dir))
                except (UsageError, OSError) as e:
                    passed.append((run_dir, e))
        else:  # read (and refused if malformed) before the store is opened: nothing is half imported
            skipped[len(records)] = [] if args.skip_bad_lines else None
            records.append(log_record(path, backend=args.backend, device_name=args.device,
                                      corpus_commit=args.corpus_commit, skipped=skipped[len(records)]))
    for run_dir, e in passed:
        print(f"[zlbench] skipped {run_dir}: {_why_not(run_dir, e)}", file=sys.stderr)
    if not records:  # every run dir found was passed over: nothing to write, no store made
        folders = ", ".join(str(p) for p in args.paths)
        raise UsageError(f"nothing imported: none of the {len(passed)} run dir(s) below {folders} can be imported "
                         "(each said above: not finished, still measuring, or damaged). Fix: `zlbench collect "
                         "RUN_DIR` a run that ended without its tables (a run still measuring records itself "
                         "when it ends), then import again.")
    db_file = sqlite_file(url)
    if db_file is not None:
        # import builds a store: its folder too (a run's store.url with a missing folder stays an error)
        _made(db_file.parent, "--url")
    given = {"backend": args.backend, "device_name": args.device, "corpus_commit": args.corpus_commit}
    with Store(url) as store:
        for i, rec in enumerate(records):
            if rec["run"]["kind"] == "log" and not all(given.values()):
                # What an earlier import was told of it stays where this one says nothing.
                said = recorded_log_facts(store, Path(rec["run"]["path"]))
                if any(said.get(k) and not v for k, v in given.items()):
                    rec = log_record(Path(rec["run"]["path"]), **{k: v or said.get(k) for k, v in given.items()},
                                     skipped=[] if skipped.get(i) is not None else None)
            written = write_record(store, rec)
            bad = skipped.get(i)
            print(f"{written.outcome}: {rec['run']['path']} ({rows_said(rec)}"
                  + (f"; skipped {len(bad)} malformed line(s): {', '.join(map(str, bad))}" if bad else "")
                  + written.note + ")")
        print(f"[zlbench] store {store.shown}: {len(records)} run(s)"
              + (f"; {len(passed)} run dir(s) skipped (said above)" if passed else ""), file=sys.stderr)
    return 0


def _finished_run_record(run_dir: Path) -> dict:
    """run_dir_record of a run dir, refused while its run is still measuring on this host (as
    collect and summary tell it): its tables are not the run's yet."""
    from zlbench.results.rundir import live_run
    from zlbench.store.ingest import run_dir_record

    running = live_run(run_dir)
    if running:
        raise UsageError(f"{run_dir.resolve()} is still measuring ({running}): its tables are not the run's yet. "
                         "Fix: import it after it ends (a run with a store records itself there as it ends).")
    return run_dir_record(run_dir)


def _why_not(run_dir: Path, error: Exception) -> str:
    """Why a run dir found below a folder is not imported, without its path said twice."""
    if isinstance(error, OSError):
        return f"cannot read {error.filename or 'it'} ({error.strerror or error})."
    why, full = str(error), str(run_dir.resolve())
    return why[len(full) + 1:] if why.startswith(full + " ") else why


def _open(args):
    from zlbench.store import Store

    return Store(store_url(args.url), create=False)


def _filters(args) -> dict:
    return {"backend": args.backend, "device": args.device, "op": getattr(args, "op", None),
            "since": args.since, "commit": args.commit, "caliber": args.caliber}


def cmd_list(args) -> int:
    from zlbench.history.query import list_runs, short_version

    with _open(args) as store:
        runs = list_runs(store, **_filters(args))
    if args.format == "json":
        import json

        print(json.dumps(runs, indent=1, default=str))
        return 0
    rows = [[r["run_id"], f"{r['created']:%Y-%m-%d %H:%M}", r["kind"], r["backend"], r["device_name"], r["timer"],
             short_version(r["corpus_commit"], 10), short_version(r["zlbench_commit"], 10), r["triton_version"] or "-",
             r["caliber"][:10], r["nodes"], r["not_ok"], r["path"]] for r in runs]
    # The path last: a run id (what compare takes) beside the run dir it names.
    print(tabulate(rows, headers=["id", "created (UTC)", "kind", "backend", "device", "timer", "corpus", "zlbench",
                                  "triton", "caliber", "nodes", "not ok", "path"], tablefmt="github") if rows else "(no runs)")
    return 0


def _check_run_dir_ref(ref: str) -> None:
    """A run named by a path that does not exist, or a folder that is no run dir: the UsageError
    resolve_run would give once a store is found (a run id or key prefix, or a result log, is left to it)."""
    from zlbench.history.query import no_such_path, not_a_run_dir

    path = Path(ref)
    if ref.isdigit() or not ("/" in ref or os.sep in ref or path.exists()):
        return
    if not path.exists():
        raise no_such_path(ref)
    if path.is_dir() and not (path / "run_identity.json").is_file():
        raise not_a_run_dir(ref)


def _run_dir_pair(args) -> Optional[List[Path]]:
    """compare's two runs where both are run dirs and neither --url nor the environment names a
    store: those are found beside them, or read alone (_compare_store)."""
    if args.url or os.environ.get(ENV_URL) or args.latest or len(args.runs) != 2:
        return None
    paths = [Path(r) for r in args.runs]
    return paths if all((p / "run_identity.json").is_file() for p in paths) else None


def _compare_store(args, stack):
    """(the store compare reads, whether it is kept: the commands compare prints may name it).
    For two run dirs, the first store that holds both: the one beside them (where their runs wrote
    it), else the one found from here (find_store); else the two alone in a store made in a
    temporary folder (runs made with store.url=none, copies from another machine, runs recorded in
    different stores), compared on their own intervals."""
    from zlbench.history.query import resolve_run
    from zlbench.store import Store, default_url
    from zlbench.store.db import NoStore, OlderSchema, display_url, sqlite_file
    from zlbench.store.ingest import run_dir_record, write_record

    pair = _run_dir_pair(args)
    if pair is None:
        return stack.enter_context(_open(args)), True
    beside = {default_url(p) for p in pair}  # sqlite:///... beside each run dir
    looked = []
    candidates = [u for u in beside if len(beside) == 1 and sqlite_file(u).is_file()]
    try:
        found, _ = find_store(None)
        candidates += [found] if found not in candidates else []
    except UsageError as e:  # none here, or several and none named
        looked.append("none found here" if str(e).startswith("no results store") else
                      str(e).split(":")[0] + ", none named")
    for url in candidates:
        try:  # a look: a store of an older schema found nearby is not upgraded by it (another zlbench's)
            store = Store(url, create=False, upgrade=False)
        except OlderSchema:
            looked.append(f"{display_url(url)} has an older schema (a look does not upgrade it)")
            continue
        except NoStore:
            looked.append(f"{display_url(url)} holds no store")
            continue
        try:
            for path in pair:
                resolve_run(store, str(path))
        except UsageError:
            store.close()
            looked.append(f"{store.shown} does not hold both")
            continue
        print(f"[zlbench] store {store.shown} (it holds both runs)", file=sys.stderr)
        return stack.enter_context(store), True
    tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="zlbench-compare-"))
    store = stack.enter_context(Store(f"sqlite:///{tmp}/zlbench.db"))
    for path in pair:
        write_record(store, run_dir_record(path))
    print(f"[zlbench] no store holds both runs ({'; '.join(looked) or 'none found'}): compared the two run dirs on "
          "their own, without earlier runs of their caliber (--url names a store; `python -m zlbench history "
          "import RUN_DIR...` keeps one)", file=sys.stderr)
    return store, False


def cmd_compare(args) -> int:
    from zlbench.history import compare as C
    from zlbench.history.query import latest_pair, resolve_run

    if not (args.url or os.environ.get(ENV_URL)):  # a store is to be found: a run dir named that is not
        for ref in args.runs:  # one is said first (resolve_run says it where a store is named)
            _check_run_dir_ref(ref)
    with contextlib.ExitStack() as stack:
        store, lasting = _compare_store(args, stack)
        if args.latest:
            if args.runs:
                raise UsageError("compare takes either two runs or --latest, not both.")
            run_a, run_b, note = latest_pair(store, backend=args.backend, device=args.device, caliber=args.caliber)
        else:
            note = None
            if len(args.runs) != 2:
                raise UsageError(f"compare needs two runs, A and B; it got {len(args.runs)}. Fix: `zlbench history "
                                 "compare A B` with run ids (`zlbench history list`), run dirs or key prefixes, or "
                                 "`zlbench history compare --latest` (the newest run against the one before it).")
            run_a, run_b = (resolve_run(store, r) for r in args.runs)
            if run_a["run_id"] == run_b["run_id"]:
                raise UsageError(f"compare needs two different runs: {args.runs[0]!r} and {args.runs[1]!r} both name "
                                 + (f"run {run_a['run_id']}. Fix: `zlbench history list` shows the runs' ids." if lasting
                                    else "one run (copies of one run dir: one identity, one start). Fix: compare "
                                         "two different runs."))
        result = C.compare_runs(store, run_a, run_b, threshold=args.threshold, window=args.window,
                                fail_on=args.fail_on, lasting=lasting)
    result["summary"]["a_chosen"] = note  # --latest: why A is not the run just before B
    if note:
        print(f"[zlbench] compare --latest: {note}", file=sys.stderr)
    if args.out:
        for p in C.write(result, _made(args.out), args.all):
            print(f"[zlbench] wrote {p}", file=sys.stderr)
    render = {"md": lambda r: C.render_markdown(r, args.all), "csv": C.render_csv, "json": C.render_json}
    sys.stdout.write(render[args.format](result))
    s = result["summary"]
    sides = s.get("sides") or {}

    def name(run) -> str:  # a store not kept: its ids mean nothing after
        return f"run {run['run_id']}" if lasting else str(run["path"])

    if s["gate_exit"] == 2 and not s["paired_rows"] and sides.get("a") and sides.get("b") \
            and not set(sides["a"]) & set(sides["b"]):
        # Rows pair within a side: a sweep's two sides (or a plain run against an A/B) share none.
        print(f"[zlbench] compare: {name(run_a)} holds rows of side {', '.join(sides['a'])} and "
              f"{name(run_b)} of side {', '.join(sides['b'])}; compare pairs rows of one side (the same A/B "
              f"side, or plain runs' main): nothing paired: exit {int(Exit.USAGE)}. Fix: two sides of an A/B "
              "pair with `zlbench summary A_DIR --ab B_DIR`; an A/B run's own ab.md judges it.", file=sys.stderr)
    elif s["gate_exit"] == 2 and not s["paired_rows"]:
        left = s.get("not_selected") or {}
        why = (f"they select different tests, and none in common ({left.get('B', 0)} row(s) only in A, "
               f"{left.get('A', 0)} only in B)" if not s["unpaired_rows"] else
               f"{s['unpaired_rows']} unpaired, listed above with why: in one run only, or not measured in a run")
        print(f"[zlbench] compare: {name(run_a)} and {name(run_b)} share no row both measured "
              f"({why}): the gate checked nothing: exit {int(Exit.USAGE)}. Fix: compare runs of the same ops, dtypes "
              "and tests (`zlbench history list`); where a run's rows failed, its ops_status.csv says why; "
              "--fail-on none accepts an empty comparison.", file=sys.stderr)
    elif s["gate_exit"] == 2:
        print(f"[zlbench] compare: none of the {s['paired_rows']} paired row(s) had a noise estimate (no "
              "process-level intervals, one round each, too little history): the gate judged nothing: exit "
              f"{int(Exit.USAGE)}. Fix: compare plain runs measured with timer.processes>=2 (the default), or "
              "record earlier runs of the caliber; an A/B's side logs carry no intervals (its ab.md judges it); "
              "--fail-on none accepts an unjudged comparison.", file=sys.stderr)
    elif s["gate_exit"] == 1:
        lost = s["lost_rows"] if args.fail_on in C.LOST_FAILS else 0
        print(f"[zlbench] compare: {s['failing_rows'] - lost} row(s) {args.fail_on} beyond their noise and the "
              "threshold" + (f", {lost} row(s) measured in A lost in B (their test crashed, timed out, failed or was interrupted, "
                             "leaving no row or one too little measured to judge; the report above says which)" if lost else "")
              + ": exit 1 (--fail-on chooses what fails: slower, faster, changed, none).", file=sys.stderr)
    return int(s["gate_exit"])


def cmd_regressions(args) -> int:
    from zlbench.history import regressions as R

    with _open(args) as store:
        result = R.regressions(store, caliber=args.caliber, k=args.k, threshold=args.threshold, z=args.z,
                               ops=args.op or None, backend=args.backend, device=args.device, since=args.since)
    render = {"md": R.render_markdown, "csv": R.render_csv, "json": R.render_json}[args.format]
    _emit(render(result), args.out, f"regressions.{args.format}")
    failing = sum(1 for f in result["steps"] if f["kind"] in R.FAIL_ON[args.fail_on])
    runs, k = result["summary"]["runs"], result["summary"]["k"]
    if result["summary"]["too_few_runs"] and R.FAIL_ON[args.fail_on]:  # a gate that judged nothing does not pass (as compare's)
        print(f"[zlbench] regressions: {runs} run(s) of caliber {result['summary']['caliber'][:12]}, and a step needs "
              f"{k} before it and {k} after it: nothing was judged: exit 2. Fix: record more runs of it"
              # (not -k 1: one run a side has no spread, so any 5% move would read as a step)
              + (f", or -k {runs // 2} to look with {runs // 2} on each side" if runs >= 4 else "")
              + ", or --fail-on none to accept it.", file=sys.stderr)
        return 2
    if failing:
        print(f"[zlbench] regressions: {failing} step(s) of kind {args.fail_on}: exit 1 (--fail-on chooses what "
              "fails: regression, improvement, any, none).", file=sys.stderr)
    return int(Exit.NOT_OK) if failing else 0


def cmd_vendors(args) -> int:
    from zlbench.history import vendors as V

    with _open(args) as store:
        result = V.vendors(store, corpus_commit=args.corpus_commit, ops=args.op or None)
    render = {"md": V.render_markdown, "csv": V.render_csv, "json": V.render_json}[args.format]
    _emit(render(result), args.out, f"vendors.{args.format}")
    return 0


def cmd_html(args) -> int:
    from zlbench.history.site import build_site

    with _open(args) as store:
        index = build_site(store, _made(args.out), k=args.k, threshold=args.threshold)
    print(f"[zlbench] site: {index} (open it from file://, no network needed)", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    p = VerbParser(prog="zlbench history", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    url_help = (f"store URL, SQLite file, its folder or a run dir (default: ${ENV_URL}, else ./zl_runs/zlbench.db, "
                "else the one zlbench.db up to 3 folders below)")
    p.add_argument("--url", help=url_help)
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name, help_text, func):
        sp = sub.add_parser(name, help=help_text, description=help_text)
        # SUPPRESS: when not given after the verb, the value given before it (`history --url X list`) stays.
        sp.add_argument("--url", default=argparse.SUPPRESS, help=url_help)
        sp.set_defaults(func=func)
        return sp

    def filters(sp, op_many=False):
        sp.add_argument("--backend", help="only runs of this backend (cuda, musa, rocm, ascend, cpu)")
        sp.add_argument("--device", help="only runs whose device name contains this (any case)")
        sp.add_argument("--since", type=_date, help="only runs created on or after this date (UTC)")
        sp.add_argument("--caliber", help="only runs of this caliber (hash prefix, see `list`)")
        if op_many:
            sp.add_argument("--op", action="append", help="only this operator (repeatable)")

    sp = verb("import", "(re)build the store from run dirs, folders of them, or FlagGems result logs", cmd_import)
    sp.add_argument("paths", nargs="+", type=Path, metavar="RUN_DIR|LOG",
                    help="run dirs, folders of them, FlagGems result_*.log files: one named that cannot be read "
                         "refuses the import (exit 2, nothing written); a run dir below a folder that cannot "
                         "(not finished, damaged) is skipped and said, and exit 2 only when nothing is imported")
    sp.add_argument("--backend", help="for FlagGems logs: the backend they were measured on")
    sp.add_argument("--device", help="for FlagGems logs: the device name")
    sp.add_argument("--corpus-commit", help="for FlagGems logs: the FlagGems commit")
    sp.add_argument("--skip-bad-lines", action="store_true",
                    help="for FlagGems logs: skip malformed record lines (counted) instead of refusing the log")

    sp = verb("list", "the runs in the store, oldest first", cmd_list)
    filters(sp)
    sp.add_argument("--op", help="only runs that measured this operator")
    sp.add_argument("--commit", help="only runs whose corpus or zlbench commit starts with this")
    sp.add_argument("--format", choices=("md", "json"), default="md")

    sp = verb("compare", "rows that changed beyond their own noise between two runs", cmd_compare)
    sp.add_argument("runs", nargs="*", metavar="RUN", help="run ids (`list`), run dirs or run key prefixes: A B")
    sp.add_argument("--latest", action="store_true",
                    help="the newest run against the previous run of the same caliber")
    sp.add_argument("--backend", help="with --latest: the newest run of this backend")
    sp.add_argument("--device", help="with --latest: the newest run on this device")
    sp.add_argument("--caliber", help="with --latest: the newest run of this caliber")
    sp.add_argument("--threshold", type=_at_least(0, float), default=0.02, help="relative change that matters (default 0.02)")
    sp.add_argument("--window", type=_at_least(1), default=20, help="earlier runs giving a row's noise (default 20)")
    sp.add_argument("--fail-on", choices=("slower", "faster", "changed", "none"), default="slower",
                    help="exit 1 when a row has this verdict (changed: slower or faster; default slower); "
                         "under slower and changed, also when a row measured in A was lost in B (its test crashed, "
                         "timed out, failed or was interrupted)")
    sp.add_argument("--all", action="store_true", help="Markdown: every row, not only the changed ones")
    sp.add_argument("--format", choices=("md", "csv", "json"), default="md", help="what goes to stdout")
    sp.add_argument("--out", type=_folder, help="also write compare.md, compare.csv, compare.json here")

    sp = verb("regressions", "persistent steps over the runs of one caliber", cmd_regressions)
    filters(sp, op_many=True)
    sp.add_argument("--commit", help=argparse.SUPPRESS)
    sp.add_argument("-k", type=_at_least(1), default=3, help="runs on each side of a step (default 3)")
    sp.add_argument("--threshold", type=_at_least(0, float), default=0.05, help="smallest step reported (default 0.05)")
    sp.add_argument("--z", type=_at_least(0, float), default=3.0, help="a step must exceed z x the runs' robust spread (default 3; "
                    "runs with process-level intervals: the intervals instead)")
    sp.add_argument("--fail-on", choices=("regression", "improvement", "any", "none"), default="regression",
                    help="exit 1 when a step of this kind is found (default regression); any but none "
                         "also exits 2 where the caliber has too few runs to look for a step")
    sp.add_argument("--format", choices=("md", "csv", "json"), default="md")
    sp.add_argument("--out", type=_folder, help="write regressions.<format> here instead of stdout")

    sp = verb("vendors", "each backend's speedup and latency per op, dtype and shape, at one corpus commit",
              cmd_vendors)
    sp.add_argument("--corpus-commit", help="this corpus commit (prefix; default: the newest run's)")
    sp.add_argument("--op", action="append", help="only this operator (repeatable)")
    sp.add_argument("--format", choices=("md", "csv", "json"), default="md")
    sp.add_argument("--out", type=_folder, help="write vendors.<format> here instead of stdout")

    sp = verb("html", "a static site: runs, per-op trends, regressions, vendors, A/B results", cmd_html)
    sp.add_argument("--out", type=_folder, required=True, help="folder for index.html")
    sp.add_argument("-k", type=_at_least(1), default=3, help="regressions: runs on each side of a step")
    sp.add_argument("--threshold", type=_at_least(0, float), default=0.05, help="regressions: smallest step")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    from zlbench.terminal import let_readers_leave

    let_readers_leave()
    sys.exit(main())
