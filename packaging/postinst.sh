#!/bin/sh
# Lull's package install step: the unprivileged account guests run as when the agent runs
# as root (config `guests.run_as`, default lull-guest). An agent run by an ordinary owner
# runs guests as that owner, confined by cgroups and Landlock.
set -e
if [ "$1" = configure ] && ! getent passwd lull-guest >/dev/null; then
  if command -v adduser >/dev/null; then
    adduser --system --group --no-create-home --home /nonexistent --quiet lull-guest
  else
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin lull-guest
  fi
fi
exit 0
