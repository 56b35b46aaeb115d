#!/usr/bin/env bash
# Compile check of tune's LibTorch code against LibTorch 2.x, CPU and CUDA.
#
# Why: tune is built and tested with Debian 12's LibTorch 1.13 (CPU), but GPU users build it
# against LibTorch 2.x, and the API differences between the two (src/torch/torch_compat.h) would
# otherwise only show up on their machines. Debian 13 (trixie) packages LibTorch 2.6 as
# libtorch-dev (CPU, main) and libtorch-cuda-dev (CUDA, contrib); their headers are enough to
# compile-check every LibTorch translation unit without installing anything or owning a GPU.
#
# What it does:
#   1. Downloads the two -dev packages (about 5 MB) with apt-get, using a PRIVATE apt
#      configuration under WORK_DIR: its own sources list (suite trixie, components main
#      contrib, on the Debian mirror(s) this system's own apt sources use), package lists,
#      archive cache and an empty dpkg status file. The system keyring
#      (/usr/share/keyrings/debian-archive-keyring.gpg) verifies trixie's Release file; nothing
#      of the system's apt or dpkg state changes, and no root is needed. Downloaded .debs are
#      reused on later runs (delete WORK_DIR to fetch newer ones).
#   2. Unpacks each with dpkg-deb -x (WORK_DIR/root-cpu, WORK_DIR/root-cuda).
#   3. Compiles every src/torch/*.cpp (globbed at run time) with g++ -fsyntax-only (the units
#      that read torch/torch.h start from it precompiled, once per pass), the C++
#      standard of CMakeLists.txt, tune's warning set, and the definitions and options that
#      LibTorch's own CMake package (Caffe2Targets.cmake, TorchConfig.cmake) gives its users:
#        cpu:  against libtorch-dev's headers;
#        cuda: against libtorch-cuda-dev's headers and the CUDA Toolkit's, with TUNE_WITH_CUDA=1
#              (as CMakeLists.txt sets with a CUDA LibTorch). Only when the toolkit's headers are
#              found (CUDA_HOME, CUDA_PATH, /usr/local/cuda, /usr/include); otherwise the pass is
#              left out and the summary says so. libtorch-cuda-dev ships the generated
#              c10/cuda/impl/cuda_cmake_macros.h, so unlike tune_cuda_compile_check (CMakeLists.txt,
#              CUDA headers with a CPU LibTorch) this needs no C10_USING_CUSTOM_GENERATED_MACROS.
#      Each file is preprocessed for both passes first. A cuda unit whose preprocessed code is
#      the same as the cpu one's (line markers and the two header trees' paths aside) cannot
#      compile differently, so it is not compiled a second time (TUNE_LIBTORCH2_FULL=1 compiles
#      it anyway). The check fails when a unit picks up a header of the system's own LibTorch
#      (e.g. Debian 12's 1.13 under /usr/include) instead of the unpacked 2.x one.
#
# Usage: scripts/check-libtorch2.sh [WORK_DIR]
#   WORK_DIR   downloads, unpacked packages and logs; default $TUNE_LIBTORCH2_DIR, else
#              build/libtorch2 in the source tree.
#   JOBS       parallel compiles (default: nproc).
#   TUNE_LIBTORCH2_FULL=1   compile the cuda pass even for units identical to the cpu ones.
#
# Exit status: 0 all compiled; 1 a unit did not compile (its errors are printed) or the check
# itself went wrong; 77 (CTest's SKIP_RETURN_CODE) when the packages cannot be had here (no
# apt-get, no Debian mirror in the system's apt sources, no network, no trixie), with a
# "SKIPPED: ... because ..." banner.
set -euo pipefail

SUITE=trixie
COMPONENTS="main contrib"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PKG_CPU=libtorch-dev
PKG_CUDA=libtorch-cuda-dev

src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:-${TUNE_LIBTORCH2_DIR:-$src_dir/build/libtorch2}}
mkdir -p "$work"
work=$(cd "$work" && pwd)
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
start_s=$SECONDS

log() { echo "libtorch2: $*"; }
cpu_s() { # CPU seconds (user + system) of the children that $1 (`times`' output) counts
  tail -n 1 "$1" |
    awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] }
           printf "%.0f", n }'
}
skip() {
  echo "SKIPPED: LibTorch 2 compile check not run because $*"
  exit 77
}
die() {
  echo "libtorch2: ERROR: $*" >&2
  exit 1
}

# One run at a time per WORK_DIR (two ctest runs sharing a build tree).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$work/.lock"
  flock 9
fi

command -v g++ >/dev/null 2>&1 || die "g++ not found"

# --- 1. The .debs: cached, or downloaded with a private apt configuration ---------------------

apt_dir=$work/apt
archives=$apt_dir/cache/archives
mkdir -p "$archives"

cached_deb() { # newest cached .deb of package $1, or nothing
  local f
  f=$(ls -1 "$archives/$1"_*.deb 2>/dev/null | sort -V | tail -n 1) || true
  echo "$f"
}

# The Debian mirror(s) this system uses: apt's own reading of its sources (sources.list and
# sources.list.d/, one-line and deb822 alike), keeping the entries for this release's own suite
# and component main (not -security, -updates, nor third-party repositories).
system_debian_uris() {
  local codename="" uri rel comp ident origin
  if [ -r /etc/os-release ]; then
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  fi
  [ -n "$codename" ] || return 0
  apt-get indextargets --format '$(REPO_URI)|$(RELEASE)|$(COMPONENT)|$(IDENTIFIER)|$(ORIGIN)' \
      2>/dev/null | sort -u | while IFS='|' read -r uri rel comp ident origin; do
    # $(ORIGIN) stays unexpanded when the system's lists have not been downloaded yet.
    [ "$rel" = "$codename" ] && [ "$comp" = main ] && [ "$ident" = Packages ] || continue
    case "$origin" in Debian | '$(ORIGIN)' | '') echo "$uri" ;; esac
  done | sort -u
}

apt_private() { # apt-get/apt-cache with the private configuration, at most 5 minutes
  if command -v timeout >/dev/null 2>&1; then
    APT_CONFIG=$apt_dir/apt.conf timeout 300 "$@"
  else
    APT_CONFIG=$apt_dir/apt.conf "$@"
  fi
}

setup_private_apt() {
  local uris=("$@")
  mkdir -p "$apt_dir/etc/sources.list.d" "$apt_dir/etc/apt.conf.d" "$apt_dir/etc/trusted.gpg.d" \
           "$apt_dir/etc/preferences.d" "$apt_dir/state/lists/partial" \
           "$apt_dir/cache/archives/partial" "$apt_dir/log"
  : > "$apt_dir/status"
  {
    echo "Types: deb"
    echo "URIs: ${uris[*]}"
    echo "Suites: $SUITE"
    echo "Components: $COMPONENTS"
    echo "Architectures: $(dpkg --print-architecture)"
    echo "Targets: Packages"
    echo "Signed-By: $KEYRING"
  } > "$apt_dir/etc/sources.list.d/$SUITE.sources"
  # APT_CONFIG is read first, then the system's apt.conf.d (proxies, timeouts and the like still
  # apply), then Dir::Etc::main: ours, so that it has the last word. It points every directory
  # at WORK_DIR (sources, keyrings, preferences, lists, cache, dpkg status, logs) and drops the
  # system's update/dpkg hooks.
  echo "Dir::Etc::main \"$apt_dir/main.conf\";" > "$apt_dir/apt.conf"
  local user
  user=$(id -un)
  {
    # The system's main apt.conf, if any, is otherwise replaced by this file.
    [ -f /etc/apt/apt.conf ] && echo '#include "/etc/apt/apt.conf";'
    cat <<EOF
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear DPkg::Pre-Invoke;
#clear DPkg::Post-Invoke;
Dir::Etc "$apt_dir/etc";
Dir::Etc::sourcelist "/dev/null";
Dir::State "$apt_dir/state";
Dir::State::status "$apt_dir/status";
Dir::Cache "$apt_dir/cache";
Dir::Cache::pkgcache "pkgcache.bin";
Dir::Cache::srcpkgcache "srcpkgcache.bin";
Dir::Log "$apt_dir/log";
APT::Architectures { "$(dpkg --print-architecture)"; };
// Downloads run as the calling user: the private directories need not be open to _apt.
APT::Sandbox::User "$user";
Acquire::Languages "none";
EOF
  } > "$apt_dir/main.conf"
}

fetch_debs() {
  command -v apt-get >/dev/null 2>&1 || skip "apt-get is not installed (not a Debian system)"
  command -v dpkg >/dev/null 2>&1 || skip "dpkg is not installed (not a Debian system)"
  [ -r "$KEYRING" ] || skip "$KEYRING is missing (package debian-archive-keyring)"
  local uris
  mapfile -t uris < <(system_debian_uris)
  [ ${#uris[@]} -gt 0 ] ||
    skip "no Debian mirror found in this system's apt sources" \
         "(an entry for the system's own release suite, component main)"
  setup_private_apt "${uris[@]}"
  log "fetching $SUITE package lists from ${uris[*]} (private apt configuration in $apt_dir)"
  local out rc=0
  out=$(apt_private apt-get -q update 2>&1) || rc=$?
  if ! apt_private apt-cache show "$PKG_CPU" >/dev/null 2>&1; then
    echo "$out" | tail -n 15
    if echo "$out" | grep -q -e NO_PUBKEY -e 'not signed' -e 'EXPKEYSIG'; then
      skip "$SUITE's Release file could not be verified with $KEYRING" \
           "(it holds none of the keys that sign it; Debian 12's debian-archive-keyring does)"
    fi
    [ "$rc" = 124 ] && rc="124, timed out"
    skip "$PKG_CPU is not in $SUITE's package lists from ${uris[*]}" \
         "(apt-get update exit $rc: no network, or the mirror has no $SUITE)"
  fi
  [ "$rc" = 0 ] || log "apt-get update exit $rc (some sources failed; $PKG_CPU is listed, going on)"
  # Into partial/ first: only complete, verified .debs land in the archives directory.
  local pkg dl_log
  for pkg in "$PKG_CPU" "$PKG_CUDA"; do
    [ -n "$(cached_deb "$pkg")" ] && continue
    dl_log=$apt_dir/log/download-$pkg.log
    rm -f "$archives/partial/$pkg"_*.deb
    if (cd "$archives/partial" && apt_private apt-get -q download "$pkg") > "$dl_log" 2>&1; then
      mv "$archives/partial/$pkg"_*.deb "$archives/"
    elif [ "$pkg" = "$PKG_CPU" ]; then
      cat "$dl_log"
      skip "apt-get download $pkg failed"
    else
      log "apt-get download $pkg failed (the cuda pass is left out):"
      sed 's/^/  /' "$dl_log"
    fi
  done
}

if [ -z "$(cached_deb "$PKG_CPU")" ] || [ -z "$(cached_deb "$PKG_CUDA")" ]; then
  fetch_debs
else
  log "using the .debs cached in $archives"
fi
command -v dpkg-deb >/dev/null 2>&1 || skip "dpkg-deb is not installed (not a Debian system)"

# --- 2. Unpack ---------------------------------------------------------------------------------

unpack() { # unpack $1 (.deb) into $2, unless already done for that very file
  local deb=$1 root=$2
  local stamp=$root/.unpacked-from
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(basename "$deb")" ]; then
    return 0
  fi
  rm -rf "$root"
  mkdir -p "$root"
  dpkg-deb -x "$deb" "$root" || die "cannot unpack $deb (delete it and run again)"
  basename "$deb" > "$root/.unpacked-from"
}

deb_cpu=$(cached_deb "$PKG_CPU")
deb_cuda=$(cached_deb "$PKG_CUDA")
unpack "$deb_cpu" "$work/root-cpu"
[ -n "$deb_cuda" ] && unpack "$deb_cuda" "$work/root-cuda"
fetch_s=$((SECONDS - start_s))

# --- 3. Compile --------------------------------------------------------------------------------

cd "$src_dir"

version_of() { # LibTorch version of an unpacked tree
  local h
  h=$(find "$1/usr/include" -path '*/torch/csrc/api/include/torch/version.h' | head -n 1)
  [ -n "$h" ] || die "no torch/version.h under $1"
  local part v=""
  for part in MAJOR MINOR PATCH; do
    v+=${v:+.}$(sed -n "s/^#define TORCH_VERSION_$part \\([0-9]*\\).*/\\1/p" "$h")
  done
  echo "$v"
}

# The compile definitions and options LibTorch's CMake package puts on the `torch` target: the
# literal INTERFACE_COMPILE_DEFINITIONS of its imported targets (torch_cpu, and torch_cuda in
# the CUDA package) and TORCH_CXX_FLAGS (-D_GLIBCXX_USE_CXX11_ABI=...).
torch_flags() {
  local root=$1 targets config defs flags
  targets=$(find "$root" -path '*/cmake/Caffe2/Caffe2Targets.cmake' | head -n 1)
  config=$(find "$root" -path '*/cmake/Torch/TorchConfig.cmake' | head -n 1)
  [ -n "$targets" ] || die "no cmake/Caffe2/Caffe2Targets.cmake under $root"
  [ -n "$config" ] || die "no cmake/Torch/TorchConfig.cmake under $root"
  defs=$(grep -h 'INTERFACE_COMPILE_DEFINITIONS "' "$targets" | grep -v '\$<' |
         sed 's/.*INTERFACE_COMPILE_DEFINITIONS "\([^"]*\)".*/\1/' | tr ';' '\n' | sort -u)
  flags=$(sed -n 's/^ *set(TORCH_CXX_FLAGS "\([^"]*\)").*/\1/p' "$config" | head -n 1)
  [ -n "$flags" ] || die "no TORCH_CXX_FLAGS in $config"
  local d
  for d in $defs; do printf -- '-D%s\n' "$d"; done
  for d in $flags; do printf -- '%s\n' "$d"; done
}

std=$(sed -n 's/^ *set(CMAKE_CXX_STANDARD \([0-9]*\)).*/\1/p' CMakeLists.txt | head -n 1)
[ -n "$std" ] || die "no CMAKE_CXX_STANDARD in CMakeLists.txt"
# tune_set_warnings's flags (cmake/TuneWarnings.cmake), without -Werror.
mapfile -t warnings < <(grep -o -- '-W[A-Za-z0-9=-]*' cmake/TuneWarnings.cmake |
                        grep -vx -- '-Werror')
[ ${#warnings[@]} -gt 0 ] || warnings=(-Wall -Wextra)

cuda_include=""
for d in ${CUDA_HOME:+"$CUDA_HOME/include"} ${CUDA_PATH:+"$CUDA_PATH/include"} \
         /usr/local/cuda/include /usr/include; do
  if [ -f "$d/cuda_runtime_api.h" ]; then cuda_include=$d; break; fi
done
cuda_version=""
if [ -n "$cuda_include" ]; then
  v=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$cuda_include/cuda.h" 2>/dev/null |
      head -n 1) || v=""
  [ -n "$v" ] && cuda_version="$((v / 1000)).$((v % 1000 / 10))"
fi

configs=(cpu)
declare -A cfg_flags cfg_root
torch_version=$(version_of "$work/root-cpu")
cfg_root[cpu]=$work/root-cpu
cfg_flags[cpu]="$(torch_flags "$work/root-cpu" | tr '\n' ' ')"
cuda_note=""
if [ -z "$deb_cuda" ]; then
  cuda_note="cuda pass left out: $PKG_CUDA could not be downloaded"
elif [ -z "$cuda_include" ]; then
  cuda_note="cuda pass left out: no CUDA Toolkit headers (cuda_runtime_api.h) in CUDA_HOME,"
  cuda_note+=" CUDA_PATH, /usr/local/cuda/include or /usr/include"
else
  configs+=(cuda)
  cfg_root[cuda]=$work/root-cuda
  cfg_flags[cuda]="$(torch_flags "$work/root-cuda" | tr '\n' ' ')-DTUNE_WITH_CUDA=1"
  [ "$(version_of "$work/root-cuda")" = "$torch_version" ] ||
    die "$PKG_CUDA is LibTorch $(version_of "$work/root-cuda"), $PKG_CPU $torch_version"
fi

shopt -s nullglob
files=(src/torch/*.cpp)  # sorted by the glob
shopt -u nullglob
[ ${#files[@]} -gt 0 ] || die "no src/torch/*.cpp"

out=$work/out
rm -rf "$out"
mkdir -p "$out"

# The top-level names of the unpacked include tree (ATen, c10, torch, caffe2, ...): a unit that
# resolves one of them anywhere else (the system's LibTorch) is not checked against 2.x.
leak_patterns=()
for t in "$work/root-cpu/usr/include"/*; do
  t=$(basename "$t")
  leak_patterns+=(-e "^/usr/include/$t/" -e "^/usr/include/$t\$" -e "^/usr/local/include/$t/")
done

# g++ arguments of configuration $1, in the array `args`.
set_args() {
  local cfg=$1 root=${cfg_root[$1]}
  # shellcheck disable=SC2206
  args=(-std=c++"$std" ${cfg_flags[$cfg]} "${warnings[@]}" -Iinclude -Isrc
        -isystem "$root/usr/include/torch/csrc/api/include" -isystem "$root/usr/include")
  if [ "$cfg" = cuda ] && [ "$cuda_include" != /usr/include ]; then
    args+=(-isystem "$cuda_include")
  fi
}

# Preprocesses file $2 in configuration $1: the normalised code's hash, the headers it read, and
# the status. Always returns 0 (the status is in the .rc file).
preprocess_one() {
  local cfg=$1 f=$2 base args
  base=$out/$cfg/$(basename "$f" .cpp)
  set_args "$cfg"
  { g++ "${args[@]}" -E -MD -MF "$base.d" -MT x "$f" 2> "$base.pp.log" ||
      echo "$?" > "$base.pp.rc"; } |
    { grep -v '^# [0-9]' || true; } | sed "s#${cfg_root[$cfg]}/#@LIBTORCH@/#g" | sha256sum |
    cut -d' ' -f1 > "$base.hash" || true
  [ -f "$base.pp.rc" ] || echo 0 > "$base.pp.rc"
  return 0
}

# torch/torch.h precompiled for configuration $1 (in $out/$1/pch/), when at least 3 of its
# units read it: its parse is most of a unit's time (16 s of 28 on the CI machine's kind). The
# units that read it then start from it (-include), after it is made; the others compile while
# it is being made.
reads_torch_h() { grep -q '/torch/torch.h' "$out/$1/$(basename "$2" .cpp).d"; }

wants_pch() { # wants_pch CFG: at least 3 units of CFG to compile read torch/torch.h
  local n=0 c f u
  for u in "${todo[@]}"; do
    read -r c f <<< "$u"
    if [ "$c" = "$1" ] && reads_torch_h "$c" "$f"; then n=$((n + 1)); fi
  done
  [ "$n" -ge 3 ]
}

make_pch() {
  local cfg=$1 args pch=$out/$1/pch/torch_pch.h
  mkdir -p "$out/$cfg/pch"
  echo '#include <torch/torch.h>' > "$pch"
  set_args "$cfg"
  g++ "${args[@]}" -x c++-header "$pch" -o "$pch.gch" > "$out/$cfg/pch/log" 2>&1 ||
    rm -f "$pch.gch"  # without it each unit parses the header itself
  return 0
}

compile_one() {
  local cfg=$1 f=$2 base args rc=0 pch=$out/$1/pch/torch_pch.h
  if [ "$f" = pch ]; then make_pch "$cfg"; return 0; fi
  base=$out/$cfg/$(basename "$f" .cpp)
  set_args "$cfg"
  if [ -f "$pch.gch" ] && reads_torch_h "$cfg" "$f"; then
    args+=(-include "$pch" -Winvalid-pch)
  fi
  g++ "${args[@]}" -fsyntax-only "$f" > "$base.log" 2>&1 || rc=$?
  echo "$rc" > "$base.rc"
  return 0
}

run_parallel() { # run_parallel FUNCTION: calls FUNCTION cfg file for each line "cfg file" of stdin
  local fn=$1 cfg f
  while read -r cfg f; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    "$fn" "$cfg" "$f" &
  done
  wait
}

for cfg in "${configs[@]}"; do mkdir -p "$out/$cfg"; done

log "LibTorch $torch_version ($SUITE): $(basename "$deb_cpu")${deb_cuda:+, $(basename "$deb_cuda")}"
[ -n "$cuda_include" ] && [ -n "$deb_cuda" ] &&
  log "cuda pass with the CUDA Toolkit ${cuda_version:+$cuda_version }headers in $cuda_include"
[ -n "$cuda_note" ] && log "$cuda_note"
cfg_list="{${configs[0]}${configs[1]:+, ${configs[1]}}}"
log "${#files[@]} files x $cfg_list, $jobs jobs: preprocessing, then g++ -std=c++$std -fsyntax-only"

pp_start_s=$SECONDS
for cfg in "${configs[@]}"; do for f in "${files[@]}"; do echo "$cfg $f"; done; done |
  run_parallel preprocess_one
pp_s=$((SECONDS - pp_start_s))

# What to compile: every unit whose preprocessing went through, except a cuda unit whose code is
# that of its cpu unit.
declare -A status
todo=()
for cfg in "${configs[@]}"; do
  for f in "${files[@]}"; do
    base=$out/$cfg/$(basename "$f" .cpp)
    if [ "$(cat "$base.pp.rc")" != 0 ]; then
      status[$cfg:$f]=ppfail
      continue
    fi
    mapfile -t leaks < <(tr ' \\' '\n\n' < "$base.d" | grep "${leak_patterns[@]}" || true)
    if [ ${#leaks[@]} -gt 0 ]; then
      status[$cfg:$f]=leak
      printf '%s\n' "${leaks[@]}" > "$base.leaks"
      continue
    fi
    if [ "$cfg" = cuda ] && [ "${TUNE_LIBTORCH2_FULL:-0}" != 1 ] &&
       [ "$(cat "$base.hash")" = "$(cat "$out/cpu/$(basename "$f" .cpp).hash")" ] &&
       [ "${status[cpu:$f]}" = compile ]; then
      status[$cfg:$f]=same
      continue
    fi
    status[$cfg:$f]=compile
    todo+=("$cfg $f")
  done
done

compile_start_s=$SECONDS
# First the precompiled headers and the units that do not start from one, then the units that do.
later=()
{
  for cfg in "${configs[@]}"; do
    if wants_pch "$cfg"; then echo "$cfg pch"; fi
  done
  for unit in "${todo[@]}"; do
    read -r cfg f <<< "$unit"
    if wants_pch "$cfg" && reads_torch_h "$cfg" "$f"; then continue; fi
    echo "$unit"
  done
} | run_parallel compile_one
for unit in "${todo[@]}"; do
  read -r cfg f <<< "$unit"
  if wants_pch "$cfg" && reads_torch_h "$cfg" "$f"; then later+=("$unit"); fi
done
[ ${#later[@]} -eq 0 ] || printf '%s\n' "${later[@]}" | run_parallel compile_one
compile_s=$((SECONDS - compile_start_s))

# --- 4. Report ---------------------------------------------------------------------------------

failed=0
compiled=0
same=0
warned=0
for cfg in "${configs[@]}"; do
  for f in "${files[@]}"; do
    base=$out/$cfg/$(basename "$f" .cpp)
    case "${status[$cfg:$f]}" in
      ppfail)
        echo "FAIL $f ($cfg): preprocessing failed"
        sed 's/^/    /' "$base.pp.log"
        failed=$((failed + 1)) ;;
      leak)
        echo "FAIL $f ($cfg): reads these headers of the system's LibTorch," \
             "not the unpacked $torch_version ones:"
        sed 's/^/    /' "$base.leaks" | head -n 10
        failed=$((failed + 1)) ;;
      same)
        # The cpu result stands for it.
        if [ "$(cat "$out/cpu/$(basename "$f" .cpp).rc")" = 0 ]; then
          echo "ok  $f ($cfg: same preprocessed code as cpu)"
          same=$((same + 1))
        else
          echo "FAIL $f ($cfg: same preprocessed code as cpu, which failed)"
          failed=$((failed + 1))
        fi ;;
      compile)
        compiled=$((compiled + 1))
        if [ "$(cat "$base.rc")" = 0 ]; then
          if [ -s "$base.log" ]; then
            echo "ok  $f ($cfg, with warnings)"
            sed 's/^/    /' "$base.log"
            warned=$((warned + 1))
          else
            echo "ok  $f ($cfg)"
          fi
        else
          echo "FAIL $f ($cfg):"
          sed 's/^/    /' "$base.log"
          failed=$((failed + 1))
        fi ;;
    esac
  done
done

details="$compiled compiled"
[ "$same" -gt 0 ] && details+=", $same cuda units identical to cpu after preprocessing"
[ "$warned" -gt 0 ] && details+=", $warned with warnings"
[ -n "$cuda_note" ] && details+="; $cuda_note"
details+="; $((SECONDS - start_s)) s: download and unpack $fetch_s s, preprocessing $pp_s s,"
times > "$out/times"  # in this shell: a $(...) subshell has no children of its own yet
details+=" compiling $compile_s s; $(cpu_s "$out/times") CPU s"
summary="libtorch2 compile check: ${#files[@]} files x $cfg_list:"
if [ "$failed" -gt 0 ]; then
  echo "$summary $failed FAILED against LibTorch $torch_version ($details)"
  exit 1
fi
echo "$summary all compiled against LibTorch $torch_version ($details)"
