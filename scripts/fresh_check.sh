#!/usr/bin/env bash
# The README's two commands on a fresh machine: makes a minimal Debian 12 root with debootstrap
# (installed with apt-get when missing; the mirror is read from this machine's apt sources),
# clones the repository's committed HEAD into it, runs ./scripts/demo.sh and ./scripts/test.sh
# there (as root, as a fresh machine's first user would) and prints the test summary.
#
# Usage: scripts/fresh_check.sh [--keep] [--cuda] [--root DIR] [--skip-demo] [--isa avx2]
#   --keep       keep the root afterwards (default: removed when the check passes)
#   --cuda       bind-mount this machine's /usr/local/cuda read-only (as on the CI machines);
#                default: none, as on a minimal Debian
#   --root DIR   where to make the root (default: a new folder under /var/tmp)
#   --skip-demo  run only the test command
#   --isa avx2   run the tests with oneDNN capped at AVX2 (a machine without AVX-512)
# Exit code: the test command's. Needs root (debootstrap, chroot, mounts).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
keep=0
cuda=0
demo=1
isa=""
root=""
while (($#)); do
  case "$1" in
    --keep) keep=1 ;;
    --cuda) cuda=1 ;;
    --skip-demo) demo=0 ;;
    --root) root=$2; shift ;;
    --isa) isa=$2; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh_check: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh_check: needs root (debootstrap and chroot); run it with sudo" >&2
  exit 2
fi
if ! command -v debootstrap >/dev/null; then
  echo "fresh_check: installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
fi

# The mirror this machine installs Debian packages from (deb822 sources or sources.list).
mirror=""
for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
  [ -f "$f" ] || continue
  mirror=$(awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}
                /^deb / && $0 ~ / bookworm / && $2 ~ /debian\/?$/ {print $2; exit}' "$f" 2>/dev/null || true)
  [ -n "$mirror" ] && break
done
mirror=${mirror:-http://deb.debian.org/debian}

root=${root:-$(mktemp -d /var/tmp/stagecraft-fresh.XXXXXX)}
mounts=()
cleanup() {
  local m
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
  if [ "$keep" -eq 0 ] && [ "${passed:-0}" -eq 1 ]; then rm -rf "$root"; fi
}
trap cleanup EXIT

start=$(date +%s)
echo "fresh_check: debootstrap --variant=minbase bookworm $root $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
  tail -n 30 "$root.debootstrap.log"
  exit 1
}
# Security updates as on an installed machine.
cat >"$root/etc/apt/sources.list" <<EOT
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian*}/debian-security bookworm-security main
EOT
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's network settings, which a fresh machine on the same network has too: extra CA
# certificates (a TLS-inspecting egress proxy; the ca-certificates package adds them to the bundle
# when the README's command installs it) and pip's configuration.
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  mount --bind "/$m" "$root/$m"
  mounts+=("$root/$m")
done
if [ "$cuda" -eq 1 ] && [ -d /usr/local/cuda ]; then
  mkdir -p "$root/usr/local/cuda"
  mount --bind -o ro "$(readlink -f /usr/local/cuda)" "$root/usr/local/cuda"
  mounts+=("$root/usr/local/cuda")
fi
# The committed state of the repository, as CI clones it.
mkdir -p "$root/work"
git clone --quiet --no-local "$repo" "$root/work/stagecraft"
echo "fresh_check: cloned $(git -C "$repo" rev-parse --short HEAD) into $root/work/stagecraft" \
     "($(( $(date +%s) - start )) s so far)"

env_isa=""
if [ -n "$isa" ]; then
  env_isa="DNNL_MAX_CPU_ISA=${isa^^} ONEDNN_MAX_CPU_ISA=${isa^^}"
fi
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 $env_isa /bin/bash -c "cd /work/stagecraft && $1"
}
status=0
if [ "$demo" -eq 1 ]; then
  echo "fresh_check: ./scripts/demo.sh"
  in_root "./scripts/demo.sh" >"$root.demo.log" 2>&1 || status=$?
  tail -n 25 "$root.demo.log"
  if [ "$status" -ne 0 ]; then
    echo "fresh_check: the demo failed (exit $status); log: $root.demo.log"
  fi
fi
echo "fresh_check: ./scripts/test.sh"
test_status=0
in_root "./scripts/test.sh" >"$root.test.log" 2>&1 || test_status=$?
sed -n '/^stagecraft: skipped tests and why/,$p' "$root.test.log" | tail -n 40
grep -E "tests passed|tests failed out of" "$root.test.log" | tail -n 1
grep -A200 "The following tests FAILED" "$root.test.log" | head -40 || true
echo "fresh_check: test command exit $test_status after $(( $(date +%s) - start )) s in all;" \
     "logs: $root.test.log $root.demo.log"
if [ "$status" -eq 0 ] && [ "$test_status" -eq 0 ]; then
  passed=1
  echo "fresh_check: PASSED"
else
  echo "fresh_check: FAILED"
fi
[ "$test_status" -ne 0 ] && exit "$test_status"
exit "$status"
