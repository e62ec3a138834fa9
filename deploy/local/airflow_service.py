"""Airflow as a service on one machine (`make airflow` / `make airflow-stop`).

Starts the api-server, scheduler, dag-processor and triggerer on the LocalExecutor with the
SQLite metadata DB in $AIRFLOW_HOME, one admin user with a generated password (printed as
where it is, never itself), a `notes` account of the USER role for the task-note connection, a
read-only `viewer` account (its password in the same file),
Fernet key that encrypts connections made in the UI, the api-server on 127.0.0.1 unless
SCALEBENCH_BIND says otherwise, and the settings a new user would otherwise guess (sizing,
plugins, examples off, DAGs unpaused at creation). Records each process it started, so `stop` ends those processes and
their children, and nothing else.

Airflow's own settings for a quiet idle service come from deploy/airflow/settings.env (shared
with the compose stack). Where fleet.yaml pins the cells to cores (a host's `cpus`), the
components and every process they start run on the cores left over, said in the startup line;
`cores [QUEUES]` prints that list (empty: no core to spare) for the compose stack.

`units DIR` writes the same components as systemd units instead (one service each, a target
that wants them all, and their environment file), so a GPU machine runs its nightly schedule
again after a reboot; `make airflow-units` writes and verifies them.

Usage: python deploy/local/airflow_service.py start|stop|status|restart COMPONENT|units DIR|cores [QUEUES]
(the Makefile sets the env)
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

COMPONENTS = ["api-server", "scheduler", "dag-processor", "triggerer"]  # api-server first: the others call it
USER = "admin"
NOTES_USER = "notes"  # the task-note connection's account: role USER, not the admin login
VIEWER = "viewer"     # a read-only login (role VIEWER): pages and alert groups, no action
HOME = Path(os.environ["AIRFLOW_HOME"])
SERVICE = HOME / "service"
PIDS = SERVICE / "pids.json"
SECRETS = SERVICE / "secrets.json"
PASSWORDS = SERVICE / "passwords.json"
PORT = int(os.environ.get("AIRFLOW_PORT", "8080"))
AIRFLOW = Path(sys.executable).parent / "airflow"
SETTINGS = Path(__file__).resolve().parents[1] / "airflow" / "settings.env"


def fernet_key() -> str:
    """A key in Fernet's format (32 random bytes, url-safe base64), without the cryptography package."""
    import base64

    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def load_secrets() -> dict:
    """The passwords and the keys every component must share (JWTs signed by the scheduler are
    checked by the api-server; connections are encrypted with the Fernet key), generated once
    and kept private to this user. A key missing from an older service's file is added."""
    SERVICE.mkdir(parents=True, exist_ok=True)
    SERVICE.chmod(0o700)
    kept = json.loads(SECRETS.read_text()) if SECRETS.exists() else {}
    made = {"password": secrets.token_urlsafe(12), "jwt_secret": secrets.token_urlsafe(32),
            "api_secret_key": secrets.token_urlsafe(32), "notes_password": secrets.token_urlsafe(24),
            "viewer_password": secrets.token_urlsafe(12),
            "fernet_key": fernet_key(), **kept}
    if made != kept:
        for path, doc in ((SECRETS, made), (PASSWORDS, {USER: made["password"], NOTES_USER: made["notes_password"],
                                                VIEWER: made["viewer_password"]})):
            path.touch(mode=0o600)
            path.write_text(json.dumps(doc))
    return made


def parallelism() -> int:
    """Every device slot of the fleet busy with a cell, plus room for the light tasks around them."""
    from scalebench.core.config import Configs

    return sum(len(h.device_ids) for h in Configs().fleet.hosts) + 4


def settings() -> dict[str, str]:
    """deploy/airflow/settings.env: KEY=VALUE lines, `#` comments."""
    lines = (line.strip() for line in SETTINGS.read_text().splitlines())
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def cores(queues: list[str] | None = None) -> tuple[list[int] | None, str]:
    """The cores the components run on (None: all) and the sentence that says why. The cells of
    every fleet host run on this machine (LocalExecutor), or those of `queues`' hosts (a Celery worker)."""
    from scalebench.core.config import Configs
    from scalebench.core.config.fleet import orchestrator_cores

    hosts = [h for h in Configs().fleet.hosts if queues is None or h.queue in queues]
    return orchestrator_cores(hosts, sorted(os.sched_getaffinity(0)))


def pinned(to: list[int] | None):
    """What a component's Popen runs in the child before exec: its cores (inherited by all it starts)."""
    return (lambda: os.sched_setaffinity(0, to)) if to else None


def addresses() -> tuple[str, str]:
    """(the address users reach the UI at: Airflow's base_url, login redirects and the links of the
    report and alerts; where this machine's processes reach the api-server). SystemExit names a
    bad SCALEBENCH_BASE_URL, SCALEBENCH_BIND or SCALEBENCH_TRUSTED_ORIGINS."""
    from scalebench.core.web_origin import AddressError, internal_url, public_url, trusted_origins

    bind = os.environ.get("SCALEBENCH_BIND")
    try:
        trusted_origins(os.environ.get("SCALEBENCH_TRUSTED_ORIGINS"))
        return public_url(os.environ.get("SCALEBENCH_BASE_URL"), bind, PORT), internal_url(bind, PORT)
    except AddressError as exc:
        raise SystemExit(f"airflow_service: {exc}") from None


def service_env(keys: dict) -> dict:
    public, internal = addresses()
    env = dict(os.environ)
    env.update(settings())
    env.update({
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin,{NOTES_USER}:user,{VIEWER}:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(PASSWORDS),
        "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt_secret"],
        "AIRFLOW__API__SECRET_KEY": keys["api_secret_key"],
        "AIRFLOW__CORE__FERNET_KEY": keys["fernet_key"],
        "AIRFLOW__API__PORT": str(PORT),
        "AIRFLOW__API__HOST": os.environ.get("SCALEBENCH_BIND") or "127.0.0.1",  # this machine only, unless told
        "AIRFLOW__API__BASE_URL": public,
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{internal}/execution/",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism()),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",  # schedules wait for their next cron time
        # task notes go through the REST API of this api-server (see scalebench.orchestration.notes),
        # as an account of the USER role: it can edit DAG runs and task instances, not connections
        "AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API": internal.replace("://", f"://{NOTES_USER}:{keys['notes_password']}@", 1),
    })
    return env


TARGET = "scalebench-airflow.target"
# what the Makefile exports (and any SCALEBENCH_* setting): the environment a unit must carry
CARRIED = ("AIRFLOW_HOME", "AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW__CORE__PLUGINS_FOLDER", "AIRFLOW__CORE__LOAD_EXAMPLES",
           "AIRFLOW__CORE__EXECUTOR", "GX_ANALYTICS_ENABLED", "DOCKER_HOST")


def unit_name(component: str) -> str:
    return f"scalebench-airflow-{component}.service"


def units(out_dir: Path) -> dict[str, str]:
    """{file name: text} of the systemd units: one service per component, restarted on failure,
    after Docker and the network; a target wanting them all, enabled for multi-user boot. Their
    environment file holds the secrets (mode 0600, beside the service's other secrets)."""
    keys = load_secrets()
    env = service_env(keys)
    carried = {k: v for k, v in env.items() if k in CARRIED or k.startswith(("SCALEBENCH_", "AIRFLOW__"))
               or k == "AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API"}
    env_file = SERVICE / "systemd.env"
    env_file.touch(mode=0o600)
    env_file.write_text("".join(f"{k}={json.dumps(v, ensure_ascii=False)}\n" for k, v in sorted(carried.items())))
    user = psutil.Process().username()
    project = Path(__file__).resolve().parents[2]
    on, why = cores()
    # the cores no cell is pinned to (make airflow-units again after fleet.yaml's `cpus` change)
    affinity = f"# {why}\nCPUAffinity={' '.join(map(str, on))}\n" if on else f"# {why}\n"
    out = {}
    for i, name in enumerate(COMPONENTS):
        after = " ".join(["network-online.target", "docker.service", *(unit_name(c) for c in COMPONENTS[:i][:1])])
        out[unit_name(name)] = f"""[Unit]
Description=scalebench: Airflow {name}
Documentation=file://{project}/docs/deploy.md
Wants=network-online.target docker.service
After={after}
PartOf={TARGET}

[Service]
Type=simple
User={user}
WorkingDirectory={project}
EnvironmentFile={env_file}
ExecStart={AIRFLOW} {name}
{affinity}Restart=on-failure
RestartSec=10
# SIGTERM to the component first (the scheduler then stops its task processes), the rest after
KillMode=mixed
TimeoutStopSec=90

[Install]
WantedBy={TARGET}
"""
    out[TARGET] = f"""[Unit]
Description=scalebench: Airflow (api-server, scheduler, dag-processor, triggerer)
Wants={" ".join(unit_name(c) for c in COMPONENTS)}
After=network-online.target docker.service

[Install]
WantedBy=multi-user.target
"""
    out_dir.mkdir(parents=True, exist_ok=True)
    for fname, text in out.items():
        (out_dir / fname).write_text(text)
    return out


def write_units(out_dir: str) -> int:
    d = Path(out_dir)
    written = units(d)
    print(f"wrote {len(written)} systemd units to {d} (environment: {SERVICE / 'systemd.env'}, mode 0600)")
    print("install (stop `make airflow`'s processes first: make airflow-stop):")
    print(f"  sudo cp {d}/scalebench-airflow* /etc/systemd/system/ && sudo systemctl daemon-reload")
    print(f"  sudo systemctl enable --now {TARGET}")
    return 0


def started_at(pid: int) -> float:
    """When a process started, on a clock no time adjustment moves where the system has one: on
    Linux its start in clock ticks since boot (/proc/<pid>/stat, field 22). psutil's create_time
    adds the boot time, which the kernel recomputes from the wall clock as a whole second, so a
    small adjustment moves it by exactly one second."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        return float(stat.read_text().rsplit(")", 1)[1].split()[19])
    return psutil.Process(pid).create_time()


def recorded() -> dict[str, psutil.Process]:
    """The processes this service started that are still the same processes (pid and start)."""
    if not PIDS.exists():
        return {}
    alive = {}
    for name, rec in json.loads(PIDS.read_text()).items():
        try:
            proc = psutil.Process(rec["pid"])
            if "start" in rec and started_at(proc.pid) == rec["start"] or \
                    "start" not in rec and abs(proc.create_time() - rec["started"]) <= 1:  # a record from before
                alive[name] = proc
        except (psutil.NoSuchProcess, OSError):
            pass
    return alive


def healthy(timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{addresses()[1]}/api/v2/monitor/health", timeout=3) as r:
                doc = json.load(r)
            if all(doc.get(c, {}).get("status") == "healthy" for c in ("metadatabase", "scheduler", "triggerer",
                                                                         "dag_processor")):
                return True
        except OSError:
            pass
        time.sleep(1)
    return False


def start() -> int:
    running = recorded()
    if running and set(running) == set(COMPONENTS):
        print(login_line(load_secrets()) + " (already running)")
        return 0
    if running:
        print(f"restarting: {sorted(set(COMPONENTS) - set(running))} had stopped")
        stop()
    keys = load_secrets()
    env = service_env(keys)
    on, why = cores()
    began = time.monotonic()
    pids = {}
    for name in COMPONENTS:
        log = open(SERVICE / f"{name}.log", "ab")
        proc = subprocess.Popen([str(AIRFLOW), name], env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=pinned(on))
        pids[name] = {"pid": proc.pid, "start": started_at(proc.pid)}
        PIDS.write_text(json.dumps(pids))
    if not healthy(240):
        print(f"Airflow did not become healthy within 240 s; logs: {SERVICE}/*.log", file=sys.stderr)
        stop()
        return 1
    print(login_line(keys) + f" (started in {time.monotonic() - began:.0f} s; logs: {SERVICE}; stop: make airflow-stop)")
    print(why)
    return 0


def restart(name: str) -> int:
    """Stop one component (and the processes under it, e.g. the scheduler's task workers) and
    start it again with the same settings; the others keep running."""
    procs = recorded()
    if name not in COMPONENTS or set(procs) != set(COMPONENTS):
        print(f"restart: {name!r} is not one of {COMPONENTS}, or the service is not fully running", file=sys.stderr)
        return 2
    proc = procs[name]
    tree = [proc, *_children(proc)]
    for p in tree:
        p.terminate()
    _, left = psutil.wait_procs(tree, timeout=30)
    for p in left:
        p.kill()
    log = open(SERVICE / f"{name}.log", "ab")
    new = subprocess.Popen([str(AIRFLOW), name], env=service_env(load_secrets()), stdout=log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=pinned(cores()[0]))
    pids = json.loads(PIDS.read_text())
    pids[name] = {"pid": new.pid, "start": started_at(new.pid)}
    PIDS.write_text(json.dumps(pids))
    ok = healthy(240)
    print(f"restarted {name} (pid {new.pid}); {'healthy' if ok else 'NOT healthy after 240 s'}")
    return 0 if ok else 1


def login_line(keys: dict) -> str:
    """Where to log in (the address links and redirects use: SCALEBENCH_BASE_URL, else the
    SCALEBENCH_BIND address, else localhost), the user, and where the password is."""
    return f"Airflow UI: {addresses()[0]}  user: {USER}  password: in {PASSWORDS} (key \"{USER}\")"


def stop() -> int:
    procs = recorded()
    tree = [p for proc in procs.values() for p in [proc, *_children(proc)]]
    for p in tree:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, left = psutil.wait_procs(tree, timeout=30)
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=10)
    PIDS.unlink(missing_ok=True)
    print(f"stopped {len(procs)} Airflow components ({len(tree)} processes)" if procs else "Airflow was not running")
    return 0


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def status() -> int:
    procs = recorded()
    for name in COMPONENTS:
        print(f"{name:14} {'running, pid ' + str(procs[name].pid) if name in procs else 'stopped'}")
    return 0 if set(procs) == set(COMPONENTS) else 3


if __name__ == "__main__":
    action = sys.argv[1] if len(sys.argv) > 1 else ""
    if action == "restart" and len(sys.argv) == 3:
        sys.exit(restart(sys.argv[2]))
    if action == "units" and len(sys.argv) == 3:
        sys.exit(write_units(sys.argv[2]))
    if action == "cores" and len(sys.argv) <= 3:  # the compose stack's cpuset: the list on stdout, why on stderr
        on, why = cores(sys.argv[2].split(",") if len(sys.argv) == 3 else None)
        print(",".join(map(str, on or [])))
        print(why, file=sys.stderr)
        sys.exit(0)
    if action not in ("start", "stop", "status"):
        sys.exit("usage: airflow_service.py start|stop|status|restart COMPONENT|units DIR|cores [QUEUES]")
    sys.exit({"start": start, "stop": stop, "status": status}[action]())
