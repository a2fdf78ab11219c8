"""A run's caliber leaves out what its run failed on (fail_on), as its identity hash does: a run
with fail_on=[] (or any other gate) measured as its series does, and is one more run of it. The
calibers of stored runs are computed again from their stored identities, as 0005 did.

Revision ID: 0006
Revises: 0005
"""
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from zlbench.store.ingest import recompute_calibers

    recompute_calibers(op.get_bind())


def downgrade() -> None:
    pass  # fail_on left out of a caliber cannot be put back from it (the identity still holds it)
