"""On a CUDA device (the lent H200): graph timing, per-shape fallback, fatal and poisoned capture.

Skipped where torch sees no CUDA device (CI, these CPU machines); benchmarks/gpu/ records runs."""

import csv
import json

import pytest

from .conftest import FIXTURES

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_capture_fallback_fatal_and_poison_are_classified(run_zlbench):
    res = run_zlbench("backend=cuda", "timer=graph", "corpus=flaggems",
                      f"corpus.root={FIXTURES / 'gpu_corpus'}", "devices=[0]")
    assert res.returncode == 1, res.stderr[-3000:]  # fatal, poisoned and failed nodes: not ok
    with open(res.run_dir / "ops_status.csv") as f:
        st = {r["op"]: r for r in csv.DictReader(f)}
    rows = [json.loads(l) for l in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    by_op = {}
    for r in rows:
        by_op.setdefault(r["op"], []).append(r)
    print({op: (s["status"], s["reason"][:300]) for op, s in st.items()})  # shown on failure
    assert st["capture_ok"]["status"] == "ok"
    assert all(r["timer_used"] == "graph" and not r["markers"] for r in by_op["capture_ok"])
    assert st["capture_refused"]["status"] == "ok"
    assert all(r["timer_used"] == "direct" and r["timer_used_base"] == "graph" for r in by_op["capture_refused"])
    assert all("BENCHMARK_DIRECT_NO_CUDAGRAPH" in r["markers"] for r in by_op["capture_refused"])
    # ops_status' timer names the op's and the baseline's timers (the torch baseline captured fine)
    assert st["capture_refused"]["timer"] == "direct+graph" and st["capture_ok"]["timer"] == "graph"
    assert "BENCHMARK_DIRECT_NO_CUDAGRAPH" in (res.run_dir / "run.log").read_text()
    assert st["device_fault"]["status"] == "fatal" and "BENCHMARK_DEVICE_FAULT" in st["device_fault"]["reason"]
    assert st["capture_poison"]["status"] == "poisoned"
    assert "capture-incompatible" in st["capture_poison"]["reason"]
    assert st["op_raises"]["status"] == "failed" and "NotImplementedError" in st["op_raises"]["reason"]
    assert "CAPTURE_POISONED" not in st["op_raises"]["reason"]
    # A capture that aborts the process: retried once in a fresh process, every call timed directly
    # and marked (its torch side too: the whole test), with why.
    assert st["capture_abort"]["status"] == "ok", st["capture_abort"]
    assert by_op["capture_abort"] and all(r["timer_used"] == "direct" and "BENCHMARK_DIRECT_NO_CUDAGRAPH" in r["markers"]
                                          for r in by_op["capture_abort"])
    assert "capturing this test killed its benchmark process" in by_op["capture_abort"][0]["marker_reason"]
    assert "SIGABRT" in by_op["capture_abort"][0]["marker_reason"]
    # A backward timed after its untimed forward captures (the test ran on the capture's stream).
    assert st["backward_after_forward"]["status"] == "ok", st["backward_after_forward"]
    assert by_op["backward_after_forward"] and all(
        r["timer_used"] == "graph" and r["timer_used_base"] == "graph" and not r["markers"]
        for r in by_op["backward_after_forward"]), by_op["backward_after_forward"]
    assert st["after_fault"]["status"] == "ok"  # measured in a fresh process
    assert all(r["latency"] > 0 for r in by_op["after_fault"])
    # The inputs' CPU draw was made on the device, the op's own CPU draw (inside the capture) was not.
    assert all(r["timer_used"] == "graph" and not r["markers"] for r in by_op["host_draws"]), by_op["host_draws"]
    identity = json.loads((res.run_dir / "run_identity.json").read_text())
    assert all("made on cuda" in p.get("host_draws", "") for p in identity["processes"]), identity["processes"]
    events = [json.loads(x) for f in (res.run_dir / "units").glob("*/events.jsonl") for x in f.read_text().splitlines()]
    said = [e for e in events if e["event"] == "host_draws"]
    assert said and all(e["moved"] >= 1 and e["pinned"] == e["moved"] and e["fell_back"] == 0 and not e["pinned_error"] for e in said), said


def test_deny_list_skips_the_attempt(run_zlbench):
    res = run_zlbench("backend=cuda", "timer=graph", "corpus=flaggems", "backend.capture_deny_ops=[capture_poison]",
                      f"corpus.root={FIXTURES / 'gpu_corpus'}", "ops=[capture_poison]", "devices=[0]")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(l) for l in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "ok" and "BENCHMARK_DIRECT_NO_CUDAGRAPH" in r["markers"] for r in rows)
    assert "capture_deny_ops" in rows[0]["marker_reason"]


UNTIMED_TUNING = r'''
import json, os, sys, time
import torch, triton, triton.language as tl
from zlbench.plugins import untimed_tuning

@triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (128, 256, 512, 1024)], key=["n"],
                 cache_results=True)
@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

assert untimed_tuning.install()
x = torch.zeros(4096, device="cuda")
t0 = time.perf_counter()
add_one[lambda m: (triton.cdiv(4096, m["BLOCK"]),)](x, 4096)
torch.cuda.synchronize()
print(json.dumps({"timings": [list(map(float, v)) for v in add_one.configs_timings.values()],
                  "launches": float(x.max()), "s": time.perf_counter() - t0,
                  "autotune_files": [f for _, _, fs in os.walk(os.environ["TRITON_CACHE_DIR"])
                                     for f in fs if f.endswith(".autotune.json")]}))
'''


def test_untimed_tuning_compiles_and_launches_every_config_once_and_caches_no_pick(tmp_path):
    """A node-level A/B's prober (plugins/untimed_tuning.py): every config of an autotuned kernel is
    compiled and launched once with a dummy time, and Triton's on-disk autotuning cache, which the
    side's timed runs share, gets nothing."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    script = tmp_path / "untimed_tuning_check.py"  # Triton reads a @jit function's source from its file
    script.write_text(UNTIMED_TUNING)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["timings"] == [[1.0, 1.0, 1.0]] * 4  # four configs, none timed
    assert got["launches"] == 5.0  # once per config, then the pick's own call
    assert got["autotune_files"] == []


def test_launches_of_a_kernel_compiled_earlier_are_recorded_by_name():
    """Liveness evidence (ab/fingerprints.py recording_launches): a kernel compiled before the
    recording (by an earlier test of the process) is still named when launched inside it, through
    this Triton's own launch hook; none is left installed after."""
    triton = pytest.importorskip("triton")
    import triton.language as tl

    from zlbench.ab.fingerprints import recording_launches

    @triton.jit
    def zl_add_one_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    x = torch.zeros(1000, device="cuda")
    zl_add_one_kernel[(4,)](x, 1000, BLOCK=256)  # compiled here, before the recording
    names = set()
    with recording_launches(names):
        zl_add_one_kernel[(4,)](x, 1000, BLOCK=256)
    zl_add_one_kernel[(4,)](x, 1000, BLOCK=256)
    torch.cuda.synchronize()
    assert names == {"zl_add_one_kernel"}
    assert float(x[0]) == 3.0


def test_release_device_memory_gives_a_cycle_held_tensor_and_the_cache_back(monkeypatch):
    """What a resident A/B process does after each node (plugins/serve.py): the other side's process
    on the device gets the memory back, from CUDA's caching allocator itself."""
    import gc

    from zlbench.plugins import guards

    monkeypatch.setattr(guards, "device_module", lambda: torch.cuda)
    gc.collect()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    held = [torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")]
    held.append(held)  # only a collection frees it
    del held
    torch.empty(128 * 2**20, dtype=torch.uint8, device="cuda")  # freed at once, its block cached
    assert torch.cuda.memory_reserved() - base >= 384 * 2**20
    after = guards.release_device_memory()
    assert after["allocated_mib"] <= base / 2**20 + 1  # the cycle's 256 MiB collected
    assert after["reserved_mib"] < base / 2**20 + 128  # and neither block kept cached


REFUSED_CAPTURE = r'''
import contextlib, json, sys
import torch, triton.testing
from zlbench.backends import get_backend
from zlbench.plugins import guards

def refuses():  # 256 MiB made inside the capture, then a sync: CUDA refuses the capture there
    torch.ones(64 * 2**20, device="cuda").sum().item()

with guards.capture_pool_guard(get_backend("cuda")) if sys.argv[1] == "guarded" else contextlib.nullcontext():
    try:
        triton.testing.do_bench_cudagraph(refuses)
        refused = None
    except Exception as e:
        refused = type(e).__name__
torch.empty(2**30, dtype=torch.uint8, device="cuda")  # the next node's 1 GiB, freed at once
torch.cuda.synchronize()
torch.cuda.empty_cache()
print(json.dumps({"refused": refused, "reserved_mib": torch.cuda.memory_reserved() / 2**20}))
'''


def test_a_refused_capture_under_the_pool_guard_leaves_nothing_reserved(tmp_path):
    """torch's capture_end raises before it ends the allocator's routing to the failed capture's
    pool, and empty_cache() frees none of its general pools while a capture counts as underway:
    unguarded, the next node's memory stays reserved for the process' life (on an H100 a resident
    A/B side held 20-75 GiB, and the other side ran out of memory). Under guards.capture_pool_guard
    (the graph timer's), it goes back. Each case in a fresh process: the unguarded one leaves its
    allocator capturing."""
    import subprocess
    import sys

    script = tmp_path / "refused_capture.py"
    script.write_text(REFUSED_CAPTURE)
    got = {}
    for case in ("unguarded", "guarded"):
        out = subprocess.run([sys.executable, str(script), case], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-3000:]
        got[case] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["unguarded"]["refused"] and got["guarded"]["refused"]
    assert got["unguarded"]["reserved_mib"] >= 1024  # torch's own behaviour: the premise
    assert got["guarded"]["reserved_mib"] < 64
