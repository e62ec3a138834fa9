"""Alembic environment for the results database (run by scalebench.store.db.upgrade)."""
from alembic import context
from sqlalchemy import engine_from_config, pool

import scalebench.store.alert_tables  # noqa: F401  (their tables join Base.metadata)
import scalebench.store.lease_tables  # noqa: F401
import scalebench.store.prediction_tables  # noqa: F401
import scalebench.store.profiles  # noqa: F401
import scalebench.store.results  # noqa: F401
from scalebench.store.db import Base

config = context.config
connectable = engine_from_config(config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.",
                                 poolclass=pool.NullPool)
with connectable.connect() as connection:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
