#!/usr/bin/env bash
# Every Airflow container starts here: refuse a missing or known placeholder secret (the ones every
# component has, and those its service names in SCALEBENCH_SECRET_VARS), and in the api-server
# copy the users' passwords (the admin, and the `notes` account of the USER role that task notes
# use) from their mounted file to where Airflow's simple auth manager keeps them; then run the
# component. No password is in any container's environment.
set -euo pipefail
export SCALEBENCH_PLACEHOLDERS=" changeme change_me CHANGE_ME admin airflow password postgres redis secret scalebench "
placeholder() { [ -z "$1" ] || [[ "$SCALEBENCH_PLACEHOLDERS" == *" $1 "* ]] || [[ "$1" == CHANGE_ME* ]]; }
for var in AIRFLOW__API__SECRET_KEY AIRFLOW__CORE__FERNET_KEY ${SCALEBENCH_SECRET_VARS:-}; do
  if placeholder "${!var:-}"; then
    echo "refusing to start: $var is unset or a known placeholder; run 'make secrets' to generate .env" >&2
    exit 78
  fi
done
mkdir -p "$AIRFLOW_HOME"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin,notes:user"
if [ -n "${SCALEBENCH_PASSWORDS_FROM:-}" ]; then
  umask 077
  python3 - "$SCALEBENCH_PASSWORDS_FROM" "$AIRFLOW_HOME/passwords.json" <<'PY' || exit 78
import json, os, sys
source, target = sys.argv[1:]
try:
    passwords = json.load(open(source))
except (OSError, ValueError) as exc:
    sys.exit(f"refusing to start: no users' passwords in {source} ({exc}); run 'make stack' to write it from .env")
placeholders = os.environ["SCALEBENCH_PLACEHOLDERS"].split()
for user in ("admin", "notes"):
    value = passwords.get(user) or ""
    if not value or value in placeholders or value.startswith("CHANGE_ME"):
        sys.exit(f"refusing to start: the {user} password in {source} is unset or a known placeholder; run 'make secrets'")
json.dump({u: passwords[u] for u in ("admin", "notes")}, open(target, "w"))  # Airflow opens it for writing
PY
  umask 022
  export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/passwords.json"
fi
unset SCALEBENCH_PLACEHOLDERS
exec "$@"
