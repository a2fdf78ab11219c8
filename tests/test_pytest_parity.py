"""pytest's own options in corpus.pytest_args behave as they do under pytest: a deselected node is
reported deselected, not failed; an option that would measure past zlbench's device pinning is
refused; the corpus' record log gets a plain name."""

import csv

import pytest

pytestmark = pytest.mark.slow
K = "corpus.pytest_args=[--mode,kernel,--record,log,-k,softmax]"


def statuses(run_dir):
    with open(run_dir / "ops_status.csv") as f:
        return {(r["op"], r["side"]): (r["status"], r["reason"]) for r in csv.DictReader(f)}


def test_a_node_deselected_by_k_is_reported_deselected_not_failed(run_zlbench):
    res = run_zlbench(K, "ops=[exp,softmax]", "dtypes=[float32]")
    assert res.returncode == 0, res.stderr[-3000:]
    assert statuses(res.run_dir) == {
        ("exp", "main"): ("skipped", "deselected by -k 'softmax' in corpus.pytest_args"),
        ("softmax", "main"): ("ok", ""),
    }
    # The corpus' record log is named after the unit, not after pytest's arguments.
    unit = res.run_dir / "units" / "main.r0.d0.s0"
    assert [p.name for p in unit.glob("result*.log")] == ["result_main.r0.d0.s0.log"]
    assert '"op_name": "softmax"' in (unit / "result_main.r0.d0.s0.log").read_text()


def test_a_node_deselected_by_k_in_a_node_level_ab_is_deselected_on_both_sides(run_zlbench):
    # Resident side processes answer every round's request for it: still deselected, not failed.
    res = run_zlbench(K, "ab=demo_fused_softmax", "ab.rounds=2", "ab.min_rounds=2", "ops=[exp,softmax]",
                      "dtypes=[float32]")
    assert res.returncode == 0, res.stderr[-3000:]
    got = statuses(res.run_dir)
    for side in ("off", "on"):
        assert got[("exp", side)] == ("skipped", "deselected by -k 'softmax' in corpus.pytest_args")
        assert got[("softmax", side)][0] == "ok"


@pytest.mark.parametrize("args", [["--parallel", "8"], ["'--parallel=2'"]])
def test_flaggems_parallel_is_refused_as_xdist_is(run_zlbench, args):
    res = run_zlbench(f"corpus.pytest_args=[--mode,kernel,{','.join(args)}]", "ops=[exp]")
    assert res.returncode == 2, res.stderr[-2000:]
    assert "asks the corpus to spread its shapes over several devices" in res.stderr
    assert "Fix: drop it; devices=[0,1,...] spreads the work." in res.stderr
    assert not res.run_dir.exists()


def test_flaggems_parallel_0_is_its_serial_default(run_zlbench):
    res = run_zlbench("corpus.pytest_args=[--mode,kernel,--parallel,0]", "ops=[exp]", "dry_run=true")
    assert res.returncode == 0, res.stderr[-2000:]


def _installed_plugin(site):
    """A pytest plugin installed as pip would (an entry point in group pytest11) that notes each
    benchmark process it is loaded into."""
    site.mkdir()
    (site / "zlprobe_plugin.py").write_text(
        "import os\nwith open(os.environ['ZLPROBE_FILE'], 'a') as f:\n    f.write(f'{os.getpid()}\\n')\n")
    info = site / "zlprobe-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zlprobe\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nzlprobe = zlprobe_plugin\n")


@pytest.mark.parametrize("args, loaded", [
    ((), False),  # not autoloaded: start-up, and nothing unasked in the process
    (("corpus.pytest_args=[--mode,kernel,--record,log,-p,zlprobe_plugin]",), True),  # named: loaded
    (("+corpus.env.PYTEST_DISABLE_PLUGIN_AUTOLOAD=''",), True),  # every installed plugin, as pytest does
])
def test_installed_pytest_plugins_load_in_benchmark_processes_only_when_named(run_zlbench, tmp_path, args, loaded):
    _installed_plugin(tmp_path / "site")
    probe = tmp_path / "loaded.txt"
    res = run_zlbench("ops=[exp]", "dtypes=[float32]", *args,
                      env={"PYTHONPATH": str(tmp_path / "site"), "ZLPROBE_FILE": str(probe)})
    assert res.returncode == 0, res.stderr[-3000:]
    assert statuses(res.run_dir) == {("exp", "main"): ("ok", "")}
    assert probe.exists() == loaded
