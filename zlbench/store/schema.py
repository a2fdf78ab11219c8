"""The store's tables (SQLAlchemy Core). The Alembic scripts in migrations/versions/ create them;
this module is what the code reads and writes through. Change both together: a new revision for
every change here, and SCHEMA_HEAD set to it."""

from __future__ import annotations

from sqlalchemy import (JSON, Boolean, Column, DateTime, Float, ForeignKey, Integer, MetaData,
                        String, Table, Text)

# The newest Alembic revision this zlbench knows (migrations/versions/).
SCHEMA_HEAD = "0007"

metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("run_id", Integer, primary_key=True, autoincrement=True),
    # identity_hash@created@host[@run_uid] for a run dir, log:<sha256 of the file> for a FlagGems log: the
    # same run written twice finds itself by this key.
    Column("run_key", String(200), nullable=False, unique=True),
    Column("content_hash", String(64), nullable=False),  # unchanged content -> the write is a no-op
    Column("kind", String(16), nullable=False),  # run | ab | log
    Column("identity_hash", String(64)),
    # The caliber: the identity without versions, commits and times (runs of one caliber form a series).
    Column("caliber", String(64), nullable=False),
    Column("created", DateTime, nullable=False),  # UTC, naive
    Column("recorded", DateTime, nullable=False),
    Column("path", Text, nullable=False),
    Column("host", String(255)),
    Column("backend", String(64)),
    Column("device_name", String(255)),
    Column("timer", String(64)),
    Column("corpus", String(64)),
    Column("corpus_commit", String(64)),
    Column("zlbench_version", String(64)),
    Column("zlbench_commit", String(64)),
    Column("triton_version", String(64)),
    Column("torch_version", String(64)),
    Column("flag_gems_version", String(64)),
    Column("python_version", String(32)),
    Column("ab_axis", String(128)),
    Column("identity", JSON),
)

statuses = Table(
    "statuses", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.run_id"), nullable=False),
    Column("op", String(255)),
    Column("test_node", Text),
    Column("side", String(64)),
    Column("status", String(16)),
    Column("rows", Integer),
    Column("backend", String(64)),
    Column("device", String(255)),
    Column("timer", String(64)),
    Column("wall_s", Float),
    Column("reason", Text),
    Column("host", String(255)),
    Column("job_id", String(64)),
)

rows = Table(
    "rows", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.run_id"), nullable=False),
    Column("op", String(255)),
    Column("dtype", String(64)),
    Column("shape", Text),
    Column("legacy_shape", JSON),
    Column("latency_base", Float),
    Column("latency", Float),
    Column("speedup", Float),
    Column("gbps_base", Float),
    Column("gbps", Float),
    Column("timer_used", String(64)),
    Column("timer_used_base", String(64)),
    Column("markers", JSON),
    Column("marker_reason", Text),
    Column("status", String(16)),
    Column("reason", Text),
    Column("side", String(64)),
    Column("round", Integer),
    Column("device", String(64)),
    Column("device_name", String(255)),
    Column("device_bus_id", String(64)),
    Column("node", Text),
    # Revision 0003: the process-level interval of a plain run with timer.processes >= 2 (null for
    # rows measured in one process, A/B rounds and rows of older runs).
    Column("processes", Integer),
    Column("latency_lo", Float),
    Column("latency_hi", Float),
    Column("latency_base_lo", Float),
    Column("latency_base_hi", Float),
)

ab_rows = Table(
    "ab_rows", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.run_id"), nullable=False),
    Column("op", String(255)),
    Column("dtype", String(64)),
    Column("shape", Text),
    Column("rounds", Integer),
    Column("a_ms", Float),
    Column("b_ms", Float),
    Column("change_pct", Float),
    Column("ci_lo_pct", Float),
    Column("ci_hi_pct", Float),
    Column("p", Float),
    Column("q", Float),
    Column("mde_pct", Float),
    Column("live", String(16)),
    Column("fallback", Boolean),
    Column("verdict", String(64)),
    # Revision 0004: the row's test node (null in rows of older runs).
    Column("node", Text),
)

ab_summaries = Table(
    "ab_summaries", metadata,
    Column("run_id", Integer, ForeignKey("runs.run_id"), primary_key=True),
    Column("label_a", Text),
    Column("label_b", Text),
    Column("liveness", String(16)),
    Column("summary", JSON),
)

CHILD_TABLES = (statuses, rows, ab_rows, ab_summaries)

# Added by revision 0002: what compare, regressions and the site look rows up by.
from sqlalchemy import Index  # noqa: E402

Index("ix_runs_caliber_created", runs.c.caliber, runs.c.created)
Index("ix_statuses_run_id", statuses.c.run_id)
Index("ix_rows_run_id_op", rows.c.run_id, rows.c.op)
Index("ix_ab_rows_run_id", ab_rows.c.run_id)
