#!/usr/bin/env bash
# The VM bench: Lull as an ordinary owner installs and runs it, on a fresh Debian 12 on
# pure cgroup v2 with systemd and logind, attacked by hostile guests.
#
# Builds (or reuses) the .deb, the cached guest image (scripts/vm/rootfs.sh, image.sh),
# boots it with QEMU — KVM when this host's KVM boots the image's kernel, else TCG — with
# the image kept clean (the guest writes to an overlay), the bench's files and the .deb
# shared read-only over virtio-9p and a second share for the results. In the guest the owner is logged in on
# seat0 by autologin with an X session; the .deb is installed by dpkg; the cases in
# scripts/vm/cases/ run unattended (as root, acting as the owner through their terminal,
# as the second user, and as pool guests) and the guest powers itself off. Prints one
# line per case — PASS, FAIL, XFAIL (a failure listed, with the branch that fixes it, in
# scripts/vm/known-failures) or XPASS (listed but passing: strike it off) — then the
# table's totals and the time each stage took. Exits non-zero on a FAIL, a case that
# never reported, or a VM that did not power itself off within LULL_VM_TIMEOUT.
#
# Usage: scripts/vm/run.sh [--deb PATH] [--cases REGEX] [--out DIR]
#   --deb PATH      test this package instead of building one (packaging/build-deb.sh;
#                   a .deb built from the same sources is reused)
#   --cases REGEX   run only the cases whose name matches, e.g. '0.*|2[0-4].*'
#                   (cases use what earlier ones set up: keep 00, 01 and 20 for the pool
#                   cases, and 60 for the root ones)
#   --out DIR       results directory (default: a new temporary one): console.log,
#                   setup.log, results.tsv, cases/NAME.log, journal.log, dmesg.log
#   LULL_REQUIRE_VM=1       fail instead of skipping where QEMU is not installed
#   LULL_VM_ACCEL=kvm|tcg   skip the accelerator probe
#   LULL_VM_CACHE=DIR       the image cache (default ${XDG_CACHE_HOME:-~/.cache}/lull-vm)
#   LULL_VM_TIMEOUT=S       kill the VM after S seconds (default 2400) and fail, saying so
#   LULL_VM_BOOT_TIMEOUT=S  a guest not at its set-up after S s (default 480) is booted again
#   LULL_VM_SMP=N, LULL_VM_NICE=N   QEMU's CPUs (default 2) and niceness (default 10)
#   LULL_VM_OVERLAY_DIR=DIR where the guest's writes go on the host (default $TMPDIR or
#                           /var/tmp); it needs LULL_VM_DISK_NEED_MIB free (default 1024: the guest's
#                           writes took 125 MiB at the peak; the disk cases fill 4 GiB
#                           with zeros, which QEMU keeps as zero clusters, not data)
#   LULL_VM_STRICT=1        an XPASS fails the run too
#   LULL_VM_VERBOSE=1       print an XFAIL's failed checks as well
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
deb="" cases="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --deb) deb=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "vm: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
cache=${LULL_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lull-vm}
export LULL_VM_CACHE=$cache
qemu=$(command -v qemu-system-x86_64 || true)
if [ -z "$qemu" ]; then
  if [ "${LULL_REQUIRE_VM:-0}" = 1 ]; then
    echo "vm: FAIL: qemu-system-x86_64 is not installed (scripts/deps.sh test installs it) and LULL_REQUIRE_VM=1" >&2
    exit 1
  fi
  echo "vm: SKIPPED: qemu-system-x86_64 is not installed, so the VM bench cannot run here"
  exit 0
fi
t0=$(date +%s)

# The .deb: reused when it was built from exactly these sources, else built.
deb_inputs_key() {
  (cd "$repo" && git ls-files -co --exclude-standard -- . ':!docs' ':!scripts' ':!*.md' ':!tests' | sort |
    xargs -d '\n' sha256sum 2>/dev/null) | sha256sum | cut -c1-16
}
if [ -z "$deb" ]; then
  target=${CARGO_TARGET_DIR:-$repo/target}
  stamp=$target/release/bundle/deb/.lull-vm-inputs
  key=$(deb_inputs_key)
  if [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$key" ] && [ -f "$(sed -n 2p "$stamp")" ]; then
    deb=$(sed -n 2p "$stamp")
    echo "vm: reusing $deb (built from these sources)"
  else
    echo "vm: building the .deb (packaging/build-deb.sh)"
    deb=$("$repo/packaging/build-deb.sh" | tail -n1)
    printf '%s\n%s\n' "$key" "$deb" >"$stamp"
  fi
fi
[ -f "$deb" ] || { echo "vm: no .deb at $deb" >&2; exit 1; }
t_deb=$(date +%s)
img=$("$here/image.sh" "$deb" | tail -n1)
t_img=$(date +%s)

# KVM only where it boots this kernel: a kernel with no root file system panics within
# seconds under a working KVM; this host's nested KVM aborts or hangs instead.
accel_probe() {
  local log
  log=$(mktemp)
  timeout 30 "$qemu" -accel kvm -cpu host -m 256 -kernel "$img/vmlinuz" -append "console=ttyS0 panic=-1" \
    -vga none -display none -nic none -no-reboot -serial "file:$log" -monitor none >/dev/null 2>&1 || true
  if grep -q "Kernel panic" "$log"; then echo kvm; else echo tcg; fi
  rm -f "$log"
}
accel=${LULL_VM_ACCEL:-}
if [ -z "$accel" ]; then
  if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    probe_key=$( (sha256sum "$img/vmlinuz"; uname -r; "$qemu" --version | head -n1) | sha256sum | cut -c1-16)
    if [ -f "$cache/accel-$probe_key" ]; then
      accel=$(cat "$cache/accel-$probe_key")
    else
      accel=$(accel_probe)
      echo "$accel" >"$cache/accel-$probe_key"
    fi
    [ "$accel" = kvm ] || echo "vm: /dev/kvm does not boot the image's kernel here: TCG emulation"
  else
    accel=tcg
    echo "vm: no usable /dev/kvm: TCG emulation"
  fi
fi
case "$accel" in
  kvm) accel_args=(-accel kvm -cpu host) ;;
  *) accel_args=(-accel tcg,thread=multi -cpu max) ;;
esac

# The shares: the bench's files and the .deb (read-only), and the results.
share=$(mktemp -d)
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
# The guest's writes go to a qcow2 overlay on the host, the cached image stays clean. The
# guest mounts its root with discard and the drive passes discards on, so a file the guest
# deletes frees the host's disk again. The disk cases' hostile guests fill their 4 GiB
# with zero bytes, which `detect-zeroes=unmap` turns into zero clusters: the guest's ext4
# allocates (and the agent's guard counts) every block, the host stores none of them
# (125 MiB at the peak with them; 4.1 GiB when they wrote a pattern, more than CI's
# /var/tmp had). A host disk that fills up anyway gives the guest an I/O error and its case
# fails, where QEMU's default (werror=enospc) paused the VM until LULL_VM_TIMEOUT killed it
# with no case reporting.
overlay_dir=${LULL_VM_OVERLAY_DIR:-${TMPDIR:-/var/tmp}}
overlay=$(mktemp "$overlay_dir/lull-vm-overlay.XXXXXX")
trap 'rm -rf "$share" "$overlay" "$overlay.peak"' EXIT
need_mib=${LULL_VM_DISK_NEED_MIB:-1024}
free_mib=$(df -Pm "$overlay_dir" | awk 'NR == 2 { print $4 }')
if [ "$free_mib" -lt "$need_mib" ]; then
  echo "vm: FAIL: $overlay_dir has $free_mib MiB free; the guest's writes need $need_mib MiB there (LULL_VM_OVERLAY_DIR picks another place)"
  exit 1
fi
cp -r "$here/guest" "$here/cases" "$share/"
cp "$deb" "$share/lull.deb"
# no_timer_check: under emulation on a busy host the kernel's IO-APIC timer check can fail
# and panic; panic=-1 with -no-reboot turns any panic into QEMU's exit, not a hang.
append="root=/dev/vda rw rootflags=discard console=ttyS0 loglevel=4 systemd.show_status=0 no_timer_check panic=-1 lull.test=1"
[ -n "$cases" ] && append="$append lull.cases=$cases" && export LULL_VM_CASES_FILTERED=1
smp=${LULL_VM_SMP:-2} nice=${LULL_VM_NICE:-10} vm_timeout=${LULL_VM_TIMEOUT:-2400}
boot() {
  echo "vm: booting $img ($accel, $smp CPUs, 4 GiB, nice $nice); results in $out"
  rm -rf "${out:?}"/*
  qemu-img create -q -f qcow2 -F raw -b "$img/disk.ext4" "$overlay"
  timeout --kill-after=10 "$vm_timeout" nice -n "$nice" "$qemu" "${accel_args[@]}" -smp "$smp" -m 4096 \
    -kernel "$img/vmlinuz" -initrd "$img/initrd.img" -append "$append" \
    -drive "file=$overlay,format=qcow2,if=virtio,discard=unmap,detect-zeroes=unmap,werror=report,rerror=report" \
    -virtfs "local,path=$share,mount_tag=lullsrc,security_model=none,readonly=on" \
    -virtfs "local,path=$out,mount_tag=lullout,security_model=none" \
    -vga none -display none -nic none -monitor none -no-reboot -serial "file:$out/console.log" &
  local pid=$! waited=0
  # The most of the host's disk the guest's writes took, sampled every 5 s.
  (peak=0; while kill -0 "$pid" 2>/dev/null; do
    m=$(du -m "$overlay" 2>/dev/null | cut -f1); [ "${m:-0}" -gt "$peak" ] && peak=$m && echo "$peak" >"$overlay.peak"
    sleep 5
  done) &
  # A guest that has not reached its set-up after LULL_VM_BOOT_TIMEOUT s is stuck booting.
  while kill -0 "$pid" 2>/dev/null && [ ! -s "$out/setup.log" ] && [ "$waited" -lt "${LULL_VM_BOOT_TIMEOUT:-480}" ]; do
    sleep 2
    waited=$((waited + 2))
  done
  [ -s "$out/setup.log" ] || kill "$pid" 2>/dev/null
  wait "$pid"
}
set +e
boot
qemu_rc=$?
# A guest that never reached its set-up (a panic or hang while booting) is booted once more.
if [ ! -s "$out/setup.log" ]; then
  echo "vm: the guest did not boot to its set-up; its console ended with:"
  tail -n 5 "$out/console.log" | sed 's/^/    /'
  echo "vm: booting it once more"
  boot
  qemu_rc=$?
fi
set -e
t_end=$(date +%s)
rc=0
echo "vm: the guest's writes took at most $(cat "$overlay.peak" 2>/dev/null || echo '?') MiB of the host's disk, $(du -m "$overlay" | cut -f1) MiB at the end; $(df -Pm "$overlay_dir" | awk 'NR == 2 { print $4 }') MiB free in $overlay_dir"
LULL_VM_TIMEOUT=$vm_timeout "$here/report.sh" "$out" "$here/known-failures" "$qemu_rc" || rc=$?
echo "vm: .deb $((t_deb - t0)) s, image $((t_img - t_deb)) s, VM run $((t_end - t_img)) s ($accel); whole bench $((t_end - t0)) s"
exit $rc
