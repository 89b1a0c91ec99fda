#!/bin/bash
# Case 24-hostile-proc with the agent run by root: its guests run as lull-guest.
# timeout: 120
MODE=root exec bash "$(dirname "$0")/24-hostile-proc.sh"
