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
    ["timer=graph", "timer.fill_gaps=false"],
    ["timer.repeat=1", "ab.rounds=1", "launcher.node_timeout_s=0.5", "launcher.run_timeout_s=1",
     "timer.warmup_ms=1", "timer.rep_ms=1", "ab.threshold=0.999"],
])
def test_shipped_defaults_and_range_edges_pass(overrides):
    validate_config(resolved(*overrides))


@pytest.mark.parametrize("override,needles", [
    ("timer.repeat=0", ["timer.repeat=0", ">= 1", "Fix: timer.repeat=1"]),
    ("ab.rounds=0", ["ab.rounds=0", ">= 1", "Fix: ab.rounds="]),
    # one problem, one fix: not also "needs at least 2. Fix: ab.rounds=2 or more" beside "Fix: ab.rounds=10"
    ("ab=demo_fused_softmax ab.rounds=0", ["ab.rounds=0", ">= 1", "Fix: ab.rounds=10"]),
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
    ("timer.max_processes=0", ["timer.max_processes=0", "from 1 to 100, or null", "Fix: timer.max_processes=null"]),
    ("timer.target_width=0", ["timer.target_width=0", ">= 0.006", "Fix: timer.target_width=0.02"]),
    ("timer.target_width=0.005", ["timer.target_width=0.005", "no interval is narrower", "Fix: timer.target_width=0.02"]),
    ("timer.more_budget=-1", ["timer.more_budget=-1", "> 0", "Fix: timer.more_budget=0.5"]),
    ("ab.threshold=0", ["ab.threshold=0", "between 0 and 1"]),
    ("ab.threshold=1.5", ["ab.threshold=1.5", "between 0 and 1"]),
    ("fail_on=[failed,oops]", ["fail_on=['failed', 'oops']", "A/B verdicts", "Fix: fail_on=["]),
    ("shape.level=huge", ["shape.level=huge", "one of core, comprehensive"]),
    ("shape.mode=random", ["shape.mode=random", "one of upstream, file"]),
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


# -- keys: every level, derived from the schema dataclasses ------------------------------------------

@pytest.mark.parametrize("override,needles", [
    # Hydra's own advice for an unknown key is `+key=`: that must not slip through either.
    ("+timer.rep=5", ["timer.rep is not a zlbench setting", "settings of timer are: name, repeat,",
                      "Fix: one of timer.repeat=..., timer.rep_ms=..."]),
    ("+ab.foo=1", ["ab.foo is not a zlbench setting", "settings of ab are: name, var,", "Fix: drop it"]),
    ("+backend.slot=2", ["backend.slot is not a zlbench setting", "Fix: backend.slots=..."]),
    ("+store.password=x", ["store.password is not a zlbench setting", "settings of store are: url."]),
    ("+node_timeout_s=0", ["node_timeout_s is not a zlbench setting", "Fix: launcher.node_timeout_s=..."]),
    ("+launcher.partition=gpu", ["launcher.partition is not a zlbench setting of launcher=local",
                                 "Fix: launcher=slurm launcher.partition=..."]),
])
def test_unknown_keys_are_refused_at_every_level_with_the_valid_ones(override, needles):
    with pytest.raises(UsageError) as e:
        validate_config(resolved(override))
    for needle in needles:
        assert needle in str(e.value)


@pytest.mark.parametrize("overrides", [
    ["+corpus.env.MY_SWITCH=1", "+ab.fixed.FLAGTREE_X=0"],  # dicts the user fills
    ["launcher=slurm", "launcher.partition=gpu", "+launcher.additional_parameters.gres=gpu:1"],
])
def test_keys_of_free_dicts_and_of_the_chosen_launcher_pass(overrides):
    validate_config(resolved(*overrides))


def test_every_schema_field_is_a_valid_key():
    import typing
    from dataclasses import fields, is_dataclass

    from zlbench.config.keys import key_problem
    from zlbench.config.schema import LAUNCHER_SCHEMAS, ZlbenchConfig

    def keys(cls, prefix=""):
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            kind = LAUNCHER_SCHEMAS["slurm"] if prefix + f.name == "launcher" else hints[f.name]
            yield prefix + f.name
            if is_dataclass(kind):
                yield from keys(kind, prefix + f.name + ".")

    found = list(keys(ZlbenchConfig))
    assert "launcher.partition" in found and "timer.fill_gaps" in found and "ab.tuning" in found
    assert [k for k in found if key_problem(k, launchers=["slurm"])] == []


# -- values that would run and fail every node --------------------------------------------------------

def test_the_dtype_list_holds_torch_dtype_names_as_a_corpus_takes_them():
    import torch

    from zlbench.config.validate import DTYPE_ALIASES, TORCH_DTYPES

    for name in TORCH_DTYPES:
        assert str(getattr(torch, name)) == f"torch.{name}"  # FlagGems' choices: str(dtype) less "torch."
    for alias, name in DTYPE_ALIASES.items():
        assert getattr(torch, alias) is getattr(torch, name)


@pytest.mark.parametrize("override,needles", [
    ("dtypes=[float17]", ["dtypes=[float17]: float17 is not a torch dtype name", "Fix: dtypes=[float16]"]),
    ("dtypes=[float32,half]", ["half is torch's other name for float16", "Fix: dtypes=[float16]"]),
    # a torch dtype the corpus' --dtypes does not take: every process died at start (exit 1, "crashed")
    ("dtypes=[float32,int64]", ["dtypes=[float32,int64]: the corpus' --dtypes does not take int64 (it takes "
                                "float16, float32, bfloat16, int16, int32, bool, complex64: corpus.dtypes_taken)",
                                "Fix: dtypes=[int16], or dtypes=[] for the corpus' own choice"]),
    # each case measured twice in one process: its two readings were counted as two processes'
    ("dtypes=[float32,float16,float32]", ["dtypes=[float32,float16,float32] lists float32 more than once",
                                          "Fix: dtypes=[float32,float16]."]),
    ("devices=[]", ["devices=[] selects no device", "Fix: devices=all"]),
    ("gpus=[]", ["gpus=[] selects no device"]),
])
def test_values_that_select_nothing_valid_are_refused(override, needles):
    with pytest.raises(UsageError) as e:
        validate_config(resolved(override))
    for needle in needles:
        assert needle in str(e.value)


@pytest.mark.parametrize("schedule", ["node", "round"])
def test_an_interleaved_ab_of_one_round_is_refused_before_it_runs(schedule):
    # It used to measure its round, then stop on an internal error (a paired interval needs two).
    with pytest.raises(UsageError) as e:
        validate_config(resolved("ab=demo_fused_softmax", "ab.rounds=1", f"ab.schedule={schedule}"))
    assert "ab.rounds=1" in str(e.value) and "Fix: ab.rounds=2 or more" in str(e.value)
    validate_config(resolved("ab=demo_fused_softmax", "ab.rounds=1", "ab.side=on"))  # one side's pass


def test_valid_dtypes_pass():
    validate_config(resolved("dtypes=[float16,float32,bfloat16,int16,int32,bool,complex64]"))
    validate_config(resolved("dtypes=[int64]", "corpus.dtypes_taken=null"))  # not checked: a fork that takes it


@pytest.mark.parametrize("corpus", ["demo", "flaggems"])
def test_the_dtypes_a_corpus_is_said_to_take_are_its_dtypes_choices(corpus):
    """corpus.dtypes_taken is the demo corpus' --dtypes choices (FlagGems' conftest, whose list it copies)."""
    import torch

    from zlbench.demo_corpus.benchmark import consts

    choices = [str(d).split(".")[-1]
               for d in consts.FLOAT_DTYPES + consts.INT_DTYPES + consts.BOOL_DTYPES + [torch.cfloat]]
    assert resolved(f"corpus={corpus}", "corpus.root=/x")["corpus"]["dtypes_taken"] == choices


@pytest.mark.parametrize("overrides,noted", [
    (["ab=demo_fused_softmax", "ab.rounds=3"], True),
    (["ab=demo_fused_softmax", "ab.rounds=3", "ab.min_rounds=3"], False),
    (["ab=demo_fused_softmax", "ab.rounds=3", "ab.schedule=round"], False),  # every round runs anyway
    (["ab=demo_fused_softmax", "ab.rounds=1", "ab.side=off"], False),  # one side of a sweep
    ([], False),  # no A/B: rounds=1 < min_rounds=4 means nothing
])
def test_ab_rounds_below_min_rounds_gets_a_note_with_the_fix(overrides, noted):
    from zlbench.config.validate import config_notes

    notes = config_notes(resolved(*overrides))
    assert bool(notes) == noted
    if noted:
        assert notes == ["ab.rounds=3 is below ab.min_rounds=4: every node runs all 3 rounds (none stops early "
                         "on a settled verdict) and each verdict rests on 3 rounds. Fix: ab.rounds=4 or more, "
                         "or ab.min_rounds=3 to plan it so."]


@pytest.mark.parametrize("every,noted", [(4, True), (9, True), (3, False), (0, False), (1, False)])
def test_a_respawn_period_no_shorter_than_the_run_gets_a_note(every, noted):
    from zlbench.config.validate import config_notes

    notes = config_notes(resolved("ab=demo_fused_softmax", "ab.rounds=4", f"ab.respawn_every={every}"))
    assert bool(notes) == noted, notes
    if noted:
        assert notes == [f"ab.respawn_every={every} is no fewer than ab.rounds=4: each side keeps one process for the "
                         "whole run, as ab.respawn_every=0 does, so process effects are not sampled (ab.md says so). "
                         "Fix: ab.respawn_every=1 (the default) or a period below ab.rounds."]


def test_replay_runs_round_by_round_so_no_resident_process_note():
    """ab.tuning=replay runs every round in fresh processes: the start said "each side keeps one
    process for the whole run" while the plan's note said respawn_every does nothing."""
    from zlbench.config.validate import config_notes

    notes = config_notes(resolved("ab=demo_fused_softmax", "ab.rounds=3", "ab.respawn_every=4", "ab.tuning=replay"))
    assert not any("keeps one process" in n or "below ab.min_rounds" in n for n in notes), notes


def test_a_max_processes_below_processes_gets_a_note():
    from zlbench.config.validate import config_notes

    (note,) = config_notes(resolved("timer.processes=4", "timer.max_processes=2"))
    assert note.startswith("timer.max_processes=2 is below timer.processes=4: every node is still measured in 4")
    assert config_notes(resolved("timer.processes=4", "timer.max_processes=4")) == []
    assert config_notes(resolved("timer.processes=4")) == []


@pytest.mark.parametrize("overrides,plain,replaced", [
    (["fail_on=[slower]"], True, True),  # README's "add slower" taken literally, on a plain run
    (["ab=demo_fused_softmax", "fail_on=[slower]"], False, True),
    (["ab=demo_fused_softmax", "ab.side=on", "fail_on=[failed,slower]"], True, False),
    (["ab=demo_fused_softmax", "fail_on=[failed,crashed,timeout,poisoned,fatal,slower]"], False, False),
    (["fail_on=[]"], False, False), (["fail_on=[timeout]"], False, False)])
def test_a_fail_on_that_gates_nothing_or_drops_the_statuses_gets_a_note(overrides, plain, replaced):
    """fail_on=[slower] on a plain run exited 0 on a timeout, without a word: no verdict to fail on,
    and the statuses the default list held were gone."""
    from zlbench.config.validate import config_notes

    notes = config_notes(resolved(*overrides))
    assert any("they never fail it" in n for n in notes) == plain, notes
    assert any("replaces the default list: a test that fails, crashes or times out no longer fails the run. Fix: "
               "fail_on=[failed,crashed,timeout,poisoned,fatal,slower] to keep them." in n for n in notes) == replaced, notes


def test_a_target_width_below_the_narrowest_interval_is_run_with_a_note():
    from zlbench.config.validate import config_notes

    assert config_notes(resolved("timer.target_width=0.012")) == []
    assert config_notes(resolved("timer.target_width=0.001")) == []  # refused, with its own Fix
    (note,) = config_notes(resolved("timer.target_width=0.01"))
    assert note.startswith("timer.target_width=0.01 is below the narrowest interval a row can have (0.0111")
    assert note.endswith("Fix: timer.target_width=0.012 or more.")


# -- rules: derived from the schema's field metadata -------------------------------------------------

def test_each_range_lives_on_its_field_and_its_default_is_the_fix():
    """A range set on a schema field is checked, with the field's default as the fix; the default
    itself passes (one place for a default, its range and its reason)."""
    import dataclasses
    import typing

    from zlbench.config.schema import ABConf, LocalLauncherConf, SlurmLauncherConf
    from zlbench.config.validate import RULES, problem, rule_of

    by_key = {r.key: r for r in RULES}
    slurm_only = {f"launcher.{f.name}" for f in dataclasses.fields(SlurmLauncherConf)} - \
        {f"launcher.{f.name}" for f in dataclasses.fields(LocalLauncherConf)}
    assert by_key["ab.respawn_every"].fix == "ab.respawn_every=1"  # ABConf.respawn_every's default
    assert by_key["launcher.tasks"].valid == "an integer >= 1"  # a Slurm-only setting is covered too
    for r in RULES:
        if r.key in by_key and (r.key.split(".")[0] != "timer" or r.key in STAYING_TIMER_KEYS):
            validate_config(resolved(*(["launcher=slurm"] if r.key in slurm_only else []), r.fix))
    # A field given a range gets its rule, worded from the metadata.
    hints = typing.get_type_hints(ABConf)
    field = dataclasses.field(default=10, metadata={"ge": 3, "le": 7, "why": "a test"})
    rule = rule_of("ab.rounds", field, hints["rounds"])
    assert (rule.valid, rule.fix) == ("an integer from 3 to 7 (a test)", "ab.rounds=10")
    assert problem(rule, 8) == "ab.rounds=8 is not valid: it must be an integer from 3 to 7 (a test). Fix: ab.rounds=10."
    assert problem(rule, 5) is None and problem(rule, 5.0) is not None and problem(rule, True) is not None


STAYING_TIMER_KEYS = ("timer.repeat", "timer.warmup_ms", "timer.rep_ms", "timer.min_window_ms", "timer.processes")


def test_a_bad_respawn_period_suggests_the_default():
    with pytest.raises(UsageError, match=r"ab.respawn_every=-1 is not valid: it must be an integer >= 0 "
                                         r"\(0: never\)\. Fix: ab.respawn_every=1\."):
        validate_config(resolved("ab.respawn_every=-1"))


def test_a_near_miss_is_fixed_to_the_setting_and_choice_it_resembles():
    """ab.value=[0,1] was offered 'one of ab.values=[0,1], ab.var=[0,1]' (ab.var takes no list),
    ab.valu=1 ab.var=1 (values is much the closer), and ab.schedule=rounds the default
    ab.schedule=node rather than the choice it misspells."""
    from zlbench.config.keys import key_problem
    from zlbench.config.value_types import type_problem

    assert key_problem("ab.value", "[0,1]").endswith("Fix: ab.values=[0,1].")
    assert key_problem("ab.value", "1").endswith("Fix: ab.values=[1].")  # much the closer; a list in brackets
    assert key_problem("ab.valu", "1").endswith("Fix: ab.values=[1].")
    assert key_problem("ab.vr", "X").endswith("Fix: ab.var=X.")
    assert type_problem("ab.schedule", ["rounds"]).endswith("Fix: ab.schedule=round.")
    assert type_problem("ab.schedule", ["xyz"]).endswith("Fix: ab.schedule=node.")  # nothing close: the default


def test_a_near_miss_above_a_mapping_keeps_the_entry_it_names():
    """corpus.envv.X=1 was fixed to corpus.env=1, which is itself refused (corpus.env takes a mapping):
    the fix keeps the entry, corpus.env.X=1; a near miss of a value setting does not grow one."""
    from zlbench.config.keys import key_problem

    assert key_problem("corpus.envv.X", "1").endswith("Fix: corpus.env.X=1.")
    assert key_problem("ab.fixd.TRITON_X", "1").endswith("Fix: ab.fixed.TRITON_X=1.")
    assert key_problem("launcher.node_timeout.x", "1").endswith("Fix: launcher.node_timeout_s=1.")


@pytest.mark.parametrize("overrides,noted", [
    (["ab=musa_rlc", "backend=cpu"], True),  # a FlagTree switch on a backend that runs no Triton kernel
    (["ab=triton_fp_fusion", "backend=cpu"], True),
    (["ab=musa_rlc", "backend=musa"], False),
    (["ab=demo_fused_softmax", "backend=cpu"], False),  # the demo corpus reads its switch on the CPU
    (["ab=env", "ab.var=TRITON_INTERPRET", "backend=cpu"], False),  # Triton's interpreter runs kernels on the CPU
])
def test_a_compiler_switch_on_the_cpu_gets_a_note(overrides, noted):
    from zlbench.config.validate import config_notes

    notes = [n for n in config_notes(resolved(*overrides)) if "runs no Triton kernel" in n]
    assert bool(notes) == noted, notes
