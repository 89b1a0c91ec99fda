#!/bin/bash
# Case 30-hostile-disk with the agent run by root: its guests run as lull-guest.
# timeout: 300
MODE=root exec bash "$(dirname "$0")/30-hostile-disk.sh"
