import copy
import json
from pathlib import Path

from zlbench.backends import get_backend
from zlbench.backends.base import DeviceInfo
from zlbench.planning.identity import build_identity
from zlbench.planning.plan import make_plan

from .conftest import FIXTURES
from .test_plan import cfg

MINI = FIXTURES / "mini_corpus"


def identity_of(config, tmp_path, environ=None, backend="cpu"):
    b = get_backend(backend)
    plan = make_plan(config, b, [DeviceInfo(0, "dev0")], MINI, tmp_path)
    return build_identity(config, plan, b, {"env": {}}, environ or {})


def test_same_caliber_same_identity(tmp_path):
    assert identity_of(cfg(), tmp_path)["identity_hash"] == identity_of(cfg(), tmp_path)["identity_hash"]


def test_differing_calibers_have_different_identities(tmp_path):
    base = identity_of(cfg(), tmp_path)["identity_hash"]
    variants = [
        cfg(timer={"repeat": 3}),
        cfg(timer={"name": "direct"}),
        cfg(shape={"level": "comprehensive"}),
        cfg(autotune=True),
        cfg(isolate_caches=False),
        cfg(ops=["exp"]),
        cfg(dtypes=["float16"]),
        cfg(backend={"capture_deny_ops": ["fft"]}),
    ]
    hashes = {identity_of(v, tmp_path)["identity_hash"] for v in variants}
    assert base not in hashes and len(hashes) == len(variants)
    assert identity_of(cfg(), tmp_path, {"FLAGTREE_RLC_ENHANCE": "1"})["identity_hash"] != base


def test_identity_records_what_the_run_found(tmp_path):
    ident = identity_of(cfg(timer={"repeat": 3}), tmp_path, {"USE_FLAGTUNE": "0", "FLAGTREE_X": "1", "HOME": "/r"})
    assert ident["timer"] == {"name": "host", "repeat": 3, "warmup_ms": None, "rep_ms": None}
    assert ident["devices"] == [{"index": 0, "name": "dev0", "bus_id": "", "driver": ""}]
    assert "benchmark/test_fft.py::test_perf_fft" in ident["test_nodes"]
    # USE_FLAGTUNE: every process gets it from `autotune` (recorded above), not from the shell.
    assert ident["switch_env"] == {"FLAGTREE_X": "1"}
    assert ident["versions"]["torch"] and ident["versions"]["zlbench"]
    assert ident["autotune"] == "0"


def test_the_old_runners_variables_and_the_corpus_location_are_not_switches(tmp_path):
    # zlbench reads them into its config (recorded there); a run started with ZL_BACKEND=cpu and its
    # resume with backend=cpu are one run, wherever FLAGGEMS_ROOT points.
    base = identity_of(cfg(), tmp_path)
    old = identity_of(cfg(), tmp_path, {"ZL_BACKEND": "cpu", "ZL_ENABLE_CUDAGRAPH": "0", "ZL_DIRECT_REPEAT": "1",
                                        "ZL_ISOLATE_TUNER_CACHE": "1", "FLAGGEMS_ROOT": "/x/FlagGems"})
    assert old["switch_env"] == {} and old["identity_hash"] == base["identity_hash"]
    # Other ZL_ and FLAGGEMS_ variables still are (a corpus' own switch, FlagGems' settings).
    assert identity_of(cfg(), tmp_path, {"ZL_FIXTURE_SWITCH": "1", "FLAGGEMS_DB_URL": "x"})["switch_env"] == {
        "FLAGGEMS_DB_URL": "x", "ZL_FIXTURE_SWITCH": "1"}


def test_progress_and_resume_settings_are_not_caliber(tmp_path):
    a = identity_of(cfg(progress="plain", resume=None), tmp_path)["identity_hash"]
    b = identity_of(cfg(progress="none", resume="/somewhere"), tmp_path)["identity_hash"]
    assert a == b
    # what the corpus' --dtypes takes checks input: a run made before the setting resumes and goes on
    taken = identity_of(cfg(corpus={"dtypes_taken": ["float16", "int32"]}), tmp_path)
    assert taken["identity_hash"] == a and "dtypes_taken" not in taken["config"]["corpus"]


def test_switches_read_inside_compiled_libraries_and_named_ones_enter_the_hash(tmp_path):
    base = identity_of(cfg(), tmp_path)["identity_hash"]
    for backend in ("cpu", "cuda", "rocm", "musa", "ascend"):
        ident = identity_of(cfg(), tmp_path, {"DISABLE_LLVM_OPT": "1", "MLIR_ENABLE_DUMP": "1", "HOME": "/r"}, backend)
        assert {"DISABLE_LLVM_OPT", "MLIR_ENABLE_DUMP"} <= set(ident["switch_env"]), backend
        assert "HOME" not in ident["switch_env"]
    assert identity_of(cfg(), tmp_path, {"LLVM_IR_ENABLE_DUMP": "1"})["identity_hash"] != base
    # A variable the user names (identity.env) is recorded; naming an unset one changes nothing.
    named = cfg(identity={"env": ["MY_SWITCH"]})
    assert identity_of(named, tmp_path)["identity_hash"] == base
    assert identity_of(named, tmp_path, {"MY_SWITCH": "1"})["switch_env"] == {"MY_SWITCH": "1"}
    assert identity_of(cfg(), tmp_path, {"MY_SWITCH": "1"})["switch_env"] == {}
    # The A/B axis variable is recorded as each side sets it; the shell's value reaches no process.
    ab = {"name": "x", "var": "MY_AXIS", "values": [0, 1], "sides": ["off", "on"]}
    with_shell = identity_of(cfg(ab=ab), tmp_path, {"MY_AXIS": "0"})
    assert with_shell["switch_env"] == {} and with_shell["sides"] == {"off": {"MY_AXIS": "0"}, "on": {"MY_AXIS": "1"}}
    assert with_shell["identity_hash"] == identity_of(cfg(ab=ab), tmp_path)["identity_hash"]


def test_a_shipped_axis_switch_set_in_the_shell_is_recorded(tmp_path):
    # The demo's switch (conf/ab/demo_fused_softmax.yaml) exported for a plain run: it changes
    # what gems_softmax computes, so two runs with and without it are two calibers (a resume of
    # one without it is refused, and history can name the change).
    base = identity_of(cfg(), tmp_path)
    fused = identity_of(cfg(), tmp_path, {"DEMO_GEMS_FUSED_SOFTMAX": "1"})
    assert fused["switch_env"] == {"DEMO_GEMS_FUSED_SOFTMAX": "1"}
    assert fused["identity_hash"] != base["identity_hash"]


def test_a_commit_comes_only_from_a_folder_that_is_its_own_git_top_level(tmp_path):
    import subprocess

    from zlbench._version_info import git_commit

    repo = tmp_path / "outer"
    (repo / "corpus" / "benchmark").mkdir(parents=True)
    (repo / "README").write_text("x\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "README"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    assert git_commit(repo) and len(git_commit(repo)) >= 40
    assert git_commit(repo / "corpus") is None
    assert git_commit(tmp_path) is None


def test_each_setting_is_stored_once_and_the_caliber_of_earlier_identities_is_kept(tmp_path):
    """The timer (as resolved) and autotune (as USE_FLAGTUNE) are recorded at the top only; an
    identity written when they were also under "config" has the same caliber (one history series)."""
    from zlbench.planning.identity import identity_hash
    from zlbench.store.ingest import caliber_of

    ident = identity_of(cfg(timer={"repeat": 3}, autotune=True), tmp_path)
    assert "timer" not in ident["config"] and "autotune" not in ident["config"]
    assert ident["timer"]["repeat"] == 3 and ident["autotune"] == "1"
    earlier = {**ident, "config": {**ident["config"], "timer": ident["timer"], "autotune": True}}
    assert caliber_of(earlier) == caliber_of(ident)
    assert identity_hash(earlier) == identity_hash(ident) == ident["identity_hash"]  # such a run resumes
    assert caliber_of(identity_of(cfg(timer={"repeat": 2}, autotune=True), tmp_path)) != caliber_of(ident)
    assert caliber_of(identity_of(cfg(timer={"repeat": 3}), tmp_path)) != caliber_of(ident)


def test_an_identity_written_before_max_processes_reads_as_made_at_its_defaults(tmp_path):
    """timer.max_processes, timer.target_width and timer.more_budget came later: a run made before
    reads as made at their defaults (it resumes, its series goes on); one made at other values is
    another caliber."""
    from zlbench.planning.identity import identity_hash
    from zlbench.store.ingest import caliber_of

    added = ("max_processes", "target_width", "more_budget")
    ident = identity_of(cfg(timer={"processes": 3, "max_processes": None, "target_width": 0.02, "more_budget": 0.5}),
                        tmp_path)
    before = {**ident, "timer": {k: v for k, v in ident["timer"].items() if k not in added}}
    assert identity_hash(before) == ident["identity_hash"] and caliber_of(before) == caliber_of(ident)
    other = identity_of(cfg(timer={"processes": 3, "max_processes": 3, "target_width": 0.02}), tmp_path)
    assert other["identity_hash"] != ident["identity_hash"]
    thrifty = identity_of(cfg(timer={"processes": 3, "more_budget": 0.2}), tmp_path)
    assert thrifty["identity_hash"] != ident["identity_hash"]


def test_a_stored_caliber_of_a_run_made_before_the_settings_added_since_stays_what_it_was():
    """An H200 run's identity as zlbench wrote it before timer.max_processes (b21069e), with the
    hash and caliber that code gave it: its hash the same today, and hash and caliber the same for a
    run made now at the new settings' defaults; another value is another caliber. (Its stored caliber
    kept the corpus' root, /work/main/.fg: store revision 0005 computes it again without.)"""
    from zlbench.planning.identity import identity_hash
    from zlbench.store.ingest import caliber_of

    before = json.loads((Path(__file__).parent / "data" / "identity_before_max_processes.json").read_text())
    ident = before["identity"]
    assert "max_processes" not in ident["timer"]
    caliber = caliber_of(ident)
    assert identity_hash(ident) == before["identity_hash"] and caliber != before["caliber"]
    elsewhere = copy.deepcopy(ident)
    elsewhere["config"]["corpus"]["root"] = "/ci/pr/FlagGems"
    assert caliber_of(elsewhere) == caliber
    now = copy.deepcopy(ident)
    now["timer"].update(max_processes=None, target_width=0.02, more_budget=0.5)
    assert (identity_hash(now), caliber_of(now)) == (before["identity_hash"], caliber)
    now["timer"]["more_budget"] = 0.25
    assert caliber_of(now) != caliber


def test_the_shells_value_of_a_variable_every_process_gets_from_the_plan_is_not_recorded(tmp_path):
    # A plain run's processes tune afresh (TRITON_CACHE_AUTOTUNING=0 in each) whatever the shell
    # says, so the shell's value must not tell two runs apart; one process keeps the shell's.
    shell = {"TRITON_CACHE_AUTOTUNING": "1"}
    three = cfg(timer={"processes": 3})
    assert identity_of(three, tmp_path, shell)["identity_hash"] == identity_of(three, tmp_path)["identity_hash"]
    assert "TRITON_CACHE_AUTOTUNING" not in identity_of(three, tmp_path, shell)["switch_env"]
    one = cfg(timer={"processes": 1})
    assert identity_of(one, tmp_path, shell)["switch_env"] == shell
    # Named (identity.env) or not, a value no process saw is not recorded; corpus.env's is, in the config.
    named = cfg(timer={"processes": 3}, identity={"env": ["TRITON_CACHE_AUTOTUNING"]})
    assert identity_of(named, tmp_path, shell)["switch_env"] == {}
    pinned = cfg(timer={"processes": 1}, corpus=cfg()["corpus"] | {"env": {"FLAGTREE_X": "1"}})
    ident = identity_of(pinned, tmp_path, {"FLAGTREE_X": "0"})
    assert ident["switch_env"] == {} and ident["config"]["corpus"]["env"] == {"FLAGTREE_X": "1"}


def test_a_shape_file_enters_the_identity_by_its_content(tmp_path):
    """shape.file entered the caliber by its path only: a run whose shape file was edited resumed as
    the same caliber, and its rows mixed two shape lists."""
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("exp:\n  shapes: [[64, 64]]\n")
    config = cfg(shape={"mode": "file", "file": str(shapes)})
    first = identity_of(config, tmp_path)
    assert first["shape_file"]["path"] == str(shapes.resolve()) and len(first["shape_file"]["sha256"]) == 64
    assert identity_of(config, tmp_path)["identity_hash"] == first["identity_hash"]
    shapes.write_text("exp:\n  shapes: [[64, 64], [128, 128]]\n")
    assert identity_of(config, tmp_path)["identity_hash"] != first["identity_hash"]
    assert "shape_file" not in identity_of(cfg(), tmp_path)  # upstream shapes: as before


def test_a_resume_after_its_shape_file_was_edited_says_so(tmp_path):
    """The refusal names the file and what to do; its usual Fix (the same overrides) would fail again."""
    import pytest

    from zlbench.engine.run import check_resume
    from zlbench.errors import UsageError

    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("exp:\n  shapes: [[64, 64]]\n")
    config = cfg(shape={"mode": "file", "file": str(shapes)})
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run_identity.json").write_text(json.dumps(identity_of(config, tmp_path)))
    assert check_resume(run_dir, identity_of(config, tmp_path)) is True
    shapes.write_text("exp:\n  shapes: [[128, 128]]\n")
    with pytest.raises(UsageError, match=r"was measured with another content of its shape file .*shapes.yaml "
                                         r"\(sha256 \w{12} then, \w{12} now\).*Fix: restore the file as it was"):
        check_resume(run_dir, identity_of(config, tmp_path))
