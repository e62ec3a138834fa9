"""Initial schema: cells and their attempts.

Revision ID: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cells",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("run_type", sa.String(32), nullable=False),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("host", sa.String(100), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("epochs", sa.Integer, nullable=False),
        sa.Column("repeat", sa.Integer, nullable=False),
        sa.Column("profile", sa.String(16), nullable=False),
        sa.Column("seed", sa.Integer, nullable=False),
        sa.Column("scaling_mode", sa.String(16), nullable=False),
        sa.Column("per_device_batch", sa.Integer, nullable=False),
        sa.Column("global_batch", sa.Integer, nullable=False),
        sa.Column("label", sa.String(100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_cells_key", "cells", ["key"], unique=True)
    op.create_index("ix_cells_run_id", "cells", ["run_id"])
    op.create_index("ix_cells_benchmark", "cells", ["benchmark"])
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("cell_id", sa.Integer, sa.ForeignKey("cells.id"), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64)),
        sa.Column("exit_code", sa.Integer),
        sa.Column("message", sa.Text),
        sa.Column("train_s", sa.Float),
        sa.Column("images_per_s", sa.Float),
        sa.Column("metrics", sa.JSON),
        sa.Column("contract", sa.JSON),
        sa.Column("image_digest", sa.String(100)),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("cell_id", "attempt", name="uq_attempt_per_cell"),
    )
    op.create_index("ix_attempts_cell_id", "attempts", ["cell_id"])


def downgrade() -> None:
    op.drop_table("attempts")
    op.drop_table("cells")
