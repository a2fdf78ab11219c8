"""`zlbench summary PATH [--ab PATH_B]`: summarize a run dir or a FlagGems result
log; with --ab, pair two runs (or logs) and compare the same implementation across them.

Two separate runs (a multirun `-m ab=AXIS ab.side=off,on`, or any two runs or logs) are not an
interleaved A/B: every round of one ran before any round of the other. The report names each side
(from the run identity: the axis variable, its value and the side's name), says that the rounds
were not interleaved and how far apart the runs ran, and points to the node-level A/B, which runs
both sides in one run, alternating per node on each device. Rounds a paired row lost on one side
are listed; a dead axis (identical kernels on both sides) exits 3 as a run does. Identical kernels
say nothing of what differs outside them: two runs whose identities differ in a version, the driver
or machine their processes found, or a setting, are compared row by row, and the report says in
what they differ; two runs of one identity are named repeats (`history compare` judges those)."""

from __future__ import annotations

import argparse
import math
import re
import shlex
import statistics
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from zlbench.ab.pairing import row_key
from zlbench.errors import UsageError, VerbParser
from zlbench.exitcodes import Exit
from zlbench.results.identity_layout import hashed_fields, hashed_layout

IDENTITY_FILE = "run_identity.json"


def load(path: Path, skip_bad_lines: bool = False, notes: Optional[List[str]] = None) -> Tuple[List[dict], List[dict], str]:
    """(rows, status rows, label) of a run dir or a result log; notes: where given, what a report of
    them should say besides (lines skipped, no identity)."""
    from zlbench.results.flaggems_log import rows_from_log
    from zlbench.results.rundir import PLAN_FILE
    from zlbench.results.tables import load_rows, load_status

    if path.is_dir():
        if not (path / PLAN_FILE).exists() and not (path / "rows.jsonl").exists():
            logs = sorted(path.glob("result_*.log")) + sorted(path.glob("run.log"))
            if logs:
                return load(logs[0], skip_bad_lines, notes)
            inside = sorted(p.parent.name for p in path.glob("*/run_identity.json"))[:3]
            fix = "pass a run dir (it holds run_identity.json) or a result_*.log"
            if inside:
                fix = f"pass one of the run dirs in it, e.g. {path / inside[0]}"
                fix += f" (also {', '.join(inside[1:])})" if inside[1:] else ""
            raise UsageError(f"{path} is neither a zlbench run dir nor holds a FlagGems result log. Fix: {fix}.")
        if notes is not None and not (path / IDENTITY_FILE).is_file():
            notes.append(f"{path} holds no {IDENTITY_FILE}: its backend, devices, timer and caliber are unknown "
                         "here; this reads its tables alone.")
        return load_rows(path), load_status(path), path.name
    if not path.exists():
        raise UsageError(f"{path} does not exist. Fix: pass a run dir or a result log.")
    skipped: Optional[List[int]] = [] if skip_bad_lines else None
    rows = rows_from_log(path, skipped)
    if skipped:
        said = f"skipped {len(skipped)} malformed line(s) of {path}: {', '.join(map(str, skipped))}"
        print(f"zlbench: {said}", file=sys.stderr)
        if notes is not None:
            notes.append(f"{said[0].upper()}{said[1:]} (--skip-bad-lines): their records are in no table here.")
    status = {}
    for r in rows:  # a log of zlbench's names each record's node; FlagGems' own, none (one per op)
        s = status.setdefault((r["op"], r.get("node")), {"op": r["op"], "test_node": r.get("node") or "",
                                                         "side": "main", "status": "ok", "reason": ""})
        if r["status"] != "ok":
            s["status"], s["reason"] = r["status"], r.get("reason") or ""
    return rows, list(status.values()), path.name


class Source:
    """What one PATH of `--ab` is: a run dir (or a log inside one: run.log, run.<side>.log) with its
    identity, side, kernels and when it measured, or a result log on its own."""

    def __init__(self, path: Path):
        self.path = path
        self.run_dir = path if (path / IDENTITY_FILE).is_file() else (
            path.parent if path.is_file() and (path.parent / IDENTITY_FILE).is_file() else None)
        self.identity: Mapping = {}
        if self.run_dir is not None:
            from zlbench.results.rundir import read_identity

            self.identity = read_identity(self.run_dir)
        sides = list(self.identity.get("sides") or {})
        named = re.fullmatch(r"run\.(.+)\.log", path.name) if path.is_file() else None
        self.side = (named[1] if named and named[1] in sides else sides[0] if len(sides) == 1 else None)

    def label(self, fallback: str) -> str:
        """`VAR=value (side NAME)` for a side of an A/B axis, else the run's or log's name."""
        from zlbench.report.ab import side_label

        ab = (self.identity.get("config") or {}).get("ab") or {}
        var = ab.get("var")
        if self.side and self.side != "main" and var:
            return side_label(var, (self.identity.get('sides') or {})[self.side].get(var), self.side)
        return fallback

    @property
    def aa(self) -> bool:
        """Whether the run was an A/A (ab.aa=true: both sides one value; a sweep's two sides of one)."""
        return bool(((self.identity.get("config") or {}).get("ab") or {}).get("aa"))

    def artifacts(self) -> Mapping[str, Sequence[str]]:
        """The kernels this side compiled, per op (liveness): {} where unknown."""
        from zlbench.results.tables import load_artifacts

        if self.run_dir is None or self.side is None:
            return {}
        return load_artifacts(self.run_dir).get(self.side, {})

    def span(self) -> Optional[Tuple[float, float, str]]:
        """(first, last, how known) of when this side measured: its units' events, else the run's
        creation time, else a log's file time."""
        from zlbench.results.events import read_events

        if self.run_dir is not None:
            times = [e["t"] for p in sorted((self.run_dir / "units").glob("*/events.jsonl")) for e in read_events(p)
                     if isinstance(e.get("t"), (int, float))]
            if times:
                return min(times), max(times), "events"
            created = self.identity.get("created")
            if created:
                t = datetime.strptime(created, "%Y-%m-%dT%H:%M:%S%z").timestamp()
                return t, t, "run identity"
        if self.path.is_file():
            t = self.path.stat().st_mtime
            return t, t, "file time"
        return None


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    s = abs(seconds)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h" if s < 172800 else f"{s / 86400:.1f} days"


def _ran(span: Tuple[float, float, str]) -> str:
    first, last = _when(span[0]), _when(span[1])
    if span[1] <= span[0]:
        return f"at {first}" + (f" ({span[2]})" if span[2] != "events" else "")
    return f"{first[:-4]} to {last[11:] if last[:10] == first[:10] else last}"


def not_interleaved(a: Source, b: Source, label_a: str, label_b: str) -> Tuple[str, Dict]:
    """The report's line for two separate runs, and what it rests on (for ab.json)."""
    spans = {"a": a.span(), "b": b.span()}
    info: Dict = {"interleaved": False, "node_level_command": _node_level_command(a, b)}
    parts = []
    for name, label, span in (("A", label_a, spans["a"]), ("B", label_b, spans["b"])):
        if span:
            info[name.lower()] = {"first": _when(span[0]), "last": _when(span[1]), "from": span[2]}
            parts.append(f"{name} ({label}) ran {_ran(span)}")
    apart = ""
    if spans["a"] and spans["b"]:
        (a0, a1, _), (b0, b1, _) = spans["a"], spans["b"]
        info["start_gap_s"] = round(b0 - a0, 1)
        gap = max(b0 - a1, a0 - b1)
        first, second = ("A", "B") if a0 <= b0 else ("B", "A")
        apart = (f"; {second} started {_duration(b0 - a0)} after {first}"
                 + (f", {_duration(gap)} after {first} ended" if gap > 0 else ", while it still ran"))
    text = ("**Not interleaved**: two separate runs, every round of one side before any of the other ("
            + ("; ".join(parts) or "times unknown") + apart + "). Rounds are paired by index as if they had run "
            "side by side, so drift of the machine between the runs enters every row's change. For an "
            "interleaved A/B (both sides in one run, alternating per node on each device): "
            f"`{info['node_level_command']}`.")
    return text, info


def _node_level_command(a: Source, b: Source) -> str:
    from zlbench.config.secrets import has_password
    from zlbench.results.rundir import hydra_value

    ab = (a.identity.get("config") or {}).get("ab") or {}
    if ab.get("name") and ab.get("name") != "none":
        values = [str(v) for v in ab.get("values") or []]
        listed = ",".join(hydra_value(v) for v in values)
        return (f"python -m zlbench ab={ab['name']}" + (f" ab.var={ab['var']}" if ab["name"] == "env" else "")
                + (f" {shlex.quote(f'ab.values=[{listed}]')}" if ab["name"] == "env" and values not in ([], ["0", "1"])
                   and not any(has_password(v) for v in values) else "")
                + (" ab.aa=true" if ab.get("aa") else ""))  # the sweep's sides an A/A: so is its one-run form

    from zlbench.planning.switches import set_apart

    apart = set_apart(a.identity, b.identity)
    var, values = next(iter(apart.items())) if len(apart) == 1 else (None, (None,))
    if None not in values and not any(has_password(str(v)) for v in values):
        # Two plain runs a variable set apart: that variable's A/B, its values as Hydra reads them back.
        listed = ",".join(hydra_value(str(v)) for v in values)
        return f"python -m zlbench ab=env ab.var={var} {shlex.quote(f'ab.values=[{listed}]')}"
    return "python -m zlbench ab=env ab.var=VAR ab.values=[A,B]"


def dropped_rounds(rows_a: Sequence[dict], rows_b: Sequence[dict]) -> List[Dict]:
    """Rows paired in some rounds but not in others: which rounds each lost and why, as the pairing
    left them out (rows paired in no round are the report's unpaired rows)."""
    from zlbench.ab.pairing import name_shared_keys, pair
    from zlbench.results.schema import short_dtype

    rows = [{"op": p.key[0], "dtype": short_dtype(p.key[1]), "shape": p.key[2], "node": p.key[3] or None,
             "rounds_kept": len(p.a), "dropped": p.dropped} for p in pair(rows_a, rows_b).rows]
    name_shared_keys(rows)  # named against every paired row: a test's key another test shares reads apart
    return [r for r in rows if r["dropped"]]


def _rounds_a_row(rows: Sequence[dict]) -> int:
    """The most measured rounds any row of a source has (a plain run's row or a log's: 1)."""
    counts = Counter(row_key(r) for r in rows if r.get("latency") and r.get("dtype") is not None)
    return max(counts.values(), default=0)


def one_value_a_row(rows_a: Sequence[dict], rows_b: Sequence[dict],
                    of_rounds: Tuple[bool, bool] = (True, True)) -> Tuple[List[dict], List[dict], Optional[str]]:
    """Where one source holds one value a row (a plain run: the median over its processes; a log: an
    A/B side's mean over its rounds, or FlagGems' one value) and the other rounds (an A/B side's run),
    rounds paired by index would pair that value with the first round alone and drop the others: the
    rounds are read as one value a row instead, their geometric mean (as a side's log holds). Returns
    both sources' rows and the caveat that says so (None where the two are of one kind). of_rounds:
    which sources are runs of rounds (a run dir: an A/B side's); a log's row logged again is its
    next round, paired by index as before."""
    counts = [_rounds_a_row(rows_a), _rounds_a_row(rows_b)]
    if sorted(counts)[0] != 1 or max(counts) < 2:
        return list(rows_a), list(rows_b), None
    many = 0 if counts[0] > 1 else 1
    if not of_rounds[many]:
        return list(rows_a), list(rows_b), None
    names = ("A", "B")
    caveat = (f"{names[1 - many]} holds one value a row and {names[many]} up to {counts[many]} rounds a row: "
              f"{names[many]}'s rows are the geometric mean over their rounds (as an A/B side's log holds), "
              "one value each, not its first round alone")
    rows = [list(rows_a), list(rows_b)]
    rows[many] = mean_over_rounds(rows[many])
    return rows[0], rows[1], caveat


def mean_over_rounds(rows: Sequence[dict]) -> List[dict]:
    """One row a key: its measured rounds' geometric mean (latency, and latency_base where every round
    has one), as round 0; a key no round measured keeps its first row. Node-level status rows stay."""
    measured: Dict[Tuple, List[dict]] = {}
    out: List[dict] = []
    firsts: Dict[Tuple, dict] = {}
    for r in rows:
        if r.get("dtype") is None and r.get("shape") is None:
            out.append(r)
        elif r.get("latency") and r.get("status", "ok") == "ok" and math.isfinite(r["latency"]):
            measured.setdefault(row_key(r), []).append(r)
        else:
            firsts.setdefault(row_key(r), r)
    for key, rs in measured.items():
        row = {**rs[0], "round": 0, "latency_ci": None, "processes": None,
               "latency": math.exp(statistics.fmean(math.log(r["latency"]) for r in rs))}
        bases = [r["latency_base"] for r in rs if r.get("latency_base")]
        row["latency_base"] = math.exp(statistics.fmean(map(math.log, bases))) if len(bases) == len(rs) else None
        out.append(row)
    out += [r for key, r in firsts.items() if key not in measured]
    return out


def dropped_markdown(dropped: Sequence[Mapping]) -> str:
    from tabulate import tabulate

    from zlbench.ab.pairing import op_with_test

    return ("\n## Rounds dropped inside rows\n\n" + tabulate(
        [[op_with_test(d), d["dtype"], d["shape"], d["rounds_kept"], "; ".join(d["dropped"])[:200]] for d in dropped],
        headers=["Operator", "dtype", "shape", "rounds kept", "dropped"], tablefmt="github") + "\n")


# What can move a row while every compiled kernel stays byte-identical, as a run's identity records
# it (in its hashed layout, so that an identity an earlier zlbench wrote reads alike): the software
# versions, the devices and their driver, the backend, the timer settings, the corpus' commit; and,
# outside the hash, the host and what the benchmark processes found (not paths or clock readings).
_CONDITIONS = ("versions", "devices", "backend", "timer", "autotune", "corpus.commit")
_PROCESS_FACTS = ("device_name", "device_uuid", "driver", "torch", "triton", "flag_gems", "python")


def _flat(value, prefix: str = "", lists: bool = True) -> Dict[str, object]:
    """Nested mappings (and lists, unless lists=False: kept whole) as 'devices.0.driver' -> value."""
    items = value.items() if isinstance(value, Mapping) else \
        enumerate(value) if lists and isinstance(value, list) else None
    if items is None:
        return {prefix: value}
    out: Dict[str, object] = {}
    for k, v in items:
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k), lists))
    return out


def _conditions(identity: Mapping) -> Dict[str, object]:
    flat = _flat({k: v for k, v in hashed_layout(identity).items() if k != "processes"})
    out = {k: v for k, v in flat.items() if any(k == c or k.startswith(c + ".") for c in _CONDITIONS)}
    found = [p for p in identity.get("processes") or [] if isinstance(p, Mapping)]
    out["host"] = identity.get("host")
    for k in _PROCESS_FACTS:  # each fact's values over the processes, e.g. 'processes.driver'
        values = sorted({str(p.get(k)) for p in found if p.get(k) is not None})
        out[f"processes.{k}"] = ", ".join(values) or None
    return out


def _changes(fa: Mapping, fb: Mapping, keys) -> List[str]:
    """'key: A's value -> B's value' for the keys whose values differ, each value cut to 40 characters
    where the cut ones still differ (a commit and the same commit '+dirty' are shown whole)."""
    def cut(v: str) -> str:
        return v if len(v) <= 40 else v[:40] + "..."

    def pair(a: str, b: str) -> str:
        return f"{cut(a)} -> {cut(b)}" if a[:40] != b[:40] else f"{a} -> {b}"
    return [f"{k}: {pair(str(fa.get(k)), str(fb.get(k)))}" for k in sorted(keys) if fa.get(k) != fb.get(k)]


def _listed(changes: Sequence[str]) -> str:
    return "; ".join(changes[:4]) + (f"; {len(changes) - 4} more" if len(changes) > 4 else "")


def conditions_apart(a: Mapping, b: Mapping) -> List[str]:
    """Where two run identities record different conditions ('versions.torch: 2.11.0 -> 2.12.0',
    'devices.0.driver: ...'); what one of them does not record is no difference."""
    ca, cb = _conditions(a), _conditions(b)
    return _changes(ca, cb, [k for k in ca.keys() & cb.keys() if ca[k] is not None and cb[k] is not None])


def switches_apart(a: Mapping, b: Mapping, side_a: Optional[str] = None, side_b: Optional[str] = None) -> List[str]:
    """Where two runs set a switch apart: their A/B side's values, or a recorded switch variable. A
    run of one side (ab.side=off, a sweep's job), or one side's log of an A/B run (side_a, side_b),
    reads as the variables that side set ('VAR: 0 -> 1', not 'sides.off.VAR: 0 -> None; sides.on.VAR:
    None -> 1')."""
    def switches(i: Mapping, side: Optional[str]) -> dict:
        # corpus.env is set in every process, so switch_env leaves it out (planning/identity.py): a
        # variable there is a switch the run set all the same (+corpus.env.VAR=1 against =0).
        corpus = ((i.get("config") or {}).get("corpus") or {}) if isinstance(i.get("config"), Mapping) else {}
        env = {**(corpus.get("env") or {}), **(i.get("switch_env") or {})}
        sides = i.get("sides") or {}
        if side in sides and isinstance(sides[side], Mapping):
            return _flat({**env, **sides[side]})
        if len(sides) == 1 and isinstance(next(iter(sides.values())), Mapping):
            return _flat({**env, **next(iter(sides.values()))})
        return _flat({"sides": sides, "switch_env": env})

    fa, fb = switches(a, side_a), switches(b, side_b)
    return _changes(fa, fb, fa.keys() | fb.keys())


def check_out(out: Path) -> None:
    """--out is a folder, made where missing: a file there, or where a folder above it should be, is refused
    before anything is read or written; so is a run dir, whose own summary.md and ab.* it would replace."""
    if (out / IDENTITY_FILE).is_file():
        raise UsageError(f"--out {out} is a run dir: its own summary.md (and an A/B's ab.md, ab.csv, ab.json, "
                         "ab.png) would be replaced by this comparison. Fix: pass a new folder for --out; "
                         f"`python -m zlbench collect {out}` writes a run's own tables again.")
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                raise UsageError(f"--out takes a folder; {p} is a file. Fix: pass a folder for summary.md (with "
                                 "--ab: ab.md, ab.csv, ab.json and ab.png; a new one is made), or move that file away.")
            return


def check_pair(path_a: Path, path_b: Path) -> None:
    """Two different runs: the same one twice would compare a run with itself."""
    if path_a.exists() and path_b.exists() and path_a.samefile(path_b):
        raise UsageError(f"--ab {path_b} names {path_a} again: that compares a run with itself. Fix: pass two "
                         f"different runs or logs (`zlbench summary {path_a}` summarizes one).")


def one_side(rows: Sequence[dict], path: Path) -> None:
    """An A/B run dir's rows hold both sides: read as one run, rows are paired by round alone, so a
    round's later side would overwrite the other and a side would be paired with itself."""
    sides = sorted({str(r.get("side") or "main") for r in rows})
    if len(sides) > 1:
        logs = " or ".join(str(path / f"run.{s}.log") for s in sides)
        raise UsageError(f"{path} holds the rows of both sides of an A/B ({', '.join(sides)}): read as one run, a side "
                         f"would be paired with itself. Fix: its own ab.md holds the interleaved A/B; to compare one "
                         f"side with another run, pass that side's log, {logs}.")


def compare_two(args) -> int:
    from zlbench.report.ab import LISTED_BELOW, compare, render_markdown, write
    from zlbench.results.process_stats import RUN_OFFSET_SD

    if args.out is not None:
        check_out(args.out)
    check_pair(args.path, args.ab)
    rows_a, _, name_a = load(args.path, args.skip_bad_lines)
    rows_b, _, name_b = load(args.ab, args.skip_bad_lines)
    one_side(rows_a, args.path)
    one_side(rows_b, args.ab)
    a, b = Source(args.path), Source(args.ab)
    label_a, label_b = a.label(name_a), b.label(name_b)
    caveats, info = [], {"interleaved": None}
    one_run = a.run_dir is not None and b.run_dir is not None and a.run_dir.resolve() == b.run_dir.resolve()
    if one_run:
        text = f"Both sides come from one run ({a.run_dir}): its own ab.md has the interleaved A/B."
    else:
        text, info = not_interleaved(a, b, label_a, label_b)
    rows_a, rows_b, mixed = one_value_a_row(rows_a, rows_b, (args.path.is_dir(), args.ab.is_dir()))
    dropped = dropped_rounds(rows_a, rows_b)
    if mixed:
        caveats.append(mixed)
    elif dropped:
        caveats.append(f"{len(dropped)} paired row(s) lost rounds on a side ({LISTED_BELOW}): their statistics rest "
                       "on fewer rounds")
    artifacts_a, artifacts_b = a.artifacts(), b.artifacts()
    both = not one_run and bool(a.identity) and bool(b.identity)
    apart = conditions_apart(a.identity, b.identity) if both else []
    switched = switches_apart(a.identity, b.identity, a.side, b.side) if both else []
    if apart:
        if switched:  # a switch's two sides (a sweep, maybe on two hosts): its kernels still say if it acted
            caveats.append(f"the runs set a switch apart ({_listed(switched)}) and differ outside it as well "
                           f"({_listed(apart)})")
        else:
            # No switch between them: identical kernels say nothing of what differs outside them (a
            # driver, torch, the machine), so every row is compared, its liveness unknown.
            artifacts_a = artifacts_b = {}
            caveats.append(f"the runs differ outside their kernels ({_listed(apart)}): rows are compared whatever "
                           "their kernels")
    elif switched:  # the one thing set apart: say which (a run's own variable, not only an A/B side's)
        caveats.append(f"the runs set a switch apart: {_listed(switched)}")
    elif both and hashed_fields(a.identity) == hashed_fields(b.identity):
        caveats.append("the runs are of one identity: repeat runs, whose rows `zlbench history compare` judges on "
                       "their intervals too")
    result = compare(rows_a, rows_b, label_a, label_b, threshold=args.threshold, artifacts_a=artifacts_a,
                     artifacts_b=artifacts_b, caveats=caveats, aa=a.aa and b.aa,
                     run_offset_sd=0.0 if one_run else RUN_OFFSET_SD)
    result["summary"]["runs"] = info
    result["dropped_rounds"] = dropped
    title, rest = render_markdown(result).split("\n", 1)
    result["markdown"] = f"{title}\n\n- {text}{rest}" + (dropped_markdown(dropped) if dropped else "")
    if args.out is not None:
        write(result, args.out)
    print(result["markdown"])
    if not result["summary"]["paired_rows"]:
        print(f"zlbench: error: {label_a} and {label_b} share no row both measured ({result['summary']['unpaired_rows']} "
              "unpaired, listed above with why): nothing was compared. Fix: pair runs or logs of the same ops, dtypes "
              "and tests.", file=sys.stderr)
        return int(Exit.USAGE)
    if result["summary"]["liveness"] == "not live" and not args.allow_dead:
        if both and not apart and hashed_fields(a.identity) == hashed_fields(b.identity):
            why = (" They are runs of one identity: repeat runs, whose rows `zlbench history compare` judges on "
                   "their intervals.")
        else:
            why = f" What the runs set apart: {_listed(switched)}." if switched else ""
        print("zlbench: the A/B axis is NOT LIVE (identical kernels on both sides); exit 3 as a run "
              f"would (--allow-dead to accept).{why}", file=sys.stderr)
        return int(Exit.DEAD_AXIS)
    return 0


def run_dir_summary(path: Path, allow_dead: bool = False) -> Optional[Tuple[str, int]]:
    """A zlbench run dir's summary as the run (or `collect`) writes it, an A/B's verdicts first, from
    its events as they stand, writing nothing, and the code the run exits with for them (a run still
    measuring: 4, as collect says); None for a result log, or a folder without a run's identity or
    plan, or a run dir copied without units/ (its tables are read: table_exit)."""
    from zlbench.report.run_report import compose, exit_of
    from zlbench.results.rundir import PLAN_FILE, live_run, load_plan, read_identity
    from zlbench.results.tables import derive, load_rows

    if not (path.is_dir() and (path / IDENTITY_FILE).exists() and (path / PLAN_FILE).exists()):
        return None
    if not (path / "units").is_dir() and (path / "ops_status.csv").exists():
        return None  # a copy of the tables: events would read every node unmeasured
    if (path / "rows.jsonl").exists():
        load_rows(path)  # a damaged table is named (its Fix: collect rebuilds it), though not read here
    d = derive(path)  # a run stopped before its first unit: every planned node unmeasured
    running = live_run(path)
    suffix = f" (summarized while the run was still running: {running})" if running else ""
    identity = read_identity(path)
    text, result = compose(path, d.rows, d.status_rows, identity, load_plan(path), suffix, running=running or "")
    code = exit_of(d.status_rows, result["ab"], identity, allow_dead=allow_dead)
    return text, int(Exit.CUT) if running and code in (Exit.OK, Exit.NOT_OK) else int(code)


def table_exit(path: Path, status_rows: List[dict]) -> int:
    """A run dir read from its tables exits as the run would for them (its fail_on); a log, 0."""
    from zlbench.report.run_report import exit_of
    from zlbench.results.rundir import read_identity

    if not (path.is_dir() and (path / IDENTITY_FILE).exists()):
        return 0
    # ops_status.csv keeps no resumable column: its interrupted nodes are the ones left to resume
    resumable = [{**s, "resumable": s.get("resumable") or s.get("status") == "interrupted"} for s in status_rows]
    return int(exit_of(resumable, None, read_identity(path)))


def main(argv=None) -> int:
    parser = VerbParser(prog="zlbench summary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="run dir, run.log, or FlagGems result_*.log")
    parser.add_argument("--ab", type=Path, help="second run (side B) to pair with PATH (side A)")
    parser.add_argument("--out", type=Path,
                        help="folder to write summary.md into (with --ab: ab.md/ab.csv/ab.json/ab.png)")
    parser.add_argument("--skip-bad-lines", action="store_true",
                        help="in a result log, skip malformed record lines (counted) instead of refusing the log")
    parser.add_argument("--threshold", type=float, default=0.02,
                        help="relative change below which a difference is 'below threshold' (default 0.02)")
    parser.add_argument("--allow-dead", action="store_true",
                        help="exit 0 even when the A/B axis is not live (default: exit 3, as a run does)")
    args = parser.parse_args(argv)
    try:
        if args.ab is None:
            from zlbench.report.summary import render_summary

            if args.out is not None:
                check_out(args.out)
            # A run dir's code as the run's (4 for a cut run, 1 for a failed node); a result log's 0.
            # Its events are read first: tables a run dir lacks, load() would write (collect).
            summarized = run_dir_summary(args.path, args.allow_dead)
            if summarized is None:
                notes: List[str] = []
                rows_a, status_a, label_a = load(args.path, args.skip_bad_lines, notes)  # a damaged table is named
                text = render_summary(rows_a, status_a, f"summary of {label_a}")
                if notes:  # under the title
                    title, rest = text.split("\n", 1)
                    text = "\n".join([title, "", *(f"> **Note**: {n}" for n in notes), rest])
                summarized = text, table_exit(args.path, status_a)
            text, code = summarized
            print(text)
            if args.out is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "summary.md").write_text(text, encoding="utf-8")
                print(f"[zlbench] wrote {args.out / 'summary.md'}", file=sys.stderr)
            return code
        return compare_two(args)
    except UsageError as e:
        print(f"zlbench: error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
