
import pytest

from zlbench.backends import get_backend
from zlbench.backends.base import DeviceInfo, SMI_OUTPUT_ENV
from zlbench.errors import UsageError
from zlbench.planning.plan import (CORE_PLUGINS, balance, make_plan, plugin_list, resolve_timer, shared_kernel_cache,
                                   sides_of)

from .conftest import DATA, FIXTURES

MINI = FIXTURES / "mini_corpus"


def cfg(**over):
    base = {
        "backend": {"name": "cpu", "capture_deny_ops": [], "slots": 1},
        "timer": {"name": "auto", "repeat": 1, "warmup_ms": None, "rep_ms": None},
        "shape": {"mode": "upstream", "level": "core", "file": None},
        "corpus": {"name": "flaggems", "root": str(MINI), "test_dir": "benchmark", "pythonpath": ["src"],
                   "pytest_args": ["--mode", "kernel", "--record", "log"],
                   "timer_modules": ["triton.testing"], "warmup_ms": None, "rep_ms": None, "env": {}},
        "launcher": {"name": "local", "node_timeout_s": 60, "shard_size": 0, "crash_retries": 0},
        "ab": {"name": "none", "var": None, "values": [], "sides": ["main"], "side": None, "rounds": 1, "fixed": {}},
        "devices": "all", "gpus": None, "ops": [], "op_file": None, "test_node": None, "dtypes": [],
        "autotune": False, "isolate_caches": True, "identity": {"env": []},
    }
    for k, v in over.items():
        if isinstance(v, dict):
            base[k] = {**base[k], **v}
        else:
            base[k] = v
    return base


def devs(n):
    return [DeviceInfo(i, f"dev{i}") for i in range(n)]


def test_compat_plugins_come_first():
    plugins = plugin_list(get_backend("musa"), "direct")
    assert plugins[0] == "zlbench.backends.musa_compat"
    assert plugins[1:] == list(CORE_PLUGINS)


@pytest.mark.parametrize("name", ["cuda", "rocm", "ascend", "cpu"])
def test_one_backends_compat_plugins_never_appear_for_another(name):
    assert not any("musa" in p for p in plugin_list(get_backend(name), "direct"))


def test_graph_timer_refused_without_graph_capture():
    with pytest.raises(UsageError, match="timer=graph needs graph capture.*backend=cpu"):
        resolve_timer("graph", get_backend("cpu"))
    assert resolve_timer("auto", get_backend("cuda")) == "graph"
    assert resolve_timer("auto", get_backend("musa")) == "direct"
    assert resolve_timer("auto", get_backend("cpu")) == "host"


def test_units_carry_visibility_key_caches_and_autotune(tmp_path):
    plan = make_plan(cfg(backend={"name": "musa"}, autotune=True), get_backend("musa"), devs(2), MINI, tmp_path)
    assert plan.timer == "direct"
    assert {u.device for u in plan.units} == {0, 1}
    for u in plan.units:
        assert u.env["MUSA_VISIBLE_DEVICES"] == str(u.device)
        assert "CUDA_VISIBLE_DEVICES" not in u.env
        assert u.env["USE_FLAGTUNE"] == "1"
        assert u.env["TRITON_CACHE_DIR"] == str(shared_kernel_cache(get_backend("musa"), u.env))  # a plain run's
        assert u.argv.index("-p") < u.argv.index("zlbench.backends.musa_compat") < u.argv.index("zlbench.plugins.record")
        assert str(MINI / "src") in u.env["PYTHONPATH"]
    nodes = sorted(n for u in plan.units for n in u.nodes)
    assert nodes == sorted(n.nodeid for n in plan.nodes)  # every node exactly once


def test_plain_runs_of_one_compile_environment_share_kernels_and_no_other_does(tmp_path, monkeypatch):
    """A plain run's processes compile into the cache of their compile environment, kept across runs:
    the same for every pass and for a second run; another for a switch set in the shell or in
    corpus.env; a run's own where share_kernels=false, where tuning picks would be kept in Triton's
    cache (timer.share_tuning: TRITON_CACHE_AUTOTUNING=1), and for an A/B's sides."""
    monkeypatch.setenv("ZLBENCH_CACHE_DIR", str(tmp_path / "kc"))
    monkeypatch.delenv("FLAGTREE_RLC_ENHANCE", raising=False)
    cuda = get_backend("cuda")

    def caches(run, **over):
        plan = make_plan(cfg(**{"backend": {"name": "cuda"}, "timer": {"processes": 3}, **over}), cuda, devs(2), MINI,
                         tmp_path / run)
        return {u.env["TRITON_CACHE_DIR"] for u in plan.units}

    first = caches("a")
    assert len(first) == 1 and next(iter(first)).startswith(str(tmp_path / "kc" / "triton" / "cuda-"))
    assert caches("b") == first  # the next run of the same environment
    assert caches("c", corpus={"env": {"FLAGTREE_RLC_ENHANCE": "0"}}).isdisjoint(first)
    monkeypatch.setenv("FLAGTREE_RLC_ENHANCE", "0")
    shell = caches("d")
    assert shell != first and shell == caches("e", corpus={"env": {"FLAGTREE_RLC_ENHANCE": "0"}})
    monkeypatch.delenv("FLAGTREE_RLC_ENHANCE")
    # A variable of any name that corpus.env or identity.env names is part of the environment too.
    assert caches("c2", corpus={"env": {"MY_COMPILER_KNOB": "1"}}).isdisjoint(first)
    assert caches("c3", identity={"env": ["MY_COMPILER_KNOB"]}) == first  # named but unset: the same
    monkeypatch.setenv("MY_COMPILER_KNOB", "1")
    assert caches("c4") == first and caches("c5", identity={"env": ["MY_COMPILER_KNOB"]}).isdisjoint(first)
    monkeypatch.delenv("MY_COMPILER_KNOB")
    # A cache root that cannot be made (under a file; root may write anywhere else): the run's own.
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("ZLBENCH_CACHE_DIR", str(tmp_path / "a_file" / "kernels"))
    assert caches("ro") == {str(tmp_path / "ro" / "cache" / "side0" / "triton")}
    monkeypatch.setenv("ZLBENCH_CACHE_DIR", str(tmp_path / "kc"))
    assert caches("f", share_kernels=False) == {str(tmp_path / "f" / "cache" / "side0" / "triton")}
    assert caches("g", timer={"processes": 3, "share_tuning": True}) == {str(tmp_path / "g" / "cache" / "side0" / "triton")}
    # Triton reads TRITON_CACHE_AUTOTUNING=true/on/yes as 1 too: picks kept in its cache, the run's own.
    assert caches("g2", corpus={"env": {"TRITON_CACHE_AUTOTUNING": "On"}}) == {
        str(tmp_path / "g2" / "cache" / "side0" / "triton")}
    ab = caches("h", ab={"name": "env", "var": "FLAGTREE_RLC_ENHANCE", "values": ["0", "1"], "sides": ["off", "on"]})
    assert ab == {str(tmp_path / "h" / "cache" / f"side{i}" / "triton") for i in (0, 1)}


@pytest.mark.parametrize("name", ["cuda", "musa", "rocm", "ascend", "cpu"])
def test_one_kernel_cache_for_every_device_of_a_run(tmp_path, monkeypatch, name):
    """The device visibility variables (MUSA_VISIBLE_DEVICES matches MUSA_, a switch prefix) are not
    the compile environment: a run's devices share one cache."""
    monkeypatch.setenv("ZLBENCH_CACHE_DIR", str(tmp_path / "kc"))
    backend = get_backend(name)
    plan = make_plan(cfg(backend={"name": name}, timer={"processes": 2}), backend, devs(2), MINI, tmp_path)
    assert {u.device for u in plan.units} == {0, 1}
    assert len({u.env["TRITON_CACHE_DIR"] for u in plan.units}) == 1


def test_devices_are_checked_against_the_enumeration(tmp_path, monkeypatch):
    monkeypatch.setenv(SMI_OUTPUT_ENV, str(DATA / "smi" / "nvidia-smi.txt"))
    cuda = get_backend("cuda")
    plan = make_plan(cfg(backend={"name": "cuda"}, devices=[1, 3]), cuda, cuda.enumerate_devices(), MINI, tmp_path)
    assert [d.index for d in plan.devices] == [1, 3]
    with pytest.raises(UsageError, match=r"device 7 does not exist on backend=cuda; devices here: 0 \(NVIDIA H200\)"):
        make_plan(cfg(backend={"name": "cuda"}, gpus=[7]), cuda, cuda.enumerate_devices(), MINI, tmp_path)
    with pytest.raises(UsageError, match="found no device"):
        make_plan(cfg(backend={"name": "cuda"}), cuda, [], MINI, tmp_path)


def test_level_dtypes_and_shape_file_reach_the_corpus(tmp_path):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("exp:\n  shapes: [[8, 8]]\n")
    plan = make_plan(cfg(shape={"mode": "file", "level": "comprehensive", "file": str(shapes)},
                         dtypes=["float16", "bfloat16"], timer={"warmup_ms": 5, "rep_ms": 7}),
                     get_backend("cpu"), devs(1), MINI, tmp_path)
    argv = " ".join(plan.units[0].argv)
    assert "--level comprehensive" in argv
    assert f"--shape_file {shapes}" in argv
    assert "--dtypes float16 --dtypes bfloat16" in argv
    assert "--warmup 5 --iter 7" in argv


def test_ab_sides_both_set_the_variable_and_rounds_alternate(tmp_path):
    ab = {"name": "x", "var": "SWITCH", "values": [0, 1], "sides": ["off", "on"], "rounds": 4,
          "fixed": {"MASK": "15"}}
    plan = make_plan(cfg(ab=ab), get_backend("cpu"), devs(1), MINI, tmp_path)
    assert [s.env for s in plan.sides] == [{"MASK": "15", "SWITCH": "0"}, {"MASK": "15", "SWITCH": "1"}]
    order = [(u.round, u.side) for u in plan.units]
    assert order == [(0, "off"), (0, "on"), (1, "on"), (1, "off"), (2, "off"), (2, "on"), (3, "on"), (3, "off")]
    caches = {u.side: u.env["TRITON_CACHE_DIR"] for u in plan.units}
    assert caches["off"].endswith("cache/side0/triton") and caches["on"].endswith("cache/side1/triton")
    assert caches["off"] != caches["on"]


def test_ab_sides_of_a_row_share_its_device(tmp_path):
    ab = {"name": "x", "var": "SWITCH", "values": [0, 1], "sides": ["off", "on"], "rounds": 2}
    plan = make_plan(cfg(ab=ab), get_backend("cpu", slots=3), devs(3), MINI, tmp_path)
    where = {}
    for u in plan.units:
        for n in u.nodes:
            where.setdefault(n, set()).add(u.device)
    assert all(len(d) == 1 for d in where.values())
    # A node-level A/B's device may take later rounds of other devices' nodes (both sides at once,
    # claimed by its scheduler, zlbench/engine/stealing.py): its processes collect them, and each side and
    # round has a claims dir; the benchmark processes claim nothing themselves.
    for u in plan.units:
        assert sorted(u.pool) == sorted(n for v in plan.units if v.device != u.device and v.side == u.side
                                        and v.round == u.round for n in v.nodes)
        assert u.claims_dir == str(tmp_path / "claims" / f"{u.side}.r{u.round}")
        assert "claims_dir" not in u.plugin_config
    # An A/B's processes record the kernels each test launches (liveness evidence); a plain run's do not.
    assert all(u.plugin_config["record_launches"] is True for u in plan.units)
    assert not any(u.plugin_config["record_launches"] for u in make_plan(
        cfg(), get_backend("cpu", slots=3), devs(3), MINI, tmp_path).units)
    # A round-level A/B (whole passes per side and round) and steal=false keep every node home.
    for kw in ({"ab": {**ab, "schedule": "round"}}, {"ab": ab, "launcher": {"steal": False}}):
        kept = make_plan(cfg(**kw), get_backend("cpu", slots=3), devs(3), MINI, tmp_path)
        assert all(u.pool == [] and u.claims_dir is None for u in kept.units)


def test_units_of_one_side_may_take_each_others_waiting_nodes_from_the_tails(tmp_path):
    plan = make_plan(cfg(), get_backend("cpu", slots=3), devs(3), MINI, tmp_path)
    assert len(plan.units) == 3
    for u in plan.units:
        others = [v for v in plan.units if v is not u]
        assert sorted(u.pool) == sorted(n for v in others for n in v.nodes)
        assert u.pool[0] in {v.nodes[-1] for v in others}  # the tails first: LPT puts small nodes last
        assert u.plugin_config["claims_dir"] == u.claims_dir == str(tmp_path / "claims" / "main.r0")
    kept = make_plan(cfg(launcher={"steal": False}), get_backend("cpu", slots=3), devs(3), MINI, tmp_path)
    assert all(u.pool == [] for u in kept.units)


def test_a_claim_is_taken_once_and_recognised_by_its_unit(tmp_path):
    from zlbench.results.claims import claim, owner

    assert owner(str(tmp_path), "b/t.py::test_a") is None
    assert claim(str(tmp_path), "b/t.py::test_a", "main.r0.d0.s0")
    assert not claim(str(tmp_path), "b/t.py::test_a", "main.r0.d1.s0")
    assert claim(str(tmp_path), "b/t.py::test_a", "main.r0.d0.s0")  # a restarted process of the same unit
    assert owner(str(tmp_path), "b/t.py::test_a") == "main.r0.d0.s0"
    assert len(list(tmp_path.iterdir())) == 1  # the claim only, no temporary file left


def test_ab_axis_needs_two_values():
    with pytest.raises(UsageError, match="needs exactly two values"):
        sides_of({"name": "x", "var": "V", "values": [1], "sides": ["off", "on"]})


def test_balance_spreads_known_costs():
    from zlbench.planning.corpus import TestNode

    nodes = [TestNode(f"f::t{i}", "f", f"op{i}", ()) for i in range(6)]
    costs = {"f::t0": 10, "f::t1": 1, "f::t2": 1, "f::t3": 1, "f::t4": 1, "f::t5": 6}
    out = balance(nodes, devs(2), costs)
    loads = sorted(sum(costs[n.nodeid] for n in v) for v in out.values())
    assert loads == [10, 10]
    # longest first inside each device, so that no long node starts last and others take short ones
    assert [[costs[n.nodeid] for n in v] for v in out.values()] == [[10], [6, 1, 1, 1, 1]]
    # without costs, corpus order
    assert [[n.nodeid for n in v] for v in balance(nodes, devs(2), {}).values()] == \
        [["f::t0", "f::t2", "f::t4"], ["f::t1", "f::t3", "f::t5"]]


def test_shard_size_splits_a_device_queue(tmp_path):
    plan = make_plan(cfg(launcher={"shard_size": 2}), get_backend("cpu"), devs(1), MINI, tmp_path)
    assert all(len(u.nodes) <= 2 for u in plan.units) and len(plan.units) >= 3


def test_earlier_wall_times_balance_the_shards(tmp_path):
    from zlbench.results.tables import wall_times as earlier_costs

    earlier = tmp_path / "earlier"
    earlier.mkdir()
    nodes = ["benchmark/test_fft.py::test_perf_fft", "benchmark/test_unary_pointwise_perf.py::test_perf_exp",
             "benchmark/test_unary_pointwise_perf.py::test_perf_abs",
             "benchmark/test_unary_pointwise_perf.py::TestTopk::test_perf_topk",
             "benchmark/test_module_mark.py::test_perf_exp_out", "benchmark/test_fft.py::test_perf_fft_vendor_lib",
             "benchmark/test_blas_perf_parallel.py::test_blas_benchmark",
             "benchmark/test_blas_perf_parallel.py::test_perf_abs_parallel"]
    walls = [50.0, 1.0, 1.0, 1.0, 1.0, 46.0, 1.0, 1.0]
    (earlier / "ops_status.csv").write_text("op,test_node,wall_s\n" + "".join(
        f"x,{n},{w}\n" for n, w in zip(nodes, walls)))
    costs = earlier_costs(str(earlier))
    plan = make_plan(cfg(), get_backend("cpu", slots=2), devs(2), MINI, tmp_path, costs)
    loads = sorted(sum(costs[n] for n in u.nodes) for u in plan.units)
    assert loads == [51.0, 51.0]  # the two heavy nodes on different devices, the light ones spread


def test_tuning_replay_gives_side_b_the_configs_side_a_tuned(tmp_path):
    ab = {"name": "x", "var": "SWITCH", "values": [0, 1], "sides": ["off", "on"], "rounds": 2, "tuning": "replay"}
    plan = make_plan(cfg(ab=ab), get_backend("cpu"), devs(1), MINI, tmp_path)
    fg = {u.side: u.env["FLAGGEMS_CACHE_DIR"] for u in plan.units}
    triton = {u.side: u.env["TRITON_CACHE_DIR"] for u in plan.units}
    assert fg["on"] == fg["off"] == str(tmp_path / "cache" / "side0" / "flaggems")
    assert triton["on"] != triton["off"]  # compiled kernels stay per side
    assert plan.units[0].side == "off"  # A tunes first
    sep = make_plan(cfg(ab={**ab, "tuning": "separate"}), get_backend("cpu"), devs(1), MINI, tmp_path)
    assert len({u.env["FLAGGEMS_CACHE_DIR"] for u in sep.units}) == 2
    # Round by round in fresh processes: a resident-process setting asked for with it does nothing, said so.
    resident = make_plan(cfg(ab={**ab, "schedule": "node", "respawn_every": 0}), get_backend("cpu"), devs(1), MINI,
                         tmp_path)
    assert resident.schedule is None and any(
        "ab.respawn_every=0 does nothing then (every round runs in fresh processes)" in n for n in resident.notes), \
        resident.notes
    # So does ab.schedule=round (every round a pass of its own), and only where the setting was changed.
    rounds = make_plan(cfg(ab={**ab, "tuning": "separate", "schedule": "round", "respawn_every": 0}),
                       get_backend("cpu"), devs(1), MINI, tmp_path)
    assert rounds.schedule is None and rounds.notes == [
        "ab.schedule=round runs whole passes round by round; ab.respawn_every=0 does nothing then (every round runs "
        "in fresh processes)"]
    assert make_plan(cfg(ab={**ab, "tuning": "separate", "schedule": "round", "respawn_every": 1}),
                     get_backend("cpu"), devs(1), MINI, tmp_path).notes == []


def test_an_op_mark_that_pulls_in_tests_of_several_files_is_noted():
    cpu = get_backend("cpu")
    plan = make_plan(cfg(ops=["abs", "fft"]), cpu, devs(1), MINI, MINI)
    assert plan.notes == ["op 'abs' matches tests in 2 files: benchmark/test_blas_perf_parallel.py, "
                          "benchmark/test_unary_pointwise_perf.py"]
    assert make_plan(cfg(ops=["abs"], op_file="test_unary_pointwise_perf.py"), cpu, devs(1), MINI, MINI).notes == []


def test_a_node_level_ab_schedule_is_planned_once_beside_the_units(tmp_path):
    """plan.json holds the schedule once (not a copy per unit) and the rounds once (Plan.rounds, not
    a schedule's max_rounds); a plan.json written with a copy on every unit still reads."""
    import json

    from zlbench.engine.run import plan_record
    from zlbench.planning.units import WorkUnit
    from zlbench.results.rundir import load_plan, write_plan

    ab = {"name": "x", "var": "SWITCH", "values": [0, 1], "sides": ["off", "on"], "rounds": 6, "min_rounds": 8,
          "respawn_every": 1, "threshold": 0.02}
    plan = make_plan(cfg(ab=ab), get_backend("cpu", slots=2), devs(2), MINI, tmp_path)
    assert plan.rounds == 6 and plan.schedule == {"sides": ["off", "on"], "min_rounds": 6, "respawn_every": 1,
                                                  "threshold": 0.02, "aa": False, "devices": 2}
    record = plan_record(plan)
    assert record["schedule"] == plan.schedule and all("schedule" not in u for u in record["units"])
    assert make_plan(cfg(ab={**ab, "schedule": "round"}), get_backend("cpu"), devs(1), MINI, tmp_path).schedule is None
    # Written before: a copy on every unit, with max_rounds.
    old = {**record, "units": [{**u, "schedule": {**plan.schedule, "max_rounds": 6}} for u in record["units"]]}
    del old["schedule"]
    write_plan(tmp_path, old)
    assert "max_rounds" in json.loads((tmp_path / "plan.json").read_text())["units"][0]["schedule"]
    read = load_plan(tmp_path)
    assert read["schedule"] == plan.schedule and read["rounds"] == 6
    assert [WorkUnit.from_dict(u).unit_id for u in read["units"]] == [u.unit_id for u in plan.units]


def test_triton_autotune_picks_are_fresh_or_shared_as_flaggems_tuning_is(tmp_path):
    cpu = get_backend("cpu")

    def autotune_env(**over):
        plan = make_plan(cfg(**over), cpu, devs(1), MINI, tmp_path)
        return {u.env.get("TRITON_CACHE_AUTOTUNING") for u in plan.units}

    three = {"processes": 3}
    # Each of a plain run's processes tunes afresh, even where the user's shell keeps picks on disk.
    assert autotune_env(timer=three) == {"0"}
    # timer.share_tuning: the processes share Triton's picks as they share FlagGems' cache.
    assert autotune_env(timer={**three, "share_tuning": True}) == {"1"}
    # One process: the environment's own setting; corpus.env pins picks on purpose.
    assert autotune_env(timer={"processes": 1}) == {None}
    pinned = cfg()["corpus"] | {"env": {"TRITON_CACHE_AUTOTUNING": "1"}}
    assert autotune_env(timer=three, corpus=pinned) == {"1"}
    # An A/B's side processes that respawn tune afresh each start; resident ones keep the environment's.
    ab = {"name": "x", "var": "SWITCH", "values": [0, 1], "sides": ["off", "on"], "rounds": 2}
    assert autotune_env(ab={**ab, "respawn_every": 1}) == {"0"}
    assert autotune_env(ab={**ab, "respawn_every": 0}) == {None}
    # One side of an axis (ab.side) runs round by round, its FlagGems picks kept across rounds.
    assert autotune_env(ab={**ab, "respawn_every": 1, "side": "on"}) == {None}
