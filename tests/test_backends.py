import pytest

from zlbench.backends import canonical_name, get_backend
from zlbench.backends.base import SMI_OUTPUT_ENV
from zlbench.backends.registry import alias_table, backend_names
from zlbench.errors import UsageError

from .conftest import DATA


@pytest.mark.parametrize("alias,name", [
    ("NVIDIA", "cuda"), ("gpu", "cuda"), ("cuda", "cuda"), ("MThreads", "musa"), ("mt", "musa"),
    ("amd", "rocm"), ("HIP", "rocm"), ("npu", "ascend"), ("Huawei", "ascend"), ("cpu", "cpu"),
    ("auto", "auto"),
])
def test_aliases_resolve_case_insensitively(alias, name):
    assert canonical_name(alias) == name


def test_unknown_backend_lists_valid_names_and_aliases():
    with pytest.raises(UsageError) as e:
        canonical_name("nvidai")
    msg = str(e.value)
    assert "unknown backend 'nvidai'" in msg
    assert "nvidia" in msg  # close match
    for name in backend_names():
        assert name in msg
    assert "mthreads" in msg and "huawei" in msg


def test_every_alias_is_unique_to_one_backend():
    table = alias_table()
    for name in backend_names():
        assert table[name] == name


@pytest.mark.parametrize("backend,sample,expected", [
    ("cuda", "nvidia-smi.txt", [(0, "NVIDIA H200", "00000000:19:00.0"), (3, "NVIDIA H200", "00000000:5D:00.0")]),
    ("musa", "mthreads-gmi.txt", [(0, "MTT S5000", "00000000:1a:00.0"), (1, "MTT S5000", "00000000:3d:00.0")]),
    ("rocm", "rocm-smi.json", [(0, "AMD Instinct MI300X", "0000:0C:00.0"), (1, "AMD Instinct MI300X", "0000:22:00.0")]),
    ("ascend", "npu-smi.txt", [(0, "910B3", "0000:C1:00.0"), (1, "910B3", "0000:01:00.0")]),
])
def test_enumeration_parses_recorded_tool_output(monkeypatch, backend, sample, expected):
    monkeypatch.setenv(SMI_OUTPUT_ENV, str(DATA / "smi" / sample))
    devices = get_backend(backend).enumerate_devices()
    got = [(d.index, d.name, d.bus_id) for d in devices]
    assert got[0] == expected[0]
    assert got[-1] == expected[-1]
    assert all(d.driver for d in devices)


def test_enumeration_without_the_tool_finds_nothing(monkeypatch):
    monkeypatch.delenv(SMI_OUTPUT_ENV, raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert get_backend("musa").enumerate_devices() == []


@pytest.mark.parametrize("backend,key", [
    ("cuda", "CUDA_VISIBLE_DEVICES"), ("musa", "MUSA_VISIBLE_DEVICES"),
    ("rocm", "HIP_VISIBLE_DEVICES"), ("ascend", "ASCEND_RT_VISIBLE_DEVICES"),
])
def test_visibility_key_is_the_backends_own(backend, key):
    env = get_backend(backend).visibility([3])
    assert env[key] == "3"
    if backend != "cuda":
        assert "CUDA_VISIBLE_DEVICES" not in env


def test_rocm_also_sets_rocr_visibility():
    assert get_backend("rocm").visibility([1])["ROCR_VISIBLE_DEVICES"] == "1"


def test_cpu_is_a_real_backend_with_slots():
    cpu = get_backend("cpu", slots=4)
    assert [d.index for d in cpu.enumerate_devices()] == [0, 1, 2, 3]
    assert cpu.default_timer == "host" and not cpu.supports_graph


def test_graph_capability_and_default_timers():
    assert get_backend("cuda").supports_graph and get_backend("cuda").default_timer == "graph"
    assert get_backend("musa").graph_class == "torch.musa.MUSAGraph"
    assert get_backend("ascend").default_timer == "direct"


def test_every_backends_default_timer_is_pinned():
    """Graph capture by default only where it is validated on the vendor's hardware (CUDA, the H200);
    every other backend is timed directly, as the runner zlbench replaced did; the CPU by the host."""
    from zlbench.backends import backend_names

    defaults = {name: get_backend(name).default_timer for name in backend_names()}
    assert defaults == {"cuda": "graph", "rocm": "direct", "musa": "direct", "ascend": "direct", "cpu": "host"}
    assert get_backend("rocm").supports_graph  # timer=graph stays available on ROCm, opt-in


def test_capture_failure_classification_is_vendor_data():
    cuda, musa = get_backend("cuda"), get_backend("musa")
    assert cuda.classify_capture_failure("operation not permitted when stream is capturing") == "refused"
    assert cuda.classify_capture_failure("CUDA error: an illegal memory access was encountered") == "fatal"
    # No poisoning wording is guessed for CUDA ...
    assert cuda.classify_capture_failure("musaErrorContextIsDestroyed") == "refused"
    # ... while MUSA's wording is its own.
    assert musa.classify_capture_failure("musaErrorContextIsDestroyed: context is destroyed") == "poisoned"


def test_only_musa_carries_a_compat_plugin():
    assert get_backend("musa").compat_plugins == ("zlbench.backends.musa_compat",)
    for name in ("cuda", "rocm", "ascend", "cpu"):
        assert get_backend(name).compat_plugins == ()


def test_only_torch_cuda_backends_use_upstreams_graph_timer():
    assert get_backend("cuda").upstream_graph_timer and get_backend("rocm").upstream_graph_timer
    assert not get_backend("musa").upstream_graph_timer and not get_backend("ascend").upstream_graph_timer


def test_the_cpu_backend_fixes_glibcs_malloc_thresholds_and_its_identity_says_so():
    """Which tensors a process allocated first must not decide whether an op's buffers are
    page-faulted every call (glibc moves its mmap and trim thresholds as blocks are freed)."""
    cpu = get_backend("cpu")
    env = cpu.visibility([0])
    assert int(env["MALLOC_MMAP_THRESHOLD_"]) >= 64 << 20 and int(env["MALLOC_TRIM_THRESHOLD_"]) >= 64 << 20
    assert cpu.describe()["malloc"] == {k: env[k] for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    assert not any(k.startswith("MALLOC_") for k in get_backend("cuda").visibility([0]))
