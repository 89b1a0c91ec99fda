#!/bin/bash
# Case 31-hostile-tcp with the agent run by root: its guests run as lull-guest.
# timeout: 150
MODE=root exec bash "$(dirname "$0")/31-hostile-tcp.sh"
