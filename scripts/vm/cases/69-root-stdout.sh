#!/bin/bash
# Case 31-hostile-stdout with the agent run by root: its guests run as lull-guest.
# timeout: 300
MODE=root exec bash "$(dirname "$0")/31-hostile-stdout.sh"
