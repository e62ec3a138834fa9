"""A team's deployment: each alert channel's deliveries (a route that failed is kept and retried
alone), and columns wide enough for the values a config or trigger may give (GPU UUIDs as device
ids, eight of them in a lease event, a bisection cell's label with its image tag).

Revision ID: 0016
"""
import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("group_id", sa.Integer, sa.ForeignKey("alert_groups.id"), nullable=False),
        sa.Column("channel", sa.String(100), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("night", sa.String(10), nullable=False),
        sa.Column("delivered", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_alert_deliveries_group_id", "alert_deliveries", ["group_id"])
    with op.batch_alter_table("device_leases") as batch:
        batch.alter_column("device_id", type_=sa.String(64), existing_type=sa.String(32), existing_nullable=False)
    with op.batch_alter_table("lease_events") as batch:
        batch.alter_column("devices", type_=sa.Text, existing_type=sa.String(255), existing_nullable=False)
    with op.batch_alter_table("cells") as batch:
        batch.alter_column("label", type_=sa.String(300), existing_type=sa.String(100), existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.alter_column("label", type_=sa.String(100), existing_type=sa.String(300), existing_nullable=False)
    with op.batch_alter_table("lease_events") as batch:
        batch.alter_column("devices", type_=sa.String(255), existing_type=sa.Text, existing_nullable=False)
    with op.batch_alter_table("device_leases") as batch:
        batch.alter_column("device_id", type_=sa.String(32), existing_type=sa.String(64), existing_nullable=False)
    op.drop_table("alert_deliveries")
