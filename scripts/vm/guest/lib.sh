# Helpers for the VM bench's cases (sourced by cases.sh and each case; run as root in the
# guest). A case says what it checks with `check`/`pass`/`fail`, and ends with `finish`,
# which first asks whether the owner's agent still serves (when the case says it ran one).
# shellcheck shell=bash

OWNER=owner
OWNER_UID=1000
OWNER_HOME=/home/owner
NEIGHBOUR=neighbour
NEIGHBOUR_HOME=/home/neighbour
RUNTIME=/run/user/$OWNER_UID
DATA=$OWNER_HOME/.local/share/lull
CONFIG=$OWNER_HOME/.config/lull/config.toml
SOCK=$RUNTIME/lull/agent.sock
LIB=/usr/local/lib/lull-vm
TERMINAL=$RUNTIME/lull-vm-terminal.sock
# What cases hand on to later cases (the pool's pids, the canary's secret): root only.
STATE=/run/lull-vm/state
# The owner's daily interruption limit as the pool set-up leaves it; a guest must not change it.
LIMIT=5
# "Outward": an address of this machine that is not loopback, with a listener (set-up).
OUTWARD=192.0.2.1:8080
mkdir -p "$STATE"

fails=0
pass() { echo "ok    $*"; }
fail() { echo "FAIL  $*"; fails=$((fails + 1)); }
note() { printf '%-6s%s\n' "${SECONDS}s" "$*"; }
# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; return 1; fi
}

# owner [--timeout S] COMMAND: a shell command typed into the owner's terminal on tty1 (in
# their logind session, with its DISPLAY and D-Bus). Prints its output, returns its status.
owner() {
  local t=120
  if [ "$1" = --timeout ]; then t=$2; shift 2; fi
  python3 "$LIB/terminal.py" run "$TERMINAL" --timeout "$t" -- "$*"
}
# as_neighbour COMMAND...: the second local user, outside any session.
as_neighbour() { setpriv --reuid "$NEIGHBOUR" --regid "$NEIGHBOUR" --init-groups env HOME="$NEIGHBOUR_HOME" USER="$NEIGHBOUR" "$@"; }

# lacks PATTERN TEXT: TEXT has no line matching PATTERN (for `check`).
lacks() { ! grep -q -- "$1" <<<"$2"; }

# wait_for SECONDS COMMAND...: until the command succeeds; fails after SECONDS.
wait_for() {
  local end=$(($(date +%s) + $1))
  shift
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 1
  done
}

agent_answers() { owner --timeout 20 'lull status' >/dev/null 2>&1; }
# finish: the agent still serves (unless NO_AGENT_CHECK=1), then the case's verdict.
finish() {
  if [ "${NO_AGENT_CHECK:-0}" != 1 ]; then
    check "the owner's agent still answers \`lull status\`" wait_for 20 agent_answers
    [ "$MODE" != root ] || check "the root agent still answers \`lull status\`" wait_for 20 root_agent_answers
  fi
  echo "case: $fails failed"
  [ "$fails" = 0 ]
}

# json FIELD.PATH: a field of the JSON document on stdin (empty when missing).
json() { python3 -c 'import json,sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v.get(k) if isinstance(v, dict) else (v[int(k)] if isinstance(v, list) and k.isdigit() and int(k) < len(v) else None)
print("" if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else v))' "$1"; }

# Hostile cases run in one of two modes: MODE=owner (default) submits each guest as a job
# to the owner's pool (`lull up` run by the owner: guests run as the owner), MODE=root hands
# it to an agent run by root (`lull agent`, guests as lull-guest) with `lull run --now`.
MODE=${MODE:-owner}
ROOT_SOCK=/root/.local/share/lull/agent.sock
as_root_lull() { env HOME=/root XDG_RUNTIME_DIR= LULL_SOCKET="$ROOT_SOCK" lull "$@"; }
root_agent_answers() { as_root_lull status >/dev/null 2>&1; }

pool_up() { [ -s "$STATE/pool-up" ]; }
# require_pool: the pool set up by 20-pool-up (and by 60-root-agent in root mode) is up;
# loads its pids: OWNER_AGENT_PID (lull up), CANARY_PID, CANARY_SECRET, TERM_PID, and
# AGENT_PID/AGENT_SOCK for the agent that runs this mode's guests.
require_pool() {
  pool_up || { fail "the pool (lull up as the owner) is not up: see case 20-pool-up"; finish; exit 1; }
  # shellcheck source=/dev/null
  . "$STATE/pool-up"
  AGENT_PID=$OWNER_AGENT_PID AGENT_SOCK=$SOCK
  if [ "$MODE" = root ]; then
    [ -s "$STATE/root-agent-up" ] || { fail "the root agent is not up: see case 60-root-agent"; finish; exit 1; }
    . "$STATE/root-agent-up"
    AGENT_PID=$ROOT_AGENT_PID AGENT_SOCK=$ROOT_SOCK
  fi
}

# submit_hostile PROBE ARGS...: the hostile guest as a job from the owner's pool (the script
# shipped as the job's input file); prints the job id.
submit_hostile() {
  local out
  out=$(owner "cd $LIB && lull submit --json --input hostile.py -- python3 hostile.py $*") || { echo "$out" >&2; return 1; }
  echo "$out" | json id
}
# The pool's jobs, through its API (guest/pool.py) rather than a `lull` command per poll.
pool() { python3 "$LIB/pool.py" "$DATA" "$@"; }
# wait_job ID SECONDS: until the job ends; prints its state.
wait_job() { pool wait "$1" "$2"; }
# job_output ID: what the job's guest wrote (stdout, then stderr), as the pool keeps it.
job_output() { pool output "$1" 2>&1; }
# job_exit ID: the exit status the pool recorded.
job_exit() { pool exit "$1"; }
# job_workdir OUTPUT: the work directory of a hostile guest as the host sees it: where the
# mark file it reported lies (its sandbox shows the directory under another path).
job_workdir() {
  local mark
  mark=$(sed -n 's/^HOSTILE START .* mark=\([^ ]*\).*/\1/p' <<<"$1" | head -n1)
  [ -n "$mark" ] && [ "$mark" != none ] || return 0
  find "$DATA" /root/.local/share/lull /var/lib/lull -xdev -name "$mark" -printf '%h\n' 2>/dev/null | head -n1
}

# start_hostile PROBE ARGS...: the hostile guest, started in this case's mode; sets $JOB
# (owner mode: the job id; root mode: the pid of the `lull run` following it).
start_hostile() {
  if [ "$MODE" = root ]; then
    # `lull run` follows the guest's output: the stdout flood goes nowhere here.
    local sink=$STATE/run.out
    [ "$1" = stdout ] && sink=/dev/null
    : >"$STATE/run.out"
    (cd "$LIB" && exec env HOME=/root XDG_RUNTIME_DIR= LULL_SOCKET="$ROOT_SOCK" \
      timeout "${JOB_TIMEOUT:-120}" lull run --now -- python3 "$LIB/hostile.py" "$@" >"$sink" 2>>"$STATE/run.out") &
    JOB=$!
  else
    JOB=$(submit_hostile "$@") || { fail "submitting the hostile $1 guest"; return 1; }
  fi
  # A case that ends early (its timeout, a failed step) leaves no guest behind to delay
  # the next case: the job is cancelled, or `lull run` stopped.
  trap 'stop_hostile' EXIT
}
stop_hostile() {
  if [ "$MODE" = root ]; then kill "$JOB" 2>/dev/null; else pool cancel "$JOB" >/dev/null 2>&1; fi
}
# finish_hostile: waits for the guest started by start_hostile; sets $OUT (what it wrote)
# and $STATE_END (owner mode: the job's state; root mode: `lull run`'s exit status).
finish_hostile() {
  if [ "$MODE" = root ]; then
    STATE_END=0
    wait "$JOB" || STATE_END=$?
    OUT=$(cat "$STATE/run.out")
  else
    STATE_END=$(wait_job "$JOB" "${JOB_TIMEOUT:-120}")
    OUT=$(job_output "$JOB")
  fi
}
# run_hostile PROBE ARGS...: start, wait, and judge a hostile guest: it must have run
# (START and DONE lines) and reached nothing (no REACHED line). Sets $JOB, $OUT, $WORKDIR.
run_hostile() {
  local probe=$1
  start_hostile "$@" || return 1
  finish_hostile
  WORKDIR=$(job_workdir "$OUT")
  note "$MODE guest $JOB ($probe) ended: $STATE_END; work directory ${WORKDIR:-unknown}; its output:"
  sed 's/^/      | /' <<<"$OUT" | head -n 60
  judge_probes "$probe" "$OUT"
}
# judge_probes PROBE OUTPUT: each attempt refused, and the guest got to its end (unless
# REQUIRE_DONE=0: for guests the agent may rightly stop, which then reach nothing either).
# PRIVATE_VIEWS="/tmp …": directories a sandbox gives the guest a private copy of (inside its
# work directory); reaching those is no finding, and the case judges them from the host.
judge_probes() {
  check "the hostile $1 guest ran" grep -q "^HOSTILE START $1" <<<"$2"
  if [ "${REQUIRE_DONE:-1}" = 1 ]; then
    check "the hostile $1 guest got to its end (not stopped before trying everything)" grep -q "^HOSTILE DONE $1" <<<"$2"
  fi
  local line
  while read -r line; do
    case "$line" in
      "PROBE "*" REFUSED "*) pass "refused: ${line#PROBE }" ;;
      "PROBE "*" REACHED "*)
        local target=${line#PROBE *-}
        target=${target%% *}
        if [[ " ${PRIVATE_VIEWS:-} " == *" $target "* ]]; then
          note "wrote in its own private $target (its sandbox's, inside its work directory): judged from the host below"
        else
          fail "reached: ${line#PROBE }"
        fi ;;
    esac
  done < <(grep '^PROBE ' <<<"$2")
}

# limit_unchanged: the owner's daily interruption limit is what the owner set.
limit_now() { owner 'lull limits --json' 2>/dev/null | json interruptions_per_day; }

# pids_of PATTERN: processes whose command line contains PATTERN (not this shell's).
pids_of() { pgrep -f -- "$1" | grep -vx "$$" || true; }

# check_containment WHO: with the owner's agent WHO (tray app, service, lull up) running and
# no configuration edited, a guest handed to it (`lull run --now`) runs in a cgroup v2 of
# its own with the limits the issue names, and `lull status` says "cgroup v2" only if so
# and names every controller the guest lacks.
check_containment() {
  local who=$1 mark="lull-vm-containment-$RANDOM" pid cg st runtime missing c
  st=$(owner 'lull status --json')
  runtime=$(json guest_runtime <<<"$st")
  missing=$(json containment.missing <<<"$st")
  note "$who: guest runtime \"$runtime\"; missing (status): ${missing:-not reported}"
  check "$who: status says guests get cgroup v2" grep -q "cgroup v2" <<<"$runtime"
  owner "lull run --now -- sh -c 'sleep 60' $mark >/tmp/$mark.log 2>&1 &"
  if ! wait_for 60 pgrep -u "$OWNER" -f -x -- "sh -c sleep 60 $mark" >/dev/null; then
    fail "$who: a guest from \`lull run --now\` started"
    sed 's/^/      | /' "/tmp/$mark.log"
    return
  fi
  pid=$(pgrep -u "$OWNER" -f -x -- "sh -c sleep 60 $mark" | head -n1)
  cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
  note "$who: the guest (pid $pid) is in ${cg#/sys/fs/cgroup}; controllers: $(cat "$cg/cgroup.controllers" 2>/dev/null)"
  for f in memory.max memory.swap.max memory.high pids.max cpu.weight cpu.idle io.weight; do
    [ -e "$cg/$f" ] && note "$who:   $f = $(tr '\n' ' ' <"$cg/$f")"
  done
  check "$who: the guest has a cgroup of its own, not the agent's or the session's" \
    sh -c "! grep -qE 'session-[0-9]+\.scope$|autostart\.service$|lull-agent\.service$' /proc/$pid/cgroup"
  for c in cpu memory pids io; do
    if grep -qw "$c" "$cg/cgroup.controllers" 2>/dev/null; then
      pass "$who: the guest's cgroup has the $c controller"
    elif grep -qw "$c" <<<"$missing $runtime"; then
      pass "$who: the guest's cgroup lacks $c, and status names it"
    else
      fail "$who: the guest's cgroup lacks the $c controller and status does not say so"
    fi
  done
  check "$who: memory.max is set" sh -c "[ -e $cg/memory.max ] && ! grep -qx max $cg/memory.max"
  check "$who: memory.swap.max is set" sh -c "[ -e $cg/memory.swap.max ] && ! grep -qx max $cg/memory.swap.max"
  check "$who: pids.max is set" sh -c "[ -e $cg/pids.max ] && ! grep -qx max $cg/pids.max"
  check "$who: the lowest CPU priority (cpu.idle 1 or cpu.weight 1)" sh -c "grep -qx 1 $cg/cpu.idle 2>/dev/null || grep -qx 1 $cg/cpu.weight 2>/dev/null"
  check "$who: cgroup.freeze and cgroup.kill are there" test -e "$cg/cgroup.freeze" -a -e "$cg/cgroup.kill"
  check "$who: the guest's cgroup is writable by the agent (delegated to the owner)" sh -c "[ \$(stat -c %u $cg/cgroup.procs) = $OWNER_UID ]"
  pkill -u "$OWNER" -f "$mark"
  wait_for 20 sh -c "! pgrep -u $OWNER -f $mark >/dev/null"
}
