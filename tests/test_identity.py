from zlbench.backends import get_backend
from zlbench.backends.base import DeviceInfo
from zlbench.identity import build_identity
from zlbench.plan import make_plan

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
    assert ident["switch_env"] == {"FLAGTREE_X": "1", "USE_FLAGTUNE": "0"}
    assert ident["versions"]["torch"] and ident["versions"]["zlbench"]
    assert ident["autotune"] == "0"


def test_progress_and_resume_settings_are_not_caliber(tmp_path):
    a = identity_of(cfg(progress="plain", resume=None), tmp_path)["identity_hash"]
    b = identity_of(cfg(progress="none", resume="/somewhere"), tmp_path)["identity_hash"]
    assert a == b
