"""Cell precision: the numeric precision preset a cell trained in (part of its identity).

Cells recorded before presets existed ran each framework's default: they read "framework default".

Revision ID: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("precision", sa.String(32), nullable=False, server_default="framework default"))


def downgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("precision")
