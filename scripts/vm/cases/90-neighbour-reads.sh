#!/bin/bash
# The second local user reads every file Lull wrote during the whole run: under the
# owner's data, config and runtime directories and /var/lib/lull (the owner's home is
# 0755 here, as on many desktops). They must read none, and no file Lull wrote may be
# open to group or others (0600/0700; root's execute directories may be 0711: passable,
# not listable). The job's API token (22-guest-runs) must be in no file they can read.
# timeout: 180
. /run/lull-vm/src/guest/lib.sh
NO_AGENT_CHECK=1
dirs=("$DATA" "$OWNER_HOME/.config/lull" "$RUNTIME/lull" /var/lib/lull /root/.local/share/lull)
existing=()
for d in "${dirs[@]}"; do [ -e "$d" ] && existing+=("$d"); done
note "Lull's directories here: ${existing[*]}"
check "Lull wrote files to look at" test "$(find "${existing[@]}" -type f 2>/dev/null | wc -l)" -gt 0
readable=$(find "${existing[@]}" -type f -print0 2>/dev/null | as_neighbour xargs -0 -r sh -c 'for f; do head -c1 "$f" >/dev/null 2>&1 && echo "$f"; done' sh)
n=$(grep -c . <<<"$readable")
check "the second user can read none of Lull's files ($n readable)" test -z "$readable"
head -n 20 <<<"$readable" | sed 's/^/      | readable: /'
open=$(find "${existing[@]}" \( -type f -perm /077 \) -o \( -type d -perm /066 \) -o \( -type s -perm /077 \) 2>/dev/null)
check "no file, socket or directory Lull wrote is open to group or others" test -z "$open"
head -n 20 <<<"$open" | while read -r f; do [ -n "$f" ] && note "open: $(stat -c '%A %U' "$f") $f"; done
token=$(cut -d= -f2 "$STATE/job-token" 2>/dev/null)
if [ -n "$token" ]; then
  hits=$(find "${existing[@]}" -type f -print0 2>/dev/null | as_neighbour xargs -0 -r grep -lsa -- "$token" 2>/dev/null)
  check "the job's API token is in no file the second user can read" test -z "$hits"
  note "token found in: $hits"
fi
finish
