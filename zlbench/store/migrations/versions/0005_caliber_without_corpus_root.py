"""A run's caliber leaves out where its corpus lies (config.corpus.root) as it always meant to:
two checkouts of FlagGems side by side (main and a PR) form one series. The calibers of stored runs
are computed again from their stored identities (zlbench.store.ingest.caliber_of); a FlagGems log's
caliber holds no identity and stays.

Revision ID: 0005
Revises: 0004
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from zlbench.store.ingest import caliber_of

    conn = op.get_bind()
    runs = sa.table("runs", sa.column("run_id", sa.Integer), sa.column("kind", sa.String),
                    sa.column("caliber", sa.String), sa.column("identity", sa.JSON))
    for run_id, caliber, identity in conn.execute(
            sa.select(runs.c.run_id, runs.c.caliber, runs.c.identity).where(runs.c.kind != "log")).all():
        identity = json.loads(identity) if isinstance(identity, str) else identity
        if isinstance(identity, dict) and "config" in identity:
            now = caliber_of(identity)
            if now != caliber:
                conn.execute(sa.update(runs).where(runs.c.run_id == run_id).values(caliber=now))


def downgrade() -> None:
    pass  # the root left out of a caliber cannot be put back from it (the identity still holds it)
