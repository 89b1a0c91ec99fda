#!/bin/bash
# Case 26-hostile-ptrace with the agent run by root: its guests run as lull-guest.
# timeout: 120
MODE=root exec bash "$(dirname "$0")/26-hostile-ptrace.sh"
