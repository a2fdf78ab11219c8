"""MUSA's compat plugin in a real pytest run, with flag_gems simulated at its module boundary."""

import os
import subprocess
import sys

import pytest

from .conftest import FIXTURES

MINI = FIXTURES / "mini_corpus"
FAKES = FIXTURES / "fake_flag_gems"


def run_fft_file(vendor, plugins=("zlbench.backends.musa_compat",)):
    """A real pytest process (it imports torch: seconds) on the mini corpus' fft file."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES / vendor), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", "--rootdir", str(MINI),
            "-c", str(MINI / "pytest.ini")]
    for p in plugins:
        argv += ["-p", p]
    res = subprocess.run(argv + [str(MINI / "benchmark" / "test_fft.py")], env=env, capture_output=True, text=True)
    return res.stdout


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the guard only fires without CUDA")
def test_the_pinned_guard_is_dropped_when_flag_gems_dispatched_to_mthreads():
    out = run_fft_file("mthreads")
    assert "1 passed, 1 skipped" in out, out
    assert "CUDA required" in out  # a guard with another reason stays


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the guard only fires without CUDA")
def test_inert_when_flag_gems_dispatched_elsewhere():
    out = run_fft_file("nvidia")
    assert "2 skipped" in out and "CUDA is not available" in out, out


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the guard only fires without CUDA")
def test_without_the_plugin_mthreads_loses_the_op():
    out = run_fft_file("mthreads", plugins=())
    assert "2 skipped" in out, out


def _zl_with_fakes(tmp_path, vendor, backend, smi, *args):
    from .conftest import DATA, zlbench

    env = {"PYTHONPATH": str(FAKES / vendor), "ZLBENCH_SMI_OUTPUT": str(DATA / "smi" / smi)}
    run = tmp_path / "run"
    res = zlbench(f"hydra.run.dir={run}", f"backend={backend}", "corpus=flaggems", f"corpus.root={MINI}",
                  "op_file=test_fft.py", "progress=none", *args, cwd=tmp_path, env=env)
    import csv

    status = {}
    if (run / "ops_status.csv").exists():
        with open(run / "ops_status.csv") as f:
            status = {r["test_node"].split("::")[1]: r for r in csv.DictReader(f)}
    return res, run, status


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the guard only fires without CUDA")
def test_simulated_musa_run_measures_the_op_the_cuda_guard_hid(tmp_path):
    """MUSA simulated at the device boundary: mthreads-gmi output replayed, torch_musa and a
    flag_gems that dispatched to mthreads stand in as modules. The rest is zlbench for real."""
    res, run, st = _zl_with_fakes(tmp_path, "mthreads", "mt", "mthreads-gmi.txt", "devices=[1]")
    assert res.returncode == 0, res.stderr[-2000:]
    assert st["test_perf_fft"]["status"] == "ok"
    assert st["test_perf_fft_vendor_lib"]["status"] == "skipped"
    plan = (run / "plan.json").read_text()
    assert '"MUSA_VISIBLE_DEVICES": "1"' in plan and "CUDA_VISIBLE_DEVICES" not in plan
    assert "zlbench.backends.musa_compat" in plan
    assert st["test_perf_fft"]["timer"] == "direct"  # MUSA's default


@pytest.mark.slow
def test_flag_gems_on_another_vendor_fails_the_run_clearly(tmp_path):
    res, run, st = _zl_with_fakes(tmp_path, "nvidia", "rocm", "rocm-smi.json", "timer=direct")
    assert res.returncode == 1, res.stderr[-2000:]  # fatal nodes: not ok (fail_on)
    assert {s["status"] for s in st.values()} == {"fatal"}
    assert all("backend=rocm but flag_gems dispatched to nvidia" in s["reason"] for s in st.values())


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine whose torch reaches no GPU")
@pytest.mark.parametrize("backend,smi,needles", [
    # torch is the runtime: a CPU build (the README's install) failed every op with "Torch not compiled
    # with CUDA enabled", status failed, as if each op were broken
    ("cuda", "nvidia-smi.txt", ["backend=cuda: torch", "cannot reach a CUDA device", "or backend=cpu"]),
    ("rocm", "rocm-smi.json", ["backend=rocm: torch", "cannot reach a ROCm device", "or backend=cpu"]),
    # the vendor's extension is missing: the reason named no fix
    ("musa", "mthreads-gmi.txt", ["torch_musa (the vendor's torch extension) is not importable",
                                  "Fix: install it for the benchmark's Python"]),
])
def test_a_torch_that_cannot_reach_the_backends_device_is_one_setup_error_with_its_fix(tmp_path, backend, smi,
                                                                                       needles):
    from .conftest import DATA, zlbench

    run = tmp_path / "run"
    res = zlbench(f"hydra.run.dir={run}", f"backend={backend}", "ops=[exp]", "dtypes=[float32]", "devices=[0]",
                  "timer.processes=1", "progress=none", f"store.url=sqlite:///{tmp_path / 'zlbench.db'}",
                  cwd=tmp_path, env={"ZLBENCH_SMI_OUTPUT": str(DATA / "smi" / smi)})
    assert res.returncode == 1, res.stderr[-2000:]
    # the store's count of rows says none was measured ("(1 rows)" read as a measured run)
    assert f"recorded {run} (1 rows, 0 measured)" in res.stderr, res.stderr[-2000:]
    import csv

    with open(run / "ops_status.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert row["status"] == "fatal", row
    assert all(n in row["reason"] for n in needles), row["reason"]
    assert "Fix:" in row["reason"]
