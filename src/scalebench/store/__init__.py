"""Layer 2: the results store: engine and schema (Alembic migrations), cells and attempts,
device leases, recording attempt folders, retention. Imports only `core`."""
