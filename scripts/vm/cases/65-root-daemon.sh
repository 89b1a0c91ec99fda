#!/bin/bash
# Case 26-hostile-daemon with the agent run by root: its guests run as lull-guest.
# timeout: 150
MODE=root exec bash "$(dirname "$0")/26-hostile-daemon.sh"
