import subprocess
import sys

import pytest

from zlbench.config.command_line import normalize_argv
from zlbench.errors import UsageError
from .conftest import DATA, FIXTURES


def test_old_env_vars_choose_defaults():
    argv, prov = normalize_argv([], {
        "ZL_BACKEND": "MThreads", "ZL_ENABLE_CUDAGRAPH": "0", "ZL_DIRECT_REPEAT": "5",
        "BENCH_LEVEL": "core", "SHAPE_MODE": "upstream", "OP": "fft,exp", "USE_FLAGTUNE": "1",
        "ZL_ISOLATE_TUNER_CACHE": "1",
    })
    assert "backend=musa" in argv
    assert "timer=direct" in argv
    assert "timer.repeat=5" in argv
    assert "ops=[fft,exp]" in argv
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


def test_op_with_op_file_env_is_one_selection_of_both():
    argv, _ = normalize_argv([], {"OP": "fft", "OP_FILE": "test_fft.py"})
    assert [a for a in argv if a.split("=")[0] in ("ops", "op_file", "test_node")] == [
        "ops=[fft]", "op_file='test_fft.py'"]


def test_op_within_op_file_from_the_old_env_runs_only_that_files_tests(run_zlbench):
    corpus = ["corpus=flaggems", f"corpus.root={FIXTURES / 'mini_corpus'}", "dry_run=true"]
    res = run_zlbench(*corpus, env={"OP": "exp", "OP_FILE": "test_module_mark.py"})
    assert res.returncode == 0, res.stderr
    assert "nodes (1):\n  exp" in res.stdout and "benchmark/test_module_mark.py::test_perf_exp_out\n" in res.stdout
    res = run_zlbench(*corpus, env={"OP": "fft", "OP_FILE": "test_module_mark.py"})
    assert res.returncode == 2
    assert "zlbench: error: op 'fft' has no test in benchmark/test_module_mark.py; its ops: exp." in res.stderr


def test_backend_aliases_are_normalized_in_sweeps():
    argv, _ = normalize_argv(["-m", "backend=NVIDIA,cpu"], {})
    assert argv == ["-m", "backend=cuda,cpu"]


def test_unknown_backend_fails_before_anything_runs():
    with pytest.raises(UsageError, match="unknown backend 'tpu'") as e:
        normalize_argv(["backend=tpu"], {})
    # its Fix works on any machine (a CPU-only one too), not an example of one vendor
    assert "Fix: backend=<name>, or backend=auto (the first vendor with a device here, else the CPU)" in str(e.value)
    with pytest.raises(UsageError, match="unknown backend"):
        normalize_argv([], {"ZL_BACKEND": "bogus"})


@pytest.mark.parametrize("name,value,needle", [
    ("ZL_ENABLE_CUDAGRAPH", "maybe", "is not a boolean"),
    ("ZL_BACKEND", "bogus", "unknown backend 'bogus'"),
    ("BENCH_LEVEL", "huge", "is not one of core, comprehensive"),
    ("SHAPE_MODE", "random", "is not one of upstream, file"),
    ("ZL_DIRECT_REPEAT", "0", "is not an integer >= 1"),
    ("ZL_DIRECT_REPEAT", "x", "is not an integer >= 1"),
])
def test_bad_env_value_names_the_variable(name, value, needle):
    with pytest.raises(UsageError) as e:
        normalize_argv([], {name: value})
    assert str(e.value).startswith(f"environment variable {name}={value!r}")
    assert needle in str(e.value) and "Fix: set " in str(e.value)


@pytest.mark.parametrize("value,fix", [
    ("[exp", "'[exp' is not an op mark or pattern. Fix: OP=exp (op marks or patterns, comma-separated), "
             "or unset OP and pass ops=[...]."),
    ("exp softmax", "'exp softmax' is not an op mark or pattern. Fix: OP=exp,softmax "),
    ("'exp',*norm*", "\"'exp'\" is not an op mark or pattern. Fix: OP=exp,*norm* "),
    (",", "names no op. Fix: OP=exp (op marks, comma-separated), or unset OP to run every op."),
])
def test_an_op_env_value_that_names_no_mark_says_so_with_the_variable(value, fix):
    with pytest.raises(UsageError) as e:
        normalize_argv([], {"OP": value})
    assert str(e.value).startswith(f"environment variable OP={value!r}") and fix in str(e.value)
    # OP=exp, softmax (spaces, a trailing comma) is a list of marks; OP= (empty) selects every op.
    assert "ops=[exp,softmax]" in normalize_argv([], {"OP": "exp, softmax,"})[0]
    assert "ops=[]" in normalize_argv([], {"OP": ""})[0]
    # Patterns select as ops= does (ops=['*norm*']).
    assert "ops=[wait_0*,*norm*,'[ab]s']" in normalize_argv([], {"OP": "wait_0*,*norm*,[ab]s"})[0]
    # A command line that selects drops OP unread, as before.
    assert normalize_argv(["ops=[exp]"], {"OP": value})[1]["env_ignored"]["OP"].endswith("Fix: unset OP, or drop ops=.")


@pytest.mark.parametrize("env,message", [
    ({"ZL_BACKEND": "bogus"}, "zlbench: error: environment variable ZL_BACKEND='bogus': unknown backend 'bogus'."),
    ({"BENCH_LEVEL": "huge"}, "zlbench: error: environment variable BENCH_LEVEL='huge' is not one of core, "
                              "comprehensive. Fix: set it to one of them, e.g. BENCH_LEVEL=core, or unset it.\n"),
])
def test_a_bad_old_env_var_is_named_on_the_command_line(run_zlbench, env, message):
    res = run_zlbench("dry_run=true", env=env)
    assert res.returncode == 2 and message in res.stderr, res.stderr


@pytest.mark.parametrize("env,said", [
    ({"OP": "nosuch"}, "(ops=[nosuch] came from the environment variable OP='nosuch': fix it there, or unset OP "
                       "and pass ops=.)"),
    ({"OP_FILE": "test_nope.py"}, "(op_file='test_nope.py' came from the environment variable "
                                  "OP_FILE='test_nope.py': fix it there, or unset OP_FILE and pass op_file=.)"),
])
def test_a_selection_an_old_env_var_made_that_matches_nothing_names_the_variable(run_zlbench, env, said):
    """OP=nosuch was refused as "op 'nosuch' matches no test ... Fix: ops=[<op mark>]": a user who never
    typed ops= had nothing to go on."""
    res = run_zlbench("dry_run=true", env=env)
    assert res.returncode == 2 and said in res.stderr, res.stderr
    res = run_zlbench("ops=[nosuch]", "dry_run=true")
    assert res.returncode == 2 and "environment variable" not in res.stderr, res.stderr


def test_a_visibility_env_set_before_zlbench_restricts_its_device_pool(run_zlbench):
    smi = {"ZLBENCH_SMI_OUTPUT": str(DATA / "smi" / "nvidia-smi.txt")}
    res = run_zlbench("backend=cuda", "dry_run=true", env={**smi, "CUDA_VISIBLE_DEVICES": "1,3"})
    assert res.returncode == 0, res.stderr
    assert "devices: 1 (NVIDIA H200), 3 (NVIDIA H200)\n" in res.stdout
    res = run_zlbench("backend=cuda", "dry_run=true", env={**smi, "CUDA_VISIBLE_DEVICES": "9"})
    assert res.returncode == 2
    assert "CUDA_VISIBLE_DEVICES=9 was set before zlbench and hides every device here (0, 1, 2, 3)" in res.stderr


def test_placements_are_refused_as_removed(run_zlbench):
    res = run_zlbench("backend=cpu", "timer.placements=4", "dry_run=true")
    assert res.returncode == 2
    assert "zlbench: error: timer.placements was removed: timing at several memory placements" in res.stderr, res.stderr


@pytest.mark.parametrize("arg,needle", [
    ("timer.rep=5", "timer.rep is not a zlbench setting. The settings of timer are: name, repeat, warmup_ms,"),
    ("+timer.rep=5", "Fix: one of timer.repeat=5, timer.rep_ms=5."),
    ("+ab.foo=1", "ab.foo is not a zlbench setting. The settings of ab are: name, var, values,"),
    # Hydra would answer "To append to your config use +node_timeout_s=0", then refuse that too.
    ("node_timeout_s=0", "node_timeout_s is not a zlbench setting. The settings at the top level are: backend, "),
    ("node_timeout_s=0", "Fix: launcher.node_timeout_s=0."),
    ("launcher.wait=false", "launcher.wait is not a zlbench setting of launcher=local: only launcher=slurm has it. "
                            "Fix: launcher=slurm launcher.wait=false."),
])
def test_unknown_keys_are_refused_before_hydra_with_the_valid_ones(arg, needle):
    with pytest.raises(UsageError) as e:
        normalize_argv([arg], {})
    assert needle in str(e.value)


@pytest.mark.parametrize("argv", [
    ["launcher=slurm", "launcher.partition=gpu", "+corpus.env.X=1", "ab=env", "ab.var=X", "ab.fixed={A: 1}"],
    ["-m", "launcher=local,slurm", "launcher.wait=false"],  # a sweep over launchers: any of theirs
    # Hydra's own; a free dict's key (deleted once set: a delete of an entry not set is refused)
    ["hydra.run.dir=x", "hydra/job_logging=disabled", "+corpus.env.X=1", "~corpus.env.X"],
])
def test_known_keys_hydras_own_and_free_dict_keys_pass(argv):
    normalize_argv(argv, {})


def test_gpus_together_with_devices_is_refused():
    with pytest.raises(UsageError, match=r"gpus= and devices= both select devices .* Fix: keep one"):
        normalize_argv(["gpus=[0]", "devices=[1]"], {})
    normalize_argv(["gpus=[0]"], {})


@pytest.mark.parametrize("arg", ["store.url=postgresql://user:password@host/db",
                                 "corpus.env.FLAGGEMS_DB_URL=postgresql://u:pw@h:5432/tuner"])
def test_a_password_on_the_command_line_is_refused_with_the_ways_to_give_it(arg):
    with pytest.raises(UsageError) as e:
        normalize_argv([arg], {})
    message = str(e.value)
    assert "holds a password" in message and "password@" not in message and ":pw@" not in message
    assert "~/.pgpass" in message and "libpq service file" in message and "ZLBENCH_STORE_URL" in message
    normalize_argv(["store.url=postgresql://user@host/db"], {})  # the password elsewhere: fine


def test_home_in_a_value_is_expanded_before_hydra_reads_it(monkeypatch):
    from zlbench.config.command_line import expand_home

    monkeypatch.setenv("HOME", "/home/me")
    assert expand_home("corpus.root=~/FlagGems") == "corpus.root=/home/me/FlagGems"
    assert expand_home("corpus.pythonpath=[src,~/x,~]") == "corpus.pythonpath=[src,/home/me/x,/home/me]"
    assert expand_home("corpus.root='~/quoted'") == "corpus.root='~/quoted'"  # Hydra reads it; kept
    assert expand_home("ops=[a~b]") == "ops=[a~b]"
    monkeypatch.setenv("HOME", "/home/a b")
    assert expand_home("corpus.root=~/F") == "corpus.root='/home/a b/F'"


def test_env_selection_the_command_line_overrides_is_named():
    argv, prov = normalize_argv(["ops=[exp]"], {"OP": "softmax", "OP_FILE": "test_norm_perf.py"})
    assert [a for a in argv if a.split("=")[0] in ("ops", "op_file")] == ["ops=[exp]"]
    assert prov["env_ignored"] == {
        "OP": "environment variable OP='softmax' is ignored: the command line gives ops=[exp]. "
              "Fix: unset OP, or drop ops=.",
        "OP_FILE": "environment variable OP_FILE='test_norm_perf.py' is ignored: the command line gives "
                   "ops=[exp]. Fix: unset OP_FILE, or drop ops=.",
    }
    _, prov = normalize_argv([], {"TEST_NODE": "benchmark/a.py::t", "OP": "exp"})
    assert prov["env_ignored"] == {"OP": "environment variable OP='exp' is ignored: "
                                         "TEST_NODE='benchmark/a.py::t' selects one test. Fix: unset OP or TEST_NODE."}


def test_a_dropped_env_selection_is_said_on_the_terminal(run_zlbench):
    res = run_zlbench("ops=[exp]", "dry_run=true", env={"OP": "softmax"})
    assert res.returncode == 0, res.stderr
    assert ("zlbench: note: environment variable OP='softmax' is ignored: the command line gives ops=[exp]. "
            "Fix: unset OP, or drop ops=.") in res.stderr
    assert "nodes (1):\n  exp " in res.stdout


def test_shell_completion_installs_for_the_zlbench_script(tmp_path):
    """Hydra's completion takes words of its own (install=bash): they are not overrides to refuse."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "zlbench", "-sc", "install=bash"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "hydra_bash_completion" in res.stdout


def test_a_dry_run_piped_into_a_reader_that_stops_early_is_no_error(tmp_path):
    """`dry_run=true | head`: the reader closing the pipe is not a zlbench bug (was exit 70 and a
    run dir left with zlbench.log)."""
    import subprocess
    import sys

    res = subprocess.run(f"'{sys.executable}' -m zlbench dry_run=true 'ops=[exp,softmax]' | true; "
                         "exit ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", cwd=tmp_path,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "internal error" not in res.stderr and not (tmp_path / "zl_runs").exists()


@pytest.mark.parametrize("argv, fix", [
    (["history", "compare", "--fail-on", "slowr", "a", "b"], "Fix: --fail-on slower, not --fail-on slowr; "
                                                              "see `zlbench history compare --help`."),
    (["summary", "--thresold", "3", "run"], "Fix: --threshold, not --thresold; see `zlbench summary --help`."),
    (["history", "lst"], "Fix: list, not lst; see `zlbench history --help`."),
    # an option the verb's parser left over is reported by history's: the verb's options are searched
    (["history", "--url", "x.db", "compare", "1", "2", "--thresold", "0.1"],
     "Fix: --threshold, not --thresold; see `zlbench history compare --help`."),
    (["collect"], "Fix: see `zlbench collect --help`."),
    (["history", "--ulr", "x.db", "compare", "1", "2"], "Fix: --url, not --ulr; see `zlbench history compare --help`."),
    (["summary", "a", "b"], "Fix: a second run is paired with --ab: zlbench summary A --ab B; see `zlbench summary --help`."),
    (["summary", "a", "--json"], "Fix: see `zlbench summary --help`."),  # no --ab hint for an unknown option
    (["history", "regressions", "--k", "1"], "Fix: -k, not --k; see `zlbench history regressions --help`."),
    (["history", "--url", "x.db", "--all", "compare", "1", "2"],
     "Fix: --all is an option of compare: give it after the verb (zlbench history compare ... --all ...); "
     "see `zlbench history compare --help`."),
])
def test_a_verbs_bad_argument_is_one_line_naming_what_was_meant(argv, fix):
    """argparse printed its usage block and left the typo to the reader; every other usage error is
    one line 'zlbench: error: ... Fix: ...', exit 2."""
    res = subprocess.run([sys.executable, "-m", "zlbench", *argv], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("zlbench: error: zlbench ") and res.stderr.rstrip().endswith(fix), res.stderr


def test_ctrl_c_after_a_run_ended_says_its_tables_are_complete(monkeypatch, capsys, tmp_path):
    """A Ctrl-C landing after the run's own handling ended (the run returned) exited 130 with nothing
    said, or a bare traceback; it now names the run, its code, and that its tables are complete."""
    import zlbench.__main__ as entry

    def run_then_ctrl_c():
        entry._jobs.append(("(defaults)", str(tmp_path / "run"), 0))
        raise KeyboardInterrupt

    monkeypatch.setattr(entry, "_app", run_then_ctrl_c)
    monkeypatch.setattr(entry, "let_readers_leave", lambda: None)
    monkeypatch.setattr(sys, "argv", ["zlbench", f"hydra.run.dir={tmp_path / 'run'}"])
    with pytest.raises(SystemExit) as e:
        entry.main()
    err = capsys.readouterr().err
    assert e.value.code == 130 and f"zlbench: error: interrupted after the run ended: {tmp_path / 'run'} " \
        "(exit 0); their tables are complete" in err, err
    # between a sweep's jobs: the later jobs did not run, and it says so
    monkeypatch.setattr(sys, "argv", ["zlbench", "-m", f"hydra.sweep.dir={tmp_path / 'sweep'}", "ops=[exp],[abs]"])
    with pytest.raises(SystemExit) as e:
        entry.main()
    err = capsys.readouterr().err
    assert e.value.code == 130 and "interrupted after job(s) of the sweep ended" in err and \
        "the sweep's later jobs did not run: run them again (into a new hydra.sweep.dir" in err, err


def test_collect_of_a_path_that_is_no_run_dir_names_summary_for_a_log(tmp_path):
    """collect of a lone result log suggested `collect <its folder>`, which failed in turn; /dev/null
    or a pipe ended in a traceback."""
    log = tmp_path / "result_x.log"
    log.write_text("x\n")
    for path in (log, "/dev/null"):
        res = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(path)], capture_output=True, text=True)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.strip().endswith(f"Fix: pass a run dir; a result log is read with `zlbench summary {path}`."), \
            res.stderr
