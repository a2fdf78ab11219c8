"""The first store: runs, their statuses, rows and A/B results.

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_key", sa.String(200), nullable=False, unique=True),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("identity_hash", sa.String(64)),
        sa.Column("caliber", sa.String(64), nullable=False),
        sa.Column("created", sa.DateTime, nullable=False),
        sa.Column("recorded", sa.DateTime, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("host", sa.String(255)),
        sa.Column("backend", sa.String(64)),
        sa.Column("device_name", sa.String(255)),
        sa.Column("timer", sa.String(64)),
        sa.Column("corpus", sa.String(64)),
        sa.Column("corpus_commit", sa.String(64)),
        sa.Column("zlbench_version", sa.String(64)),
        sa.Column("zlbench_commit", sa.String(64)),
        sa.Column("triton_version", sa.String(64)),
        sa.Column("torch_version", sa.String(64)),
        sa.Column("flag_gems_version", sa.String(64)),
        sa.Column("python_version", sa.String(32)),
        sa.Column("ab_axis", sa.String(128)),
        sa.Column("identity", sa.JSON),
    )
    op.create_table(
        "statuses",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("op", sa.String(255)),
        sa.Column("test_node", sa.Text),
        sa.Column("side", sa.String(64)),
        sa.Column("status", sa.String(16)),
        sa.Column("rows", sa.Integer),
        sa.Column("backend", sa.String(64)),
        sa.Column("device", sa.String(255)),
        sa.Column("timer", sa.String(64)),
        sa.Column("wall_s", sa.Float),
        sa.Column("reason", sa.Text),
        sa.Column("host", sa.String(255)),
        sa.Column("job_id", sa.String(64)),
    )
    op.create_table(
        "rows",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("op", sa.String(255)),
        sa.Column("dtype", sa.String(64)),
        sa.Column("shape", sa.Text),
        sa.Column("legacy_shape", sa.JSON),
        sa.Column("latency_base", sa.Float),
        sa.Column("latency", sa.Float),
        sa.Column("speedup", sa.Float),
        sa.Column("gbps_base", sa.Float),
        sa.Column("gbps", sa.Float),
        sa.Column("timer_used", sa.String(64)),
        sa.Column("timer_used_base", sa.String(64)),
        sa.Column("markers", sa.JSON),
        sa.Column("marker_reason", sa.Text),
        sa.Column("status", sa.String(16)),
        sa.Column("reason", sa.Text),
        sa.Column("side", sa.String(64)),
        sa.Column("round", sa.Integer),
        sa.Column("device", sa.String(64)),
        sa.Column("device_name", sa.String(255)),
        sa.Column("device_bus_id", sa.String(64)),
        sa.Column("node", sa.Text),
    )
    op.create_table(
        "ab_rows",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("op", sa.String(255)),
        sa.Column("dtype", sa.String(64)),
        sa.Column("shape", sa.Text),
        sa.Column("rounds", sa.Integer),
        sa.Column("a_ms", sa.Float),
        sa.Column("b_ms", sa.Float),
        sa.Column("change_pct", sa.Float),
        sa.Column("ci_lo_pct", sa.Float),
        sa.Column("ci_hi_pct", sa.Float),
        sa.Column("p", sa.Float),
        sa.Column("q", sa.Float),
        sa.Column("mde_pct", sa.Float),
        sa.Column("live", sa.String(16)),
        sa.Column("fallback", sa.Boolean),
        sa.Column("verdict", sa.String(64)),
    )
    op.create_table(
        "ab_summaries",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("label_a", sa.Text),
        sa.Column("label_b", sa.Text),
        sa.Column("liveness", sa.String(16)),
        sa.Column("summary", sa.JSON),
    )


def downgrade() -> None:
    for name in ("ab_summaries", "ab_rows", "rows", "statuses", "runs"):
        op.drop_table(name)
