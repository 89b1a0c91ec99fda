#!/bin/bash
# Case 33-hostile-read with the agent run by root: its guests run as lull-guest.
# timeout: 240
MODE=root exec bash "$(dirname "$0")/33-hostile-read.sh"
