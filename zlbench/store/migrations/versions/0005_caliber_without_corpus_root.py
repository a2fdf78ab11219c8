"""A run's caliber leaves out where its corpus lies (config.corpus.root) as it always meant to:
two checkouts of FlagGems side by side (main and a PR) form one series. The calibers of stored runs
are computed again from their stored identities (zlbench.store.ingest.caliber_of); a FlagGems log's
caliber holds no identity and stays.

Revision ID: 0005
Revises: 0004
"""
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from zlbench.store.ingest import recompute_calibers

    recompute_calibers(op.get_bind())


def downgrade() -> None:
    pass  # the root left out of a caliber cannot be put back from it (the identity still holds it)
