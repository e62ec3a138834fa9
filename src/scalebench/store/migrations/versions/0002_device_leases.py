"""Device leases (which cell holds which GPU ids on a host, and their history) and each
attempt's placement (device ids, timing policy, co-tenants, pre-flight).

Revision ID: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("placement", sa.JSON))
    op.create_table(
        "lease_hosts",
        sa.Column("host", sa.String(100), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
    )
    op.create_table(
        "device_leases",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("lease_id", sa.String(64), nullable=False),
        sa.Column("host", sa.String(100), nullable=False),
        sa.Column("device_id", sa.String(32), nullable=False),
        sa.Column("cell_key", sa.String(64), nullable=False),
        sa.Column("holder_host", sa.String(255), nullable=False),
        sa.Column("holder_pid", sa.Integer, nullable=False),
        sa.Column("exclusive", sa.Boolean, nullable=False),
        sa.Column("acquired_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.UniqueConstraint("host", "device_id", name="uq_one_lease_per_device"),
    )
    op.create_index("ix_device_leases_lease_id", "device_leases", ["lease_id"])
    op.create_table(
        "lease_events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("lease_id", sa.String(64), nullable=False),
        sa.Column("host", sa.String(100), nullable=False),
        sa.Column("devices", sa.String(255), nullable=False),
        sa.Column("cell_key", sa.String(64), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text),
        sa.Column("at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("lease_events")
    op.drop_table("device_leases")
    op.drop_table("lease_hosts")
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("placement")
