"""Op-level profiles: each profiled attempt's window (the slowest rank's steps, seconds per step,
traces, or why there is none) and its operations and kernels by self time per step.

Revision ID: 0017
"""
import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attempt_profiles",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("attempt_id", sa.Integer, sa.ForeignKey("attempts.id"), nullable=False, unique=True),
        sa.Column("rank", sa.Integer, nullable=True),
        sa.Column("steps", sa.Integer, nullable=True),
        sa.Column("step_s", sa.Float, nullable=True),
        sa.Column("traces", sa.JSON, nullable=False),
        sa.Column("why_not", sa.Text, nullable=True),
    )
    op.create_table(
        "profile_ops",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("profile_id", sa.Integer, sa.ForeignKey("attempt_profiles.id"), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("self_s", sa.Float, nullable=False),
        sa.Column("calls", sa.Float, nullable=False),
        sa.Column("share", sa.Float, nullable=True),
    )
    op.create_index("ix_profile_ops_profile_id", "profile_ops", ["profile_id"])


def downgrade() -> None:
    op.drop_table("profile_ops")
    op.drop_table("attempt_profiles")
