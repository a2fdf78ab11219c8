"""The column registry: every column of a row and of an A/B row, declared once (name, type, unit,
what it means, where it goes), and read by everything that lists columns:

- Row (results/records.py) is made from ROW_COLUMNS: its fields, their types and defaults;
  Row.from_result fills the columns whose `source` says where a measurement carries them;
- rows.jsonl (results/tables.py) writes the ROWS_JSONL columns, in this order;
- ab.csv and ab.json (report/ab.py) write the AB_CSV / AB_JSON columns of AB_COLUMNS, and ab.md's
  table (and report/condensed.py's) shows the AB_MD ones, headed by their labels;
- summary.md (report/summary.py) reads the sampling facts (source FACTS);
- the store (store/ingest.py) writes the STORE columns, converted by type, each to the store column
  of its name (an interval: to `store_names`); store/schema.py and its migrations hold the tables.

A new column is one entry here plus its producer: a value the corpus' result entry carries (source
RESULT) or a timing plugin's fact (source FACTS) needs nothing else; any other needs the line that
computes it. A column meant for the store also needs a store column (store/schema.py and an Alembic
revision). Readers take rows as dicts (`row.get(name)`): rows of older runs that lack a column, or
carry one no longer declared here, read as they are."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple

# Where a column goes.
ROWS_JSONL = "rows.jsonl"
AB_CSV = "ab.csv"
AB_JSON = "ab.json"
AB_MD = "ab.md"  # a column of ab.md's table (and ab_condensed.md's), headed by its label
STORE = "store"

# Where Row.from_result takes a column from (None: computed by its producer, or where it ran).
RESULT = "result"  # the corpus record's result entry, under the same key ([INFO] {"result": [...]})
FACTS = "facts"    # the timing plugin's facts about the alternative's timing call (plugins/sampling.py)

# Types: how a value is written and stored.
STR, FLOAT, INT, BOOL = "str", "float", "int", "bool"
JSON = "json"          # any JSON value, stored as JSON
ANY = "any"            # a scalar of either kind (a device index or name), stored as text
LIST = "list"          # a list of strings, [] by default
INTERVAL = "interval"  # [lo, hi], stored as two float columns (store_names)
MAPPING = "mapping"    # a JSON object, not stored


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str
    unit: str = ""
    outputs: Tuple[str, ...] = (ROWS_JSONL,)
    source: str = ""
    default: Any = None
    required: bool = False
    length: int = 0  # the store's string length (0: unbounded text)
    store_names: Tuple[str, ...] = ()
    label: str = ""  # a Markdown table's header (default: the name)

    @property
    def store_columns(self) -> Tuple[str, ...]:
        if STORE not in self.outputs:
            return ()
        return self.store_names or (self.name,)


def _row(name, type_, doc, unit="", store=False, **kw) -> Column:
    return Column(name, type_, doc, unit, (ROWS_JSONL, STORE) if store else (ROWS_JSONL,), **kw)


# Sampling facts of timer.stop=adaptive, clock screening and placements: their producers are being
# retired (timer rewrite, 2026-12-01), so newer rows carry null. They stay declared so that rows of
# older runs keep their meaning and summary.md's Timing section still reads them.
_RETIRING = " (older runs; its producer is being retired: null in newer rows)"

ROW_COLUMNS: Tuple[Column, ...] = (
    _row("op", STR, "operator name as the corpus records it (FlagGems' op_name; ops_status.csv's op is the test's "
         "first non-builtin mark, what ops= selects)", store=True, required=True, length=255),
    _row("dtype", STR, "dtype as the corpus names it (torch.float16)", store=True, length=64),
    _row("shape", STR, "canonical JSON of the shape detail: the pairing key across runs (the n-th case "
         "of a record whose shapes read alike: `<shape> #n`)", store=True),
    _row("legacy_shape", JSON, "the corpus' own shape value", store=True, source=RESULT),
    _row("latency_base", FLOAT, "the baseline's (torch) latency", "ms", store=True, source=RESULT),
    _row("latency", FLOAT, "the alternative's (e.g. FlagGems) latency; over processes: their median (an even count "
         "that reads apart: the median of all but the latest, a value one of them drew)", "ms",
         store=True, source=RESULT),
    _row("speedup", FLOAT, "latency_base / latency as the corpus reports it", "x", store=True, source=RESULT),
    _row("gbps_base", FLOAT, "the baseline's bandwidth", "GB/s", store=True, source=RESULT),
    _row("gbps", FLOAT, "the alternative's bandwidth", "GB/s", store=True, source=RESULT),
    _row("tflops", FLOAT, "what FlagGems' harness reports beside the latencies, where it does", "TFLOPS",
         source=RESULT),
    _row("utilization", FLOAT, "FlagGems' harness: utilization, where reported", source=RESULT),
    _row("accuracy", FLOAT, "FlagGems' harness: accuracy, where reported", source=RESULT),
    _row("compared_speedup", FLOAT, "FlagGems' harness: speedup against a reference, where reported", "x",
         source=RESULT),
    _row("timer_used", STR, "the timer that timed the alternative (graph, direct, host, ...)", store=True,
         length=64),
    _row("timer_used_base", STR, "the timer that timed the baseline", store=True, length=64),
    _row("markers", LIST, "BENCHMARK_* markers (results/schema.py)", store=True, default=()),
    _row("marker_reason", STR, "why the markers were set", store=True),
    _row("status", STR, "ok, failed, skipped, crashed, timeout, poisoned or fatal", store=True, default="ok",
         length=16),
    _row("reason", STR, "why a row is not ok", store=True),
    _row("side", STR, "the A/B side, or main", store=True, default="main", length=64),
    _row("round", INT, "the A/B round (null: a row over processes)", store=True, default=0),
    _row("device", ANY, "the plan's device slot", store=True, length=64),
    _row("device_name", STR, "the device the measuring process saw", store=True, default="", length=255),
    _row("device_bus_id", STR, "its PCI bus id", store=True, default="", length=64),
    _row("node", STR, "the pytest node id", store=True),
    _row("unit", STR, "the work unit that measured it"),
    _row("stop_reason", STR, "why the alternative's timing call stopped: target, max_samples, max_time, fixed, "
         "no_samples", source=FACTS),
    _row("samples", INT, "samples kept" + _RETIRING, "count", source=FACTS),
    _row("ci_rel", FLOAT, "95% CI half-width of the latency, relative" + _RETIRING, "rel", source=FACTS),
    _row("spread_rel", FLOAT, "interquartile range of the samples over their median", "rel", source=FACTS),
    _row("min_ms", FLOAT, "fastest sample", "ms", source=FACTS),
    _row("samples_discarded", INT, "samples retaken for a low SM clock (null: no clock reading)" + _RETIRING,
         "count", source=FACTS),
    _row("sm_mhz", FLOAT, "lowest SM clock read over the kept samples" + _RETIRING, "MHz", source=FACTS),
    _row("mem_mhz", FLOAT, "lowest memory clock read over the kept samples" + _RETIRING, "MHz", source=FACTS),
    _row("mode_lo_ms", FLOAT, "BENCHMARK_BIMODAL: the lower cluster's median", "ms", source=FACTS),
    _row("mode_hi_ms", FLOAT, "BENCHMARK_BIMODAL: the upper cluster's median", "ms", source=FACTS),
    _row("mode_hi_share", FLOAT, "BENCHMARK_BIMODAL: the share of samples in the upper cluster", "rel",
         source=FACTS),
    _row("placements", INT, "timer.placements: memory placements timed (median kept)" + _RETIRING, "count",
         source=FACTS),
    _row("placement_spread_rel", FLOAT, "(max - min) / median of the placements' values" + _RETIRING, "rel",
         source=FACTS),
    _row("placement_note", STR, "why one placement only where more were asked for" + _RETIRING, source=FACTS),
    _row("timing_base", MAPPING, "the baseline's timing facts as one mapping (over processes: its latency_ci "
         "and processes too; the store keeps its interval as latency_base_lo / latency_base_hi)"),
    # source RESULT: a plain run's run.log writes both into its result entries, so the log read back
    # (history import, zlbench summary LOG) keeps the rows' intervals; a corpus' own record has neither.
    _row("processes", INT, "benchmark processes that measured the row (plain run; null in A/B rows)", "count",
         store=True, source=RESULT),
    _row("latency_ci", INTERVAL, "95% interval [lo, hi] for the value another run would report (null: one "
         "process, and too few rows of its timer measured in several to borrow a spread from)", "ms", store=True, store_names=("latency_lo", "latency_hi"), source=RESULT),
)

_AB_ALL = (AB_CSV, AB_JSON, STORE, AB_MD)
_AB_DATA = (AB_CSV, AB_JSON, STORE)


def _ab(name, type_, doc, unit="", outputs=_AB_DATA, **kw) -> Column:
    return Column(name, type_, doc, unit, outputs, **kw)


AB_COLUMNS: Tuple[Column, ...] = (
    _ab("op", STR, "operator id", outputs=_AB_ALL, length=255, label="Operator"),
    _ab("dtype", STR, "dtype, short (float16)", outputs=_AB_ALL, length=64),
    _ab("shape", STR, "canonical shape key", outputs=_AB_ALL),
    _ab("node", STR, "the test node (ab.md names its test beside the op where another test's row has the "
        "same op, dtype and shape)", outputs=_AB_DATA),
    _ab("rounds", INT, "rounds paired (ab.md: and why they stopped)", "count", outputs=_AB_ALL),
    _ab("a_ms", FLOAT, "A's latency: geometric mean over the rounds the verdict rests on", "ms", outputs=_AB_ALL,
        label="A ms (geo)"),
    _ab("b_ms", FLOAT, "B's latency, the same way", "ms", outputs=_AB_ALL, label="B ms (geo)"),
    _ab("change_pct", FLOAT, "B / A - 1", "%", outputs=_AB_ALL, label="change"),
    _ab("ci_lo_pct", FLOAT, "95% interval of the change, low end (ab.md: lo..hi)", "%", outputs=_AB_ALL,
        label="95% CI"),
    _ab("ci_hi_pct", FLOAT, "95% interval of the change, high end", "%"),
    _ab("p", FLOAT, "p-value of the paired test"),
    _ab("q", FLOAT, "Benjamini-Hochberg adjusted p-value", outputs=_AB_ALL),
    _ab("mde_pct", FLOAT, "minimum detectable effect", "%"),
    _ab("live", STR, "liveness of the op's kernels: live, not live, unknown; A/A: not checked (both sides one value)", length=16),
    _ab("fallback", BOOL, "a side was timed by the direct fallback", default=False),
    _ab("process_unstable", BOOL, "two plain runs: a side's processes of the op disagreed (BENCHMARK_PROCESS_UNSTABLE "
        "for the op, not only its baseline); left out of the overall line, judged on its own intervals", default=False, outputs=(AB_CSV, AB_JSON)),
    _ab("verdict", STR, "faster, slower, no difference beyond threshold, ... (ab.md: with fallback and "
        "liveness where they qualify it)", outputs=_AB_ALL, length=64),
    _ab("stop", STR, "why the row has the rounds it has", outputs=(AB_CSV, AB_JSON)),
    _ab("ratio", FLOAT, "B / A", "x", outputs=(AB_JSON,)),
    _ab("lo", FLOAT, "95% interval of B / A, low end", "x", outputs=(AB_JSON,)),
    _ab("hi", FLOAT, "95% interval of B / A, high end", "x", outputs=(AB_JSON,)),
    _ab("look", INT, "the round whose look the verdict rests on", outputs=(AB_JSON,)),
)


def names(columns: Tuple[Column, ...], output: str = "", source: str = "") -> Tuple[str, ...]:
    """The names of the columns that go to `output` (and come from `source`), in declared order."""
    return tuple(c.name for c in columns if (not output or output in c.outputs) and (not source or c.source == source))

