#!/bin/bash
# Case 22-hostile-socket with the agent run by root: its guests run as lull-guest.
# timeout: 150
MODE=root exec bash "$(dirname "$0")/22-hostile-socket.sh"
