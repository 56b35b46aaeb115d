#!/usr/bin/env bash
# Builds and tests tune on Debian 13 (trixie, LibTorch 2.6) from a Debian 12 machine, in a chroot.
#
# Why: Debian 13 is Debian's stable release and packages LibTorch 2.6, SentencePiece 0.2
# and PostgreSQL 17; tune's day-to-day machines run Debian 12 (LibTorch 1.13). This runs the
# README's `make test` there, so that what differs at run time between the two LibTorch releases
# (allocator hooks, c10::OutOfMemoryError, autocast, SDPA, safetensors loading, the counting
# allocator) is exercised by the whole suite. Too slow for `make test` itself (the first run
# downloads ~1 GB and builds tune without a warm compiler cache: about 45 minutes on 2 cores).
#
# What it does (as root: debootstrap, mount and chroot need it):
#   1. A Debian 13 root made with Debian's debootstrap (--variant=minbase, components main contrib
#      non-free non-free-firmware) from the Debian mirror this system's apt sources use (else
#      http://deb.debian.org/debian). It is kept in ROOT and reused by later runs; delete ROOT to
#      start afresh.
#   2. Mounts /proc, /sys, /dev (with /dev/pts and /dev/shm, which PostgreSQL and Chromium use)
#      into it, and unmounts them on exit (trap), whatever happens.
#   3. A clean clone of this repository's HEAD (`git clone`; uncommitted changes are not in it)
#      into ROOT/src/tune, replacing the last run's.
#   4. In the chroot: scripts/install-deps.sh (Debian 13's package names), then `make test`
#      (with -DTUNE_WERROR=ON as in .ci/run unless TUNE_DEBIAN13_WERROR=0, and ccache with its
#      cache in ROOT/var/cache/ccache, so that later runs rebuild only what changed).
#   5. Prints one summary line ("debian13: ...") and the tail of ctest's output; the whole log is
#      in LOG_DIR/make-test.log.
#
# Usage: scripts/check-debian13.sh [--cuda]
#   --cuda   the CUDA variant instead (scripts/check-debian13-cuda.sh): see docs/gpu.md.
# Environment:
#   TUNE_DEBIAN13_ROOT   the root; default /var/cache/tune/debian13
#   TUNE_DEBIAN13_LOGS   logs; default build/debian13 in the source tree
#   JOBS                 make test's parallel jobs (default: nproc)
#
# Exit status: that of `make test` (0 all passed); 1 when the check itself could not run (not
# root, no debootstrap, debootstrap or apt failed: the message says which).
set -euo pipefail

SUITE=trixie
src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "${1:-}" = --cuda ]; then exec "$src_dir/scripts/check-debian13-cuda.sh"; fi
[ $# -eq 0 ] || { echo "usage: scripts/check-debian13.sh [--cuda]" >&2; exit 2; }
# shellcheck source=scripts/debian13-root.sh
. "$src_dir/scripts/debian13-root.sh"

log_dir=${TUNE_DEBIAN13_LOGS:-$src_dir/build/debian13}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
mkdir -p "$log_dir"
log_dir=$(cd "$log_dir" && pwd)
start_s=$SECONDS

root_prepare            # 1 and 2: debootstrap (once), mounts with their trap
root_clone "$src_dir"   # 3

werror=ON
[ "${TUNE_DEBIAN13_WERROR:-1}" = 0 ] && werror=OFF
test_log=$log_dir/make-test.log
log "scripts/install-deps.sh, then make test (JOBS=$jobs, TUNE_WERROR=$werror); log: $test_log"
rc=0
root_run "cd /src/tune && scripts/install-deps.sh && \
  make test JOBS=$jobs CMAKE_FLAGS='-DTUNE_WERROR=$werror -DCMAKE_CXX_COMPILER_LAUNCHER=ccache'" \
  > "$test_log" 2>&1 || rc=$?

torch_version=$(root_run "dpkg-query -W -f='\${Version}' libtorch-dev" 2>/dev/null || echo '?')
summary=$(grep -E '^[0-9]+% tests passed' "$test_log" | tail -n 1 || true)
[ -n "$summary" ] || summary="no ctest summary (make test exit $rc: see $test_log)"
minutes=$(( (SECONDS - start_s + 30) / 60 ))
echo "debian13: $SUITE, LibTorch $torch_version, commit $(git -C "$src_dir" rev-parse --short HEAD):" \
     "$summary; make test exit $rc; $minutes min"
echo "--- ctest tail (from $test_log) ---"
tail -n 25 "$test_log"
exit "$rc"
