"""The host assignment as the nights use it: decided from the configs, the fleet, the stored
costs and the stored assignment (`scalebench.core.assignment`), and stored when it changes."""
from __future__ import annotations

from scalebench.core.assignment import Assignment
from scalebench.core.config import Configs
from scalebench.core.plan import assigned_plan, stored_inputs


def settle(configs: Configs, store, *, save: bool = True) -> Assignment:
    """Every benchmark's host tonight; `save`: keep what changed (a run planning its cells), else
    a preview (`scalebench plan`)."""
    from sqlalchemy.exc import IntegrityError

    costs, previous = stored_inputs(store)
    for attempt in (1, 2):  # two runs planning at once: the second finds the first's rows and agrees
        if attempt == 2:
            previous = {b: row["host"] for b, row in store.assignments().items()}
        _, a = assigned_plan(configs.benchmarks, configs.fleet, "nightly", stored=costs, previous=previous,
                             probe=configs.probe())
        if not save:
            return a
        try:
            store.save_assignments(a.hosts, a.why)
            return a
        except IntegrityError:
            if attempt == 2:
                raise
    return a
