"""plugins/host_draws.py: large host integer draws made on the device. No accelerator here, so the
device is simulated where torch would draw on it (randint's device argument and the device's
generator): `sim` draws on the CPU what it is asked to draw on "simdev" and notes each call."""

import pickle
import types

import pytest
import torch

from zlbench.plugins import _runtime, host_draws, timing

BIG = host_draws.MIN_NUMEL
_REAL_PINNED_EMPTY = host_draws._pinned_empty  # before a fixture stands in for it


def _scripted_draw(n: int):
    return torch.randint(0, 5, [n])


class _OnSimDevice(torch.Tensor):
    """A tensor on the simulated device: .cpu() gives a plain host tensor (a copy)."""

    def cpu(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor).clone()


class _PinnedStandIn(torch.Tensor):
    """Host memory standing in for pinned memory (this torch has none): says it is pinned and notes
    whether each copy into it blocked."""

    def is_pinned(self, device=None):
        return True

    def copy_(self, src, non_blocking=False):
        self.non_blocking_copies.append(non_blocking)
        return super().copy_(src.as_subclass(torch.Tensor), non_blocking=non_blocking)


class _Calls(list):
    device_default: torch.Generator


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(host_draws, "counts", {"moved": 0, "pinned": 0, "fell_back": 0, "error": None,
                                               "pinned_error": None})
    monkeypatch.setattr(host_draws, "_pinning", True)
    monkeypatch.setattr(host_draws, "_emptier", None)
    monkeypatch.setattr(_runtime, "in_timing_call", False)


@pytest.fixture
def sim(monkeypatch, fresh):
    """torch.randint wrapped for a simulated device "simdev": returns the calls randint saw (the
    device each was asked for)."""
    calls = _Calls()
    real = torch.randint
    device_default = torch.Generator().manual_seed(0)  # the device's own default generator

    def randint(*args, **kwargs):
        calls.append(kwargs.get("device"))
        if kwargs.get("device") == "simdev":
            assert not kwargs.get("requires_grad"), "a device draw is made without requires_grad"
            kwargs = {**kwargs, "device": "cpu", "generator": kwargs.get("generator") or device_default}
            return real(*args, **kwargs).as_subclass(_OnSimDevice)
        return real(*args, **kwargs)

    calls.device_default = device_default

    # The device's generator, simulated on the CPU (seeded as host_draws seeds it).
    monkeypatch.setattr(host_draws, "_device_generator",
                        lambda torch_, device: torch.Generator().manual_seed(int(torch.empty((), dtype=torch.int64)
                                                                                 .random_())))
    host_draws.before_patching(torch)
    monkeypatch.setattr(torch, "randint", host_draws._wrap(torch, randint, "simdev"))
    return calls


def test_a_large_cpu_draw_is_made_on_the_device_and_returned_as_asked(sim):
    """FlagGems' generate_tensor_input: torch.randint(lo, hi, shape, dtype=int16, device="cpu")."""
    x = torch.randint(-32768, 32767, (BIG,), dtype=torch.int16, device="cpu")
    assert sim == ["simdev"] and host_draws.counts["moved"] == 1
    assert x.device.type == "cpu" and x.dtype == torch.int16 and x.shape == (BIG,)
    assert int(x.min()) >= -32768 and int(x.max()) < 32767
    mask = torch.randint(0, 2, size=(1024, 1024), dtype=torch.bool, device="cpu")
    shift = torch.randint(8, (1024, 1024))  # randint(high, size), no device: the CPU (torch's default)
    ranged = torch.randint(low=3, high=5, size=torch.Size([1024, 1024]), device=torch.device("cpu"))
    assert sim[1:] == ["simdev"] * 3 and host_draws.counts["moved"] == 4
    assert mask.dtype == torch.bool and int(shift.max()) < 8 and int(ranged.min()) >= 3
    assert all(t.device.type == "cpu" and t.shape == (1024, 1024) for t in (mask, shift, ranged))


@pytest.fixture
def pinning(monkeypatch):
    """Pinned memory and its cache simulated at torch's boundary: returns what was pinned and how
    often the cache was emptied."""
    seen = types.SimpleNamespace(pinned=[], emptied=[])

    def pinned_empty(torch_, shape, dtype):
        host = torch_.empty(shape, dtype=dtype).as_subclass(_PinnedStandIn)
        host.non_blocking_copies = []
        seen.pinned.append(host)
        return host

    monkeypatch.setattr(host_draws, "_pinned_empty", pinned_empty)
    monkeypatch.setattr(host_draws, "_host_cache_emptier", lambda torch_, device: lambda: seen.emptied.append(device))
    return seen


def test_a_moved_draw_comes_back_pinned_and_each_items_end_empties_the_cache(sim, pinning):
    torch.manual_seed(3)
    x = torch.randint(0, 1000, (BIG,), dtype=torch.int32)
    assert pinning.pinned == [x] and x.non_blocking_copies == [False]  # blocking: the values are there
    assert x.dtype == torch.int32 and x.shape == (BIG,) and int(x.max()) < 1000
    assert host_draws.counts["moved"] == 1 and host_draws.counts["pinned"] == 1
    assert len(pinning.emptied) == 1  # tried once before the first pin: it works here
    host_draws.release_pinned()
    host_draws.release_pinned()  # an item whose inputs a fixture freed after the first
    assert len(pinning.emptied) == 3 and host_draws.counts["pinned_error"] is None
    torch.manual_seed(3)
    host_draws._pinning = False  # the same draw, copied back pageable: the same values
    y = torch.randint(0, 1000, (BIG,), dtype=torch.int32)
    assert type(y) is torch.Tensor and torch.equal(y, x.as_subclass(torch.Tensor))


def test_a_process_that_never_pinned_empties_nothing(sim, pinning):
    host_draws.release_pinned()
    assert pinning.emptied == []


@pytest.mark.parametrize("how", ["no pinned memory", "not pinned after all", "no way to empty the cache",
                                 "emptying fails"])
def test_where_pinning_fails_or_could_not_be_undone_the_draw_comes_back_pageable(sim, pinning, monkeypatch, how):
    if how == "no pinned memory":  # this machine's torch, as it is
        monkeypatch.setattr(host_draws, "_pinned_empty", _REAL_PINNED_EMPTY)
    elif how == "not pinned after all":  # a backend that ignores pin_memory
        monkeypatch.setattr(host_draws, "_pinned_empty", lambda torch_, shape, dtype: torch_.empty(shape, dtype=dtype))
    elif how == "no way to empty the cache":  # e.g. torch_npu's pinned memory
        monkeypatch.setattr(host_draws, "_host_cache_emptier", lambda torch_, device: None)
    else:
        monkeypatch.setattr(host_draws, "_host_cache_emptier", lambda torch_, device: lambda: 1 / 0)
    x = torch.randint(0, 9, (BIG,))
    assert type(x) is torch.Tensor and x.device.type == "cpu" and not x.is_pinned()
    assert host_draws.counts["moved"] == 1 and host_draws.counts["pinned"] == 0
    assert host_draws.counts["pinned_error"], "the event says why nothing was pinned"
    if how in ("no way to empty the cache", "emptying fails"):
        assert pinning.pinned == []  # not even tried: its blocks would stay cached for good
    host_draws.release_pinned()
    assert len(pinning.emptied) == (how in ("no pinned memory", "not pinned after all"))  # the first try


def test_a_cache_that_cannot_be_emptied_stops_the_pinning(sim, pinning, monkeypatch):
    torch.randint(0, 9, (BIG,))
    monkeypatch.setattr(host_draws, "_emptier", lambda: 1 / 0)  # worked once, fails now
    host_draws.release_pinned()
    assert "ZeroDivisionError" in host_draws.counts["pinned_error"]
    y = torch.randint(0, 9, (BIG,))
    assert len(pinning.pinned) == 1 and type(y) is torch.Tensor and host_draws.counts["moved"] == 2


def test_the_real_copy_back_asks_for_pinned_host_memory_whatever_the_default_device(fresh):
    """This torch has no pinned memory: the real _pinned_empty says so (under a default device too,
    it asks for the CPU, not that device), and the seed of a device draw's generator comes from the
    CPU's generator."""
    torch.set_default_device("meta")
    try:
        with pytest.raises(RuntimeError, match="pin"):
            host_draws._pinned_empty(torch, (4,), torch.int32)
        torch.manual_seed(5)
        seeded = host_draws._device_generator(torch, "cpu").initial_seed()
    finally:
        torch.set_default_device(None)
    torch.manual_seed(5)
    assert seeded == int(torch.empty((), dtype=torch.int64).random_())


def test_only_devices_whose_pinned_cache_torch_can_empty_pin(monkeypatch):
    """CUDA (and ROCm's "cuda") uses its own emptier, else the accelerator API, as XPU does; torch_npu
    and torch_musa pin through allocators that torch's emptiers do not reach."""
    accelerator_api = getattr(getattr(torch, "accelerator", None), "empty_host_cache", None)
    for device in ("npu", "musa", "cpu", "privateuseone"):
        assert host_draws._host_cache_emptier(torch, device) is None
    assert host_draws._host_cache_emptier(torch, "xpu") is accelerator_api
    monkeypatch.delattr(torch._C, "_host_emptyCache", raising=False)
    assert host_draws._host_cache_emptier(torch, "cuda") is accelerator_api
    own = lambda: None  # noqa: E731
    monkeypatch.setattr(torch._C, "_host_emptyCache", own, raising=False)
    assert host_draws._host_cache_emptier(torch, "cuda") is own


def test_an_items_end_gives_the_pinned_cache_back(monkeypatch):
    """device_setup's hook, run by pytest after each item's teardown."""
    from zlbench.plugins import device_setup

    released = []
    monkeypatch.setattr(host_draws, "release_pinned", lambda: released.append(1))
    device_setup.pytest_runtest_logfinish("benchmark/test_x.py::test_x", ("benchmark/test_x.py", 0, "test_x"))
    assert released == [1]


def test_a_nodes_moved_inputs_do_not_depend_on_what_else_drew_on_the_device(sim):
    """Each moved draw has a generator of its own seeded from the CPU's: after the same seed, the
    same inputs, however the device's default generator moved in between (an op timed directly)."""
    torch.manual_seed(7)
    first = torch.randint(0, 1000, (BIG,))
    torch.manual_seed(7)
    torch.randint(0, 2, (BIG,), generator=sim.device_default)  # an op drawing on the device meanwhile
    assert torch.equal(torch.randint(0, 1000, (BIG,)), first)


def test_a_draw_that_asked_for_gradients_is_a_leaf_that_requires_them(sim):
    x = torch.randint(0, 9, (BIG,), dtype=torch.float32, device="cpu", requires_grad=True)
    assert sim == ["simdev"]
    assert x.requires_grad and x.is_leaf and x.grad_fn is None


@pytest.mark.parametrize("call", [
    lambda: torch.randint(0, 10, (BIG - 1,), device="cpu"),                 # small
    lambda: torch.randint(0, 10, (BIG,), generator=torch.Generator()),     # the caller's generator
    lambda: torch.randint(0, 10, (BIG,), out=torch.empty(BIG, dtype=torch.int64)),  # an output
    lambda: torch.randint(0, 10, (BIG,), device="meta"),                    # not the CPU
    lambda: torch.randint(0, 10, (BIG,), layout=torch.strided),             # a keyword it does not pass on
    lambda: torch.randint(0, 10, (BIG,), pin_memory=False),
])
def test_small_draws_and_draws_the_caller_pinned_are_left_as_written(sim, call):
    call()
    assert host_draws.counts["moved"] == 0 and "simdev" not in sim


def test_a_draw_aimed_at_another_default_device_or_at_no_device_is_left_to_torch(sim):
    torch.set_default_device("meta")
    try:
        assert torch.randint(0, 10, (BIG,)).device.type == "meta" and sim == [None]
    finally:
        torch.set_default_device(None)
    with pytest.raises(RuntimeError):  # torch's own error for a device that is none
        torch.randint(0, 10, (BIG,), device="nodevice")
    assert host_draws.counts["moved"] == 0 and "simdev" not in sim


def test_draws_inside_a_timing_call_stay_on_the_host_also_after_a_nested_one(sim, tmp_path, monkeypatch):
    """The op's own draws, inside the timed (or captured) region, stay as the corpus wrote them, also
    after a timing call nested in it has ended (graph_entry calls the policy again)."""
    cfg = tmp_path / "plugin.json"
    cfg.write_text('{"backend": "cpu", "timer": {"name": "direct", "repeat": 1}}')
    monkeypatch.setenv(_runtime.CONFIG_ENV, str(cfg))
    monkeypatch.setattr(_runtime, "_config", None)
    seen = []

    def bench(fn, **kw):
        fn()
        return 1.0

    policy, graph_entry = timing.make_policy(bench, None)

    def op():
        graph_entry(lambda: None)  # a nested timing call, ended before the op draws
        seen.append((_runtime.in_timing_call, torch.randint(0, 9, (BIG,)).device.type))

    policy(op)
    assert seen == [(True, "cpu")] and host_draws.counts["moved"] == 0 and sim == [None]
    assert _runtime.in_timing_call is False
    monkeypatch.setattr(_runtime, "probe_only", True)  # a liveness probe runs the op untimed
    policy(op)
    assert seen[-1] == (True, "cpu") and host_draws.counts["moved"] == 0
    monkeypatch.setattr(_runtime, "probe_only", False)
    torch.randint(0, 9, (BIG,))
    assert host_draws.counts["moved"] == 1


@pytest.mark.parametrize("capturing", [lambda: True, lambda: 1 / 0])  # capturing, or cannot tell
def test_no_draw_moves_while_the_device_may_capture_a_graph(sim, monkeypatch, capturing):
    monkeypatch.setattr(torch, "simdev", types.SimpleNamespace(is_current_stream_capturing=capturing), raising=False)
    torch.randint(0, 9, (BIG,))
    assert host_draws.counts["moved"] == 0 and sim == [None]
    monkeypatch.setattr(torch, "simdev", types.SimpleNamespace(is_current_stream_capturing=lambda: False))
    torch.randint(0, 9, (BIG,))
    assert host_draws.counts["moved"] == 1


def test_install_wraps_randint_for_the_device_and_a_draw_it_cannot_make_is_made_on_the_cpu(fresh):
    """The real install() on a device this torch does not have ("meta" draws, but cannot be copied
    back): each draw falls back to the CPU as asked, counted with why; installing twice wraps once;
    uninstall() gives torch its own randint back. The CPU backend installs nothing."""
    from torch.utils._device import _device_constructors

    original = torch.randint
    assert host_draws.install("cpu") is False and torch.randint is original
    _device_constructors.cache_clear()  # as in a fresh process: built on first use
    try:
        assert host_draws.install("meta") is True and torch.randint is not original
        torch.set_default_device("meta")  # a corpus that sets a default device still gets it
        try:
            assert torch.randint(0, 5, (3,)).device.type == "meta"
        finally:
            torch.set_default_device(None)
        wrapped = torch.randint
        assert host_draws.install("meta") is True and torch.randint is wrapped
        x = torch.randint(0, 5, (BIG,), dtype=torch.int32, device="cpu")
        assert x.device.type == "cpu" and x.dtype == torch.int32 and int(x.max()) < 5
        assert host_draws.counts["moved"] == 0 and host_draws.counts["fell_back"] == 1
        assert host_draws.counts["error"]
        assert pickle.loads(pickle.dumps(torch.randint)) is torch.randint  # pickles by name, as torch's
        assert int(torch.jit.script(_scripted_draw)(3).max()) < 5  # scripts as torch's builtin
    finally:
        host_draws.uninstall()
    assert torch.randint is original
