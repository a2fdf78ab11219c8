"""`zlbench summary A --ab B` on the two run dirs of a real multirun A/B
(`-m ab=env ab.side=off,on` over the fixture corpus, whose dead_op compiles identical kernels on
both sides): sides named from the identity, the rounds said not interleaved with how far apart
they ran, rounds dropped inside a row listed, and a dead axis exiting 3 for run dirs and for the
result logs inside them (issue 25 item 8)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from .conftest import FIXTURES, zlbench

AXIS = [f"corpus.root={FIXTURES / 'ab_corpus'}", "corpus.name=fixture", "ab=env", "ab.var=ZL_FIXTURE_SWITCH"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("multirun")
    res = zlbench("-m", *AXIS, "ab.side=off,on", "ab.rounds=2", "ops=[dead_op]", "progress=none",
                  f"hydra.sweep.dir={root / 'sweep'}", cwd=root)
    assert res.returncode == 0, res.stderr[-3000:]
    return root / "sweep" / "0", root / "sweep" / "1"


def summary(*args):
    return subprocess.run([sys.executable, "-m", "zlbench", "summary", *map(str, args)], capture_output=True,
                          text=True)


def first_event(run_dir):
    return min(json.loads(line)["t"] for p in (run_dir / "units").glob("*/events.jsonl")
               for line in p.read_text().splitlines())


def test_multirun_sides_are_named_and_said_not_interleaved(sweep, tmp_path):
    a, b = sweep
    out = summary(a, "--ab", b, "--allow-dead", "--out", tmp_path / "cmp")
    assert out.returncode == 0, out.stderr
    md = (tmp_path / "cmp" / "ab.md").read_text()
    assert md.startswith("# A/B: ZL_FIXTURE_SWITCH=0 (side off) (A) vs ZL_FIXTURE_SWITCH=1 (side on) (B)\n"), md[:200]
    assert "| 0 " not in md.splitlines()[0] and "(A) vs 1 (B)" not in md  # not the sweep's folder names
    line = next(l for l in md.splitlines() if l.startswith("- **Not interleaved**"))
    assert "A (ZL_FIXTURE_SWITCH=0 (side off)) ran " in line and "B (ZL_FIXTURE_SWITCH=1 (side on)) ran " in line
    assert "after A ended" in line  # the local launcher ran the sweep's jobs one after the other
    # the switch its two sides set apart, by its name (not 'sides.off.X: 0 -> None; sides.on.X: None -> 1')
    assert "set a switch apart: ZL_FIXTURE_SWITCH: 0 -> 1" in md and "sides.off" not in md, md[:3000]
    assert "`python -m zlbench ab=env ab.var=ZL_FIXTURE_SWITCH`" in line
    summary_json = json.loads((tmp_path / "cmp" / "ab.json").read_text())["summary"]
    runs = summary_json["runs"]
    assert runs["interleaved"] is False
    # Two runs, not the sides of one: the overall interval carries each run's offset over its rows.
    assert summary_json["overall"]["run_offset_sd"] == 0.002
    assert runs["start_gap_s"] == pytest.approx(first_event(b) - first_event(a), abs=0.1)
    assert runs["a"]["first"] == datetime.fromtimestamp(first_event(a), timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert out.stdout.strip() == md.strip()


def test_a_dead_axis_exits_3_for_run_dirs_and_for_their_result_logs(sweep, tmp_path):
    a, b = sweep
    for pair in ((a, b), (a / "run.log", b / "run.log")):
        out = summary(pair[0], "--ab", pair[1])
        assert out.returncode == 3, (pair, out.stderr)
        assert "the A/B axis is NOT LIVE" in out.stderr and "**AXIS NOT LIVE**" in out.stdout
        assert summary(pair[0], "--ab", pair[1], "--allow-dead").returncode == 0
    # The same logs away from their run dirs: nothing says which kernels they ran, so liveness is
    # unknown, said so, and never read as dead.
    for side, src in (("a", a), ("b", b)):
        shutil.copy(src / "run.log", tmp_path / f"result_{side}.log")
    out = summary(tmp_path / "result_a.log", "--ab", tmp_path / "result_b.log")
    assert out.returncode == 0 and "Liveness: **unknown**" in out.stdout, out.stdout
    assert "(A) vs result_b.log (B)" in out.stdout
    assert "**Not interleaved**" in out.stdout and "(file time)" in out.stdout


def test_rounds_dropped_inside_a_row_are_listed(sweep, tmp_path):
    a, b = sweep
    crashed = tmp_path / "1"
    shutil.copytree(b, crashed)
    rows = [json.loads(line) for line in (crashed / "rows.jsonl").read_text().splitlines()]
    for r in rows:
        if r["shape"] == "[[64]]" and r["round"] == 1:
            r.update(status="crashed", reason="worker killed", latency=None)
    (crashed / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = summary(a, "--ab", crashed, "--allow-dead", "--out", tmp_path / "cmp")
    assert out.returncode == 0, out.stderr
    md = (tmp_path / "cmp" / "ab.md").read_text()
    assert "1 paired row(s) lost rounds on a side (listed below)" in md
    section = md.split("## Rounds dropped inside rows", 1)[1]
    row = "| dead_op    | float16 | [[64]]  |             1 | round 1: side B crashed worker killed |"
    assert row in section, section
    ab = json.loads((tmp_path / "cmp" / "ab.json").read_text())
    assert ab["dropped_rounds"] == [{"op": "dead_op", "dtype": "float16", "shape": "[[64]]",
                                     "node": "benchmark/test_switch_perf.py::test_perf_dead_op", "rounds_kept": 1,
                                     "dropped": ["round 1: side B crashed worker killed"]}]
    assert {r["shape"]: r["rounds"] for r in ab["rows"]} == {"[[64]]": 1, "[[256]]": 2}


# -- refusals, and what a run.log read back says --------------------------------------------------
@pytest.fixture(scope="module")
def ab_run(tmp_path_factory):
    """One A/B run dir holding both sides (the fixture corpus' live_op; the CPU times it as the
    corpus does: its rows are corpus-timed)."""
    root = tmp_path_factory.mktemp("ab")
    res = zlbench(*AXIS, "ab.rounds=2", "ab.min_rounds=2", "ops=[live_op]", "progress=none",
                  f"hydra.run.dir={root / 'ab'}", cwd=root)
    assert res.returncode == 0, res.stderr[-3000:]
    return root / "ab"


def test_an_ab_run_dir_is_refused_as_one_side_and_a_run_against_itself(sweep, ab_run, tmp_path):
    a, _ = sweep
    # Its rows hold both sides: paired by round alone, each round's later side overwrote the other.
    for pair in ((ab_run, a), (a, ab_run)):
        out = summary(pair[0], "--ab", pair[1], "--out", tmp_path / "cmp")
        assert out.returncode == 2, out.stdout[-2000:]
        assert out.stderr.startswith(f"zlbench: error: {ab_run} holds the rows of both sides of an A/B (off, on)")
        assert "its own ab.md holds the interleaved A/B" in out.stderr
        assert f"{ab_run / 'run.off.log'} or {ab_run / 'run.on.log'}" in out.stderr
        assert "Traceback" not in out.stderr and not (tmp_path / "cmp").exists()
    # A side's log is what the refusal names: it pairs.
    out = summary(ab_run / "run.off.log", "--ab", ab_run / "run.on.log")
    assert out.returncode == 0 and "Both sides come from one run" in out.stdout, out.stderr
    # ... however its path is spelled. Its sides ran interleaved: no run offset between them.
    other_spelling = ab_run.parent / ".." / ab_run.parent.name / ab_run.name / "run.on.log"
    out = summary(ab_run / "run.off.log", "--ab", other_spelling, "--out", tmp_path / "one")
    assert out.returncode == 0 and "Both sides come from one run" in out.stdout, out.stdout[-2000:]
    assert json.loads((tmp_path / "one" / "ab.json").read_text())["summary"]["overall"]["run_offset_sd"] is None
    # The same run twice, as a dir or a file, as history compare refuses it.
    for same in ((a, a), (a, f"{a}/"), (a / "run.log", a / "run.log")):
        out = summary(same[0], "--ab", same[1], "--out", tmp_path / "cmp")
        assert out.returncode == 2 and "compares a run with itself" in out.stderr, (same, out.stderr)
        assert "Traceback" not in out.stderr and not (tmp_path / "cmp").exists()


def test_out_that_is_a_file_is_refused_before_anything_is_read(sweep, tmp_path):
    a, b = sweep
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    for out_dir in (taken, taken / "cmp"):
        out = summary(a, "--ab", b, "--allow-dead", "--out", out_dir)
        assert out.returncode == 2, out.stderr
        assert out.stderr == f"zlbench: error: --out takes a folder; {taken} is a file. Fix: pass a folder for " \
                             "summary.md (with --ab: ab.md, ab.csv, ab.json and ab.png; a new one is made), or " \
                             "move that file away.\n"
        assert out.stdout == "" and taken.read_text() == "mine\n"


def test_out_that_is_a_run_dir_is_refused_and_its_tables_kept(sweep, ab_run, tmp_path):
    """`summary A --ab B --out AB_RUN` replaced an A/B run's own ab.md, ab.csv, ab.json and ab.png with
    the comparison's, without a word."""
    a, b = sweep
    before = {name: (ab_run / name).read_bytes() for name in ("ab.md", "ab.csv", "summary.md")}
    for args in ((a, "--ab", b, "--allow-dead"), (a,)):
        out = summary(*args, "--out", ab_run)
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith(f"zlbench: error: --out {ab_run} is a run dir: its own summary.md"), out.stderr
        assert f"`python -m zlbench collect {ab_run}` writes a run's own tables again" in out.stderr
    assert {name: (ab_run / name).read_bytes() for name in before} == before


@pytest.fixture(scope="module")
def unstable_run(tmp_path_factory):
    """A plain run of the demo corpus over 2 processes whose events are set to known latencies, one
    row's second process 10x the first's (BENCHMARK_PROCESS_UNSTABLE), then collected again."""
    root = tmp_path_factory.mktemp("plain")
    res = zlbench("ops=[exp]", "dtypes=[float32]", "timer.processes=2", "progress=none", "store.url=none",
                  f"hydra.run.dir={root / 'run'}", cwd=root, defaults=True)
    assert res.returncode == 0, res.stderr[-3000:]
    for path in (root / "run" / "units").glob("*/events.jsonl"):
        process = int(path.parent.name.split(".")[1][1:])  # main.r<process>.d0.s0
        events = [json.loads(line) for line in path.read_text().splitlines()]
        for e in events:
            for i, entry in enumerate(e["payload"]["result"] if e.get("event") == "record" else []):
                entry["latency_base"] = 0.05 * (i + 1) * (1 + 0.01 * process)
                entry["latency"] = 0.1 * (i + 1) * (1 + 0.01 * process) * (10 if i == 0 and process == 1 else 1)
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
    res = zlbench("collect", root / "run", cwd=root, defaults=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return root / "run"


def test_a_plain_run_log_reads_back_its_timer_and_what_its_processes_read(unstable_run, tmp_path):
    clause = "widest: exp float32 [[64,64]]: processes read 0.1, 1.01 ms"
    assert clause in (unstable_run / "summary.md").read_text()
    for path in (unstable_run, unstable_run / "run.log"):
        out = summary(path)
        assert out.returncode == 0, out.stderr
        assert clause in out.stdout and "None" not in out.stdout, out.stdout
        row = next(line for line in out.stdout.splitlines() if line.startswith("| exp "))
        assert row.endswith("| host    |"), row  # not the run.log records' mode, "zlbench"
    # A log that does not say what its processes read (an earlier zlbench's): the row is named alone.
    older = tmp_path / "result_older.log"
    older.write_text((unstable_run / "run.log").read_text().replace('"marker_reason": "processes read', '"was": "'))
    out = summary(older)
    assert out.returncode == 0 and "widest: exp float32 [[64,64]]\n" in out.stdout, out.stdout
    assert "None" not in out.stdout


def test_corpus_timed_rows_name_the_corpus_as_their_timer(ab_run):
    md = (ab_run / "summary.md").read_text()
    assert "None" not in md, md
    for side in ("off", "on"):
        row = next(line for line in md.splitlines() if line.startswith(f"| live_op | {side} "))
        assert row.endswith("| corpus  |"), row


def test_two_runs_apart_outside_their_kernels_are_compared_and_a_repeat_is_named(sweep, tmp_path):
    """Identical kernels say a switch was dead; they say nothing of what differs outside them (torch,
    the driver, the machine). A run of torch 2.12 against one of 2.11 is compared row by row, and
    says why; a repeat of one identity is still a dead axis, named as a repeat."""
    a, _ = sweep
    repeat = tmp_path / "repeat"
    shutil.copytree(a, repeat)
    out = summary(a, "--ab", repeat)
    assert out.returncode == 3 and "repeat runs" in out.stderr and "history compare" in out.stderr, out.stderr
    assert "the runs are of one identity: repeat runs" in out.stdout  # said in the report too
    identity = json.loads((repeat / "run_identity.json").read_text())
    identity["versions"]["torch"] = "2.12.0"
    for p in identity.get("processes") or []:
        p["tuning_cache"] = "/elsewhere"  # a path is no condition of the run
    (repeat / "run_identity.json").write_text(json.dumps(identity))
    out = summary(a, "--ab", repeat)
    assert out.returncode == 0, out.stderr
    assert "the runs differ outside their kernels (versions.torch: " in out.stdout and "-> 2.12.0)" in out.stdout
    assert "AXIS NOT LIVE" not in out.stdout and "tuning_cache" not in out.stdout


def test_a_dead_switch_stays_dead_when_its_sides_ran_on_two_hosts(sweep, tmp_path):
    """A sweep's sides on two Slurm nodes differ in host as well as in the switch: the switch's
    identical kernels still call it dead, and the report says what else differs."""
    a, b = sweep
    other = tmp_path / "on_host2"
    shutil.copytree(b, other)
    identity = json.loads((other / "run_identity.json").read_text())
    identity["host"] = "node-2"
    (other / "run_identity.json").write_text(json.dumps(identity))
    out = summary(a, "--ab", other)
    assert out.returncode == 3 and "**AXIS NOT LIVE**" in out.stdout, out.stderr
    assert "and differ outside it as well (host: " in out.stdout and "-> node-2)" in out.stdout
    assert "repeat runs" not in out.stderr


def test_two_plain_runs_a_variable_set_apart_name_it_and_its_interleaved_ab(unstable_run, tmp_path):
    """Two plain runs whose shells set a switch apart (recorded in switch_env) read as a comparison
    of two dir names: the report now names the variable, and the interleaved A/B command is that
    variable's; a repeat run of the same identity is named a repeat."""
    runs = {}
    for name, value in (("fused0", "0"), ("fused1", "1"), ("again", "0")):
        runs[name] = tmp_path / name
        shutil.copytree(unstable_run, runs[name])
        identity = json.loads((runs[name] / "run_identity.json").read_text())
        identity["switch_env"] = {**identity.get("switch_env", {}), "DEMO_GEMS_FUSED_SOFTMAX": value}
        (runs[name] / "run_identity.json").write_text(json.dumps(identity))
    out = summary(runs["fused0"], "--ab", runs["fused1"])
    assert out.returncode == 0, out.stderr
    assert "the runs set a switch apart: DEMO_GEMS_FUSED_SOFTMAX: 0 -> 1" in out.stdout, out.stdout
    assert "`python -m zlbench ab=env ab.var=DEMO_GEMS_FUSED_SOFTMAX 'ab.values=[0,1]'`" in out.stdout
    out = summary(runs["fused0"], "--ab", runs["again"])
    assert "repeat runs" in out.stdout and "set a switch apart" not in out.stdout, out.stdout
    # The same variable set through corpus.env (+corpus.env.VAR=1): in every process, so switch_env
    # leaves it out; the report named nothing (a review), or only a setting that differed beside it.
    for name, value in (("env0", "0"), ("env1", "1")):
        runs[name] = tmp_path / name
        shutil.copytree(unstable_run, runs[name])
        identity = json.loads((runs[name] / "run_identity.json").read_text())
        identity["config"]["corpus"]["env"] = {**identity["config"]["corpus"].get("env", {}),
                                               "DEMO_GEMS_FUSED_SOFTMAX": value}
        (runs[name] / "run_identity.json").write_text(json.dumps(identity))
    out = summary(runs["env0"], "--ab", runs["env1"])
    assert "the runs set a switch apart: DEMO_GEMS_FUSED_SOFTMAX: 0 -> 1" in out.stdout, out.stdout

    # Values as the shell and Hydra read them back (a comma, a space, true; a masked password left out).
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from zlbench.report.batch_summary import Source, _node_level_command

    for one, other in (("a,b", "c"), ("-O3 -g", ""), ("true", "false")):
        for run, value in ((runs["fused0"], one), (runs["fused1"], other)):
            identity = json.loads((run / "run_identity.json").read_text())
            identity["switch_env"]["DEMO_GEMS_FUSED_SOFTMAX"] = value
            (run / "run_identity.json").write_text(json.dumps(identity))
        words = shlex.split(_node_level_command(Source(runs["fused0"]), Source(runs["fused1"])))
        (parsed,) = OverridesParser.create().parse_overrides(words[-1:])
        assert words[4] == "ab.var=DEMO_GEMS_FUSED_SOFTMAX" and parsed.value() == [one, other], (words, parsed.value())


def test_one_value_a_row_is_paired_with_the_mean_over_the_other_sides_rounds(sweep, ab_run, tmp_path):
    """A plain run's row is one value (the median over its processes), and so is an A/B side's log's
    (its mean over its rounds); an A/B side's run has a value per round, and rounds paired by index
    paired that one value with the side's first round alone (a side log against a sweep's side: -44.7%
    where its rounds' mean said -46.8%), listing the other rounds as dropped. Those rounds now read
    as their geometric mean; and a side's log sets its side's switch value apart, not 'sides.off.VAR:
    0 -> None'."""
    import math
    import statistics

    plain = tmp_path / "plain"
    res = zlbench(f"corpus.root={FIXTURES / 'ab_corpus'}", "corpus.name=fixture", "ops=[dead_op]", "timer.processes=2",
                  "progress=none", "store.url=none", f"hydra.run.dir={plain}", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    out = summary(plain, "--ab", sweep[0], "--allow-dead", "--out", tmp_path / "cmp")
    assert "A holds one value a row and B up to 2 rounds a row: B's rows are the geometric mean over their " \
           "rounds" in out.stdout, out.stdout[-3000:]
    assert "lost rounds on a side" not in out.stdout
    rounds = {}
    for line in (sweep[0] / "rows.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("latency") and r.get("shape"):
            rounds.setdefault(json.dumps(r["shape"]), []).append(r["latency"])
    assert all(len(v) == 2 for v in rounds.values()), rounds
    rows = json.loads((tmp_path / "cmp" / "ab.json").read_text())["rows"]
    assert len(rows) == len(rounds) and all(r["rounds"] == 1 for r in rows), rows
    for r in rows:
        expected = math.exp(statistics.fmean(map(math.log, rounds[json.dumps(r["shape"])])))
        assert r["b_ms"] == pytest.approx(expected, rel=1e-6), (r, rounds)
    # A side's log (the mean over its rounds) against the other side's sweep run.
    out = summary(ab_run / "run.off.log", "--ab", sweep[1], "--allow-dead")
    assert "A holds one value a row and B up to 2 rounds a row" in out.stdout, out.stdout[-3000:]
    assert "the runs set a switch apart: ZL_FIXTURE_SWITCH: 0 -> 1" in out.stdout, out.stdout[-3000:]
    assert "sides." not in out.stdout


def test_summary_of_a_run_dir_exits_as_the_run_did_and_writes_nothing(tmp_path):
    """`zlbench summary RUN_DIR` exited 0 whatever the run found; it exits as the run would for its
    tables: a dead axis 3 (--allow-dead: what else it found, here 0), a copy of its tables without
    units/ as those tables say, a run stopped before measuring anything 4 (cut), and it writes no
    table into the run dir (it wrote rows.jsonl and ops_status.csv where they were missing)."""
    run = tmp_path / "dead"
    res = zlbench(*AXIS, "ab.rounds=2", "ab.min_rounds=2", "ops=[dead_op]", "progress=none", f"hydra.run.dir={run}",
                  cwd=tmp_path)
    assert res.returncode == 3, res.stderr[-3000:]
    assert summary(run).returncode == 3 and summary(run, "--allow-dead").returncode == 0
    tables = tmp_path / "tables"
    shutil.copytree(run, tables)
    shutil.rmtree(tables / "units")
    assert summary(tables).returncode == 0  # its tables hold ok nodes: liveness is in the events
    # collect refuses such a copy: from no events it rewrote every node as not measured
    status = (tables / "ops_status.csv").read_text()
    refused = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(tables)], capture_output=True, text=True)
    assert refused.returncode == 2 and "holds tables but no units/" in refused.stderr, refused.stderr
    assert (tables / "ops_status.csv").read_text() == status
    planned = tmp_path / "planned"  # stopped after its plan: identity and plan, nothing measured
    shutil.copytree(run, planned)
    for name in ("units", "rows.jsonl", "ops_status.csv", "summary.md"):
        (shutil.rmtree if (planned / name).is_dir() else (planned / name).unlink)(planned / name)
    out = summary(planned)
    assert out.returncode == 4 and "> **Run cut short**: 2 of 2 node-side pair(s) not measured" in out.stdout, out.stdout
    assert not (planned / "rows.jsonl").exists() and not (planned / "ops_status.csv").exists()


def test_two_runs_conditions_name_their_devices_and_whole_values_where_a_cut_hides_the_change():
    """What sets two runs apart outside their kernels names the GPUs by UUID (two cards of a kind
    share name, bus id and host; their own offsets are in no interval), and a commit against the same
    commit '+dirty' is shown whole (cut to 40 characters both read alike)."""
    from zlbench.report.batch_summary import _changes, _conditions

    def ident(uuid, commit):
        return {"config": {}, "timer": {}, "versions": {"zlbench_commit": commit}, "host": "vm",
                "processes": [{"device": 0, "device_name": "NVIDIA H100", "device_uuid": uuid}]}
    a, b = _conditions(ident("a6501279", "9" * 40)), _conditions(ident("5ffe901a", "9" * 40 + "+dirty"))
    changes = _changes(a, b, a.keys() | b.keys())
    assert "processes.device_uuid: a6501279 -> 5ffe901a" in changes, changes
    assert f"versions.zlbench_commit: {'9' * 40} -> {'9' * 40}+dirty" in changes, changes
    assert _changes({"k": "x" * 50}, {"k": "y" * 50}, ["k"]) == [f"k: {'x' * 40}... -> {'y' * 40}..."]  # said cut


def test_the_one_run_form_of_an_aa_sweep_is_an_aa(tmp_path):
    """`summary A --ab B` of an A/A sweep's two sides offered `ab=env ab.var=X`: an A/B, not the A/A
    the sweep was. The one-run form keeps ab.aa=true, and values other than the default 0/1."""
    from zlbench.report.batch_summary import Source, _node_level_command

    def side(name, aa, values):
        run = tmp_path / name
        run.mkdir()
        (run / "run_identity.json").write_text(json.dumps(
            {"config": {"ab": {"name": "env", "var": "ZL_X", "aa": aa, "values": values}}, "sides": {name: {}},
             "backend": {"name": "cpu"}, "switch_env": {}, "identity_hash": name}))
        return Source(run)

    assert _node_level_command(side("off", True, [0, 1]), side("on", True, [0, 1])) == \
        "python -m zlbench ab=env ab.var=ZL_X ab.aa=true"
    assert _node_level_command(side("a", False, ["-O2", "-O3"]), side("b", False, ["-O2", "-O3"])) == \
        "python -m zlbench ab=env ab.var=ZL_X 'ab.values=[-O2,-O3]'"
