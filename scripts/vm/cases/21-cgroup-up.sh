#!/bin/bash
# Containment out of the box, `lull up`: the agent the owner started from their terminal
# (their login session's scope, not a unit of theirs) gives its guests a delegated cgroup
# v2 subtree too, with no configuration edited.
# timeout: 150
. /run/lull-vm/src/guest/lib.sh
require_pool
check_containment "lull up (from the owner's terminal)"
finish
