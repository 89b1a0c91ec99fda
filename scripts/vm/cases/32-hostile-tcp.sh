#!/bin/bash
# With the default network policy a guest opens TCP connections to this machine's services
# (the coordinator on 127.0.0.1:7878, PostgreSQL on 127.0.0.1:5432) and outward (an address
# of this machine outside loopback, standing for the internet: the VM has no NIC). Each
# listener is first checked from outside, so that a refusal means the guest's.
# timeout: 150
. /run/lull-vm/src/guest/lib.sh
require_pool
wait_for 60 sh -c 'ss -ltn | grep -q ":5432 "'
targets=(127.0.0.1:7878 127.0.0.1:5432 "$OUTWARD")
for t in "${targets[@]}"; do
  check "something listens on $t (from outside a guest)" python3 -c "import socket,sys; h,p=sys.argv[1].rsplit(':',1); socket.create_connection((h,int(p)),timeout=5).close()" "$t"
done
run_hostile tcp "${targets[@]}"
finish
