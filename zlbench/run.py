"""One run, start to end: compose -> plan -> identity -> launch -> watch -> collect -> report."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .backends import get_backend
from .backends.registry import backend_names, detect
from .errors import UsageError
from .identity import IDENTITY_FILE, add_process_facts, build_identity, write_identity
from .plan import Plan, WorkUnit, make_plan
from .results.rundir import PLAN_FILE, collect, load_plan, run_pinning_problems
from .validate import validate_config


def resolved_config(cfg: DictConfig) -> Dict[str, Any]:
    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[return-value]
    except OmegaConfBaseException as e:
        msg = str(e).splitlines()[0]
        key = getattr(e, "full_key", None)
        hint = " Fix: shape.file=<path to a shape-record file>." if key == "shape.file" else ""
        raise UsageError(f"config value {key or ''} is not set or cannot be resolved: {msg}.{hint}")


def corpus_root(cfg: Mapping[str, Any]) -> Path:
    corpus = cfg["corpus"]
    if corpus["name"] == "demo" and not corpus.get("root"):
        # Not a Python package on purpose: pytest must import it as `benchmark`, as FlagGems' is.
        return Path(__file__).resolve().parent / "demo_corpus"
    root = corpus.get("root")
    if not root:
        raise UsageError(
            f"corpus={corpus['name']} needs its checkout: set corpus.root=/path/to/FlagGems or the "
            "environment variable FLAGGEMS_ROOT."
        )
    path = Path(str(root)).expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"corpus.root={root} does not exist. Fix: point it at a FlagGems checkout.")
    return path


def make_backend(cfg: Mapping[str, Any]):
    name = cfg["backend"]["name"]
    if name == "auto":
        name = detect()
    settings = {"slots": cfg["backend"].get("slots")} if name == "cpu" else {}
    return get_backend(name, **settings)


def earlier_costs(*run_dirs: Optional[str]) -> Dict[str, float]:
    """Wall time per test node from an earlier run of the same corpus (for shard balancing)."""
    import csv

    for d in run_dirs:
        if not d:
            continue
        path = Path(d) / "ops_status.csv"
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                return {r["test_node"]: float(r["wall_s"] or 0) for r in csv.DictReader(f)}
    return {}


def visibility_snapshot() -> Dict[str, Optional[str]]:
    """This process' values of every backend's visibility keys (None = unset), restored in jobs."""
    keys = set()
    for name in backend_names():
        b = get_backend(name)
        if b.visibility_env:
            keys.add(b.visibility_env)
        keys.update(b.extra_visibility_envs)
    return {k: os.environ.get(k) for k in sorted(keys)}


def prepare(cfg: DictConfig, run_dir: Path, provenance: Mapping[str, Any]):
    """Everything before execution; raises UsageError on bad input, writes nothing."""
    resolved = resolved_config(cfg)
    validate_config(resolved)
    backend = make_backend(resolved)
    if resolved["launcher"]["name"] == "slurm":
        # Devices are Slurm's to allocate: plan one queue per array task, pinned at run time.
        from .backends import DeviceInfo

        devices = [DeviceInfo(i, f"slurm task {i}") for i in range(max(1, int(resolved["launcher"].get("tasks") or 1)))]
    else:
        devices = backend.inherited_visible(backend.enumerate_devices())
    root = corpus_root(resolved)
    costs = earlier_costs(resolved.get("cost_from"), resolved.get("resume"))
    plan = make_plan(resolved, backend, devices, root, run_dir, costs)
    identity = build_identity(resolved, plan, backend, provenance)
    return resolved, backend, plan, identity


def check_resume(run_dir: Path, identity: Mapping[str, Any]) -> bool:
    """True when run_dir already holds this run (resume it); error when it holds another caliber."""
    path = run_dir / IDENTITY_FILE
    if not path.exists():
        return False
    old = json.loads(path.read_text(encoding="utf-8"))
    if old.get("identity_hash") != identity["identity_hash"]:
        diff = sorted(k for k in identity if k not in ("provenance", "created", "identity_hash")
                      and old.get(k) != identity.get(k))
        raise UsageError(
            f"{run_dir} holds a run of another caliber (differs in: {', '.join(diff) or 'unknown'}); "
            "resuming it would mix measurements. Fix: resume with the same config, or start a new run dir."
        )
    return True


def write_plan(run_dir: Path, plan: Plan) -> None:
    data = {
        "backend": plan.backend, "timer": plan.timer, "rounds": plan.rounds,
        "devices": [d.as_dict() for d in plan.devices],
        "nodes": [{"nodeid": n.nodeid, "op": n.op, "file": n.file} for n in plan.nodes],
        "sides": [{"name": s.name, "env": s.env} for s in plan.sides],
        "plugins": plan.plugins, "corpus_root": plan.corpus_root,
        "units": [u.to_dict() for u in plan.units],
    }
    (run_dir / PLAN_FILE).write_text(json.dumps(data, indent=1), encoding="utf-8")


def print_plan(plan: Plan, identity: Mapping[str, Any]) -> None:
    print(f"backend={plan.backend} timer={plan.timer} identity={identity['identity_hash'][:16]}")
    print("devices: " + ", ".join(f"{d.index} ({d.name})" for d in plan.devices))
    print(f"plugins: {' '.join(plan.plugins)}")
    print(f"nodes ({len(plan.nodes)}):")
    for n in plan.nodes:
        print(f"  {n.op:24s} {n.nodeid}")
    print(f"units ({len(plan.units)}):")
    for u in plan.units:
        env = " ".join(f"{k}={v}" for k, v in sorted(u.env.items()) if k != "PYTHONPATH")
        print(f"  {u.unit_id}: {len(u.nodes)} node(s) on device {u.device}; {env}")
    if plan.units:
        print("argv: " + " ".join(plan.units[0].argv))


def queues_of(plan: Plan) -> Dict[int, List[dict]]:
    queues: Dict[int, List[dict]] = {}
    for u in plan.units:
        queues.setdefault(u.device, []).append(u.to_dict())
    return queues


def execute(cfg: DictConfig, hydra_run_dir: Path, provenance: Mapping[str, Any]) -> int:
    resolved_resume = cfg.get("resume")
    run_dir = Path(resolved_resume).resolve() if resolved_resume else hydra_run_dir
    resolved, backend, plan, identity = prepare(cfg, run_dir, provenance)
    if resolved.get("dry_run"):
        print_plan(plan, identity)
        remove_empty_run_dir(run_dir)
        return 0
    run_dir.mkdir(parents=True, exist_ok=True)
    resuming = check_resume(run_dir, identity)
    if resuming and (run_dir / PLAN_FILE).exists():
        # The same units as before, not a fresh balance (which the earlier wall times now known
        # would change): completion is tracked per unit, so a re-planned unit would measure again.
        plan.units = [WorkUnit(**u) for u in load_plan(run_dir)["units"]]
    try:
        write_identity(run_dir, identity)
        write_plan(run_dir, plan)
    except OSError as e:
        raise UsageError(f"cannot write the run dir {run_dir}: {e}. Fix: free space or choose "
                         "hydra.run.dir=<writable path>.")
    print(f"[zlbench] {'resuming' if resuming else 'run'} {run_dir}  backend={plan.backend} "
          f"timer={plan.timer} devices={[d.index for d in plan.devices]} nodes={len(plan.nodes)} "
          f"sides={[s.name for s in plan.sides]} rounds={plan.rounds}", file=sys.stderr, flush=True)

    launcher_cfg = resolved["launcher"]
    deadline = (time.time() + float(launcher_cfg["run_timeout_s"])) if launcher_cfg.get("run_timeout_s") else None
    from .launchers import get_launcher
    from .progress import RunState, watch

    launch = get_launcher(launcher_cfg["name"])
    keys = [k for k in backend.visibility([0]) if k.endswith("_DEVICES") or k.endswith("_SLOT")]
    jobs = launch(queues_of(plan), run_dir, launcher_cfg, deadline, visibility_snapshot(), keys,
                  backend.name != "cpu")
    if not launcher_cfg.get("wait", True):
        print(f"[zlbench] submitted {len(jobs)} job(s); gather results later with "
              f"`python -m zlbench.collect {run_dir}`", file=sys.stderr)
        return 0
    state = RunState(run_dir, [u.to_dict() for u in plan.units])
    watch(state, lambda: all(j.done() for j in jobs), resolved.get("progress", "auto"))
    for j in jobs:
        try:
            j.result()
        except Exception as e:  # a job that died: its nodes are reported by collect as missing
            print(f"[zlbench] job {j.job_id} failed: {str(e).strip().splitlines()[-1:]}", file=sys.stderr)
    try:
        return finish(run_dir)
    except OSError as e:
        raise UsageError(
            f"could not write results into {run_dir}: {e}. The events already written are intact "
            f"(tables are replaced atomically, never half-written). Fix: free space, then "
            f"`python -m zlbench.collect {run_dir}` to rebuild the tables, or resume={run_dir} to "
            "measure what is missing."
        )


def finish(run_dir: Path) -> int:
    from .claims import owner
    from .worker import finished_nodes, read_events

    plan = load_plan(run_dir)
    units = {u["unit_id"]: u for u in plan["units"]}
    # Finished per side and round, wherever it ran (a unit may have taken another's nodes).
    done: Dict[tuple, set] = {}
    for u in plan["units"]:
        finished = finished_nodes(read_events(run_dir / "units" / u["unit_id"] / "events.jsonl"))
        done.setdefault((u["side"], u["round"]), set()).update(finished)
    # Nodes with no terminal status (their job died from outside): say so, never drop them. The
    # note goes to the unit that claimed the node, else to the one the plan gave it.
    missing: Dict[str, list] = {}
    for u in plan["units"]:
        for n in u["nodes"]:
            if n not in done[(u["side"], u["round"])]:
                who = owner(u["claims_dir"], n) if u.get("claims_dir") else None
                missing.setdefault(who if who in units else u["unit_id"], []).append(n)
    for unit_id, nodes in missing.items():
        events_path = run_dir / "units" / unit_id / "events.jsonl"
        events_path.parent.mkdir(parents=True, exist_ok=True)
        with open(events_path, "a", encoding="utf-8") as f:
            for n in nodes:
                # Reported, but resumable: the node was not at fault, its job was ended
                # (cancelled, killed, preempted), so resume=RUN_DIR measures it.
                f.write(json.dumps({"event": "end", "node": n, "status": "crashed", "t": time.time(),
                                    "resumable": True,
                                    "reason": "its job ended before the node finished (worker killed, job "
                                              "cancelled or preempted); resume to measure it"}) + "\n")
    return report(run_dir, f"zlbench run {run_dir.name}")


def report(run_dir: Path, title: str) -> int:
    """Tables, summary, plots and (for an interleaved A/B) the A/B report, from the events so far.
    Exit code 3 when an A/B axis is not live."""
    from .report.summary import render_summary

    plan = load_plan(run_dir)
    rows, status_rows = collect(run_dir)
    add_process_facts(run_dir)
    identity = json.loads((run_dir / IDENTITY_FILE).read_text(encoding="utf-8"))
    text = render_summary(rows, status_rows, title, identity)
    warnings = run_pinning_problems(run_dir)
    if warnings:
        text = "".join(f"> **Warning**: {w}\n" for w in warnings) + "\n" + text
    code = 0
    sides = [s["name"] for s in plan["sides"]]
    if len(sides) == 2:
        ab_text, code = ab_report(run_dir, rows, sides, identity)
        text = ab_text + "\n" + text
    elif identity["config"]["ab"]["name"] != "none":
        text += (f"\n> One side ({sides[0]}) of A/B axis {identity['config']['ab']['name']}: pair it with "
                 "the other side's run dir: `python -m zlbench.batch_summary A_DIR --ab B_DIR`.\n")
    (run_dir / "summary.md").write_text(text, encoding="utf-8")
    from .report.plots import speedup_plot

    speedup_plot(rows, run_dir / "speedup.png")
    print(text)
    print(f"[zlbench] results in {run_dir}: run_identity.json ops_status.csv rows.jsonl run.log summary.md"
          + (" ab.md ab.csv ab.json ab.png" if len(sides) == 2 else ""), file=sys.stderr)
    return code


def shared_state_caveats(identity: Mapping[str, Any]) -> List[str]:
    """What both sides shared although each side should have had its own."""
    out = []
    if identity["switch_env"].get("FLAGGEMS_DB_URL"):
        out.append("FLAGGEMS_DB_URL is set, so both sides read and wrote one tuning database (its key "
                   "ignores compiler switches): unset it to give each side its own")
    if not identity["config"].get("isolate_caches", True):
        out.append("isolate_caches=false: both sides shared Triton and FlagGems caches, so liveness "
                   "and compile-time effects are not separated")
    return out


def ab_report(run_dir: Path, rows: List[dict], sides: List[str], identity: Mapping[str, Any]):
    """The interleaved A/B of this run; exit code 3 when the axis is not live (unless allowed)."""
    from .report.ab import compare
    from .results.rundir import load_artifacts

    ab = identity["config"]["ab"]
    artifacts = load_artifacts(run_dir)
    result = compare([r for r in rows if r.get("side") == sides[0]],
                     [r for r in rows if r.get("side") == sides[1]],
                     f"{ab['var']}={identity['sides'][sides[0]].get(ab['var'])} ({sides[0]})",
                     f"{ab['var']}={identity['sides'][sides[1]].get(ab['var'])} ({sides[1]})",
                     threshold=float(ab.get("threshold", 0.02)), artifacts_a=artifacts.get(sides[0], {}),
                     artifacts_b=artifacts.get(sides[1], {}), aa=bool(ab.get("aa")), out_dir=run_dir,
                     caveats=shared_state_caveats(identity))
    code = 0
    if result["summary"]["liveness"] == "not live" and not ab.get("allow_dead"):
        print(f"[zlbench] A/B axis {ab['name']} ({ab['var']}) is NOT LIVE: identical kernels on both "
              "sides. Exiting 3 (set ab.allow_dead=true to accept).", file=sys.stderr)
        code = 3
    return result["markdown"], code


def remove_empty_run_dir(run_dir: Path) -> None:
    """After a usage error, leave nothing that looks like a result: Hydra made the dir and its
    .hydra/ before zlbench could check anything."""
    if not run_dir.is_dir():
        return
    leftovers = [p for p in run_dir.iterdir() if p.name != ".hydra" and p.suffix != ".log"]
    if not leftovers:
        shutil.rmtree(run_dir, ignore_errors=True)
