#!/bin/bash
# Case 23-hostile-socket with the agent run by root: its guests run as lull-guest.
# timeout: 150
MODE=root exec bash "$(dirname "$0")/23-hostile-socket.sh"
