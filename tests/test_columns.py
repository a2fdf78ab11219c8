"""The column registry (zlbench/results/columns.py): every row and A/B-row column declared once, and
read as declared by Row, rows.jsonl, ab.csv / ab.json and the store; a new column is one registry
entry plus its producer; rows of older runs (columns since removed, or not yet there) still read."""

import csv
import json
import subprocess
import sys
import textwrap
from dataclasses import fields

import pytest
from sqlalchemy import create_engine, inspect, select

from zlbench.results import columns as C
from zlbench.results.records import ROW_FIELDS, SAMPLING_FIELDS, Row
from zlbench.store import schema as S

from .conftest import FIXTURES, zlbench
from . import history_runs as H

AB_RUN = [f"corpus.root={FIXTURES / 'ab_corpus'}", "corpus.name=fixture", "ab=env", "ab.var=ZL_FIXTURE_SWITCH",
          "ops=[live_op]", "ab.rounds=2", "ab.min_rounds=2"]


def test_row_is_made_of_the_registry():
    assert [f.name for f in fields(Row)] == list(C.names(C.ROW_COLUMNS))
    assert ROW_FIELDS == list(C.names(C.ROW_COLUMNS, C.ROWS_JSONL))
    assert set(SAMPLING_FIELDS) < set(ROW_FIELDS) and "stop_reason" in SAMPLING_FIELDS
    row = Row(op="exp")
    assert (row.status, row.side, row.round, row.markers, row.device_name) == ("ok", "main", 0, [], "")
    assert len({c.name for c in C.ROW_COLUMNS}) == len(C.ROW_COLUMNS)  # declared once
    assert len({c.name for c in C.AB_COLUMNS}) == len(C.AB_COLUMNS)
    assert all(c.doc for c in C.ROW_COLUMNS + C.AB_COLUMNS)


def test_the_store_tables_are_the_registry_store_columns():
    """Every column the registry sends to the store has its store column, and the store has no row
    column the registry does not declare (but the baseline's interval, kept inside timing_base)."""
    row_store = {n for c in C.ROW_COLUMNS for n in c.store_columns} | {"latency_base_lo", "latency_base_hi"}
    assert row_store == set(S.rows.c.keys()) - {"id", "run_id"}
    assert {n for c in C.AB_COLUMNS for n in c.store_columns} == set(S.ab_rows.c.keys()) - {"id", "run_id"}
    for c in C.ROW_COLUMNS + C.AB_COLUMNS:
        for n in c.store_columns:
            table = S.rows if c in C.ROW_COLUMNS else S.ab_rows
            assert getattr(table.c[n].type, "length", None) == (c.length or None), n


@pytest.mark.slow  # a real A/B run of the fixture corpus: seconds
def test_a_real_ab_run_writes_every_column_where_the_registry_says(tmp_path):
    run_dir = tmp_path / "zl_runs" / "ab"
    res = zlbench(f"hydra.run.dir={run_dir}", "progress=none", *AB_RUN, cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "rows.jsonl").read_text().splitlines()]
    assert rows and all(list(r) == ROW_FIELDS for r in rows)  # every column, in the declared order
    with open(run_dir / "ab.csv", encoding="utf-8") as f:
        header = next(csv.reader(f))
    assert header == list(C.names(C.AB_COLUMNS, C.AB_CSV))
    ab_rows = json.loads((run_dir / "ab.json").read_text())["rows"]
    assert ab_rows and all(set(t) == set(C.names(C.AB_COLUMNS, C.AB_JSON)) for t in ab_rows)
    # The run recorded itself in zl_runs/zlbench.db: each store column filled from its registry column.
    engine = create_engine(f"sqlite:///{tmp_path / 'zl_runs' / 'zlbench.db'}")
    with engine.connect() as conn:
        stored = [dict(r._mapping) for r in conn.execute(select(S.rows))]
        stored_ab = [dict(r._mapping) for r in conn.execute(select(S.ab_rows))]
    assert len(stored) == len(rows) and len(stored_ab) == len(ab_rows)
    by_key = {(r["side"], r["round"], r["shape"]): r for r in rows}
    for s in stored:
        r = by_key[(s["side"], s["round"], s["shape"])]
        for name in ("op", "dtype", "latency", "latency_base", "status", "node", "markers", "timer_used"):
            assert s[name] == r[name], name
    assert {(t["op"], t["shape"], t["verdict"]) for t in ab_rows} == {(s["op"], s["shape"], s["verdict"]) for s in stored_ab}
    assert set(inspect(engine).get_table_names()) >= {"rows", "ab_rows"}


NEW_COLUMN = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from zlbench.results import columns as C

    # The one registry entry: a value FlagGems' harness reports in its result entries.
    C.ROW_COLUMNS += (C.Column("peak_mem_mb", C.FLOAT, "peak device memory of the op", "MB",
                               (C.ROWS_JSONL,), source=C.RESULT),)
    from zlbench.results.tables import collect
    collect(Path(sys.argv[1]))
""")


def test_a_new_column_is_one_registry_entry_plus_its_producer(tmp_path):
    """The producer here is the corpus: its result entries carry peak_mem_mb. Declaring the column
    is all it takes for Row, rows.jsonl and its readers to carry it."""
    from .test_results import _fake_run

    run = _fake_run(tmp_path / "run", ["", ""], {"peak_mem_mb": 512.0})
    res = subprocess.run([sys.executable, "-c", NEW_COLUMN, str(run)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [json.loads(line) for line in (run / "rows.jsonl").read_text().splitlines()]
    assert [r["peak_mem_mb"] for r in rows] == [512.0, 512.0] and list(rows[0])[-1] == "peak_mem_mb"
    # Without the entry the column is not written: the registry, not the corpus, decides.
    from zlbench.results.tables import collect

    assert "peak_mem_mb" not in collect(run)[0][0]


def test_rows_of_older_runs_read_whatever_columns_they_carry(tmp_path):
    """A run dir whose rows carry a column the registry no longer declares, and lack newer ones,
    still summarises and goes to the store (the unknown column is left out)."""
    from zlbench.report.summary import render_summary
    from zlbench.store.ingest import run_dir_record

    rows = [H.row("exp", "[[64,64]]", 0.01, 0.012), H.row("exp", "[[256,256]]", 0.02, 0.025)]
    run = H.write_run(tmp_path / "old", H.identity(), rows)
    old = []
    for line in (run / "rows.jsonl").read_text().splitlines():
        r = json.loads(line)
        for name in ("processes", "latency_ci", "tflops", "stop_reason"):
            r.pop(name)
        old.append(json.dumps({**r, "retired_column": 3}))
    (run / "rows.jsonl").write_text("\n".join(old) + "\n")
    record = run_dir_record(run)
    assert [(r["latency"], r["processes"], r["latency_lo"]) for r in record["rows"]] == [(0.01, None, None),
                                                                                         (0.02, None, None)]
    assert all("retired_column" not in r for r in record["rows"])
    from zlbench.results.tables import load_rows, load_status

    text = render_summary(load_rows(run), load_status(run), "old run")
    line = next(l for l in text.splitlines() if l.startswith("| exp "))
    assert [c.strip() for c in line.split("|")[1:-1]] == ["exp", "float16", "2", "0.0185", "0.015", "1.22",
                                                           "1.2..1.25", "graph"]


def test_ab_md_and_the_condensed_markdown_show_the_registry_ab_md_columns(tmp_path):
    """ab.md's table and the comment-sized one (report/condensed.py) list the same columns, the
    registry's AB_MD ones under their labels (the condensed table had its own list, without rounds)."""
    from zlbench.report.ab import compare
    from zlbench.report.condensed import ab_markdown

    a = [H.row("exp", s, 0.01 * (1 + i / 100), 0.01, side="off", rnd=r) for i, s in enumerate(H.SHAPES) for r in range(3)]
    b = [H.row("exp", s, 0.012 * (1 + i / 100), 0.01, side="on", rnd=r) for i, s in enumerate(H.SHAPES) for r in range(3)]
    result = compare(a, b, "X=0", "X=1")
    labels = [c.label or c.name for c in C.AB_COLUMNS if C.AB_MD in c.outputs]
    assert labels == ["Operator", "dtype", "shape", "rounds", "A ms (geo)", "B ms (geo)", "change", "95% CI", "q",
                      "verdict"]
    for text in (result["markdown"], ab_markdown(result)):
        header = next(line for line in text.splitlines() if line.startswith("| Operator"))
        assert [h.strip() for h in header.split("|")[1:-1]] == labels


def test_the_store_reads_a_rows_interval_by_the_one_rule(tmp_path):
    """An interval the summaries and the pairing would not read (lo <= 0, lo > hi, a non-finite
    bound) is stored as no interval, so `history compare` never judges a row on one."""
    from zlbench.store.ingest import run_dir_record

    cis = [[0.009, 0.011], [0.0, 0.011], [0.012, 0.011], [0.009, float("inf")]]
    rows = [H.row("exp", f"[[{64 * (i + 1)},64]]", 0.01, 0.012, ci=ci, base_ci=ci) for i, ci in enumerate(cis)]
    record = run_dir_record(H.write_run(tmp_path / "run", H.identity(), rows))
    stored = [(r["latency_lo"], r["latency_hi"], r["latency_base_lo"], r["latency_base_hi"]) for r in record["rows"]]
    assert stored == [(0.009, 0.011, 0.009, 0.011)] + [(None, None, None, None)] * 3
