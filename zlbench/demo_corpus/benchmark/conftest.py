"""Demo corpus conftest: FlagGems' benchmark/conftest.py conventions (options, op marks, record log)."""

import logging
import os

import pytest
import torch

from . import consts

recordLogger = logging.getLogger("flag_gems_benchmark")
recordLogger.propagate = False
Config = None

BUILTIN_MARKS = (
    "parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout",
    "tryfirst", "trylast",
)


def emit_record_logger(message: str) -> None:
    if Config is not None and Config.record_log:
        recordLogger.info(message)


class BenchConfig:
    def __init__(self):
        self.mode = consts.BenchMode.KERNEL
        self.bench_level = consts.BenchLevel.COMPREHENSIVE
        self.warm_up = consts.DEFAULT_WARMUP_TIME
        self.repetition = consts.DEFAULT_ITER_TIME
        self.record_log = False
        self.user_desired_dtypes = None
        self.user_desired_metrics = None
        self.shape_file = os.path.join(os.path.dirname(__file__), "core_shapes.yaml")
        self.query = False


def pytest_addoption(parser):
    parser.addoption("--mode", default="kernel", choices=[m.value for m in consts.BenchMode])
    parser.addoption("--level", default="comprehensive", choices=[lv.value for lv in consts.BenchLevel])
    parser.addoption("--warmup", default=consts.DEFAULT_WARMUP_TIME)
    parser.addoption("--iter", default=consts.DEFAULT_ITER_TIME)
    parser.addoption("--query", action="store_true", default=False)
    parser.addoption("--metrics", action="append", default=None, choices=consts.ALL_AVAILABLE_METRICS)
    parser.addoption(
        "--dtypes", action="append", default=None,
        choices=[str(d).split(".")[-1]
                 for d in consts.FLOAT_DTYPES + consts.INT_DTYPES + consts.BOOL_DTYPES + [torch.cfloat]],
    )
    parser.addoption(
        "--shape_file", default=os.path.join(os.path.dirname(__file__), "core_shapes.yaml")
    )
    parser.addoption("--record", default="none", choices=["none", "log", "json"])


def pytest_configure(config):
    global Config
    Config = BenchConfig()
    Config.mode = consts.BenchMode(config.getoption("--mode"))
    Config.bench_level = consts.BenchLevel(config.getoption("--level"))
    Config.warm_up = int(config.getoption("--warmup"))
    Config.repetition = int(config.getoption("--iter"))
    Config.query = config.getoption("--query")
    dtypes = config.getoption("--dtypes")
    Config.user_desired_dtypes = [getattr(torch, d) for d in dtypes] if dtypes else None
    Config.user_desired_metrics = config.getoption("--metrics")
    Config.shape_file = config.getoption("--shape_file")
    Config.record_log = config.getoption("--record") == "log"
    if Config.record_log:
        args = [
            a.replace(".py", "").replace("=", "_").replace("/", "_")
            for a in config.invocation_params.args
        ]
        log_file = "result_{}.log".format("_".join(args)).replace("_-", "-")[:200]
        for h in list(recordLogger.handlers):
            recordLogger.removeHandler(h)
            h.close()
        handler = logging.FileHandler(log_file, mode="w", encoding="utf-8")
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
        recordLogger.addHandler(handler)
        recordLogger.setLevel(logging.INFO)
        emit_record_logger("Benchmark record logger enabled")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    report = out.get_result()
    marks = [m.name for m in item.iter_markers() if m.name not in BUILTIN_MARKS]
    report.opid = marks[0] if marks else item.nodeid
