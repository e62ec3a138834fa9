#!/usr/bin/env bash
# Builds the deployment's images on the offline base: scalebench/airflow (always), and
# PostgreSQL/Redis from Debian's packages when .env names the local ones (no registry).
# Usage: deploy/build-images.sh            (what .env asks for)
#        deploy/build-images.sh postgres   (only scalebench/postgres:15, e.g. for the tests)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
env_file="$root/.env"
base="${BASE_IMAGE:-scalebench/debian-base:bookworm}"
get() { sed -n "s/^$1=//p" "$env_file" | tail -1; }
[ "$base" != "scalebench/debian-base:bookworm" ] || "$root/containers/base/make-base-image.sh" "$base"
"$root/containers/build-ca.sh"
records="${SCALEBENCH_HOME:-$root/.state}/images"
build() {  # IMAGE DOCKERFILE [build args...]
  local image="$1" file="$2"; shift 2
  echo "building $image"
  DOCKER_BUILDKIT=0 docker build -q -f "$root/$file" --build-arg BASE_IMAGE="$base" "$@" -t "$image" "$root" >/dev/null 2> >(grep -v -e "^DEPRECATED: The legacy builder" -e "BuildKit is currently disabled" -e "^ *environment-variable" -e "^$" >&2)
  docker image inspect -f "$image {{.Size}} bytes" "$image"
  record "$image"
}
record() {  # the Debian packages an image was built with, beside it (Debian's point releases move them)
  local image="$1" out; mkdir -p "$records"
  out="$records/$(echo "$image" | tr '/:' '__').packages.txt"
  docker run --rm --user 0 --entrypoint dpkg-query "$image" -W -f '${Package} ${Version}\n' >"$out"
  echo "  $(grep -E '^(postgresql-15|redis-server|python3) ' "$out" | tr '\n' ' ')(all $(wc -l <"$out") packages: $out)"
}
if [ "${1:-}" = postgres ]; then build scalebench/postgres:15 deploy/postgres/Dockerfile; exit 0; fi
record "$base"
build "${SCALEBENCH_AIRFLOW_IMAGE:-scalebench/airflow:3.3.2}" deploy/airflow/Dockerfile \
  --build-arg GIT_REVISION="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
pg="$(get POSTGRES_IMAGE)"; redis="$(get REDIS_IMAGE)"
if [[ "$pg" == scalebench/* ]]; then build "$pg" deploy/postgres/Dockerfile; else record "$pg"; fi
if [[ "$redis" == scalebench/* ]]; then build "$redis" deploy/redis/Dockerfile; else record "$redis"; fi
