"""Reruns and system fingerprints: cells.role / cells.rerun_of, attempts.fingerprint.

Revision ID: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("role", sa.String(16), nullable=False, server_default="measure"))
        batch.add_column(sa.Column("rerun_of", sa.String(64)))
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("fingerprint", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("fingerprint")
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("rerun_of")
        batch.drop_column("role")
