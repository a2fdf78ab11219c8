from pathlib import Path

import pytest

from zlbench.planning.corpus import Corpus, check_shape_file
from zlbench.errors import UsageError

from .conftest import FIXTURES

MINI = FIXTURES / "mini_corpus"


def test_static_scan_finds_nodes_and_op_marks_without_importing():
    c = Corpus(MINI)
    by_id = {n.nodeid: n for n in c.nodes}
    assert by_id["benchmark/test_fft.py::test_perf_fft"].op == "fft"  # skipif is builtin, not the op
    assert by_id["benchmark/test_unary_pointwise_perf.py::test_perf_abs"].op == "abs"
    assert by_id["benchmark/test_unary_pointwise_perf.py::TestTopk::test_perf_topk"].op == "topk"
    assert by_id["benchmark/test_module_mark.py::test_perf_exp_out"].op == "exp"  # module pytestmark


def test_select_by_ops_file_and_node():
    c = Corpus(MINI)
    assert {n.nodeid for n in c.select(ops=["exp"])} == {
        "benchmark/test_unary_pointwise_perf.py::test_perf_exp",
        "benchmark/test_module_mark.py::test_perf_exp_out",
    }
    assert [n.op for n in c.select(op_file="test_fft.py")] == ["fft", "fft"]
    assert c.select(test_node="benchmark/test_fft.py::test_perf_fft")[0].op == "fft"
    assert c.select(test_node="test_fft.py::test_perf_fft")[0].op == "fft"


@pytest.mark.parametrize("kwargs,needle", [
    ({"ops": ["ffft"]}, "Close matches: fft"),
    ({"op_file": "test_fftt.py"}, "Close matches: test_fft.py"),
    ({"test_node": "benchmark/test_fft.py::test_perf_ffft"}, "benchmark/test_fft.py::test_perf_fft"),
])
def test_names_that_resolve_to_nothing_name_close_matches(kwargs, needle):
    with pytest.raises(UsageError) as e:
        Corpus(MINI).select(**kwargs)
    assert needle in str(e.value)


def test_the_fix_of_a_name_that_resolves_to_nothing_gives_an_example_of_this_corpus():
    import zlbench

    demo = Path(zlbench.__file__).parent / "demo_corpus"
    for kwargs, example in (({"op_file": "nope.py"}, "e.g. op_file=test_blas_perf.py."),
                            ({"test_node": "nope"}, "e.g. benchmark/test_blas_perf.py::test_perf_mm.")):
        with pytest.raises(UsageError) as e:
            Corpus(demo).select(**kwargs)
        assert str(e.value).endswith(example) and "test_fft" not in str(e.value)


def test_test_node_with_another_selection_is_an_error():
    for other in ({"ops": ["exp"]}, {"op_file": "test_fft.py"}):
        with pytest.raises(UsageError, match="choose one selection, not test_node and"):
            Corpus(MINI).select(test_node="benchmark/test_fft.py::test_perf_fft", **other)


def test_ops_with_op_file_select_the_ops_tests_in_that_file_only():
    c = Corpus(MINI)
    assert [n.nodeid for n in c.select(ops=["exp"], op_file="test_module_mark.py")] == [
        "benchmark/test_module_mark.py::test_perf_exp_out"]
    assert [n.nodeid for n in c.select(ops=["*xp"], op_file="test_unary_pointwise_perf.py")] == [
        "benchmark/test_unary_pointwise_perf.py::test_perf_exp"]
    with pytest.raises(UsageError) as e:
        c.select(ops=["fft"], op_file="test_unary_pointwise_perf.py")
    assert str(e.value) == (
        "op 'fft' has no test in benchmark/test_unary_pointwise_perf.py; its ops: abs, exp, topk. "
        "Fix: ops=[<one of them>], or drop op_file=test_unary_pointwise_perf.py to find 'fft' in every file.")


def test_missing_benchmark_folder_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="no 'benchmark/' folder"):
        Corpus(tmp_path)


def test_an_empty_benchmark_folder_is_named_as_such(tmp_path):
    # it read "its op marks are ." (a review)
    (tmp_path / "benchmark").mkdir()
    with pytest.raises(UsageError, match=r"matches no test in .*: it holds no test at all .*Fix: corpus.root="):
        Corpus(tmp_path).select(ops=["exp"])


def test_shape_file_validation(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("exp:\n  shapes: [[64, 64], [128, 128]]\n")
    assert check_shape_file(str(good)) == good
    bad = tmp_path / "bad.yaml"
    bad.write_text("exp:\n  shapes: 64\n")
    with pytest.raises(UsageError, match="entry 'exp' needs a list"):
        check_shape_file(str(bad))
    broken = tmp_path / "broken.yaml"
    broken.write_text("exp: [unclosed\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        check_shape_file(str(broken))
    with pytest.raises(UsageError, match="does not exist"):
        check_shape_file(str(tmp_path / "nope.yaml"))


def write(path, text):
    path.write_text(text)
    return str(path)


def test_shape_file_negative_dimension_names_file_line_op_and_fix(tmp_path):
    path = write(tmp_path / "shapes.yaml", "exp:\n  shapes:\n    - [64, 64]\n    - [64, -1]\n")
    with pytest.raises(UsageError) as e:
        check_shape_file(path)
    assert str(e.value) == (f"shape file {path}:4: op 'exp': shape [64, -1] has a negative dimension (-1). "
                            "Fix: give every dimension as an integer >= 0, or delete that shape.")


def test_shape_file_op_typo_is_refused_with_a_suggestion(tmp_path):
    path = write(tmp_path / "shapes.yaml", "fft:\n  shapes: [[8]]\nexpp:\n  shapes: [[64, 64]]\n")
    known = Corpus(MINI).shape_names()
    with pytest.raises(UsageError) as e:
        check_shape_file(path, known)
    assert str(e.value).startswith(f"shape file {path}:3: 'expp' is neither an op of the corpus nor a "
                                   "Benchmark class name (did you mean exp?). Fix: ")
    check_shape_file(path)  # without the corpus' ops, names are not checked


def test_shape_file_unknown_key_and_every_problem_in_one_message(tmp_path):
    path = write(tmp_path / "shapes.yaml",
                 "exp:\n  shape: [[64]]\n  shapes: [[64]]\nabs:\n  shapes: [[-2, 3], [4], [64x, 2]]\nfft: 3\n")
    with pytest.raises(UsageError) as e:
        check_shape_file(path, Corpus(MINI).shape_names())
    lines = str(e.value).splitlines()
    assert len(lines) == 4
    assert f"{path}:2: entry 'exp' has an unknown key 'shape' (did you mean shapes?)" in lines[0]
    assert f"{path}:5: op 'abs': shape [-2, 3] has a negative dimension (-2)" in lines[1]
    assert f"{path}:5: op 'abs': shape ['64x', 2] has a dimension that is not a number ('64x')" in lines[2]
    assert f"{path}:6: entry 'fft' needs a list `shapes` of lists" in lines[3]


def test_shape_file_yaml_error_names_the_line(tmp_path):
    path = write(tmp_path / "shapes.yaml", "exp:\n  shapes: [[64, 64]\nabs:\n  shapes: [[1]]\n")
    with pytest.raises(UsageError, match=r"shapes.yaml:3 is not valid YAML"):
        check_shape_file(path)


def test_shape_file_in_flaggems_own_forms_passes(tmp_path):
    """Anchors merged into other entries, class names, parameters beside shapes (dim, keepdim,
    flags), empty tensors and conv padding 0: all in FlagGems' own shape files."""
    path = write(tmp_path / "shapes.yaml", """\
single_dim_shapes: &single_dim_shapes
  shapes:
    - [64]
  shape_desc: "M"
exp:
  <<: *single_dim_shapes
abs:
  shapes:
    - [[32, 384, 128], -1, false]
    - [[1024, 64], mean]
    - [[268435456], [[65536]], [65536], False]
    - [0, 3584]
    - [256, 128, 8, true]
Conv2DBenchmark:
  shapes:
    - [104, 16, 32, 32, 32, 4, 4, 1, 0, 1]
""")
    check_shape_file(path, Corpus(MINI).shape_names())
    bad = write(tmp_path / "bad.yaml", "tmpl: &t\n  shapes: [[8, -8]]\nexp:\n  <<: *t\n")
    with pytest.raises(UsageError, match=r"bad.yaml:2: op 'tmpl': shape \[8, -8\] has a negative"):
        check_shape_file(bad, Corpus(MINI).shape_names())


def test_corpus_shape_names_include_benchmark_op_names_that_are_not_marks(tmp_path):
    (tmp_path / "benchmark").mkdir()
    (tmp_path / "benchmark" / "test_median.py").write_text(
        "import pytest\n\n@pytest.mark.median\n@pytest.mark.parametrize('x', [1])\ndef test_median_dim(x):\n"
        "    bench = GenericBenchmark(op_name='median_dim', torch_op=None)\n")
    assert Corpus(tmp_path).shape_names() == {"median", "median_dim"}


def test_op_patterns_select_by_glob():
    c = Corpus(MINI)
    assert {n.op for n in c.select(ops=["*xp"])} == {"exp"}
    assert {n.op for n in c.select(ops=["[ft]*"])} == {"fft", "topk"}


PARALLEL = "benchmark/test_blas_perf_parallel.py::test_blas_benchmark"


def test_marks_on_pytest_param_select_the_function_and_only_those_cases():
    c = Corpus(MINI)
    node = {n.nodeid: n for n in c.nodes}[PARALLEL]
    assert set(node.marks) >= {"addmm", "bmm", "mm"}
    (bmm,) = c.select(ops=["bmm"])
    assert (bmm.nodeid, bmm.op, bmm.only_marks) == (PARALLEL, "bmm", ("bmm",))
    (both,) = c.select(ops=["bmm", "mm"])  # one node, both cases
    assert both.only_marks == ("bmm", "mm")
    # Selected whole (no case filter) where the selection does not go through a case's mark.
    assert c.select(test_node=PARALLEL)[0].only_marks == ()
    assert {n.only_marks for n in c.select(op_file="test_blas_perf_parallel.py")} == {()}


@pytest.mark.parametrize("test_node,needles", [
    # a parametrize id copied from pytest: every case ran, and the id was dropped silently
    (PARALLEL + "[bmm]", ["names one case of " + PARALLEL, "ops=[<mark>] runs one", f"Fix: test_node='{PARALLEL}'"]),
    ("benchmark/test_fft.py::test_perf_fft[zzz]", ["names one case of benchmark/test_fft.py::test_perf_fft",
                                                   "Fix: test_node='benchmark/test_fft.py::test_perf_fft'"]),
])
def test_a_test_node_naming_one_case_is_refused_with_the_function(test_node, needles):
    with pytest.raises(UsageError) as e:
        Corpus(MINI).select(test_node=test_node)
    assert all(n in str(e.value) for n in needles), str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize("mark", ["bmm", "mm", "abs", "exp"])
def test_selection_finds_what_pytest_m_finds(mark):
    """pytest's own collection of the fixture corpus is the reference (no device needed there)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(MINI), "-c", str(MINI / "pytest.ini"), "-m", mark, str(MINI / "benchmark")],
                         capture_output=True, text=True, cwd=MINI)
    collected = {line.split("[")[0] for line in out.stdout.splitlines() if "::" in line}
    assert collected, out.stdout + out.stderr
    assert {n.nodeid for n in Corpus(MINI).select(ops=[mark])} == collected


@pytest.mark.slow
def test_a_run_of_a_case_mark_runs_only_those_cases_and_records_their_marks(run_zlbench):
    import json

    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={MINI}", "ops=[bmm]")
    assert res.returncode == 0, res.stderr[-2000:]
    starts = [json.loads(line) for p in (res.run_dir / "units").glob("*/events.jsonl")
              for line in p.read_text().splitlines() if '"start"' in line]
    starts = [e for e in starts if e["event"] == "start"]
    assert [(e["node"].split("::")[1], e["op"], e["marks"]) for e in starts] == [
        ("test_blas_benchmark[bmm-bmm]", "bmm", ["bmm"])]


@pytest.mark.slow
def test_a_run_says_when_an_op_mark_pulls_in_another_files_test(run_zlbench):
    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={MINI}", "ops=[abs]")
    assert res.returncode == 0, res.stderr[-2000:]
    assert ("[zlbench] note: op 'abs' matches tests in 2 files: benchmark/test_blas_perf_parallel.py, "
            "benchmark/test_unary_pointwise_perf.py\n") in res.stderr


def test_corpus_root_names_what_is_wrong_with_it(tmp_path):
    from zlbench.engine.run import corpus_root

    a_file = tmp_path / "FlagGems.tar"
    a_file.write_text("")
    with pytest.raises(UsageError, match=r"corpus.root=.*FlagGems.tar is a file, not a folder\. Fix:"):
        corpus_root({"corpus": {"name": "flaggems", "root": str(a_file)}})
    with pytest.raises(UsageError, match=r"corpus.root=.*nope does not exist\. Fix:"):
        corpus_root({"corpus": {"name": "flaggems", "root": str(tmp_path / "nope")}})
    # the fix says what a root is, and for the demo (which needs none) how to leave it out
    with pytest.raises(UsageError, match=r"Fix: corpus.root=PATH .*src/, benchmark/ and pytest.ini.*FLAGGEMS_ROOT"):
        corpus_root({"corpus": {"name": "flaggems", "root": str(tmp_path / "nope")}})
    with pytest.raises(UsageError, match=r"Fix: the demo corpus needs no root: drop corpus.root; for FlagGems, "
                                         r"corpus=flaggems corpus.root=PATH"):
        corpus_root({"corpus": {"name": "demo", "root": str(tmp_path / "nope")}})


def test_an_op_in_a_file_python_cannot_parse_is_said_so(tmp_path):
    """A syntax error in the op's file: "matches no test", with the file's name offered as an op mark."""
    import shutil

    root = tmp_path / "corpus"
    shutil.copytree(MINI, root)
    broken = root / "benchmark" / "test_fft.py"
    broken.write_text(broken.read_text() + "\ndef broken(:\n")
    with pytest.raises(UsageError) as e:
        Corpus(root).select(ops=["fft"])
    said = str(e.value)
    assert "op 'fft' matches no test in" in said and "1 test file(s) there cannot be parsed" in said, said
    assert "benchmark/test_fft.py (SyntaxError: " in said and "Fix: correct the file, or op_file=<it>" in said
    assert [n.op for n in Corpus(root).select(op_file="test_fft.py")] == ["test_fft"]  # still plannable
