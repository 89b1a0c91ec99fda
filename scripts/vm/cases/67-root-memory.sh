#!/bin/bash
# Case 29-hostile-memory with the agent run by root: its guests run as lull-guest.
# timeout: 240
MODE=root exec bash "$(dirname "$0")/29-hostile-memory.sh"
