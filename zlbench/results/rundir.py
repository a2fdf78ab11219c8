"""A zlbench run dir's format, its one owner: file names, the plan (with the format version), the
identity, the run's lock and its holder, the resume command, and what the units' events say is
measured or not (placeholders for nodes whose job ended early). The tables derived from the events
(rows.jsonl, ops_status.csv, run.log, processes.json) are made in results/tables.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from zlbench.errors import UsageError
from zlbench.results import events as ev

PLAN_FILE = "plan.json"
IDENTITY_FILE = "run_identity.json"
PROCESS_ROWS_FILE = "process_rows.jsonl"  # a plain run over several processes: every process' rows
# Held by a run's orchestrator (engine/locks.py); beside a lock, `<lock>.holder.json` names its holder.
RUN_LOCK_FILE = ".zlbench.lock"
# Reason of a placeholder for a planned node that got no end of its own.
NOT_RUN = ("its job ended before the node finished (worker killed, job cancelled, interrupted or "
           "preempted); resume to measure it")


def holder_record(lock: Path) -> Path:
    return lock.with_name(lock.name + ".holder.json")


def describe_holder(record: Path) -> str:
    """Who holds a lock (a run dir's or a device's), as its holder record says."""
    try:
        h = json.loads(record.read_text(encoding="utf-8"))
        return f"pid {h['pid']} on {h['host']}, started {h['started']}: {h.get('command', '')}"
    except (OSError, ValueError, KeyError):
        return "holder unknown"


def live_run(run_dir: Path) -> Optional[str]:
    """Who holds the run dir, where that is a live process of this host (a run still measuring);
    None otherwise. Read-only: a run starting meanwhile is not disturbed."""
    record = holder_record(Path(run_dir) / RUN_LOCK_FILE)
    try:
        h = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    import socket

    import psutil

    if h.get("host") != socket.gethostname() or not psutil.pid_exists(int(h.get("pid", -1))):
        return None
    return describe_holder(record)


def write_identity(run_dir: Path, identity: Mapping) -> Path:
    path = run_dir / IDENTITY_FILE
    atomic_write(path, json.dumps(identity, indent=2, default=str, sort_keys=False) + "\n")
    return path


# What every identity a run writes as it starts holds, and its JSON type (summary, collect and the store
# read them); `provenance` is read where it is there.
IDENTITY_KEYS = {"config": dict, "backend": dict, "switch_env": dict, "identity_hash": str}
_JSON_TYPES = {dict: "an object", list: "a list", str: "a string", bool: "true or false", int: "a number",
               float: "a number", type(None): "null"}


def read_identity(run_dir: Path, whole: bool = True) -> dict:
    """A run dir's identity. whole=False: a JSON object, whichever of IDENTITY_KEYS it holds (a reader
    of one key that does without it)."""
    path = Path(run_dir) / IDENTITY_FILE
    try:
        identity = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{run_dir} is not a zlbench run dir (no {IDENTITY_FILE}: a run writes it as it starts). "
                         "Fix: pass the folder a run names in its `results in ...` line (it holds "
                         f"{IDENTITY_FILE} and plan.json).")
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e}): the run dir is damaged (its measurements in units/ "
                         "are untouched). Fix: restore that file from a copy of the run dir, or start a new run.")
    problem = _identity_problem(identity, whole)
    if problem:
        raise UsageError(f"{path} is no run identity: {problem} (a run writes a JSON object holding "
                         f"{', '.join(IDENTITY_KEYS)}): the run dir is damaged (its measurements in units/ are "
                         "untouched). Fix: restore that file from a copy of the run dir, or start a new run.")
    return identity


def _identity_problem(identity, whole: bool) -> Optional[str]:
    def kind(value) -> str:
        return _JSON_TYPES.get(type(value), type(value).__name__)

    if not isinstance(identity, dict):
        return f"it holds {kind(identity)}"
    missing = [k for k in IDENTITY_KEYS if k not in identity] if whole else []
    if missing:
        return f"it lacks {', '.join(missing)}"
    wanted = {**IDENTITY_KEYS, "provenance": dict}
    for key, want in wanted.items():
        if key in identity and not isinstance(identity[key], want):
            return f"its {key} is {kind(identity[key])}, not {_JSON_TYPES[want]}"
    ab = identity.get("config", {}).get("ab") if whole else {}
    if not isinstance(ab, dict):
        return f"its config.ab is {kind(ab)}, not an object"
    return None


def add_process_facts(run_dir: Path) -> None:
    """Merge what the benchmark processes found (device names, driver, flag_gems vendor) into the
    identity, without changing its hash (facts observed, not chosen)."""
    facts_path = run_dir / "processes.json"
    if not (run_dir / IDENTITY_FILE).exists() or not facts_path.exists():
        return
    identity = read_identity(run_dir)
    facts = json.loads(facts_path.read_text(encoding="utf-8"))
    unique = {json.dumps(f, sort_keys=True) for f in facts.values()}
    identity["processes"] = [json.loads(u) for u in sorted(unique)]
    write_identity(run_dir, identity)


def device_uuids(identity: Optional[Mapping]) -> set:
    """The device UUIDs a run's benchmark processes ran on (recorded in its identity's processes)."""
    return {str(p["device_uuid"]) for p in (identity or {}).get("processes") or []
            if isinstance(p, Mapping) and p.get("device_uuid")}


def devices_swapped(identity: Optional[Mapping]) -> Dict[int, List[str]]:
    """Device indices whose processes ran on more than one GPU (by UUID): the run was resumed on
    another machine, or its pool's numbering changed. What a GPU draws as a whole (its clocks, its
    memory) then differs between the run's processes (RESULTS.md, thirty-seventh session)."""
    seen: Dict[int, set] = {}
    for p in (identity or {}).get("processes") or []:
        if isinstance(p, Mapping) and p.get("device_uuid") and p.get("device") is not None:
            seen.setdefault(int(p["device"]), set()).add(str(p["device_uuid"]))
    return {d: sorted(u) for d, u in sorted(seen.items()) if len(u) > 1}


def pairs_apart(run_dir: Path, sides: Sequence[str]) -> Optional[tuple]:
    """(node-round pairs whose two sides' records came from processes on different GPUs, pairs with
    both sides recorded) of an A/B run, from its units' events (each process says its device UUID
    at start; a unit id is side.rROUND.dDEVICE.sSHARD); None where no process said its UUID."""
    uuids: Dict[tuple, set] = {}  # (node, round, side) -> UUIDs of the processes that recorded it
    said = False
    for path in sorted((run_dir / "units").glob("*/events.jsonl")):
        side, _, rest = path.parent.name.partition(".r")
        if side not in sides or not rest.split(".")[0].isdigit():
            continue
        r = int(rest.split(".")[0])
        events = ev.read_events(path)
        by_pid = {e.get("pid"): (e.get("facts") or {}).get("device_uuid") for e in events
                  if e.get("event") == "process"}
        said = said or any(by_pid.values())
        for e in events:
            if e.get("event") == "record" and by_pid.get(e.get("pid")):
                uuids.setdefault((e.get("node"), r, side), set()).add(by_pid[e.get("pid")])
    if not said:
        return None
    pairs = {(n, r) for n, r, _ in uuids if all((n, r, s) in uuids for s in sides)}
    apart = sum(1 for n, r in pairs if len(set.union(*(uuids[(n, r, s)] for s in sides))) > 1)
    return apart, len(pairs)


def swapped_note(identity: Optional[Mapping], ab: bool, apart: Optional[tuple] = None) -> Optional[str]:
    """A caveat where devices_swapped finds any: which index was which GPUs, and what that means for
    a plain run's rows (their processes mix GPUs) or an A/B's of both sides (`apart`: pairs_apart)."""
    swapped = devices_swapped(identity)
    if not swapped:
        return None
    which = "; ".join(f"device {d} was {len(u)} GPUs ({', '.join(x[:8] for x in u)})" for d, u in swapped.items())
    if not ab:
        meaning = ("the rows' processes ran on different GPUs, so their values and intervals hold what each GPU "
                   "draws as a whole; a run of one GPU compares with its own kind")
    elif apart is None:
        meaning = "whether each node's two sides of a round shared a GPU is not known (no process said its UUID)"
    elif apart[0] == 0:
        meaning = (f"each node's two sides of a round ran on one GPU ({apart[1]} pairs, by their processes' "
                   "UUIDs), so its ratios hold, but the A and B ms average over the GPUs")
    else:
        meaning = (f"{apart[0]} of {apart[1]} node-round pairs ran their two sides on different GPUs: their ratios "
                   "hold what the GPUs differ by (a round cut between its sides and resumed elsewhere); "
                   "rerun the run on one machine")
    return f"{which} (device UUIDs: the run was resumed or requeued on another machine): {meaning}"


def resume_command(run_dir: Path, unset: Sequence[str] = (), drop: Sequence[str] = ()) -> str:
    """The command that resumes this run dir: the overrides it ran with and resume=, since a resume
    with other settings is refused (another identity); `unset`: switch variables a shell sets that
    the run did not (env -u); `drop`: overrides left out (a time limit that cut the run, which is
    no part of its identity)."""
    keep = [o for o in made_with(run_dir) if not _key(o).startswith(("resume", "hydra.")) and _key(o) not in drop]
    return " ".join([*map(shlex.quote, switches(run_dir, unset)), "python -m zlbench", *map(shlex.quote, keep),
                     shlex.quote(f"resume={hydra_value(str(run_dir))}")])


# The overrides that choose a run's tests (a recheck chooses its own).
SELECTION_KEYS = ("ops", "op_file", "test_node")


# A run's time limits: a recheck of a few ops is not cut where its run was.
LIMIT_KEYS = ("launcher.run_timeout_s", "launcher.time_min")


def recheck_command(run_dir: Path, ops: Sequence[str], into: Path, unset: Sequence[str] = (),
                    store_url: Optional[str] = None) -> str:
    """The command that measures `ops` again in a new run dir `into`, with the settings and switches
    run_dir was made with (`unset`: switch variables to clear) but its selection and time limits:
    the same settings, so `history compare` pairs its rows. store_url: the store it records into (the
    comparing one), in place of the run's own."""
    keep = [o for o in made_with(run_dir) if not _key(o).startswith(("resume", "hydra."))
            and _key(o) not in SELECTION_KEYS + LIMIT_KEYS and not (store_url and _key(o) == "store.url")]
    keep += [f"store.url={hydra_value(store_url)}"] if store_url else []
    ops_value = "[" + ",".join(hydra_value(o) for o in ops) + "]"
    return " ".join([*map(shlex.quote, switches(run_dir, unset)), "python -m zlbench", *map(shlex.quote, keep),
                     shlex.quote(f"ops={ops_value}"), shlex.quote(f"hydra.run.dir={hydra_value(str(into))}")])


def switches(run_dir: Path, unset: Sequence[str] = ()) -> List[str]:
    """`env [-u VAR ...] VAR=value ...` for the switches a run dir was made with (its identity's
    switch_env; `unset`: those a shell sets that the run did not): a command without them, in
    another shell, would be another identity. A value recorded masked (a URL's password) is left to
    the environment."""
    from zlbench.config.secrets import has_password

    try:
        env = read_identity(run_dir, whole=False).get("switch_env") or {}
    except UsageError:
        return []
    pairs = [f"{k}={v}" for k, v in sorted(env.items()) if not has_password(str(v))]
    pairs = [w for k in sorted(set(unset) - set(env)) for w in ("-u", k)] + pairs
    return ["env", *pairs] if pairs else []


def made_with(run_dir: Path) -> List[str]:
    """The overrides a run dir was made with, read from run_identity.json (its job's overrides, as
    Hydra took them), which only a run zlbench accepted writes; Hydra's .hydra/overrides.yaml, which
    any later command into the dir may rewrite, where it has none."""
    overrides = None
    try:
        overrides = (read_identity(run_dir, whole=False).get("provenance") or {}).get("job_overrides")
    except UsageError:
        pass
    if overrides is None:
        try:
            import yaml

            overrides = yaml.safe_load((Path(run_dir) / ".hydra" / "overrides.yaml").read_text()) or []
        except (OSError, ValueError, AttributeError, ImportError):
            overrides = []
    return [str(o) for o in overrides]


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def hydra_value(value: str) -> str:
    """A string as Hydra's grammar reads it back: quoted where it holds more than a plain path's
    characters (a comma would make a sweep, a quote or a space would not parse) or reads as another
    type (true, null: a variable set to it would read True or None)."""
    plain = re.fullmatch(r"[\w./@+:-]+", value) and value.lower() not in ("true", "false", "null")
    if plain:
        return value
    # Inside quotes a backslash is itself except before a quote or at the end, where it is doubled.
    escaped = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
    return "'" + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped) + "'"


def write_plan(run_dir: Path, plan: Mapping) -> None:
    atomic_write(run_dir / PLAN_FILE, json.dumps({"format": ev.FORMAT_VERSION, **plan}, indent=1))


def load_plan(run_dir: Path) -> dict:
    path = Path(run_dir) / PLAN_FILE
    if not Path(run_dir).exists():
        raise UsageError(f"{run_dir} does not exist. Fix: pass a run dir (it holds run_identity.json and plan.json).")
    if not path.is_file():
        raise UsageError(f"{run_dir} is not a zlbench run dir (no {PLAN_FILE}). Fix: pass the folder "
                         "that holds run_identity.json and plan.json.")
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e}): the run dir is damaged (its measurements in units/ "
                         "are untouched). Fix: restore that file from a copy of the run dir, or start a new run.")
    version = plan.get("format", 1)
    if version != ev.FORMAT_VERSION:
        raise UsageError(f"{run_dir} was written in run-dir format {version}; this zlbench reads format "
                         f"{ev.FORMAT_VERSION}. Fix: collect or resume it with the zlbench version that "
                         "wrote it, or start a new run.")
    return _one_schedule(plan)


def _one_schedule(plan: dict) -> dict:
    """A node-level A/B's schedule is written once, as plan["schedule"] (null: none). A plan.json
    written before that carried a copy on every unit, with max_rounds (plan["rounds"]): read it as
    written now, so such a run is still collected and resumed."""
    units = plan.get("units") or []
    if "schedule" not in plan:
        plan["schedule"] = next((u["schedule"] for u in units if u.get("schedule")), None)
    for u in units:
        u.pop("schedule", None)
    if plan["schedule"]:
        plan["schedule"].pop("max_rounds", None)
    return plan


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():  # a full disk mid-write: never leave the half-written copy behind
            tmp.unlink()


def measured_nodes(run_dir: Path, plan: Mapping, events: Optional[Mapping[str, List[dict]]] = None
                   ) -> Dict[tuple, set]:
    """(side, round) -> nodes with a final end in any of its units (a unit may take another's), or
    that the A/B scheduler stopped (not live, settled): nothing left to measure there."""
    done: Dict[tuple, set] = {}
    for u in plan["units"]:
        unit_events = events[u["unit_id"]] if events is not None else ev.read_events(ev.events_path(run_dir, u["unit_id"]))
        done.setdefault((u["side"], u["round"]), set()).update(ev.done_nodes(unit_events))
    return done


def unfinished_nodes(run_dir: Path, plan: Optional[Mapping] = None,
                     done: Optional[Dict[tuple, set]] = None) -> Dict[str, List[str]]:
    """unit id -> planned nodes with no final end, wherever they ran (a unit may have taken
    another's nodes): the note goes to the unit that claimed the node, else to the plan's."""
    from zlbench.results.claims import owner

    plan = plan or load_plan(run_dir)
    units = {u["unit_id"]: u for u in plan["units"]}
    done = done if done is not None else measured_nodes(run_dir, plan)
    missing: Dict[str, List[str]] = {}
    for u in plan["units"]:
        for n in u.get("nodes", []):
            if n not in done[(u["side"], u["round"])]:
                who = owner(u["claims_dir"], n) if u.get("claims_dir") else None
                missing.setdefault(who if who in units else u["unit_id"], []).append(n)
    return missing


# A placeholder's reason where what ended the jobs is known (write_placeholders' `why`).
_NOT_MEASURED_BECAUSE = "not measured ({}); resume to measure it"


def why_not_measured(reasons: Iterable[str]) -> str:
    """What ended the jobs, read back from the placeholders' reasons, so that `zlbench collect`
    says it as the run did; "" where none or several are given."""
    head, tail = _NOT_MEASURED_BECAUSE.split("{}")
    # Anywhere in the reason: a node measured in some rounds or processes says so first.
    pattern = re.compile(re.escape(head) + "(.*)" + re.escape(tail) + "$")
    whys = {m.group(1) for m in map(pattern.search, reasons) if m}
    return whys.pop() if len(whys) == 1 else ""


def write_placeholders(run_dir: Path, missing: Mapping[str, List[str]], why: str = "") -> None:
    """Resumable ends for nodes whose job ended from outside: reported, never dropped, and measured
    by resume=RUN_DIR (they were not at fault). `why`: what ended the jobs, when known."""
    reason = _NOT_MEASURED_BECAUSE.format(why) if why else NOT_RUN
    # A Ctrl-C or SIGTERM of the run is no fault of the node's: said as such, not as a crash.
    status = "interrupted" if why == "interrupted" else "crashed"
    for unit_id, nodes in missing.items():
        path = ev.events_path(run_dir, unit_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        known = ev.placeholders(ev.read_events(path))
        for n in nodes:
            if n not in known:
                ev.append(path, "end", node=n, status=status, resumable=True, reason=reason)


