#!/usr/bin/env bash
# From nothing to an installed tune as a user without root, in a clean Debian root: what a GPU
# workstation user does, on a machine that has only a compiler, CMake, git, Python's venv and a
# pip torch.
#
# What it does (as root here: debootstrap, mount and chroot need it; the build runs as a user):
#   1. A minimal root (debootstrap --variant=minbase, SUITE, default bookworm; an Ubuntu suite
#      such as jammy or noble comes from archive.ubuntu.com with main and universe, checked
#      against Ubuntu's archive key) kept in ROOT (default /var/cache/tune/clean-SUITE) and
#      reused; in it only build-essential, cmake, git, python3-venv and ca-certificates are
#      installed (plus CC's compiler package: g++-11 or clang-14). The packages present are listed
#      in the log.
#   2. A user `tuneuser` (no sudo) with a virtual environment holding torch: from the wheels in
#      WHEELS (pip install --no-index --find-links; offline) or from PyPI.
#   3. As that user: a clean clone of this repository's HEAD, then
#      scripts/build-with-torch.sh --python ~/venv/bin/python --fetch-deps (the small libraries
#      built from pinned sources; offline their sources come from SOURCES, one directory per
#      FetchContent name, passed as FETCHCONTENT_SOURCE_DIR_<NAME>), which builds and installs
#      into ~/.local: timed.
#   4. In a new login shell of the user: `tune --version` and a function study from ~/.local/bin.
#   5. The LibTorch-free unit suites (ctest -L unit) built in the same build directory.
#   6. One summary line: the compiler, the build and install time, the study, the tests.
#
# With --system-libs, the with-root path instead: after step 2, root runs the clone's
# scripts/install-deps.sh --build (the release's own -dev packages: what the README's apt-get line
# installs) and step 3 builds against them, without --fetch-deps (default ROOT
# /var/cache/tune/clean-SUITE-system, so that the clean root stays clean).
#
# Usage: scripts/check-clean-root.sh [--cc gcc-11|gcc|clang-14] [--wheels DIR] [--sources DIR]
#                                    [--jobs N] [--root DIR] [--suite SUITE] [--system-libs]
#                                    [--remove]
# A root takes 8-10 GB once built (the torch wheel and the build directory): the run refuses to
# make a new one with under 15 GB free beside it, prints the root's size at the end, and with
# --remove deletes it afterwards (the next run builds it again: debootstrap and pip, minutes).
# Logs: build/clean-root/SUITE[-system]-CC/ in the source tree.
# Exit status: 0 when every step passed; 1 when one failed (the message names it).
set -euo pipefail

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUITE=bookworm
cc=gcc
wheels=""
sources=""
system_libs=""
remove=""
jobs=$(nproc 2>/dev/null || echo 2)
root=${TUNE_CLEAN_ROOT:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --cc) cc=${2:?--cc needs a value}; shift 2 ;;
    --wheels) wheels=$(cd "${2:?--wheels needs a value}" && pwd); shift 2 ;;
    --sources) sources=$(cd "${2:?--sources needs a value}" && pwd); shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
    --root) root=${2:?--root needs a value}; shift 2 ;;
    --suite) SUITE=${2:?--suite needs a value}; shift 2 ;;
    --system-libs) system_libs=1; shift ;;
    --remove) remove=1; shift ;;
    *) echo "check-clean-root.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
root=${root:-/var/cache/tune/clean-$SUITE${system_libs:+-system}}
case "$cc" in
  gcc) cc_pkg=""; cc_env="" ;;
  gcc-11) cc_pkg=g++-11; cc_env="CC=gcc-11 CXX=g++-11" ;;
  clang-14) cc_pkg=clang-14; cc_env="CC=clang-14 CXX=clang++-14" ;;
  *) echo "check-clean-root.sh: --cc must be gcc, gcc-11 or clang-14 (got '$cc')" >&2; exit 2 ;;
esac
# shellcheck source=scripts/debian13-root.sh
. "$src_dir/scripts/debian13-root.sh"
log() { echo "clean-root: $*" >&2; }
die() { echo "clean-root: ERROR: $*" >&2; exit 1; }
log_dir=$src_dir/build/clean-root/$SUITE${system_libs:+-system}-$cc
mkdir -p "$log_dir"

if ! [ -f "$root/.tune-root-ready" ]; then
  mkdir -p "$(dirname "$root")"
  free_kb=$(df -Pk "$(dirname "$root")" | awk 'NR==2 {print $4}')
  [ "$free_kb" -ge $((15 * 1024 * 1024)) ] ||
    die "only $((free_kb / 1024 / 1024)) GB free in $(dirname "$root"); a new root needs about" \
        "10 GB and the run refuses under 15 GB (remove old roots: rm -rf /var/cache/tune/clean-*)"
fi
root_prepare
root_run "apt-get update -qq && apt-get install -y -qq --no-install-recommends build-essential \
  cmake git python3-venv ca-certificates $cc_pkg >/dev/null" > "$log_dir/apt.log" 2>&1 ||
  die "apt-get in the root failed: $(tail -n 5 "$log_dir/apt.log")"
# This machine's own certificate authorities (a proxy's, say), as its resolv.conf: pip must reach
# PyPI from the root as from the machine.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  root_run "update-ca-certificates >/dev/null 2>&1"
fi
root_run "dpkg-query -W -f='\${Package} \${Version}\n'" > "$log_dir/packages.txt"
log "the root has $(wc -l < "$log_dir/packages.txt") packages; of tune's libraries:" \
    "$(grep -E '^(libfmt|libspdlog|libcli11|nlohmann|libgtest|libsqlite3-dev|libicu-dev|libsentencepiece|libminizip|libcurl4-openssl|libpq-dev|libtorch)' \
       "$log_dir/packages.txt" | tr '\n' ' ' || true)(none means none)"

# 2. The user and its torch.
root_run "id tuneuser >/dev/null 2>&1 || useradd -m -s /bin/bash tuneuser"
user_run() { # runs $1 as tuneuser in a login shell, in a clean environment
  chroot "$root" /usr/bin/env -i TERM=dumb LANG=C.UTF-8 /bin/su - tuneuser -c "$1"
}
if [ -n "$wheels" ]; then
  root_mount /wheels --bind "$wheels"
  pip_from="--no-index --find-links /wheels"
else
  pip_from=""
fi
if ! user_run "test -x ~/venv/bin/python && ~/venv/bin/python -c 'import torch'" 2>/dev/null; then
  log "a venv with torch for tuneuser (${wheels:-from PyPI})"
  user_run "python3 -m venv ~/venv && ~/venv/bin/pip install -q $pip_from torch" \
    > "$log_dir/pip.log" 2>&1 || die "pip install torch failed: $(tail -n 5 "$log_dir/pip.log")"
fi
torch_version=$(user_run "~/venv/bin/python -c 'import torch; print(torch.__version__)' 2>/dev/null")

# 3. Clone, build with fetched libraries, unit tests, install.
rm -rf "$root/home/tuneuser/tune"
git clone -q --no-checkout "$src_dir" "$root/home/tuneuser/tune"
built_commit=$(git -C "$src_dir" rev-parse --short HEAD)
git -C "$root/home/tuneuser/tune" checkout -q --detach "$built_commit"
chroot "$root" chown -R tuneuser: /home/tuneuser/tune
deps="--fetch-deps"
if [ -n "$system_libs" ]; then
  log "as root: the release's packages for building (scripts/install-deps.sh --build)"
  root_run "cd /home/tuneuser/tune && scripts/install-deps.sh --build" > "$log_dir/install-deps.log" 2>&1 ||
    die "install-deps.sh --build failed: $(tail -n 5 "$log_dir/install-deps.log")"
  root_run "dpkg-query -W -f='\${Package} \${Version}\n'" > "$log_dir/packages-after.txt"
  log "the root now has $(wc -l < "$log_dir/packages-after.txt") packages; of tune's libraries:" \
      "$(grep -E '^(libfmt-dev|libspdlog-dev|libcli11-dev|nlohmann-json3-dev|libgtest-dev|libsqlite3-dev|libsentencepiece-dev|libminizip-dev|libcurl4-openssl-dev|libpq-dev|cmake|g\+\+) ' \
         "$log_dir/packages-after.txt" | tr '\n' ' ' || true)"
  deps=""
fi
fetch_args=""
if [ -n "$sources" ] && [ -z "$system_libs" ]; then
  root_mount /sources --bind "$sources" -o ro
  for d in "$sources"/*/; do
    name=$(basename "$d")
    fetch_args+=" --cmake-arg -DFETCHCONTENT_SOURCE_DIR_$(echo "$name" | tr '[:lower:]-' '[:upper:]_')=/sources/$name"
  done
fi
build_cmd="cd ~/tune && $cc_env scripts/build-with-torch.sh --python ~/venv/bin/python $deps \
  --jobs $jobs --build-dir ~/tune/build$fetch_args"
log "as tuneuser: $build_cmd"
start=$SECONDS
user_run "$build_cmd" > "$log_dir/build-install.log" 2>&1 ||
  die "build or install failed: $(tail -n 20 "$log_dir/build-install.log")"
build_s=$((SECONDS - start))
grep -E '^-- (tune: |LibTorch|tune_torch)' "$log_dir/build-install.log" >&2 || true

# 4. A new login shell: tune from ~/.local/bin.
user_run 'export PATH=$HOME/.local/bin:$PATH; command -v tune; tune --version;
  cd /tmp && tune --study demo --config $HOME/.local/share/tune/configs/demo.json \
    --storage sqlite:///$HOME/clean-root.db --n-trials 20 && tune best-trial --study demo --storage sqlite:///$HOME/clean-root.db' \
  > "$log_dir/study.log" 2>&1 || die "the installed tune failed: $(tail -n 20 "$log_dir/study.log")"

# 5. The LibTorch-free unit suites (ctest -L unit) in the same build, with the fetched GoogleTest.
# With libpq found (--system-libs), the PostgreSQL suites' server fixture too (it skips, exit 77,
# where no PostgreSQL server is installed).
unit_targets="tune_core_tests tune_tracking_tests tune_storage_tests tune_fuzz_replay_tests"
[ -n "$system_libs" ] && unit_targets+=" tune_test_postgres_server"
start=$SECONDS
user_run "cd ~/tune/build && cmake -DTUNE_BUILD_TESTS=ON . >/dev/null && \
  cmake --build . -j $jobs --target $unit_targets && ctest -L unit -j $jobs" \
  > "$log_dir/unit-tests.log" 2>&1 || die "unit tests failed: $(tail -n 20 "$log_dir/unit-tests.log")"
tests_s=$((SECONDS - start))
tests=$(grep -E '^[0-9]+% tests passed' "$log_dir/unit-tests.log" | tail -n 1)
cat "$log_dir/study.log"
echo "clean-root: $SUITE${system_libs:+ (its own packages)}, ${cc}, torch $torch_version, commit" \
     "$built_commit: configure + build + install ${build_s}s;" \
     "study from ~/.local ok; unit tests ${tests_s}s ($tests)"
if [ -n "$remove" ]; then
  root_unmount
  trap - EXIT
  ! grep -q " $root/" /proc/mounts || die "something is still mounted under $root; not removing it"
  rm -rf "$root"
  log "removed $root (--remove)"
else
  log "the root $root holds $(du -sh "$root" 2>/dev/null | cut -f1); --remove deletes it after a run"
fi
