"""plugins/host_draws.py: large host integer draws made on the device. No accelerator here, so the
device is simulated where torch would draw on it (randint's device argument and the device's
generator): `sim` draws on the CPU what it is asked to draw on "simdev" and notes each call."""

import pickle
import types

import pytest
import torch

from zlbench.plugins import _runtime, host_draws, timing

BIG = host_draws.MIN_NUMEL


def _scripted_draw(n: int):
    return torch.randint(0, 5, [n])


class _Calls(list):
    device_default: torch.Generator


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(host_draws, "counts", {"moved": 0, "pinned": 0, "fell_back": 0, "error": None})
    monkeypatch.setattr(host_draws, "_pinned_since_release", False)
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


def test_a_moved_draw_comes_back_in_pinned_memory_which_a_nodes_end_gives_back(sim, monkeypatch):
    """Pinned memory simulated at its allocation (this torch has none): the draw is copied into it,
    values as drawn; release_pinned() empties torch's pinned cache once after such draws, not again."""
    pinned, emptied = [], []

    def pinned_empty(torch_, shape, dtype):
        pinned.append(torch_.empty(shape, dtype=dtype))
        return pinned[-1]

    monkeypatch.setattr(host_draws, "_pinned_empty", pinned_empty)
    monkeypatch.setattr(torch._C, "_host_emptyCache", lambda: emptied.append(1), raising=False)
    torch.manual_seed(3)
    x = torch.randint(0, 1000, (BIG,), dtype=torch.int32)
    assert len(pinned) == 1 and x is pinned[0] and x.dtype == torch.int32 and x.shape == (BIG,)
    assert host_draws.counts["moved"] == 1 and host_draws.counts["pinned"] == 1
    monkeypatch.setattr(host_draws, "_pinned_empty", _no_pinned_memory)
    torch.manual_seed(3)
    assert torch.equal(torch.randint(0, 1000, (BIG,), dtype=torch.int32), x)  # pageable: the same values
    assert host_draws.counts["moved"] == 2 and host_draws.counts["pinned"] == 1
    host_draws.release_pinned()
    host_draws.release_pinned()  # nothing pinned since: nothing to give back
    assert emptied == [1]


def _no_pinned_memory(torch_, shape, dtype):
    raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend")


def test_without_pinned_memory_a_moved_draw_comes_back_pageable(sim, monkeypatch):
    """This machine's torch has no pinned memory at all: the draw still moves, nothing is emptied."""
    emptied = []
    monkeypatch.setattr(torch._C, "_host_emptyCache", lambda: emptied.append(1), raising=False)
    x = torch.randint(0, 9, (BIG,))
    assert x.device.type == "cpu" and not x.is_pinned()
    assert host_draws.counts["moved"] == 1 and host_draws.counts["pinned"] == 0
    host_draws.release_pinned()
    assert emptied == []


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
