#!/usr/bin/env bash
# The distributed deployment on this host (docker-compose.yaml): up (build, start, wait for
# health, print the login), down (stop and remove the containers; data volume kept), ps.
# Uses Compose v2 (`docker compose`) when present, else docker-compose v1 (installed from
# Debian's packages when missing and run as root on Debian).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if docker compose version >/dev/null 2>&1; then compose=(docker compose); ps_all=(ps -a -q); else
  ps_all=(ps -q)
  if ! command -v docker-compose >/dev/null; then
    if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
      echo "installing docker-compose (Debian package)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
    else echo "stack.sh: install Docker Compose (v2 plugin or docker-compose 1.29)" >&2; exit 1; fi
  fi
  compose=(docker-compose)
fi
if [ "${1:-}" = install ]; then "${compose[@]}" version; exit 0; fi  # make test: Compose for the config test
[ -f .env ] || { echo "stack.sh: no .env; run 'make secrets' first" >&2; exit 1; }
get() { sed -n "s/^$1=//p" .env | tail -1; }
# The api-server's users' passwords, from .env: mounted into that container only (no container has
# them in its environment). The folder is private; the file is readable by the container's user.
write_passwords() {
  install -d -m 700 .secrets
  ADMIN="$(get AIRFLOW_ADMIN_PASSWORD)" NOTES="$(get AIRFLOW_NOTES_PASSWORD)" python3 -c '
import json, os, sys
json.dump({"admin": os.environ["ADMIN"], "notes": os.environ["NOTES"]}, open(sys.argv[1], "w"))' .secrets/api-passwords.json.new
  chmod 644 .secrets/api-passwords.json.new && mv .secrets/api-passwords.json.new .secrets/api-passwords.json
}

# The address users reach the UI at (Airflow's base_url: login redirects, report and alert links):
# SCALEBENCH_BASE_URL, else the SCALEBENCH_BIND address (this machine's name for 0.0.0.0), else localhost
base_url() {
  PYTHONPATH="$root/src" python3 -m scalebench.core.web_origin "${SCALEBENCH_BASE_URL:-$(get SCALEBENCH_BASE_URL)}" \
    "${SCALEBENCH_BIND:-$(get SCALEBENCH_BIND)}" "$(get AIRFLOW_PORT)" \
    "${SCALEBENCH_TRUSTED_ORIGINS:-$(get SCALEBENCH_TRUSTED_ORIGINS)}"
}
SCALEBENCH_BASE_URL="$(base_url)" || exit 2
export SCALEBENCH_BASE_URL

case "${1:-}" in
  up)
    began=$(date +%s)
    mkdir -p "$(get SCALEBENCH_STATE)"
    write_passwords
    if ! "${compose[@]}" up -d --no-build; then
      "${compose[@]}" logs --tail 20 airflow-init >&2; exit 1
    fi
    for _ in $(seq 1 120); do
      unhealthy=$("${compose[@]}" "${ps_all[@]}" | xargs docker inspect -f '{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' \
                  | grep -v -E ' (healthy|exited)$' || true)
      [ -z "$unhealthy" ] && break
      sleep 5
    done
    if [ -n "$unhealthy" ]; then echo "not healthy after 600 s: $unhealthy" >&2; exit 1; fi
    init_rc=$(docker inspect -f '{{.State.ExitCode}}' "$("${compose[@]}" "${ps_all[@]}" airflow-init)")
    [ "$init_rc" = 0 ] || { "${compose[@]}" logs airflow-init | tail -20 >&2; exit 1; }
    echo "Airflow UI: $SCALEBENCH_BASE_URL  user: admin  password: in $root/.env (AIRFLOW_ADMIN_PASSWORD)  (stack healthy in $(( $(date +%s) - began )) s; stop: make stack-down)"
    ;;
  down) "${compose[@]}" down --remove-orphans ;;
  ps) "${compose[@]}" ps ;;
  compose) shift; "${compose[@]}" "$@" ;;
  *) echo "usage: deploy/stack.sh install|up|down|ps|compose ARGS" >&2; exit 2 ;;
esac
