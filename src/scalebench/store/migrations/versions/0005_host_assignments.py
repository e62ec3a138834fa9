"""Host assignments: which GPU host each benchmark runs on, kept from night to night.

Revision ID: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_assignments",
        sa.Column("benchmark", sa.String(100), primary_key=True),
        sa.Column("host", sa.String(100), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(300), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("host_assignments")
