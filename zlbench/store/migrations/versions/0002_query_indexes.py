"""Indexes for the history commands: a caliber's runs by date, a run's rows by operator.

Revision ID: 0002
Revises: 0001
"""
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_caliber_created", "runs", ["caliber", "created"])
    op.create_index("ix_statuses_run_id", "statuses", ["run_id"])
    op.create_index("ix_rows_run_id_op", "rows", ["run_id", "op"])
    op.create_index("ix_ab_rows_run_id", "ab_rows", ["run_id"])


def downgrade() -> None:
    for name, table in (("ix_ab_rows_run_id", "ab_rows"), ("ix_rows_run_id_op", "rows"),
                        ("ix_statuses_run_id", "statuses"), ("ix_runs_caliber_created", "runs")):
        op.drop_index(name, table_name=table)
