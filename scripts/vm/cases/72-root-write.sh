#!/bin/bash
# Case 34-hostile-write with the agent run by root: its guests run as lull-guest.
# timeout: 150
MODE=root exec bash "$(dirname "$0")/34-hostile-write.sh"
