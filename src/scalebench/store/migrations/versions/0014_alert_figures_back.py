"""Alert groups close only when every figure is back: the night each figure was judged back at
the level before its regression (fixed by a change, or ended by itself).

Revision ID: 0014
"""
import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("alert_group_figures") as batch:
        batch.add_column(sa.Column("back_night", sa.String(10), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("alert_group_figures") as batch:
        batch.drop_column("back_night")
