"""Everything a run dir's reader gets at the end of a run (or of `collect`): the tables from the
events, summary.md and speedup.png, and for an interleaved A/B the ab.* report; then the exit code."""

from __future__ import annotations

import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from zlbench.config.validate import is_compiler_switch, round_by_round
from zlbench.exitcodes import Exit, run_exit
from zlbench.results import events as ev
from zlbench.results.rundir import (add_process_facts, devices_swapped, load_plan, pairs_apart, read_identity,
                                   resume_command, swapped_note, why_not_measured)
from zlbench.results.tables import collect, load_artifacts, run_pinning_problems, stopped_nodes, event_file_problems
from zlbench.report.overview import LARGE
from zlbench.report.summary import contention_warning, render_summary

log = logging.getLogger("zlbench")

# A node's runs that measured nothing through its own or its process' fault (not a cut run's).
FAILED_STATUSES = ("failed", "crashed", "timeout", "poisoned", "fatal", "interrupted")
# fail_on where a run dir's config does not say (conf/config.yaml's default is the same).
DEFAULT_FAIL_ON = FAILED_STATUSES


def run_title(identity: Mapping[str, Any], run_dir: Path) -> str:
    corpus = identity.get("corpus", {}).get("name", "?")
    backend = identity.get("backend", {}).get("name", "?")
    devices = ", ".join(d.get("name", "") for d in identity.get("devices", [])[:1])
    return (f"zlbench run {identity.get('created', run_dir.name)}: {corpus} on {backend}"
            f"{f' ({devices})' if devices else ''}, timer {identity.get('timer', {}).get('name', '?')}")


def cut_nodes(status_rows: Sequence[Mapping]) -> List[Mapping]:
    """Nodes the run did not get to measure: left for a resume, or cut by the run's time limit."""
    return [s for s in status_rows if s.get("resumable") or (s.get("reason") or "").startswith(ev.DEADLINE_REASON)]


def cut_banner(cut: Sequence[Mapping], total: int, run_dir: Path, why: str = "", processes: int = 1,
               sides: int = 0) -> str:
    """The summary's first line for a cut run. A node cut in a plain run's later passes has rows from
    the processes that got to it, one cut in an A/B's later rounds rows from its earlier rounds
    (`sides`: the A/B's sides, whose status rows count a node once per side)."""
    partly = sum(1 for s in cut if s.get("rows")) if processes > 1 or sides else 0
    noun = "node-side pair(s)" if sides > 1 else "node(s)"
    if not partly:
        what = "not measured"
    elif sides:
        where = "the A/B section says how many each row got" if sides > 1 else "`round` on each row says which"
        what = f"not measured in every round ({partly} in fewer: {where})"
    else:
        what = (f"not measured in all {processes} processes ({partly} in fewer: their rows are the median "
                "over the processes that measured them, and `processes` says how many)")
    # The whole-run limit that cut it would cut the resume at the same point: the command leaves it out.
    limit = any(ev.DEADLINE_REASON in (s.get("reason") or "") for s in cut)  # its reason may say in how many processes first
    command = resume_command(run_dir)
    shorter = resume_command(run_dir, drop=("launcher.run_timeout_s",)) if limit else command
    return (f"> **Run cut short**{f' ({why})' if why else ''}: {len(cut)} of {total} {noun} {what}. "
            f"Resume with `{shorter}`" + (" (without the launcher.run_timeout_s that cut it: add one back to bound "
                                          "the resume)" if shorter != command else "") + ".\n")


def rounds_across_resumes(run_dir: Path, plan: Mapping[str, Any], identity: Mapping[str, Any]) -> Optional[str]:
    """The caveat for an A/B resumed between the two sides of a node's round: one side measured before
    the resume (a cut or an interrupt), the other after it, maybe hours apart, so the round's change
    holds whatever moved between the sessions, where an A/B times both sides of a round seconds apart."""
    from datetime import datetime

    resumes = [datetime.strptime(r["at"], "%Y-%m-%dT%H:%M:%S%z").timestamp()
               for r in identity.get("resumed") or [] if isinstance(r, Mapping) and r.get("at")]
    sides = [s["name"] for s in plan.get("sides") or []]
    if not resumes or len(sides) != 2:
        return None
    events_of = unit_events(run_dir, plan)
    ended = {(u["side"], int(u["round"]), ev.base_node(e["node"])): float(e["t"])  # when each node-side-round ended
             for u in plan.get("units") or [] for e in events_of[u["unit_id"]] if ev.is_final_end(e)}
    split = sorted((r, node) for (side, r, node), t in ended.items() if side == sides[0]
                   and (other := ended.get((sides[1], r, node))) is not None
                   and any(min(t, other) < at <= max(t, other) for at in resumes))
    if not split:
        return None
    r, node = split[0]
    return (f"{len(split)} node round(s) pair a side measured before a resume with one measured after it (e.g. "
            f"{node} round {r + 1}): their change holds whatever moved between the two sessions, where an A/B "
            "times both sides of a round seconds apart. Fix: for rounds whole within a session, run the A/B "
            "again into a new run dir")


def shared_state_caveats(identity: Mapping[str, Any]) -> List[str]:
    """What both sides shared although each side should have had its own."""
    out = []
    if identity["switch_env"].get("FLAGGEMS_DB_URL"):
        out.append("FLAGGEMS_DB_URL is set, so both sides read and wrote one tuning database (its key "
                   "ignores compiler switches): unset it to give each side its own")
    ab = identity["config"].get("ab") or {}
    rounds = int(identity.get("rounds") or 1)
    period = 1 if round_by_round(ab) else int(ab.get("respawn_every", 1))
    if period >= rounds > 1:  # a period no shorter than the run: one process a side throughout, as 0
        setting, period = f"ab.respawn_every={period} (no fewer than the run's {rounds} rounds)", 0
    else:
        setting = "ab.respawn_every=0"
    if period == 0:
        out.append(f"process effects not sampled: {setting} kept one process per side for the "
                   "whole run, so what each drew at start (autotune picks, input placement) is a constant "
                   "offset between the sides that no interval over rounds can see; ab.respawn_every=1 "
                   "(the default) samples it")
    if ab.get("name", "none") != "none" and period > 1:
        out.append(f"ab.respawn_every={period}: each side's processes ran {period} rounds in a row, so a row's "
                   f"rounds are not all independent draws of a process (its interval counts rounds; the overall "
                   "one resamples whole periods); ab.respawn_every=1 (the default) makes every round one")
    if (identity["config"].get("corpus") or {}).get("baseline_off_args") and int(identity.get("rounds") or 1) > 1 \
            and period:  # resident processes keep their first round's command line, baseline and all
        first = "round 1" if period == 1 else f"the first {period} rounds (one process a side)"
        out.append(f"the torch baseline was timed in {first} only (corpus.baseline_off_args): an A/B compares "
                   f"the alternative, and the baseline drift check reads {first}")
    var = str(ab.get("var") or "")
    if ab.get("name", "none") != "none" and is_compiler_switch(var) and \
            (identity["config"].get("backend") or {}).get("name") == "cpu":
        out.append(f"ab={ab.get('name')} switches {var}, a Triton/FlagTree compiler setting, and this run was on the "
                   "CPU, which runs no Triton kernel: both sides ran the same code, so any difference here is noise, "
                   "and no verdict speaks for the device the switch is for (run it there: backend=cuda, musa, ...)")
    if not identity["config"].get("isolate_caches", True):
        out.append("isolate_caches=false: both sides shared Triton and FlagGems caches, so liveness "
                   "and compile-time effects are not separated")
    return out


def gpus_note(run_dir: Path, identity: Mapping[str, Any], sides: Sequence[str]) -> Optional[str]:
    """swapped_note for this run (`sides`: its plan's); an A/B of both sides checks its pairs' GPUs,
    reading its units' events only where a device index was several GPUs."""
    both = len(sides) == 2
    if not devices_swapped(identity):
        return None
    return swapped_note(identity, ab=both, apart=pairs_apart(run_dir, sides) if both else None)


def ab_report(run_dir: Path, rows: List[dict], sides: List[str], identity: Mapping[str, Any],
              extra_caveats: Sequence[str] = (), cut: Sequence[Mapping] = (), plan: Optional[Mapping] = None,
              status_rows: Sequence[Mapping] = ()) -> Dict:
    """The interleaved A/B of this run: what ab.md, ab.csv, ab.json and ab.png hold (write_ab writes
    them). `plan`: the run's plan.json, which says how the rounds were scheduled (None: round by
    round, no stops); status_rows: the nodes' statuses (a node that failed in some rounds leaves its
    rows short)."""
    from zlbench.report.ab import compare, side_label

    ab = identity["config"]["ab"]
    artifacts = load_artifacts(run_dir)
    schedule = plan.get("schedule") if plan else None
    rounds = {"min": schedule["min_rounds"], "max": int(plan["rounds"])} if schedule else None
    result = compare([r for r in rows if r.get("side") == sides[0]],
                     [r for r in rows if r.get("side") == sides[1]],
                     side_label(ab['var'], identity['sides'][sides[0]].get(ab['var']), sides[0]),
                     side_label(ab['var'], identity['sides'][sides[1]].get(ab['var']), sides[1]),
                     threshold=float(ab.get("threshold", 0.02)), artifacts_a=artifacts.get(sides[0], {}),
                     artifacts_b=artifacts.get(sides[1], {}), aa=bool(ab.get("aa")),
                     caveats=list(extra_caveats) + shared_state_caveats(identity),
                     stops=stopped_nodes(run_dir, plan) if plan else {}, rounds=rounds, cut={c["test_node"] for c in cut},
                     fixed_rounds=None if schedule else int(identity.get("rounds") or 1),
                     failed={s["test_node"] for s in status_rows if s.get("status") in FAILED_STATUSES},
                     # rounds that shared their side processes are drawn together in the overall interval
                     round_period=1 if round_by_round(ab) else int(ab.get("respawn_every", 1)))
    from zlbench.report.condensed import GITHUB_COMMENT_LIMIT, ab_markdown

    # Each form is decided before anything is written: at corpus scale ab.md is the Markdown that
    # fits a pull-request comment (ab.csv and ab.json keep every row), and write() draws ab.png as
    # the fixed-size overview instead of a forest-plot line per row.
    if len(result["rows"]) > LARGE and len(result["markdown"]) > GITHUB_COMMENT_LIMIT:
        result["markdown"] = ab_markdown(result)
    return result


def write_ab(result: Mapping, run_dir: Path, identity: Mapping[str, Any]) -> None:
    """ab.md, ab.csv, ab.json and ab.png of ab_report's result."""
    from zlbench.report.ab import write
    from zlbench.report.condensed import plot_title

    write(result, run_dir, plot_title(identity, "A/B"))


def _speedup_png(rows: List[dict], path: Path, identity: Mapping[str, Any]) -> bool:
    from zlbench.report.condensed import plot_title
    from zlbench.report.overview import speedup_overview_plot
    from zlbench.report.plots import speedup_plot

    groups = {(r.get("op"), r.get("dtype"), r.get("side")) for r in rows if r.get("speedup")}
    if len(groups) > LARGE:
        return speedup_overview_plot(rows, path, plot_title(identity, "speedup over torch"))
    return speedup_plot(rows, path, plot_title(identity, "speedup over torch"))


def compose(run_dir: Path, rows: List[dict], status_rows: List[dict], identity: Mapping[str, Any],
            plan: Mapping[str, Any], title_suffix: str = "", why_cut: str = "", running: str = "") -> Tuple[str, Dict]:
    """summary.md's text, and what went into it ("ab": an interleaved A/B's result, else None;
    "warnings"), without writing anything: a run's end and `zlbench summary RUN_DIR` say the same.
    running: who still measures the run (`zlbench summary` of a live run): its nodes not measured yet
    are not a cut to resume."""
    cut = cut_nodes(status_rows)
    sides = [s["name"] for s in plan["sides"]]
    gpus = gpus_note(run_dir, identity, sides)  # once: summary.md's line and ab.md's caveat
    text = render_summary(rows, status_rows, run_title(identity, run_dir) + title_suffix, identity, gpus)
    warnings = event_file_problems(run_dir) + run_pinning_problems(run_dir)
    if warnings:
        text = "".join(f"> **Warning**: {w}\n" for w in warnings) + "\n" + text
    # read once, for the Time section and the more passes' stops: both a plain run's only
    events = unit_events(run_dir, plan) if identity["config"]["ab"]["name"] == "none" else {}
    timed = time_lines(plan, identity, events)
    text += "\n" + "\n".join(timed) + "\n" if timed else ""
    left_out = more_processes_left_out(plan, events)
    if left_out:
        text += (f"\n> The run limit (launcher.run_timeout_s) stopped {left_out} node run(s) of the more passes "
                 "(nodes whose processes disagreed): their rows are from the processes that ran; the run is "
                 "whole.\n")
    if cut and running:
        text = (f"> **Still measuring** ({running}): {len(cut)} of {len(status_rows)} node(s) not measured yet; "
                "these tables are the run as it stands, and the run writes its own summary.md when it ends.\n\n"
                + text)
    elif cut:
        why_cut = why_cut or why_not_measured(s.get("reason") or "" for s in cut)  # zlbench collect
        ab_sides = len(sides) if identity["config"]["ab"]["name"] != "none" else 0
        text = cut_banner(cut, len(status_rows), run_dir, why_cut, int(plan.get("processes") or 1),
                          ab_sides) + "\n" + text
    ab = identity["config"]["ab"]
    result = None
    if len(sides) == 2:
        caveat = [f"run cut short: {len(cut)} node-side pair(s) not measured on every round, so some rows have "
                  "fewer rounds than planned"] if cut else []
        caveat += [gpus] if gpus else []
        caveat += [split] if (split := rounds_across_resumes(run_dir, plan, identity)) else []
        result = ab_report(run_dir, rows, sides, identity, caveat, cut, plan, status_rows)
        text = result["markdown"] + "\n" + text
    elif ab["name"] != "none":
        text += (f"\n> One side ({sides[0]}) of A/B axis {ab['name']}: pair it with "
                 "the other side's run dir: `zlbench summary A_DIR --ab B_DIR`.\n")
    return text, {"ab": result, "warnings": warnings}


def report(run_dir: Path, title_suffix: str = "", fail_on: Optional[Sequence[str]] = None,
           why_cut: str = "", running: str = "") -> Exit:
    """Tables, summary, plots and (for an interleaved A/B) the A/B report, from the events so far."""
    plan = load_plan(run_dir)
    rows, status_rows = collect(run_dir)
    add_process_facts(run_dir)
    identity = read_identity(run_dir)
    text, result = compose(run_dir, rows, status_rows, identity, plan, title_suffix, why_cut, running)
    for w in result["warnings"]:
        log.warning(f"[zlbench] warning: {w}")
    outputs = ["run_identity.json", "ops_status.csv", "rows.jsonl", "run.log", "summary.md"]
    ab = identity["config"]["ab"]
    ab_result = result["ab"]
    dead = is_dead(ab_result, identity)
    if ab_result is not None:
        write_ab(ab_result, run_dir, identity)
        outputs += ["ab.md", "ab.csv", "ab.json", "ab.png"]
    (run_dir / "summary.md").write_text(text, encoding="utf-8")
    if _speedup_png(rows, run_dir / "speedup.png", identity):
        outputs.insert(5, "speedup.png")
    print(text)
    if ab_result is not None and ab_result["summary"].get("cut"):
        from zlbench.report.ab import cut_line

        log.warning("[zlbench] A/B " + cut_line(ab_result["summary"]).replace("**", ""))
    if dead:
        log.info(f"[zlbench] A/B axis {ab['name']} ({ab['var']}) is NOT LIVE: identical kernels on both "
              "sides (set ab.allow_dead=true to accept).")
    if (contention := contention_warning(rows)):
        log.warning(f"[zlbench] warning: {contention}")
    written = [name for name in outputs if (run_dir / name).exists()]  # ab.png: none without a measured row
    log.info(f"[zlbench] results in {run_dir}: {' '.join(written)}")
    return exit_of(status_rows, ab_result, identity, fail_on)


def is_dead(ab_result: Optional[Mapping], identity: Mapping[str, Any], allow_dead: bool = False) -> bool:
    """An A/B whose axis is not live, unless the run (ab.allow_dead) or the caller accepts that."""
    return (ab_result is not None and ab_result["summary"]["liveness"] == "not live"
            and not (allow_dead or identity["config"]["ab"].get("allow_dead")))


def exit_of(status_rows: List[dict], ab_result: Optional[Mapping], identity: Mapping[str, Any],
            fail_on: Optional[Sequence[str]] = None, allow_dead: bool = False) -> Exit:
    """The code the run exits with for these tables (fail_on: the run's own where not given), so
    `zlbench summary RUN_DIR` and `collect` exit as the run did; a dead axis accepted leaves the
    code to what else the run found."""
    fail_on = identity.get("fail_on", DEFAULT_FAIL_ON) if fail_on is None else fail_on
    verdicts = [t["verdict"] for t in ab_result["rows"]] if ab_result is not None else []
    code = run_exit(status_rows, verdicts, fail_on, cut=bool(cut_nodes(status_rows)),
                    dead_axis=is_dead(ab_result, identity, allow_dead))
    if code == Exit.NOT_OK:  # say what fail_on found: an A/B's verdicts print no failure of their own
        found = Counter(s["status"] for s in status_rows if s["status"] in fail_on)
        found.update(v for v in verdicts if v in fail_on)
        if not found:
            nodes = len({s.get("test_node") for s in status_rows})  # an A/B's status rows are per node and side
            counted = f"{nodes}" if nodes == len(status_rows) else f"{nodes}, on {len(status_rows)} node-sides"
            print(f"[zlbench] exit {int(code)}: every node skipped ({counted}), no row measured: "
                  "a run that checked nothing does not pass (ops_status.csv says why; fail_on=[] lets it pass)",
                  file=sys.stderr)
            return code
        print(f"[zlbench] exit {int(code)}: fail_on={list(fail_on)} found "
              + ", ".join(f"{n} {what}" for what, n in sorted(found.items()))
              + " (test nodes by status, A/B rows by verdict; fail_on= chooses what fails)", file=sys.stderr)
    return code


def unit_events(run_dir: Path, plan: Mapping[str, Any]) -> Dict[str, List[dict]]:
    """unit id -> its events, for every unit of the plan."""
    return {u["unit_id"]: ev.read_events(ev.events_path(run_dir, u["unit_id"])) for u in plan.get("units", [])}


def time_lines(plan: Mapping[str, Any], identity: Mapping[str, Any], events_of: Mapping[str, List[dict]]) -> List[str]:
    """summary.md's ## Time of a plain run, from its processes' events: the wall they were alive,
    what each pass measured (its nodes' seconds), the start-ups that were not hidden (where
    processes start ahead, launcher.prestart, only the first's), and the settings that trade time
    for what the run samples. [] where no process left events (a run dir made before they were
    kept), and for A/B runs (their rounds are ab.md's)."""
    if ((identity.get("config") or {}).get("ab") or {}).get("name", "none") != "none":
        return []
    measured: Dict[int, float] = {}
    more, spans, startups = set(), [], []
    for u in plan.get("units", []):
        # events whose time is not a number (an edited or damaged file) say nothing of time
        events = [e for e in events_of.get(u["unit_id"], []) if isinstance(e.get("t"), (int, float))]
        lived = ev.process_spans(events)
        launched = [e["t"] for e in events if e.get("event") == "launch"]
        if not lived and launched:  # killed with its run: no exit, alive until its last event
            lived = [(launched[0], events[-1]["t"])]
        spans += lived
        took = ev.node_seconds(events)
        if not took:
            continue
        measured[u["round"]] = measured.get(u["round"], 0.0) + sum(took.values())
        if u.get("more_pass"):
            more.add(u["round"])
        startups += ev.launch_startups(events)  # every launch: a crashed or timed-out process starts again

    def listed(rounds: List[int]) -> str:
        return ", ".join(f"{measured[r]:.1f}" for r in rounds) + " s"

    if not spans or not measured:
        return []
    planned = sorted(r for r in measured if r not in more)
    extra = sorted(more)
    devices = len(plan.get("devices") or [])
    ahead = any(u.get("prestart") for u in plan.get("units", []))
    startups.sort()
    preloaded = any(e.get("event") == "gate" and "preload_s" in e for evs in events_of.values() for e in evs)
    what = "start-up (torch import, pytest collection" + (", the device preload)" if preloaded else ")")
    if not startups:
        started = ""
    elif len(startups) == 1:
        started = f"; {what} {startups[0][1]:.1f} s"
    elif ahead:
        started = (f"; {what} {startups[0][1]:.1f} s for the first process; the later ones started while "
                   "one before measured")
    else:
        started = (f"; {what} {sum(t for _, t in startups):.1f} s in all, each process starting when the "
                   "one before ended")
    of = int(plan.get("processes") or 1)
    ran = f"{len(planned)} of the {of} planned" if len(planned) < of else f"{len(planned)} planned"  # a cut run
    line = (f"- {ev.alive_seconds(spans):.0f} s of benchmark processes running: {ran} "
            f"pass(es) (a process each, timing every selected test once) spent {listed(planned)} in their tests"
            + (f", {len(extra)} more pass(es) (for tests whose processes read apart) {listed(extra)}" if extra else "")
            + (f" (each pass' tests on {devices} devices together)" if devices > 1 else "")
            + started)
    timer = identity.get("timer") or {}
    if int(plan.get("processes") or 1) < 2:
        return ["## Time", "", line]
    spend = [f"`timer.more_budget` (the more passes' wall as a share of the planned passes', now "
             f"{timer.get('more_budget', 0.5):g})"] if extra else []
    if not timer.get("share_tuning") and (identity.get("backend") or {}).get("name") != "cpu":
        spend.append("`timer.share_tuning=true` (the processes share their autotune picks: cheaper where "
                     "tuning dominates, and blind to that luck)")
    spend.append("`timer.processes=1` (one pass: rows with no process-level interval)")
    return ["## Time", "", line, "- to spend less: " + "; ".join(spend)]


def more_processes_left_out(plan: Mapping[str, Any], events_of: Mapping[str, List[dict]]) -> int:
    """How many (node, more pass) pairs the run limit stopped (engine/plain_worker.py)."""
    return sum(len(ev.stopped(events_of.get(u["unit_id"], []))) for u in plan.get("units", []) if u.get("more_pass"))
