import pytest

from zlbench.corpus import Corpus, check_shape_file
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


def test_two_selections_at_once_is_an_error():
    with pytest.raises(UsageError, match="choose one selection"):
        Corpus(MINI).select(ops=["exp"], op_file="test_fft.py")


def test_missing_benchmark_folder_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="no 'benchmark/' folder"):
        Corpus(tmp_path)


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


def test_op_patterns_select_by_glob():
    c = Corpus(MINI)
    assert {n.op for n in c.select(ops=["*xp"])} == {"exp"}
    assert {n.op for n in c.select(ops=["[ft]*"])} == {"fft", "topk"}
