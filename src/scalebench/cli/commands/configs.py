"""The configs, the training stacks and the fleet's Airflow pools."""
from __future__ import annotations

from scalebench.cli.arguments import Command, arg
from scalebench.cli.listing import Listing
from scalebench.core.config import PROFILES, ConfigError, Configs
from scalebench.core.config.common import ALERTS_FILE, SHIFTS_FILE


def cmd_configs(args, configs: Configs) -> Listing:
    doc = {"fleet": configs.fleet.model_dump(),
           "benchmarks": {bid: {**b.model_dump(), "resolved": {p: b.resolved(p).summary() for p in PROFILES}}
                          for bid, b in configs.benchmarks.items()}}
    rows = [{"benchmark": bid, "stack": b.stack, "model": b.model.get("architecture", ""), "dataset": b.dataset.name,
             "gpu_counts": b.gpu_counts, "per_gpu_batch": b.per_gpu_batch, "epochs": b.epochs,
             "schedule": b.schedule or "manual"}
            for bid, b in sorted(configs.benchmarks.items())]
    hosts = ", ".join(f"{h.name} ({h.kind}, {len(h.device_ids)} devices, queue {h.queue})" for h in configs.fleet.hosts)
    alerts, shifts = configs.alerts(), configs.acknowledged_shifts()
    stacks = set(configs.stacks.stacks)
    for i, route in enumerate(alerts.routes):  # a route that can never match is a typo
        for what, names, known in (("benchmarks", route.benchmarks, configs.benchmarks), ("stacks", route.stacks, stacks)):
            unknown = sorted(set(names) - set(known))
            if unknown:
                raise ConfigError(f"{configs.config_dir / ALERTS_FILE}: field 'routes.{i}.{what}': unknown {unknown}; "
                                  f"known: {sorted(known)}")
    _stack_folders(configs)
    for i, shift in enumerate(shifts):  # the report reads old entries too; validating names them
        if shift.benchmark not in configs.benchmarks:
            raise ConfigError(f"{configs.config_dir / SHIFTS_FILE}: field 'shifts.{i}.benchmark': unknown benchmark "
                              f"{shift.benchmark!r}; known: {sorted(configs.benchmarks)}")
    return Listing(list(rows[0]) if rows else [], rows, doc,
                   notes=[f"fleet: {hosts}", f"alerts: {alerts.notifier}", f"acknowledged shifts: {len(shifts)}"])


def _stack_folders(configs: Configs) -> None:
    """Each stack of stacks.yaml has its folder's Dockerfile (where the checkout holds containers/:
    an installed deployment without the build tree has nothing to check)."""
    from scalebench.core import paths
    from scalebench.core.config.common import STACKS_FILE

    root = paths.project_root()
    if root is None or not (root / "containers").is_dir():
        return
    for name in configs.stacks.stacks:
        dockerfile = root / "containers" / name / "Dockerfile"
        if not dockerfile.is_file():
            raise ConfigError(f"{configs.config_dir / STACKS_FILE}: field 'stacks.{name}': no {dockerfile}; a stack "
                              "is an entry here and its folder containers/<name>/ with its Dockerfile")


def cmd_stacks(args, configs: Configs) -> Listing | str:
    """The training stacks of include/configs/stacks.yaml; --build-order and --base-of serve make and scripts."""
    stacks = configs.stacks
    if args.base_of:
        if args.base_of not in stacks.stacks:
            raise ConfigError(f"unknown stack {args.base_of!r}; expected one of {sorted(stacks.stacks)}")
        return stacks.stacks[args.base_of].base or ""
    if args.build_order:
        return "\n".join(stacks.build_order())
    rows = [{"stack": name, "base": s.base, "launcher": s.launcher, "processes_per_device": s.processes_per_device,
             "formats": s.formats, "cpu_image": s.images.get("cpu"), "gpu_image": s.images.get("gpu")}
            for name, s in ((n, stacks.stacks[n]) for n in stacks.build_order())]
    return Listing(list(rows[0]), rows, stacks.model_dump())


def cmd_pools(args, configs: Configs) -> Listing:
    """One Airflow pool per host, sized to its devices (pool_slots of a cell = its GPU count)."""
    wanted = {h.pool: len(h.device_ids) for h in configs.fleet.hosts}
    if args.apply:
        from airflow.models.pool import Pool

        from sqlalchemy.exc import DBAPIError

        try:
            for h in configs.fleet.hosts:
                Pool.create_or_update_pool(h.pool, len(h.device_ids), f"scalebench host {h.name} ({h.kind})", False)
        except DBAPIError as exc:
            from airflow.configuration import conf

            from scalebench.store.db import shown_url

            url = shown_url(conf.get("database", "sql_alchemy_conn"))
            raise ConfigError(f"pools --apply: the Airflow metadata DB {url} refused the pools "
                              f"({str(exc.orig).splitlines()[0][:200]}); run `airflow db migrate` with this "
                              "AIRFLOW_HOME first (make airflow-db does)") from None
    rows = [{"pool": h.pool, "slots": len(h.device_ids), "host": h.name, "queue": h.queue} for h in configs.fleet.hosts]
    return Listing(["pool", "slots", "host", "queue"], rows, {"pools": wanted, "applied": bool(args.apply)},
                   notes=["applied to the Airflow metadata DB" if args.apply else "not applied (--apply writes them)"])


CONFIGS = Command("configs", "validate the configs: one row per benchmark (-o json: every resolved field)", cmd_configs,
                  listing=True)
STACKS = Command("stacks", "the training stacks (include/configs/stacks.yaml), in build order", cmd_stacks, (
    arg("--build-order", action="store_true", help="only the names, each after the stack it is built FROM"),
    arg("--base-of", metavar="STACK", help="only the stack STACK is built FROM (empty: the base image)"),
), listing=True)
POOLS = Command("pools", "the Airflow pools of the fleet (one per host)", cmd_pools, (
    arg("--apply", action="store_true", help="create or update them in the Airflow metadata DB"),
), listing=True)
