#!/bin/bash
# A pool on PostgreSQL: the database URL's password must never be on a command line.
# (1) The owner starts `lull coordinator serve --db postgres://lullpool:PASSWORD@…`: either
# it refuses (saying why) or its password is in /proc/PID/cmdline for every local user and
# guest to read — the latter fails. (2) The documented way, LULL_COORDINATOR_DB in the
# environment: the coordinator must start on PostgreSQL (its tables appear there) with no
# password on any command line. (3) A hostile guest looks for the password in every
# process's command line and environment, and connects to PostgreSQL.
# timeout: 240
. /run/lull-vm/src/guest/lib.sh
require_pool
pw=lull-vm-pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
check "PostgreSQL is up" wait_for 60 runuser -u postgres -- psql -qAtc 'select 1'
runuser -u postgres -- psql -q -c "CREATE ROLE lullpool LOGIN PASSWORD '$pw'" -c "CREATE DATABASE lullpool OWNER lullpool" >/dev/null
url="postgres://lullpool:$pw@127.0.0.1:5432/lullpool"
pool2="LULL_DATA_DIR=$OWNER_HOME/pg-pool LULL_CONFIG=$OWNER_HOME/pg-pool/config.toml"
in_cmdline() { grep -lsa -- "$pw" /proc/[0-9]*/cmdline 2>/dev/null; }

owner "mkdir -p ~/pg-pool; $pool2 nohup lull coordinator serve --listen 127.0.0.1:7979 --db '$url' >~/pg-pool/argv.log 2>&1 &"
sleep 8
leak=$(in_cmdline)
check "the password given on the command line is on no process's command line" test -z "$leak"
sed 's/^/      | argv: /' "$OWNER_HOME/pg-pool/argv.log" | head -n 5
pkill -u "$OWNER" -f 'coordinator serve --listen 127.0.0.1:7979'
sleep 1

owner "$pool2 LULL_COORDINATOR_DB='$url' nohup lull coordinator serve --listen 127.0.0.1:7979 >~/pg-pool/env.log 2>&1 &"
wait_for 60 python3 -c "import socket; socket.create_connection(('127.0.0.1', 7979), timeout=2).close()"
sed 's/^/      | env: /' "$OWNER_HOME/pg-pool/env.log" | head -n 5
tables=$(runuser -u postgres -- psql -qAt -d lullpool -c "select count(*) from information_schema.tables where table_schema = 'public'")
check "with LULL_COORDINATOR_DB the coordinator runs on PostgreSQL ($tables tables there)" test "${tables:-0}" -gt 0
check "and the password is on no process's command line" test -z "$(in_cmdline)"
serve=$(pgrep -u "$OWNER" -f 'coordinator serve --listen 127.0.0.1:7979' | head -n1)

check "the coordinator on PostgreSQL runs (pid ${serve:-none})" test -n "$serve"
run_hostile proc "$(rev <<<"$pw")" ${serve:+"$serve"}
run_hostile tcp 127.0.0.1:5432 127.0.0.1:7979
pkill -u "$OWNER" -f 'coordinator serve --listen 127.0.0.1:7979'
finish
