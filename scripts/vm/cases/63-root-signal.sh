#!/bin/bash
# Case 25-hostile-signal with the agent run by root: its guests run as lull-guest.
# timeout: 120
MODE=root exec bash "$(dirname "$0")/25-hostile-signal.sh"
