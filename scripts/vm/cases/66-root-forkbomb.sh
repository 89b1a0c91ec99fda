#!/bin/bash
# Case 28-hostile-forkbomb with the agent run by root: its guests run as lull-guest.
# timeout: 240
MODE=root exec bash "$(dirname "$0")/28-hostile-forkbomb.sh"
