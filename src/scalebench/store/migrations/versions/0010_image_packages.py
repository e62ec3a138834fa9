"""Image packages: what each training image carries (Python packages with versions, Debian
packages, CUDA libraries), read once per image inside it and kept by its digest, so a change
verdict, an alert and `scalebench diff` can name the packages that changed.

Revision ID: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "image_packages",
        sa.Column("digest", sa.String(100), primary_key=True),   # the engine's image ID (sha256:...)
        sa.Column("image", sa.String(300), nullable=False),      # the reference it was read as (name:tag)
        sa.Column("ref", sa.String(300), nullable=False),        # a reference that runs it again (tag by digest, or repo@digest)
        sa.Column("packages", sa.JSON, nullable=False),          # {"python": {..}, "debian": {..}, "cuda": {..}}
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_image_packages_image", "image_packages", ["image"])
    op.create_index("ix_image_packages_ref", "image_packages", ["ref"])


def downgrade() -> None:
    op.drop_index("ix_image_packages_ref", "image_packages")
    op.drop_index("ix_image_packages_image", "image_packages")
    op.drop_table("image_packages")
