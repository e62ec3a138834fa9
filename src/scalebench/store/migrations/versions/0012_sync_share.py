"""The exposed sync share of a steady step as a history figure (core.figures: sync_share): a
column of the night summaries, filled for the stored nights by the rebuild this asks for.

Revision ID: 0012
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
rebuilds_summaries = True


def upgrade() -> None:
    with op.batch_alter_table("night_summaries") as batch:
        batch.add_column(sa.Column("sync_share", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("night_summaries") as batch:
        batch.drop_column("sync_share")
