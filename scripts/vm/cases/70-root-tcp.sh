#!/bin/bash
# Case 32-hostile-tcp with the agent run by root: its guests run as lull-guest.
# timeout: 150
MODE=root exec bash "$(dirname "$0")/32-hostile-tcp.sh"
