"""Nights and run completion: cells.night, attempts.config_sha/timing, benchmark_runs.

Revision ID: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("night", sa.String(10)))
    op.execute("UPDATE cells SET night = substr(CAST(created_at AS VARCHAR(40)), 1, 10) WHERE night IS NULL")
    op.create_index("ix_cells_night", "cells", ["night"])
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("config_sha", sa.String(64)))
        batch.add_column(sa.Column("timing", sa.JSON))
    op.create_table(
        "benchmark_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("run_type", sa.String(32), nullable=False),
        sa.Column("night", sa.String(10), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("counts", sa.JSON),
        sa.UniqueConstraint("dag_id", "run_id", name="uq_benchmark_run"),
    )
    op.create_index("ix_benchmark_runs_night", "benchmark_runs", ["night"])


def downgrade() -> None:
    op.drop_table("benchmark_runs")
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("timing")
        batch.drop_column("config_sha")
    op.drop_index("ix_cells_night", "cells")
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("night")
