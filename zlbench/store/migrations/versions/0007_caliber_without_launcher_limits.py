"""A run's caliber leaves out its test time limit, crash retries and device lock
(launcher.node_timeout_s, crash_retries, device_lock): they decide whether a test is measured, not
the number it gets, and a run that raised the limit for one slow op began a series of its own
(`history compare --latest`: nothing earlier). The calibers of stored runs are computed again from
their stored identities, as 0005 and 0006 did.

Revision ID: 0007
Revises: 0006
"""
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from zlbench.store.ingest import recompute_calibers

    recompute_calibers(op.get_bind())


def downgrade() -> None:
    pass  # the settings left out of a caliber cannot be put back from it (the identity still holds them)
