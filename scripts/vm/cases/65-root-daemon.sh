#!/bin/bash
# Case 27-hostile-daemon with the agent run by root: its guests run as lull-guest.
# timeout: 150
MODE=root exec bash "$(dirname "$0")/27-hostile-daemon.sh"
