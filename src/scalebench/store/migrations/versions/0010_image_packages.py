"""Image packages and bisects: what each training image carries (Python packages with versions,
Debian packages, CUDA libraries), read once per image inside it and kept by its digest, so a
change verdict, an alert and `scalebench diff` can name the packages that changed; and each
bisect between images, one row per step with its runs, figures and verdicts.

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
    op.create_table(
        "bisect_steps",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("bisect_id", sa.String(100), nullable=False),  # one bisect: benchmark, GPU count and when it began
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("run_id", sa.String(250), nullable=True),      # the benchmark's run that ran the step's cells
        sa.Column("doc", sa.JSON, nullable=False),               # the step (images, figures, lines) and the state after it
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("bisect_id", "step", name="uq_bisect_step"),
    )


def downgrade() -> None:
    op.drop_table("bisect_steps")
    op.drop_index("ix_image_packages_ref", "image_packages")
    op.drop_index("ix_image_packages_image", "image_packages")
    op.drop_table("image_packages")
