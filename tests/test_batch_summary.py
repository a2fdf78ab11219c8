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
    assert md.startswith("# A/B: ZL_FIXTURE_SWITCH=0 (off) (A) vs ZL_FIXTURE_SWITCH=1 (on) (B)\n"), md[:200]
    assert "| 0 " not in md.splitlines()[0] and "(A) vs 1 (B)" not in md  # not the sweep's folder names
    line = next(l for l in md.splitlines() if l.startswith("- **Not interleaved**"))
    assert "A (ZL_FIXTURE_SWITCH=0 (off)) ran " in line and "B (ZL_FIXTURE_SWITCH=1 (on)) ran " in line
    assert "after A ended" in line  # the local launcher ran the sweep's jobs one after the other
    assert "`python -m zlbench ab=env ab.var=ZL_FIXTURE_SWITCH`" in line
    runs = json.loads((tmp_path / "cmp" / "ab.json").read_text())["summary"]["runs"]
    assert runs["interleaved"] is False
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
