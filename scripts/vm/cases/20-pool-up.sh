#!/bin/bash
# The pool the hostile guests come from: the owner types `lull up` in their terminal (a
# coordinator on SQLite in their data directory plus their agent, enrolled to it) and
# offers the machine (`lull donate 8h`: no configuration edited; emulation makes owner
# CPU readings high, so the machine would rarely look idle on its own). The owner also
# runs a program of their own (the canary) with a secret in its command line and
# environment. PostgreSQL is started here for the later cases.
# timeout: 180
. /run/lull-vm/src/guest/lib.sh
rm -f "$STATE/pool-up"
# One agent per data directory: the tray app (its autostart unit) and lull-agent.service
# stop first (11-cgroup-service does it too; this keeps the case whole when run alone).
owner "systemctl --user stop 'app-lull*autostart.service' lull-agent.service" >/dev/null 2>&1
wait_for 30 sh -c "! pgrep -u $OWNER -x lull-tray >/dev/null"
systemctl start --no-block postgresql.service
secret=lull-vm-canary-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
owner "LULL_VM_CANARY=$secret nohup python3 $LIB/canary.py $secret $OWNER_HOME/canary-signals.log >/dev/null 2>&1 &"
owner 'nohup lull up >~/lull-up.log 2>&1 &'
check "lull up's agent answers" wait_for 120 agent_answers
sed 's/^/      | /' "$OWNER_HOME/lull-up.log" | head -n 30
check "the coordinator answers on 127.0.0.1:7878" wait_for 60 owner 'lull machines >/dev/null'
check "the owner offers the machine (lull donate 8h)" owner 'lull donate 8h >/dev/null'
owner 'lull status' | sed 's/^/      | /'
up=$(pgrep -u "$OWNER" -f '^lull up' | head -n1)
canary=$(pgrep -u "$OWNER" -f "canary.py $secret" | head -n1)
term=$(pgrep -u "$OWNER" -f 'terminal.py serve' | head -n1)
check "the owner's canary program runs" test -n "$canary"
lim=$(limit_now)
check "the owner's daily interruption limit is $LIMIT (the default)" test "$lim" = "$LIMIT"
note "lull up pid $up, canary pid $canary, terminal pid $term, limit $lim"
if [ "$fails" = 0 ]; then
  printf 'OWNER_AGENT_PID=%s\nCANARY_PID=%s\nCANARY_SECRET=%s\nTERM_PID=%s\n' "$up" "$canary" "$secret" "$term" >"$STATE/pool-up"
fi
finish
