#!/usr/bin/env bash
# The GPU kit, part 1 (here, on Debian 12): downloads the Debian 12 packages tune needs besides
# LibTorch into .gpu-kit/debs, for scripts/gpu/build.sh to unpack on a borrowed GPU machine that
# has no network and no apt (docs/gpu.md#the-gpu-kit). Prints the kit's size: it travels with the
# source tree, at most 64 MiB in all; the kit itself must stay under 50 MiB.
#
# The packages: what CMakeLists.txt and cmake/TuneDependencies.cmake find (CLI11, nlohmann-json,
# spdlog, fmt, GoogleTest, SQLite, libpq, SentencePiece), the shared libraries those link
# (with libpq's Kerberos, LDAP and OpenSSL libraries, which a minimal system may lack), and
# Universal Ctags for the memory_functions_short test. apt-get download fetches the versions of
# this system's package lists; nothing is installed. Downloaded .debs are kept; run again to
# fetch what changed (older versions are removed).
#
# Usage: scripts/gpu/prepare.sh [KIT_DIR]      (default: .gpu-kit in the source tree)
set -euo pipefail

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
kit=${1:-$src_dir/.gpu-kit}
limit_kit_mib=50
limit_all_mib=64

pkgs=(
  # Headers and CMake packages.
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libgtest-dev libsqlite3-dev libpq-dev
  libsentencepiece-dev libminizip-dev
  # Their shared libraries.
  libspdlog1.10 libfmt9 libsqlite3-0 libpq5 libsentencepiece0 libminizip1 zlib1g-dev zlib1g
  # libpq5's.
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2
  libldap-2.5-0 libsasl2-2 libsasl2-modules-db libssl3
  # scripts/longest-functions.py (the memory_functions_short test) and its libraries.
  universal-ctags libjansson4 libyaml-0-2
)

command -v apt-get >/dev/null 2>&1 || { echo "prepare.sh: needs apt-get (Debian 12)" >&2; exit 1; }
codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
[ "$codename" = bookworm ] ||
  echo "prepare.sh: note: made for Debian 12 (bookworm), this is '${codename:-unknown}'" >&2

mkdir -p "$kit/debs"
cd "$kit/debs"
# One apt-get call; on a failure (say, stale package lists) one `apt-get update` and a retry.
if ! apt-get download -q "${pkgs[@]}" > "$kit/download.log" 2>&1; then
  echo "prepare.sh: apt-get download failed; updating the package lists and retrying" >&2
  apt-get update -qq
  apt-get download -q "${pkgs[@]}" > "$kit/download.log" 2>&1 ||
    { cat "$kit/download.log" >&2; exit 1; }
fi
# Keep the newest .deb of each package only.
for p in "${pkgs[@]}"; do
  mapfile -t versions < <(ls -1 "${p}"_*.deb 2>/dev/null | sort -V)
  for ((i = 0; i + 1 < ${#versions[@]}; i++)); do rm -f "${versions[$i]}"; done
done
printf '%s\n' "${pkgs[@]}" > "$kit/packages.txt"

mib() { echo $(( ($1 + 1048575) / 1048576 )); }
kit_bytes=$(du -sb "$kit" | cut -f1)
src_bytes=$(cd "$src_dir" && git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
n=$(ls -1 "$kit/debs"/*.deb | wc -l)
echo "gpu-kit: $n packages, $(mib "$kit_bytes") MiB in $kit (limit $limit_kit_mib MiB);" \
     "with the source tree ($(mib "$src_bytes") MiB) $(mib $((kit_bytes + src_bytes))) MiB" \
     "(limit $limit_all_mib MiB)"
if [ "$(mib "$kit_bytes")" -gt "$limit_kit_mib" ] ||
   [ "$(mib $((kit_bytes + src_bytes)))" -gt "$limit_all_mib" ]; then
  echo "prepare.sh: ERROR: over the limit" >&2
  exit 1
fi
