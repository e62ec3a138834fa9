"""Scaling predictions: each host's all-reduce bus bandwidth per GPU count and gradient size,
and the predictions frozen each night (never rewritten), with the night that judged each.

Revision ID: 0015
"""
import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "allreduce_bandwidth",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("host", sa.String(100), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("busbw_gbps", sa.Float, nullable=False),
        sa.Column("image", sa.String(300), nullable=True),
        sa.Column("night", sa.String(10), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_allreduce_bandwidth_host", "allreduce_bandwidth", ["host"])
    op.create_table(
        "predictions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("host", sa.String(100), nullable=False),
        sa.Column("precision", sa.String(32), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("hosts", sa.Integer, nullable=False),
        sa.Column("night", sa.String(10), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("model_version", sa.Integer, nullable=False),
        sa.Column("fitted_nights", sa.JSON, nullable=False),
        sa.Column("fitted_counts", sa.JSON, nullable=False),
        sa.Column("images_per_s", sa.Float, nullable=True),
        sa.Column("efficiency", sa.Float, nullable=True),
        sa.Column("low", sa.Float, nullable=True),
        sa.Column("high", sa.Float, nullable=True),
        sa.Column("line", sa.Text, nullable=False),
        sa.Column("doc", sa.JSON, nullable=False),
        sa.Column("judged_night", sa.String(10), nullable=True),
        sa.Column("measured_images_per_s", sa.Float, nullable=True),
        sa.Column("measured_efficiency", sa.Float, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("benchmark", "host", "precision", "gpus", "hosts", "night",
                            name="uq_one_prediction_per_night"),
    )
    op.create_index("ix_predictions_benchmark", "predictions", ["benchmark"])
    op.create_index("ix_predictions_night", "predictions", ["night"])


def downgrade() -> None:
    op.drop_table("predictions")
    op.drop_table("allreduce_bandwidth")
