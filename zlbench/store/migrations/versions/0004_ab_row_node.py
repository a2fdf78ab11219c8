"""An A/B row's test node: tests of one op may time one shape (FlagGems' einsum trace and
transpose), and the site names the test beside the op where such rows meet. Rows of older runs
keep it null.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ab_rows") as batch:
        batch.add_column(sa.Column("node", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ab_rows") as batch:
        batch.drop_column("node")
