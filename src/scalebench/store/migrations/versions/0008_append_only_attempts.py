"""Append-only attempts: an attempt row is never updated once written. Each attempt names the
Airflow task instance that ran it (task id, map index, try number), so a link can open its log;
rows written before this revision keep NULL there.

Revision ID: 0008
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("task_id", sa.String(250), nullable=True))
        batch.add_column(sa.Column("map_index", sa.Integer, nullable=True))
        batch.add_column(sa.Column("try_number", sa.Integer, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        for name in ("try_number", "map_index", "task_id"):
            batch.drop_column(name)
