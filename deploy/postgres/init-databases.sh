#!/usr/bin/env bash
# Two databases with their own owners: Airflow's metadata and scalebench's results (run once,
# by the postgres image's entrypoint, official or ours, on an empty data folder).
set -euo pipefail
: "${AIRFLOW_DB_PASSWORD:?}" "${SCALEBENCH_DB_PASSWORD:?}"
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres \
  -v airflow_pw="$AIRFLOW_DB_PASSWORD" -v scalebench_pw="$SCALEBENCH_DB_PASSWORD" <<'SQL'
CREATE ROLE airflow LOGIN PASSWORD :'airflow_pw';
CREATE DATABASE airflow OWNER airflow;
CREATE ROLE scalebench LOGIN PASSWORD :'scalebench_pw';
CREATE DATABASE scalebench OWNER scalebench;
SQL
