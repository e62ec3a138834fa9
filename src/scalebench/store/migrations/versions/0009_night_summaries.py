"""Night summaries: one row per (benchmark, night, GPU count, precision), written when a run is
recorded, so the history pages read a few rows per night instead of scanning every figure.
Derived data: `scalebench db summarize` rebuilds them from the attempts, which stay the record.

Revision ID: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
rebuilds_summaries = True  # `scalebench db upgrade` summarizes the nights stored so far


def upgrade() -> None:
    op.create_table(
        "night_summaries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("night", sa.String(10), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("precision", sa.String(32), nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=False),
        sa.Column("run_type", sa.String(32), nullable=False),
        sa.Column("profile", sa.String(16), nullable=False),
        sa.Column("host", sa.String(100), nullable=False),
        sa.Column("cells", sa.Integer, nullable=False),
        sa.Column("valid", sa.Integer, nullable=False),
        sa.Column("retried", sa.Integer, nullable=False),
        sa.Column("reruns", sa.Integer, nullable=False),
        sa.Column("basis", sa.String(16), nullable=True),
        sa.Column("train_s", sa.Float, nullable=True),
        sa.Column("images_per_s", sa.Float, nullable=True),
        sa.Column("relative_time", sa.Float, nullable=True),
        sa.Column("relative_time_ci", sa.JSON, nullable=True),
        sa.Column("metrics", sa.JSON, nullable=True),
        sa.Column("step_shares", sa.JSON, nullable=True),
        sa.Column("image_digest", sa.String(100), nullable=True),
        sa.Column("fingerprint", sa.JSON, nullable=True),
        sa.Column("marks", sa.JSON, nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("benchmark", "night", "gpus", "precision", name="uq_night_summary"),
    )
    op.create_index("ix_night_summaries_benchmark_night", "night_summaries", ["benchmark", "night"])
    op.create_index("ix_night_summaries_night", "night_summaries", ["night"])


def downgrade() -> None:
    op.drop_index("ix_night_summaries_night", "night_summaries")
    op.drop_index("ix_night_summaries_benchmark_night", "night_summaries")
    op.drop_table("night_summaries")
