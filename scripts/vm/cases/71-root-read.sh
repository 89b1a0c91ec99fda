#!/bin/bash
# Case 32-hostile-read with the agent run by root: its guests run as lull-guest.
# timeout: 240
MODE=root exec bash "$(dirname "$0")/32-hostile-read.sh"
