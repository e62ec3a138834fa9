"""An alert figure keeps where its A/B's step time went (analysis.profile_diff.ab_diff, the
latest night's): the alert page shows it beside the figure.

Revision ID: 0018
"""
import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("alert_group_figures") as batch:
        batch.add_column(sa.Column("profile_diff", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("alert_group_figures") as batch:
        batch.drop_column("profile_diff")
