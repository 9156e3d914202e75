#!/bin/bash
# stoker-node: a GPU node's set-up, run by systemd at every boot (not once per instance), so a
# reboot or a deallocate-and-start brings back the scratch array and the shared mounts.
#
#   stoker-node scratch   local NVMe disks -> one RAID0 -> one file system, in fstab by UUID
#   stoker-node mounts    Lustre / NFS lines of $STOKER_MOUNTS into fstab (_netdev), mounted
#   stoker-node install   stoker itself, with the image's pip (no venv module on the HPC image)
#   stoker-node health    azurehpc-health-checks and `stoker doctor`; a failure drains the node
#   stoker-node ready     every mount real (not the OS disk), the node healthy: $RUN/ready
#
# Settings come from $STOKER_NODE_CONF (cloud-init writes it); every path below can be set in
# the environment instead, which is how the tests run this without touching the host's /etc.
set -euo pipefail

conf=${STOKER_NODE_CONF:-/etc/stoker/node.conf}
if [ -r "$conf" ]; then
  # shellcheck source=/dev/null
  . "$conf"
fi
fstab=${STOKER_FSTAB:-/etc/fstab}
mdconf=${STOKER_MDADM_CONF:-/etc/mdadm/mdadm.conf}
mounts=${STOKER_MOUNTS:-/etc/stoker/mounts}
run=${STOKER_RUN:-/run/stoker}
fstype=${STOKER_FSTYPE:-xfs}
prefix=${STOKER_PREFIX:-/opt/stoker}
bin=${STOKER_BIN:-/usr/local/bin/stoker}
nhc=${STOKER_NHC:-/opt/azurehpc/test/azurehpc-health-checks/run-health-checks.sh}
doctor_json=${STOKER_DOCTOR_JSON:-/var/log/stoker-doctor.json}
tries=${STOKER_MOUNT_TRIES:-5}
wait_s=${STOKER_MOUNT_WAIT_S:-15}
# The array's name in its superblock: how stoker knows an array on these disks is its own.
array=stoker-scratch

say() { echo "stoker-node $verb: $*" >&2; }
die() {
  say "$*"
  exit 1
}

# replace_owned FILE MARKER LINE: the one line stoker wrote under "# MARKER" becomes LINE; every
# other line of FILE stays byte for byte. Written beside FILE and renamed: never half a file.
replace_owned() {
  local file=$1 marker="# $2" line=$3 tmp
  mkdir -p "$(dirname "$file")"
  [ -e "$file" ] || : >"$file"
  tmp=$(mktemp "$file.stoker.XXXXXX")
  awk -v m="$marker" 'skip { skip = 0; next } $0 == m { skip = 1; next } { print }' \
    "$file" >"$tmp"
  printf '%s\n%s\n' "$marker" "$line" >>"$tmp"
  chmod --reference="$file" "$tmp"
  mv "$tmp" "$file"
}

# owned_line FILE MARKER: the line stoker wrote under "# MARKER", or nothing.
owned_line() {
  [ -e "$1" ] || return 0
  awk -v m="# $2" 'take { print; exit } $0 == m { take = 1 }' "$1"
}

# foreign_entry TARGET: an fstab line for TARGET that stoker did not write (never replaced).
foreign_entry() {
  [ -e "$fstab" ] || return 0
  awk -v t="$1" 'skip { skip = 0; next } /^# stoker: / { skip = 1; next }
    $0 !~ /^[ \t]*#/ && $2 == t { print; exit }' "$fstab"
}

# A mount point that is really mounted, from a device other than the OS disk's.
real_mount() {
  mountpoint -q "$1" &&
    [ "$(findmnt -n -o MAJ:MIN -M "$1")" != "$(findmnt -n -o MAJ:MIN -M /)" ]
}

# The empty directory under a mount is made immutable: a job that writes there while nothing
# is mounted gets an error instead of filling the OS disk. Mounting over it still works.
protect() {
  mkdir -p "$1"
  if mountpoint -q "$1"; then return 0; fi
  if [ -n "$(ls -A "$1")" ]; then
    say "$1 already holds files on the OS disk (written while nothing was mounted); left as they are"
  elif ! chattr +i "$1"; then
    say "cannot make $1 immutable on this file system"
  fi
}

uuid_of() { sed -n 's/.*UUID=\([0-9a-fA-F:-]*\).*/\1/p' | head -n 1; }

# active_device UUID: the device an active array of that UUID has now (md127 or any name).
active_device() {
  [ -n "$1" ] || return 0
  mdadm --detail --scan | awk -v u="UUID=$1" '{ for (i = 1; i <= NF; i++) if ($i == u) { print $2; exit } }'
}

list_disks() {
  local d
  if [ -n "${STOKER_DISKS:-}" ]; then
    printf '%s\n' $STOKER_DISKS
    return 0
  fi
  for d in /dev/nvme*n1; do
    if [ -b "$d" ]; then echo "$d"; fi
  done
}

# The array on these disks: the one mdadm.conf names, else the one their superblocks name,
# else (no superblock on any disk: new disks) a new one. Prints its device.
find_or_make_array() {
  local disks=("$@") uuid dev d line foreign="" found=""
  uuid=$(owned_line "$mdconf" "stoker: scratch" | uuid_of)
  if [ -n "$uuid" ]; then
    # Its exit status is not the evidence: an array udev already assembled is not an error.
    if ! mdadm --assemble --scan --config="$mdconf" >&2; then
      say "mdadm --assemble --scan assembled nothing new"
    fi
    dev=$(active_device "$uuid")
    if [ -n "$dev" ]; then echo "$dev" && return 0; fi
  fi
  for d in "${disks[@]}"; do
    if line=$(mdadm --examine --brief "$d" 2>/dev/null) && [ -n "$line" ]; then
      if echo "$line" | grep -Eq "name=([^ ]*:)?$array( |$)"; then
        found=$(echo "$line" | uuid_of)
      else
        foreign="$foreign $d"
      fi
    fi
  done
  [ -z "$foreign" ] || die "disks$foreign carry another md array's superblock; left alone"
  if [ -n "$found" ]; then
    dev=$(active_device "$found")
    if [ -z "$dev" ]; then
      mdadm --assemble "/dev/md/$array" --uuid="$found" "${disks[@]}" >&2 ||
        die "the array $found on ${disks[*]} does not assemble (a disk missing?); not recreated"
      dev=$(active_device "$found")
    fi
  else
    say "no md superblock on ${disks[*]}: new disks, creating RAID0 $array"
    mdadm --create "/dev/md/$array" --name="$array" --level=0 --metadata=1.2 \
      --raid-devices="${#disks[@]}" --force --run "${disks[@]}" >&2
    found=$(mdadm --examine --brief "${disks[0]}" | uuid_of)
    dev=$(active_device "$found")
  fi
  [ -n "$dev" ] || die "mdadm reports no active array for UUID $found"
  replace_owned "$mdconf" "stoker: scratch" "ARRAY /dev/md/$array metadata=1.2 UUID=$found"
  echo "$dev"
}

do_scratch() {
  local scratch=${STOKER_SCRATCH:?STOKER_SCRATCH (the scratch mount path) is not set in $conf}
  local disks dev probe type uuid foreign
  mapfile -t disks < <(list_disks)
  [ "${#disks[@]}" -gt 0 ] || die "no local NVMe disk (looked for ${STOKER_DISKS:-/dev/nvme*n1})"
  foreign=$(foreign_entry "$scratch")
  [ -z "$foreign" ] || die "$fstab already mounts $scratch in a line stoker did not write: $foreign"
  dev=$(find_or_make_array "${disks[@]}")
  # blkid exits 2 when the device holds no signature at all: only then is it formatted.
  if probe=$(blkid -p -o export "$dev"); then
    type=$(echo "$probe" | sed -n 's/^TYPE=//p')
    [ -n "$type" ] || die "$dev holds a signature that is no file system; not formatted over"
  else
    [ "$?" -eq 2 ] || die "blkid cannot read $dev"
    say "$dev holds no file system: mkfs.$fstype"
    "mkfs.$fstype" -q "$dev" >&2
    type=$fstype
  fi
  uuid=$(blkid -p -o value -s UUID "$dev")
  replace_owned "$fstab" "stoker: $scratch" \
    "UUID=$uuid $scratch $type defaults,noatime,nofail 0 2"
  protect "$scratch"
  if ! mountpoint -q "$scratch"; then mount --fstab "$fstab" "$scratch"; fi
  [ "$(findmnt -n -o UUID -M "$scratch")" = "$uuid" ] ||
    die "$scratch is mounted, but not from the array's file system $uuid"
  chmod 1777 "$scratch"
  say "$scratch: $type on $dev (UUID $uuid)"
}

do_mounts() {
  local source target type opts rest failed="" foreign n
  [ -e "$mounts" ] || return 0
  while read -r source target type opts rest; do
    case "$source" in '' | '#'*) continue ;; esac
    foreign=$(foreign_entry "$target")
    [ -z "$foreign" ] || die "$fstab already mounts $target in a line stoker did not write: $foreign"
    replace_owned "$fstab" "stoker: $target" "$source $target $type $opts 0 0"
    protect "$target"
    n=1
    # The file system's servers may still be coming up at boot: a few tries, then a failure.
    until mountpoint -q "$target" || mount --fstab "$fstab" "$target"; do
      if [ "$n" -ge "$tries" ]; then
        say "$source did not mount at $target after $n tries"
        failed="$failed $target"
        break
      fi
      n=$((n + 1))
      sleep "$wait_s"
    done
  done <"$mounts"
  [ -z "$failed" ] || die "not mounted:$failed"
}

do_install() {
  local req=${STOKER_INSTALL:?STOKER_INSTALL (the pip requirement) is not set in $conf}
  local python=${STOKER_PYTHON:-python3} stamp="$prefix/installed" tmp have
  local need=${STOKER_PYTHON_MIN:-3.11}
  if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$req" ] && "$bin" --version >/dev/null; then
    return 0
  fi
  # Said plainly here rather than as pip's "requires a different Python" further down.
  have=$("$python" -c 'import platform; print(platform.python_version())')
  "$python" -c "import sys; sys.exit(sys.version_info[:2] < tuple(map(int, '$need'.split('.'))))" ||
    die "stoker needs Python $need or later; this image's $python is $have"
  # --target: the image's pip into a folder of its own; PEP 668 does not apply there, and
  # nothing of the image's Python changes. A failure fails the unit: nothing swallows it.
  "$python" -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --upgrade --target "$prefix/lib" "$req" >&2
  mkdir -p "$(dirname "$bin")"
  tmp=$(mktemp "$bin.XXXXXX")
  printf '#!/bin/sh\nPYTHONPATH=%s${PYTHONPATH:+:$PYTHONPATH} exec %s "$@"\n' \
    "$prefix/lib" "$prefix/lib/bin/stoker" >"$tmp"
  chmod 0755 "$tmp"
  mv "$tmp" "$bin"
  "$bin" --version >&2
  echo "$req" >"$stamp"
}

# The node drains itself in Slurm (where there is one) and says why in $run/unhealthy, which
# `stoker-node ready`, the scheduler and stoker's own checks read.
mark_unhealthy() {
  local node
  mkdir -p "$run"
  rm -f "$run/ready"
  printf '%s %s\n' "$(date -u +%FT%TZ)" "$1" >"$run/unhealthy"
  if command -v scontrol >/dev/null; then
    node=${STOKER_NODENAME:-$(hostname -s)}
    scontrol update nodename="$node" state=drain reason="stoker-health: $1" ||
      say "scontrol could not drain $node"
  fi
}

# Healthy again: ready again if the mounts are, and only then is a drain lifted; only one
# stoker set (Slurm keeps a drain across reboots), never one an operator set.
clear_unhealthy() {
  local node
  rm -f "$run/unhealthy"
  if ! (do_ready); then
    say "healthy, but not ready: a drain stays"
    return 0
  fi
  if command -v scontrol >/dev/null; then
    node=${STOKER_NODENAME:-$(hostname -s)}
    if scontrol show node "$node" | grep -q 'Reason=stoker-health:'; then
      scontrol update nodename="$node" state=resume
    fi
  fi
}

# Processes on the GPUs: a job is running. azurehpc-health-checks loads the GPUs and the links
# itself, so it waits for an idle node rather than slow the job and fail for want of them.
gpus_busy() {
  command -v nvidia-smi >/dev/null &&
    [ -n "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)" ]
}

do_health() {
  local reasons=""
  mkdir -p "$run" "$(dirname "$doctor_json")"
  if [ ! -x "$nhc" ]; then
    reasons="azurehpc-health-checks is missing ($nhc)"
  elif gpus_busy; then
    say "GPUs in use by a job: azurehpc-health-checks waits for the next idle run"
  elif ! "$nhc" >&2; then
    reasons="azurehpc-health-checks failed"
  fi
  if ! "$bin" doctor --json >"$doctor_json.tmp"; then
    reasons="${reasons:+$reasons; }stoker doctor failed (see $doctor_json)"
  fi
  mv "$doctor_json.tmp" "$doctor_json"
  if [ -n "$reasons" ]; then
    mark_unhealthy "$reasons"
    die "$reasons"
  fi
  clear_unhealthy
}

do_ready() {
  local target rest missing=""
  rm -f "$run/ready"
  [ ! -e "$run/unhealthy" ] || die "marked unhealthy: $(cat "$run/unhealthy")"
  for target in ${STOKER_SCRATCH:+"$STOKER_SCRATCH"} $(awk '$1 !~ /^#/ && NF { print $2 }' \
    "$mounts" 2>/dev/null); do
    real_mount "$target" || missing="$missing $target"
  done
  [ -z "$missing" ] || die "not a mounted file system (writes would land on the OS disk):$missing"
  mkdir -p "$run"
  date -u +%FT%TZ >"$run/ready"
}

verb=${1:-}
case "$verb" in
  scratch) do_scratch ;;
  mounts) do_mounts ;;
  install) do_install ;;
  health) do_health ;;
  ready) do_ready ;;
  *)
    echo "usage: stoker-node scratch|mounts|install|health|ready" >&2
    exit 2
    ;;
esac
