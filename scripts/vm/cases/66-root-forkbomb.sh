#!/bin/bash
# Case 27-hostile-forkbomb with the agent run by root: its guests run as lull-guest.
# timeout: 240
MODE=root exec bash "$(dirname "$0")/27-hostile-forkbomb.sh"
