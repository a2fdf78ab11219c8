"""Each row's process-level interval: how many processes measured it and the 95% interval
(latency_ci, and timing_base.latency_ci for the baseline) a plain run with timer.processes >= 2
reports. Rows of older runs keep them null.

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

COLUMNS = (("processes", sa.Integer), ("latency_lo", sa.Float), ("latency_hi", sa.Float),
           ("latency_base_lo", sa.Float), ("latency_base_hi", sa.Float))


def upgrade() -> None:
    with op.batch_alter_table("rows") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rows") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
