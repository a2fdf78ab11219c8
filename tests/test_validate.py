import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from zlbench.config.schema import conf_dir, register_schemas
from zlbench.errors import UsageError
from zlbench.config.validate import validate_config


def resolved(*overrides):
    """The shipped config as Hydra composes it, resolved as run.prepare() sees it."""
    register_schemas()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    out = OmegaConf.to_container(cfg, resolve=True)
    out.pop("hydra", None)
    return out


@pytest.mark.parametrize("overrides", [
    [],
    ["ab=demo_fused_softmax", "ab.tuning=replay"],
    ["launcher=slurm", "launcher.tasks=4"],
    ["shape=file", "shape.file=x.yaml", "shape.level=comprehensive"],
    # The edges of each range, and null where null means "none".
    ["launcher.shard_size=0", "launcher.crash_retries=0", "launcher.run_timeout_s=null",
     "timer.min_window_ms=0", "timer.warmup_ms=null", "timer.rep_ms=null", "progress=none"],
    ["timer=graph", "timer.placements=5", "timer.placement_max_mb=0.5"],
    ["timer.repeat=1", "ab.rounds=1", "launcher.node_timeout_s=0.5", "launcher.run_timeout_s=1",
     "timer.warmup_ms=1", "timer.rep_ms=1", "ab.threshold=0.999"],
])
def test_shipped_defaults_and_range_edges_pass(overrides):
    validate_config(resolved(*overrides))


@pytest.mark.parametrize("override,needles", [
    ("timer.repeat=0", ["timer.repeat=0", ">= 1", "Fix: timer.repeat=1"]),
    ("ab.rounds=0", ["ab.rounds=0", ">= 1", "Fix: ab.rounds="]),
    ("ab.rounds=-3", ["ab.rounds=-3", ">= 1"]),
    ("launcher.node_timeout_s=0", ["launcher.node_timeout_s=0", "> 0", "Fix: launcher.node_timeout_s=900"]),
    ("launcher.node_timeout_s=-5", ["launcher.node_timeout_s=-5", "> 0"]),
    ("launcher.run_timeout_s=0", ["launcher.run_timeout_s=0", "or null for no limit"]),
    ("launcher.shard_size=-1", ["launcher.shard_size=-1", ">= 0", "Fix: launcher.shard_size=0"]),
    ("launcher.crash_retries=-1", ["launcher.crash_retries=-1", ">= 0"]),
    ("launcher=slurm launcher.tasks=0", ["launcher.tasks=0", ">= 1"]),
    ("timer.min_window_ms=-1", ["timer.min_window_ms=-1", ">= 0"]),
    ("timer.warmup_ms=0", ["timer.warmup_ms=0", "> 0, or null"]),
    ("timer.rep_ms=-10", ["timer.rep_ms=-10", "> 0, or null"]),
    ("ab.threshold=0", ["ab.threshold=0", "between 0 and 1"]),
    ("ab.threshold=1.5", ["ab.threshold=1.5", "between 0 and 1"]),
    ("fail_on=[failed,oops]", ["fail_on=['failed', 'oops']", "A/B verdicts", "Fix: fail_on=["]),
    ("shape.level=huge", ["shape.level=huge", "one of core, comprehensive"]),
    ("shape.mode=random", ["shape.mode=random", "one of upstream, file"]),
    ("timer.placements=0", ["timer.placements=0", ">= 1", "Fix: timer.placements=1"]),
    ("timer=direct timer.placements=3", ["timer.placements=3 does nothing with timer=direct",
                                         "Fix: timer=graph timer.stop=fixed, or timer.placements=1"]),
    ("timer=graph timer.stop=adaptive timer.placements=3", ["timer.stop=adaptive", "placements apply to graph"]),
])
def test_out_of_range_values_are_refused_with_key_value_range_and_fix(override, needles):
    with pytest.raises(UsageError) as e:
        validate_config(resolved(*override.split()))
    message = str(e.value)
    assert "\n" not in message  # one problem, one line
    for needle in needles:
        assert needle in message


def test_every_bad_value_is_named_in_one_message():
    with pytest.raises(UsageError) as e:
        validate_config(resolved("timer.repeat=0", "ab.rounds=0"))
    lines = str(e.value).splitlines()
    assert [line.split("=")[0] for line in lines] == ["timer.repeat", "ab.rounds"]


@pytest.mark.parametrize("override", ["progress=bogus", "ab.tuning=replay2"])
def test_enumerated_settings_are_refused_by_the_schema(override):
    # Enums in the schema: Hydra refuses the value while composing (the CLI turns that into exit 2).
    with pytest.raises(Exception) as e:
        resolved(override)
    key, value = override.split("=")
    assert key.split(".")[-1] in str(e.value) and value in str(e.value)


@pytest.mark.slow
def test_cli_refuses_a_negative_shard_size_before_anything_runs(run_zlbench):
    res = run_zlbench("launcher.shard_size=-1")
    assert res.returncode == 2, res.stderr
    assert ("zlbench: error: launcher.shard_size=-1 is not valid: it must be an integer >= 0 "
            "(0 = every node of a device in one process). Fix: launcher.shard_size=0.") in res.stderr
    assert "Traceback" not in res.stderr
    assert not (res.run_dir / "rows.jsonl").exists()
