"""Alert groups: one group per change that regressed (its figures, a triage state and owner),
and an append-only log of every event of a group.

Revision ID: 0013
"""
import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alert_groups",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("suspect_kind", sa.String(16), nullable=True),
        sa.Column("suspect", sa.Text, nullable=True),
        sa.Column("previous_image", sa.String(300), nullable=True),
        sa.Column("new_image", sa.String(300), nullable=True),
        sa.Column("what_changed", sa.Text, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(100), nullable=True),
        sa.Column("first_night", sa.String(10), nullable=False),
        sa.Column("last_night", sa.String(10), nullable=False),
        sa.Column("notified_state", sa.String(16), nullable=True),
        sa.Column("notified_benchmarks", sa.Text, nullable=True),
        sa.Column("notified_night", sa.String(10), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_alert_groups_key", "alert_groups", ["key"])
    op.create_index("ix_alert_groups_state", "alert_groups", ["state"])
    op.create_table(
        "alert_group_figures",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("group_id", sa.Integer, sa.ForeignKey("alert_groups.id"), nullable=False),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("precision", sa.String(32), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("first_night", sa.String(10), nullable=False),
        sa.Column("last_night", sa.String(10), nullable=False),
        sa.Column("worst_change", sa.Float, nullable=False),
        sa.Column("line", sa.Text, nullable=False),
        sa.UniqueConstraint("group_id", "benchmark", "gpus", "precision", "metric", name="uq_alert_figure"),
    )
    op.create_index("ix_alert_group_figures_group_id", "alert_group_figures", ["group_id"])
    op.create_table(
        "alert_group_events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("group_id", sa.Integer, sa.ForeignKey("alert_groups.id"), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("who", sa.String(100), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("from_state", sa.String(16), nullable=True),
        sa.Column("to_state", sa.String(16), nullable=True),
        sa.Column("note", sa.Text, nullable=True),
    )
    op.create_index("ix_alert_group_events_group_id", "alert_group_events", ["group_id"])


def downgrade() -> None:
    op.drop_index("ix_alert_group_events_group_id", "alert_group_events")
    op.drop_table("alert_group_events")
    op.drop_index("ix_alert_group_figures_group_id", "alert_group_figures")
    op.drop_table("alert_group_figures")
    op.drop_index("ix_alert_groups_state", "alert_groups")
    op.drop_index("ix_alert_groups_key", "alert_groups")
    op.drop_table("alert_groups")
