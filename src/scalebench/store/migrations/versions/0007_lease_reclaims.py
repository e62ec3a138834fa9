"""Lease reclaims in two steps: a dead lease is first marked (reclaim_reason), its containers are
stopped outside the host lock, and only then are its devices freed. A marked lease's holder is
refused its heartbeat, so it learns that its lease is lost.

Revision ID: 0007
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("device_leases") as batch:
        batch.add_column(sa.Column("reclaim_reason", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("device_leases") as batch:
        batch.drop_column("reclaim_reason")
