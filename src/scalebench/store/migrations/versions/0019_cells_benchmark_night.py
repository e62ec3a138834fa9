"""Indexes of the cells and of the frozen predictions by benchmark and night: a record step's summary of one benchmark's night
(and any read of a benchmark's window) finds its cells without reading all of that benchmark's
years (a 10-million-cell store: 570 ms a summary, from 65 ms at 1 million). It replaces the index
by benchmark alone, which it leads with (SQLite chose that one to keep the cells' order and read
every night of the benchmark); the predictions' likewise (the history page draws a window's).

Revision ID: 0019
"""
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_cells_benchmark_night", "cells", ["benchmark", "night"])
    op.drop_index("ix_cells_benchmark", table_name="cells")
    op.create_index("ix_predictions_benchmark_night", "predictions", ["benchmark", "night"])
    op.drop_index("ix_predictions_benchmark", table_name="predictions")


def downgrade() -> None:
    op.create_index("ix_predictions_benchmark", "predictions", ["benchmark"])
    op.drop_index("ix_predictions_benchmark_night", table_name="predictions")
    op.create_index("ix_cells_benchmark", "cells", ["benchmark"])
    op.drop_index("ix_cells_benchmark_night", table_name="cells")
