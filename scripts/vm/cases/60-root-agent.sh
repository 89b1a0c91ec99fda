#!/bin/bash
# The root agent: `lull agent` run by root (a system service), whose guests run as
# lull-guest. It starts and its status says what contains its guests; the hostile guests
# of cases 23–34 then run against it (6x-root-*).
# timeout: 120
. /run/lull-vm/src/guest/lib.sh
require_pool
rm -f "$STATE/root-agent-up"
systemd-run --unit=lull-root-agent --setenv=HOME=/root --property=Restart=no /usr/bin/lull agent
check "the root agent answers" wait_for 60 root_agent_answers
as_root_lull status | sed 's/^/      | /'
pid=$(systemctl show -p MainPID --value lull-root-agent.service)
runtime=$(as_root_lull status --json | json guest_runtime)
check "its guests get cgroup v2" grep -q "cgroup v2" <<<"$runtime"
out=$(cd /tmp && as_root_lull run --now -- id -un 2>&1)
sed 's/^/      | /' <<<"$out"
check "its guests run as lull-guest" grep -qx lull-guest <<<"$out"
[ -n "$pid" ] && [ "$pid" != 0 ] && printf 'ROOT_AGENT_PID=%s\n' "$pid" >"$STATE/root-agent-up"
MODE=root
finish
