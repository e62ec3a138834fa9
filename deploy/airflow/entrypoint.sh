#!/usr/bin/env bash
# Every Airflow container starts here: refuse a missing or known placeholder secret, write the
# simple auth manager's password file from the admin secret, then run the component.
set -euo pipefail
placeholders=" changeme change_me CHANGE_ME admin airflow password postgres redis secret scalebench "
for var in AIRFLOW_ADMIN_PASSWORD AIRFLOW__API_AUTH__JWT_SECRET AIRFLOW__API__SECRET_KEY ${SCALEBENCH_SECRET_VARS:-}; do
  value="${!var:-}"
  if [ -z "$value" ] || [[ "$placeholders" == *" $value "* ]] || [[ "$value" == CHANGE_ME* ]]; then
    echo "refusing to start: $var is unset or a known placeholder; run 'make secrets' to generate .env" >&2
    exit 78
  fi
done
mkdir -p "$AIRFLOW_HOME"
python3 -c 'import json, os, sys; json.dump({"admin": os.environ["AIRFLOW_ADMIN_PASSWORD"]}, open(sys.argv[1], "w"))' \
  "$AIRFLOW_HOME/passwords.json"
chmod 600 "$AIRFLOW_HOME/passwords.json"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/passwords.json"
exec "$@"
