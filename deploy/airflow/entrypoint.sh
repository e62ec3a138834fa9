#!/usr/bin/env bash
# Every Airflow container starts here: refuse a missing or known placeholder secret, write the
# simple auth manager's password file (the admin, and the `notes` account of the USER role that
# task notes use), then run the component.
set -euo pipefail
placeholders=" changeme change_me CHANGE_ME admin airflow password postgres redis secret scalebench "
for var in AIRFLOW_ADMIN_PASSWORD AIRFLOW_NOTES_PASSWORD AIRFLOW__API_AUTH__JWT_SECRET AIRFLOW__API__SECRET_KEY \
           AIRFLOW__CORE__FERNET_KEY ${SCALEBENCH_SECRET_VARS:-}; do
  value="${!var:-}"
  if [ -z "$value" ] || [[ "$placeholders" == *" $value "* ]] || [[ "$value" == CHANGE_ME* ]]; then
    echo "refusing to start: $var is unset or a known placeholder; run 'make secrets' to generate .env" >&2
    exit 78
  fi
done
mkdir -p "$AIRFLOW_HOME"
umask 077
python3 -c 'import json, os, sys; json.dump({"admin": os.environ["AIRFLOW_ADMIN_PASSWORD"],
                                            "notes": os.environ["AIRFLOW_NOTES_PASSWORD"]}, open(sys.argv[1], "w"))' \
  "$AIRFLOW_HOME/passwords.json"
umask 022
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin,notes:user"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE="$AIRFLOW_HOME/passwords.json"
exec "$@"
