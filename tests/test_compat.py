"""MUSA's compat plugin in a real pytest run, with flag_gems simulated at its module boundary."""

import os
import subprocess
import sys

import pytest

from .conftest import FIXTURES

MINI = FIXTURES / "mini_corpus"
FAKES = FIXTURES / "fake_flag_gems"


def run_fft_file(vendor, plugins=("zlbench.backends.musa_compat",)):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES / vendor), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", "--rootdir", str(MINI),
            "-c", str(MINI / "pytest.ini")]
    for p in plugins:
        argv += ["-p", p]
    res = subprocess.run(argv + [str(MINI / "benchmark" / "test_fft.py")], env=env, capture_output=True, text=True)
    return res.stdout


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the guard only fires without CUDA")
def test_the_pinned_guard_is_dropped_when_flag_gems_dispatched_to_mthreads():
    out = run_fft_file("mthreads")
    assert "1 passed, 1 skipped" in out, out
    assert "CUDA required" in out  # a guard with another reason stays


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the guard only fires without CUDA")
def test_inert_when_flag_gems_dispatched_elsewhere():
    out = run_fft_file("nvidia")
    assert "2 skipped" in out and "CUDA is not available" in out, out


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the guard only fires without CUDA")
def test_without_the_plugin_mthreads_loses_the_op():
    out = run_fft_file("mthreads", plugins=())
    assert "2 skipped" in out, out
