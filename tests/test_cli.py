import pytest

from zlbench.cli import normalize_argv
from zlbench.errors import UsageError
from .conftest import DATA


def test_old_env_vars_choose_defaults():
    argv, prov = normalize_argv([], {
        "ZL_BACKEND": "MThreads", "ZL_ENABLE_CUDAGRAPH": "0", "ZL_DIRECT_REPEAT": "5",
        "BENCH_LEVEL": "core", "SHAPE_MODE": "upstream", "OP": "fft,exp", "USE_FLAGTUNE": "1",
        "ZL_ISOLATE_TUNER_CACHE": "1",
    })
    assert "backend=musa" in argv
    assert "timer=direct" in argv
    assert "timer.repeat=5" in argv
    assert "ops=['fft','exp']" in argv
    assert "autotune=true" in argv
    assert "isolate_caches=true" in argv
    assert prov["env"]["ZL_BACKEND"] == "MThreads"


def test_command_line_wins_over_env_and_both_are_recorded():
    argv, prov = normalize_argv(["backend=cpu", "timer=host", "ops=[exp]"],
                                {"ZL_BACKEND": "cuda", "ZL_ENABLE_CUDAGRAPH": "1", "TEST_NODE": "x::y"})
    assert "backend=cuda" not in argv and "timer=graph" not in argv
    assert not any(a.startswith("test_node=") for a in argv)
    assert prov["env"] == {"ZL_BACKEND": "cuda", "ZL_ENABLE_CUDAGRAPH": "1", "TEST_NODE": "x::y"}
    assert prov["cli_overrides"] == ["backend=cpu", "timer=host", "ops=[exp]"]
    assert prov["env_overrides"] == []


def test_test_node_env_takes_precedence_over_op_pair():
    argv, _ = normalize_argv([], {"TEST_NODE": "benchmark/test_a.py::test_x", "OP": "a", "OP_FILE": "test_a.py"})
    selections = [a for a in argv if a.split("=")[0] in ("ops", "op_file", "test_node")]
    assert selections == ["test_node='benchmark/test_a.py::test_x'"]


def test_backend_aliases_are_normalized_in_sweeps():
    argv, _ = normalize_argv(["-m", "backend=NVIDIA,cpu"], {})
    assert argv == ["-m", "backend=cuda,cpu"]


def test_unknown_backend_fails_before_anything_runs():
    with pytest.raises(UsageError, match="unknown backend 'tpu'"):
        normalize_argv(["backend=tpu"], {})
    with pytest.raises(UsageError, match="unknown backend"):
        normalize_argv([], {"ZL_BACKEND": "bogus"})


def test_bad_env_value_names_the_variable():
    with pytest.raises(UsageError, match="ZL_ENABLE_CUDAGRAPH"):
        normalize_argv([], {"ZL_ENABLE_CUDAGRAPH": "maybe"})


def test_a_visibility_env_set_before_zlbench_restricts_its_device_pool(run_zlbench):
    smi = {"ZLBENCH_SMI_OUTPUT": str(DATA / "smi" / "nvidia-smi.txt")}
    res = run_zlbench("backend=cuda", "dry_run=true", env={**smi, "CUDA_VISIBLE_DEVICES": "1,3"})
    assert res.returncode == 0, res.stderr
    assert "devices: 1 (NVIDIA H200), 3 (NVIDIA H200)\n" in res.stdout
    res = run_zlbench("backend=cuda", "dry_run=true", env={**smi, "CUDA_VISIBLE_DEVICES": "9"})
    assert res.returncode == 2
    assert "CUDA_VISIBLE_DEVICES=9 was set before zlbench and hides every device here (0, 1, 2, 3)" in res.stderr
