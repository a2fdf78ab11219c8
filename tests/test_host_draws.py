"""plugins/host_draws.py: large host draws made on the device. No accelerator here, so the device
is simulated where torch would draw on it (the draw function's device argument): `sim` draws on the
CPU what it is asked to draw on "simdev" and notes each call."""

import pytest
import torch

from zlbench.plugins import _runtime, host_draws, timing

BIG = host_draws.MIN_NUMEL


@pytest.fixture
def sim(monkeypatch):
    """torch.randint/randn/rand wrapped for a simulated device "simdev": returns the calls the
    functions saw (the device each was asked for)."""
    calls = []

    def simulated(name):
        real = getattr(torch, name)

        def draw(*args, **kwargs):
            calls.append((name, kwargs.get("device")))
            if kwargs.get("device") == "simdev":
                kwargs = {**kwargs, "device": "cpu"}
                if kwargs.pop("requires_grad", False):
                    raise AssertionError("a device draw is made without requires_grad")
            return real(*args, **kwargs)
        return draw

    for name in host_draws.FUNCTIONS:
        monkeypatch.setattr(torch, name, host_draws._wrap(torch, name, simulated(name), "simdev"))
    monkeypatch.setattr(host_draws, "moved", 0)
    monkeypatch.setattr(_runtime, "in_timing_call", False)
    return calls


def test_a_large_cpu_draw_is_made_on_the_device_and_returned_as_asked(sim):
    """FlagGems' generate_tensor_input: torch.randint(lo, hi, shape, dtype=int16, device="cpu")."""
    x = torch.randint(-32768, 32767, (BIG,), dtype=torch.int16, device="cpu")
    assert sim == [("randint", "simdev")] and host_draws.moved == 1
    assert x.device.type == "cpu" and x.dtype == torch.int16 and x.shape == (BIG,)
    assert int(x.min()) >= -32768 and int(x.max()) < 32767
    mask = torch.randint(0, 2, size=(1024, 1024), dtype=torch.bool, device="cpu")
    y = torch.randn(1024, 1024, device="cpu")
    z = torch.rand((1024, 1024), dtype=torch.float16)  # no device: the CPU (torch's default)
    assert [c[1] for c in sim[1:]] == ["simdev"] * 3 and host_draws.moved == 4
    assert mask.dtype == torch.bool and y.shape == (1024, 1024) and z.dtype == torch.float16
    assert all(t.device.type == "cpu" for t in (mask, y, z))


def test_a_draw_that_asked_for_gradients_is_a_leaf_that_requires_them(sim):
    x = torch.randn((BIG,), device="cpu", requires_grad=True)
    assert sim == [("randn", "simdev")]
    assert x.requires_grad and x.is_leaf and x.grad_fn is None


@pytest.mark.parametrize("call", [
    lambda: torch.randint(0, 10, (BIG - 1,), device="cpu"),          # small
    lambda: torch.randn(1024, 1023),                                 # small
    lambda: torch.randint(0, 10, (BIG,), generator=torch.Generator()),  # the caller's generator
    lambda: torch.randn((BIG,), out=torch.empty(BIG)),               # an output
    lambda: torch.rand((BIG,), device="meta"),                       # not the CPU
    lambda: torch.rand((BIG,), layout=torch.strided),               # a keyword it does not pass on
])
def test_small_draws_and_draws_the_caller_pinned_are_left_as_written(sim, call):
    call()
    assert host_draws.moved == 0 and all(device != "simdev" for _, device in sim)


def test_draws_inside_a_timing_call_stay_on_the_host(sim, tmp_path, monkeypatch):
    """The op's own draws, inside the timed (or captured) region, stay as the corpus wrote them."""
    cfg = tmp_path / "plugin.json"
    cfg.write_text('{"backend": "cpu", "timer": {"name": "direct", "repeat": 1}}')
    monkeypatch.setenv(_runtime.CONFIG_ENV, str(cfg))
    monkeypatch.setattr(_runtime, "_config", None)
    seen = []

    def bench(fn, **kw):
        fn()
        return 1.0

    policy, _ = timing.make_policy(bench, None)
    policy(lambda: seen.append((_runtime.in_timing_call, torch.randint(0, 9, (BIG,)).device.type)))
    assert seen == [(True, "cpu")] and host_draws.moved == 0 and sim == [("randint", None)]
    assert _runtime.in_timing_call is False
    torch.randint(0, 9, (BIG,))
    assert host_draws.moved == 1


def test_a_draw_the_device_cannot_make_is_made_on_the_cpu(monkeypatch):
    """A device draw that fails (here: a meta tensor cannot be copied to the CPU) is made as asked."""
    monkeypatch.setattr(host_draws, "moved", 0)
    monkeypatch.setattr(_runtime, "in_timing_call", False)
    draw = host_draws._wrap(torch, "randint", torch.randint, "meta")
    x = draw(0, 5, (BIG,), dtype=torch.int32, device="cpu")
    assert x.device.type == "cpu" and x.dtype == torch.int32 and int(x.max()) < 5 and host_draws.moved == 0


def test_nothing_is_installed_on_the_cpu_backend():
    before = torch.randint
    assert host_draws.install("cpu") is False and torch.randint is before


def test_no_draw_moves_while_the_device_captures_a_graph(sim, monkeypatch):
    import types

    capturing = [True]
    monkeypatch.setattr(torch, "simdev", types.SimpleNamespace(is_current_stream_capturing=lambda: capturing[0]),
                        raising=False)
    torch.randint(0, 9, (BIG,))
    assert host_draws.moved == 0 and sim == [("randint", None)]
    capturing[0] = False
    torch.randint(0, 9, (BIG,))
    assert host_draws.moved == 1
