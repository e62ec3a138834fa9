"""Assignment moves: every time a benchmark gets a GPU host or leaves one (new, a host joined
or left the fleet, a budget, its `hosts:`), with the reason, so the history of assignments is
kept beside the current one (`host_assignments`).

Revision ID: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "assignment_moves",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("from_host", sa.String(100), nullable=True),  # None: its first assignment
        sa.Column("to_host", sa.String(100), nullable=False),
        sa.Column("reason", sa.String(300), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_assignment_moves_benchmark", "assignment_moves", ["benchmark"])


def downgrade() -> None:
    op.drop_index("ix_assignment_moves_benchmark", "assignment_moves")
    op.drop_table("assignment_moves")
