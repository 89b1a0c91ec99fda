#!/usr/bin/env bash
# Starts the Debian PostgreSQL 15 cluster and creates the `lull` role (allowed to create
# the throw-away databases the coordinator tests make) for the tests at
# postgres://lull:lull@127.0.0.1:5432/lull (scripts/test.sh exports LULL_TEST_PG_URL).
set -euo pipefail
command -v pg_ctlcluster >/dev/null || { echo "postgresql is not installed (scripts/deps.sh test)" >&2; exit 1; }
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -q "^15 main$"; then
  pg_createcluster 15 main >/dev/null
fi
pg_ctlcluster 15 main start 2>/dev/null || pg_ctlcluster 15 main status >/dev/null
for _ in $(seq 1 50); do
  su postgres -c "psql -qtAc 'SELECT 1'" >/dev/null 2>&1 && break
  sleep 0.2
done
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname = 'lull'\"" | grep -q 1 \
  || su postgres -c "psql -qc \"CREATE ROLE lull LOGIN CREATEDB PASSWORD 'lull'\""
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname = 'lull'\"" | grep -q 1 \
  || su postgres -c "createdb -O lull lull"
echo "postgres ready: postgres://lull:lull@127.0.0.1:5432/lull"
