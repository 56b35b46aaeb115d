#!/usr/bin/env bash
# check-floor-versions.sh: builds tune against the oldest versions of its libraries it supports,
# Ubuntu 22.04's (the "floor": GCC 11, CMake 3.22, fmt 8.1.1, spdlog 1.9.2, CLI11 2.1.2,
# nlohmann_json 3.10.5, GoogleTest 1.11.0, SQLite 3.37.2), and runs its LibTorch-free unit tests
# and a tiny study there. Not part of `make test`: it builds six libraries and tune (about
# 40 minutes on 2 cores the first time).
#
#   scripts/check-floor-versions.sh [--sources DIR] [--work DIR] [--jobs N] [--fetch] [--no-werror]
#
# What it does, all under --work (default build-floor/):
#   1. CMake 3.22.6 from PyPI, in a virtual environment of its own (cmake-venv/); it configures the
#      libraries and tune.
#   2. The upstream sources at their release tags (table below), either cloned from the projects'
#      repositories (`git clone --branch TAG`, needs the network) or, with --sources DIR, taken
#      from DIR/<name> (fmt, spdlog, CLI11, json, googletest, sqlite): a git repository (bare or
#      not) that has the tag, or a plain source tree of that version. For SQLite, a tree of its
#      repository (the amalgamation is generated with its Makefile and tclsh) or the amalgamation
#      itself (sqlite3.c, sqlite3.h).
#   3. Builds them with gcc-11/g++-11 into prefix/, as Ubuntu 22.04 packages them: fmt and spdlog
#      shared, spdlog against the prefix's fmt (SPDLOG_FMT_EXTERNAL=ON), GoogleTest static, SQLite
#      shared with JSON1 (-DSQLITE_ENABLE_JSON1) and Debian's other options.
#   4. Configures tune with that CMake and compiler against the prefix (CMAKE_PREFIX_PATH;
#      TUNE_WITH_TORCH=OFF, TUNE_BUILD_BENCH=OFF, tests on, TUNE_WERROR=ON unless --no-werror),
#      builds the tune binary and the unit test programs, and checks from the compiler's
#      dependency files that no unit included the system's fmt, spdlog, CLI11, nlohmann_json,
#      GoogleTest or sqlite3.h (and from ldd, that tune loads the prefix's shared libraries).
#   5. Runs `ctest -L unit` and a 12-trial study of configs/demo.json into a SQLite file, and
#      prints a summary.
#
# --fetch does steps 1-3 as above, then steps 4-5 with -DTUNE_FETCH_DEPS=ON instead of the prefix
# (tune-fetch-build/): tune's own CMake builds the libraries (FetchContent, cmake/TuneFetchDeps.cmake)
# from the same sources, handed over as FETCHCONTENT_SOURCE_DIR_<NAME> (SQLite: the amalgamation of
# step 3), and the configure output shows each one taken from there.
#
# Network: where the script itself was checked, GitHub could not be reached, so it ran with
# --sources (local copies of the same repositories and tags); its download path (`git clone`)
# and FetchContent's own downloads have not run there. SQLite's own mirror (sqlite/sqlite) was too
# large to copy: another git mirror of SQLite's Fossil repository, with the same tag
# version-3.37.2, stood in, and the amalgamation generated from it was byte for byte the released
# one (checked below). The branch that takes a ready amalgamation (sqlite3.c) has not run.
#
# Needs: gcc-11 and g++-11 (Debian 12 / Ubuntu: apt-get install g++-11), git, make, tar,
# /usr/bin/python3 with venv (python3-venv), and pip's access to PyPI for cmake==3.22.6 (once);
# tclsh (tcl) only to generate SQLite's amalgamation from its repository. The other libraries tune
# links (SentencePiece, libcurl, minizip, libpq) are the system's.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

root=$(cd "$(dirname "$0")/.." && pwd)
sources=""
work="$root/build-floor"
jobs=$(nproc)
fetch_mode=0
werror=ON
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sources) sources=$(cd "$2" && pwd); shift 2 ;;
    --work) mkdir -p "$2"; work=$(cd "$2" && pwd); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --fetch) fetch_mode=1; shift ;;
    --no-werror) werror=OFF; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "check-floor-versions: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done

# name | upstream repository | release tag | expected version
libraries=(
  "fmt|https://github.com/fmtlib/fmt.git|8.1.1|8.1.1"
  "spdlog|https://github.com/gabime/spdlog.git|v1.9.2|1.9.2"
  "CLI11|https://github.com/CLIUtils/CLI11.git|v2.1.2|2.1.2"
  "json|https://github.com/nlohmann/json.git|v3.10.5|3.10.5"
  "googletest|https://github.com/google/googletest.git|release-1.11.0|1.11.0"
  "sqlite|https://github.com/sqlite/sqlite.git|version-3.37.2|3.37.2"
)
# Debian's and Ubuntu's compile-time options of libsqlite3 (JSON1: json_each, which tune needs).
sqlite_defines=(-DSQLITE_ENABLE_JSON1 -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_FTS3
                -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_FTS4 -DSQLITE_ENABLE_FTS5
                -DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_UNLOCK_NOTIFY -DSQLITE_ENABLE_DBSTAT_VTAB
                -DSQLITE_SECURE_DELETE -DSQLITE_MAX_VARIABLE_NUMBER=250000 -DSQLITE_THREADSAFE=1
                # What SQLite's configure finds on Linux and its Makefile passes. Without
                # HAVE_USLEEP the busy handler sleeps in whole seconds: a busy timeout under 1 s
                # then does not wait at all.
                -DHAVE_USLEEP=1 -DHAVE_FDATASYNC=1 -DHAVE_LOCALTIME_R=1 -DHAVE_GMTIME_R=1
                -DHAVE_POSIX_FALLOCATE=1 -DHAVE_MALLOC_USABLE_SIZE=1 -DHAVE_STRCHRNUL=1)

# SQLite 3.37.2's source id (its check-in) and the git blob ids of the released amalgamation's
# sqlite3.c and sqlite3.h.
sqlite_source_id="2022-01-06 13:25:41 872ba256cbf61d9290b571c0e6d82a20c224ca3ad82971edc46b29818d5d17a0"
sqlite_release_blobs="62f197db2cbdb81fe45bb1197fb9e3dd0a3cc57e 33c2c48caf6916ee24dc5262d676ab3c8b4aad6a"

log="$work/floor.log"
summary=()
say() { printf '[floor] %s\n' "$*"; }
note() { summary+=("$*"); say "$*"; }
die() { printf '[floor] FAILED: %s\n' "$*" >&2; exit 1; }
# run LABEL CMD...: the command's output goes to the log (its tail to the terminal on failure).
run() {
  local label=$1 status=0
  shift
  echo "+ $*" >>"$log"
  "$@" >"$work/step.log" 2>&1 || status=$?
  cat "$work/step.log" >>"$log"
  if [[ $status != 0 ]]; then
    grep -E 'error|Error' "$work/step.log" | head -n 40 >&2 || true
    tail -n 20 "$work/step.log" >&2
    die "$label (the whole output: $log)"
  fi
}

mkdir -p "$work"
: >"$log"
say "work directory: $work (log: $log)"

# --- Tools ---------------------------------------------------------------------------------------
missing=()
for tool in gcc-11 g++-11 git make tar; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  die "missing: ${missing[*]} (Debian 12 / Ubuntu: apt-get install g++-11 git make tar)"
fi
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null ||
  die "/usr/bin/python3 cannot make virtual environments (apt-get install python3-venv)"
export CC=gcc-11 CXX=g++-11
# No ccache (tune's CMake uses it where installed): its direct mode would hand back an object
# compiled before a library was (re)built into the prefix when the unit's headers did not change,
# even where a header of the prefix now shadows the system's -- and the check below reads the
# compiler's dependency files.
export CCACHE_DISABLE=1

venv="$work/cmake-venv"
if [[ ! -x "$venv/bin/cmake" ]] || [[ "$("$venv/bin/cmake" --version | head -n1)" != "cmake version 3.22.6" ]]; then
  say "CMake 3.22.6 from PyPI into $venv"
  run "virtual environment" /usr/bin/python3 -m venv "$venv"
  run "pip install cmake==3.22.6" "$venv/bin/pip" install --disable-pip-version-check -q cmake==3.22.6
fi
cmake="$venv/bin/cmake"
ctest="$venv/bin/ctest"
note "CMake: $("$cmake" --version | head -n1)"
note "compiler: $(g++-11 --version | head -n1)"

# --- Sources -------------------------------------------------------------------------------------
src="$work/src"
prefix="$work/prefix"
mkdir -p "$src" "$work/stamps"

# get_source NAME URL TAG: $src/NAME at TAG, from --sources or the network.
get_source() {
  local name=$1 url=$2 tag=$3 dest="$src/$1" from
  if [[ -f "$work/stamps/source-$name" && "$(cat "$work/stamps/source-$name")" == "$tag" ]]; then
    return
  fi
  rm -rf "$dest"
  if [[ -z "$sources" ]]; then
    say "$name: git clone --branch $tag $url"
    run "clone $name" git clone --quiet --depth 1 --branch "$tag" "$url" "$dest"
  else
    from="$sources/$name"
    [[ -e "$from" ]] || die "--sources: $from does not exist (expected: fmt spdlog CLI11 json googletest sqlite)"
    local gitdir=""
    if git --git-dir="$from" rev-parse --git-dir >/dev/null 2>&1; then
      gitdir="$from" # a bare repository
    elif git -C "$from" rev-parse --show-toplevel >/dev/null 2>&1 &&
      [[ "$(git -C "$from" rev-parse --show-toplevel)" == "$(cd "$from" && pwd -P)" ]]; then
      gitdir="$(git -C "$from" rev-parse --absolute-git-dir)"
    fi
    mkdir -p "$dest"
    if [[ -n "$gitdir" ]]; then
      git --git-dir="$gitdir" rev-parse --verify -q "$tag^{commit}" >/dev/null ||
        die "$from has no tag $tag"
      say "$name: $tag from the repository $from"
      # SQLite's test/ holds large fuzzing databases that nothing here needs.
      local paths
      paths=$(git --git-dir="$gitdir" ls-tree --name-only "$tag" | grep -vx -e test -e tests -e doc -e docs)
      # shellcheck disable=SC2086 # one path per word
      git --git-dir="$gitdir" archive "$tag" -- $paths 2>>"$log" | tar -x -C "$dest"
    else
      say "$name: the source tree $from (its version is checked below)"
      cp -a "$from/." "$dest/"
    fi
  fi
  echo "$tag" >"$work/stamps/source-$name"
}

for entry in "${libraries[@]}"; do
  IFS='|' read -r name url tag version <<<"$entry"
  get_source "$name" "$url" "$tag"
done

# --- Versions ------------------------------------------------------------------------------------
# version_of NAME DIR: the library's version, from its version header under DIR (a source tree or
# the prefix: both have include/...), or GoogleTest's from its CMake package or CMakeLists.txt.
version_of() {
  local name=$1 dir=$2 f
  case "$name" in
    fmt)
      f=$(grep -h '#define FMT_VERSION ' "$dir/include/fmt/core.h" | awk '{print $3}')
      echo "$((f / 10000)).$((f / 100 % 100)).$((f % 100))" ;;
    spdlog)
      awk '/#define SPDLOG_VER_(MAJOR|MINOR|PATCH)/ {v = v sep $3; sep = "."} END {print v}' \
        "$dir/include/spdlog/version.h" ;;
    CLI11)
      sed -n 's/#define CLI11_VERSION "\(.*\)"/\1/p' "$dir/include/CLI/Version.hpp" ;;
    json)
      f="$dir/include/nlohmann/json.hpp"
      [[ -f "$f" ]] || f="$dir/single_include/nlohmann/json.hpp"
      awk '/#define NLOHMANN_JSON_VERSION_(MAJOR|MINOR|PATCH) / {v = v sep $3; sep = "."}
           END {print v}' "$f" ;;
    googletest)
      if [[ -f "$dir/lib/cmake/GTest/GTestConfigVersion.cmake" ]]; then
        sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$dir/lib/cmake/GTest/GTestConfigVersion.cmake"
      else
        sed -n 's/^ *set(GOOGLETEST_VERSION \([0-9.]*\)).*/\1/p' "$dir/CMakeLists.txt"
      fi ;;
    sqlite)
      if [[ -f "$dir/include/sqlite3.h" ]]; then
        f="$dir/include/sqlite3.h"
      elif [[ -f "$dir/sqlite3.h" ]]; then
        f="$dir/sqlite3.h"
      else
        cat "$dir/VERSION"
        return
      fi
      sed -n 's/^#define SQLITE_VERSION *"\(.*\)"/\1/p' "$f" ;;
  esac
}

for entry in "${libraries[@]}"; do
  IFS='|' read -r name url tag version <<<"$entry"
  got=$(version_of "$name" "$src/$name")
  [[ "$got" == "$version" ]] || die "$name: the source is version '$got', not $version"
done

# --- The floor libraries, into the prefix ----------------------------------------------------------
common=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_INSTALL_PREFIX=$prefix" -DCMAKE_INSTALL_LIBDIR=lib
        "-DCMAKE_PREFIX_PATH=$prefix" -DCMAKE_C_COMPILER=gcc-11 -DCMAKE_CXX_COMPILER=g++-11
        -DCMAKE_POSITION_INDEPENDENT_CODE=ON)
# build_cmake NAME ARGS...: configure, build and install $src/NAME (once per tag).
build_cmake() {
  local name=$1
  shift
  local stamp="$work/stamps/built-$name" tag
  tag=$(cat "$work/stamps/source-$name")
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$tag" ]]; then
    say "$name $tag: already in the prefix"
    return
  fi
  say "$name $tag: building"
  rm -rf "$work/deps-build/$name"
  run "configure $name" "$cmake" -S "$src/$name" -B "$work/deps-build/$name" "${common[@]}" "$@"
  run "build $name" "$cmake" --build "$work/deps-build/$name" -j "$jobs"
  run "install $name" "$cmake" --install "$work/deps-build/$name"
  echo "$tag" >"$stamp"
  prefix_changed=1
}

build_sqlite() {
  local stamp="$work/stamps/built-sqlite" tag dir="$src/sqlite" amalgamation
  tag="$(cat "$work/stamps/source-sqlite") ${sqlite_defines[*]}"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$tag" ]]; then
    say "sqlite ${tag%% *}: already in the prefix"
    note "$(cat "$work/stamps/sqlite-amalgamation")"
    return
  fi
  amalgamation="$work/deps-build/sqlite"
  rm -rf "$amalgamation"
  mkdir -p "$amalgamation"
  if [[ -f "$dir/sqlite3.c" && -f "$dir/sqlite3.h" ]]; then
    say "sqlite ${tag%% *}: building the amalgamation"
    cp "$dir/sqlite3.c" "$dir/sqlite3.h" "$amalgamation/"
  else
    command -v tclsh >/dev/null || die "SQLite's amalgamation is generated with tclsh (apt-get install tcl)"
    say "sqlite ${tag%% *}: generating the amalgamation (configure; make sqlite3.c), then building it"
    # Git mirrors of SQLite's Fossil repository lack Fossil's manifest and manifest.uuid, from
    # which the Makefile takes the source id: a manifest with the check-in's date stands in, and
    # the release's source id replaces the one it gives (only those lines differ).
    local stand_in=0 generated_id
    if [[ ! -f "$dir/manifest" || -f "$dir/manifest.floor-stand-in" ]]; then
      printf 'D %sT%s.000\n' "${sqlite_source_id:0:10}" "${sqlite_source_id:11:8}" >"$dir/manifest"
      echo "${sqlite_source_id:20}" >"$dir/manifest.uuid"
      touch "$dir/manifest.floor-stand-in"
      stand_in=1
    fi
    (cd "$amalgamation" && run "configure sqlite" "$dir/configure" CC=gcc-11 --disable-tcl &&
      run "make sqlite3.c" make sqlite3.c)
    if [[ $stand_in == 1 ]]; then
      generated_id=$(sed -n 's/^#define SQLITE_SOURCE_ID *"\(.*\)"/\1/p' "$amalgamation/sqlite3.h")
      sed -i "s/$generated_id/$sqlite_source_id/" "$amalgamation/sqlite3.c" "$amalgamation/sqlite3.h"
    fi
  fi
  # The release's amalgamation, as git stores it (sqlite-amalgamation-3370200.zip).
  local blob_c blob_h
  blob_c=$(git hash-object "$amalgamation/sqlite3.c")
  blob_h=$(git hash-object "$amalgamation/sqlite3.h")
  if [[ "$blob_c $blob_h" == "$sqlite_release_blobs" ]]; then
    echo "sqlite: sqlite3.c and sqlite3.h are byte for byte the released amalgamation's (git blobs ${blob_c:0:12}, ${blob_h:0:12})" >"$work/stamps/sqlite-amalgamation"
  else
    echo "sqlite: WARNING: sqlite3.c/sqlite3.h ($blob_c $blob_h) differ from the released amalgamation's ($sqlite_release_blobs)" >"$work/stamps/sqlite-amalgamation"
  fi
  note "$(cat "$work/stamps/sqlite-amalgamation")"
  mkdir -p "$prefix/include" "$prefix/lib"
  run "compile sqlite3.c" gcc-11 -O2 -fPIC "${sqlite_defines[@]}" -shared \
    -Wl,-soname,libsqlite3.so.0 -o "$prefix/lib/libsqlite3.so.0" "$amalgamation/sqlite3.c" \
    -lpthread -ldl -lm
  ln -sf libsqlite3.so.0 "$prefix/lib/libsqlite3.so"
  # Only a new header makes tune's build stale (a new library is relinked).
  if ! cmp -s "$amalgamation/sqlite3.h" "$prefix/include/sqlite3.h"; then
    cp "$amalgamation/sqlite3.h" "$prefix/include/"
    prefix_changed=1
  fi
  [[ -f "$amalgamation/sqlite3ext.h" ]] && cp "$amalgamation/sqlite3ext.h" "$prefix/include/"
  echo "$tag" >"$stamp"
}

mkdir -p "$work/deps-build"
prefix_changed=0
build_cmake fmt -DBUILD_SHARED_LIBS=ON -DFMT_DOC=OFF -DFMT_TEST=OFF
build_cmake spdlog -DSPDLOG_BUILD_SHARED=ON -DSPDLOG_FMT_EXTERNAL=ON -DSPDLOG_BUILD_EXAMPLE=OFF \
  -DSPDLOG_BUILD_TESTS=OFF "-Dfmt_DIR=$prefix/lib/cmake/fmt"
build_cmake CLI11 -DCLI11_BUILD_TESTS=OFF -DCLI11_BUILD_EXAMPLES=OFF -DCLI11_BUILD_DOCS=OFF
# The multi-header layout, as Debian and Ubuntu package it: it has nlohmann/json_fwd.hpp, which
# 3.10's single header does not.
build_cmake json -DJSON_BuildTests=OFF -DJSON_Install=ON -DJSON_MultipleHeaders=ON
build_cmake googletest -DBUILD_GMOCK=ON -DINSTALL_GTEST=ON
build_sqlite

for entry in "${libraries[@]}"; do
  IFS='|' read -r name url tag version <<<"$entry"
  got=$(version_of "$name" "$prefix")
  [[ "$got" == "$version" ]] || die "$name in the prefix is version '$got', not $version"
  note "built: $name $got (tag $tag)"
done
grep -q 'SPDLOG_FMT_EXTERNAL' "$prefix/include/spdlog/tweakme.h" "$prefix"/lib/cmake/spdlog/*.cmake ||
  die "spdlog was not built with SPDLOG_FMT_EXTERNAL"

# --- tune against the prefix -------------------------------------------------------------------
tune_targets=(tune tune_core_tests tune_tracking_tests tune_storage_tests tune_fuzz_replay_tests)
if [[ $fetch_mode == 1 ]]; then
  build="$work/tune-fetch-build"
  # The same sources, handed to FetchContent (cmake/TuneFetchDeps.cmake): nothing is downloaded,
  # and CMAKE_PREFIX_PATH does not name the prefix, so nothing comes from there either.
  configure_args=(-DTUNE_FETCH_DEPS=ON
                  "-DFETCHCONTENT_SOURCE_DIR_FMT=$src/fmt"
                  "-DFETCHCONTENT_SOURCE_DIR_SPDLOG=$src/spdlog"
                  "-DFETCHCONTENT_SOURCE_DIR_CLI11=$src/CLI11"
                  "-DFETCHCONTENT_SOURCE_DIR_NLOHMANN_JSON=$src/json"
                  "-DFETCHCONTENT_SOURCE_DIR_GOOGLETEST=$src/googletest"
                  "-DFETCHCONTENT_SOURCE_DIR_SQLITE3=$work/deps-build/sqlite")
  mode="TUNE_FETCH_DEPS=ON (FetchContent, sources from $src)"
else
  build="$work/tune-build"
  configure_args=("-DCMAKE_PREFIX_PATH=$prefix")
  mode="find_package against $prefix"
fi
note "tune: $mode"
# Installed headers keep their sources' old times: a build of tune from before a library was
# rebuilt would not see the change.
if [[ $prefix_changed == 1 && -d "$build" ]]; then
  say "the prefix changed: removing the previous build of tune ($build)"
  rm -rf "$build"
fi
say "configuring tune in $build"
configure_log="$work/$(basename "$build")-configure.log"
if ! "$cmake" -S "$root" -B "$build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=gcc-11 -DCMAKE_CXX_COMPILER=g++-11 -DTUNE_WITH_TORCH=OFF \
  -DTUNE_BUILD_BENCH=OFF -DTUNE_BUILD_TESTS=ON "-DTUNE_WERROR=$werror" \
  "${configure_args[@]}" >"$configure_log" 2>&1; then
  tail -n 40 "$configure_log" >&2
  die "configuring tune (the whole output: $configure_log)"
fi
if [[ $fetch_mode == 1 ]]; then
  # What TUNE_FETCH_DEPS said about each library: where it took it from.
  grep -E '^-- tune: .*(FetchContent|fetched|from)' "$configure_log" | sed 's/^-- /[floor] /' || true
fi
# The test program the ctest fixture of the PostgreSQL tests needs, where libpq was found.
if grep -q 'tune_test_postgres_server' "$build/tests/Makefile" 2>/dev/null; then
  tune_targets+=(tune_test_postgres_server)
fi
say "building ${tune_targets[*]} (-j $jobs, TUNE_WERROR=$werror)"
start=$SECONDS
# -k: every unit that does not compile is listed, not only the first.
run "building tune" "$cmake" --build "$build" -j "$jobs" --target "${tune_targets[@]}" -- -k
note "built tune and its unit tests with g++-11 (TUNE_WERROR=$werror; this run: $((SECONDS - start)) s)"

# --- Which headers and libraries were used ---------------------------------------------------------
# The compiler's dependency files (-MD) of every unit, the precompiled headers' included.
mapfile -t depfiles < <(find "$build" -name '*.d' -type f)
[[ ${#depfiles[@]} -gt 50 ]] || die "only ${#depfiles[@]} dependency files under $build"
headers="$work/$(basename "$build")-headers.txt"
cat "${depfiles[@]}" | tr -s ' \\' '\n\n' | grep -E '\.(h|hpp|hxx|hh|inl)$|/[a-z_]+$' |
  grep -v ':$' | sort -u >"$headers"
floor_pattern='/(fmt|spdlog|CLI|nlohmann|gtest|gmock)/|/sqlite3\.h$'
if [[ $fetch_mode == 1 ]]; then
  expected_roots=("$src/" "$work/deps-build/sqlite/" "$build/")
else
  expected_roots=("$prefix/include/")
fi
bad=$(grep -E "$floor_pattern" "$headers" | while read -r h; do
  ok=0
  for r in "${expected_roots[@]}"; do [[ "$h" == "$r"* ]] && ok=1; done
  [[ $ok == 1 ]] || echo "$h"
done | sort -u)
if [[ -n "$bad" ]]; then
  echo "$bad" | head -n 20 >&2
  die "units included these headers from outside the floor libraries (all: $headers)"
fi
for lib_header in fmt/core.h spdlog/spdlog.h CLI/CLI.hpp nlohmann/json.hpp gtest/gtest.h sqlite3.h; do
  used=$(grep -E "/$lib_header\$" "$headers" | head -n 1)
  [[ -n "$used" ]] || die "no unit included $lib_header"
  note "compiled against: ${used}"
done
note "no unit included a system copy (/usr/include, /usr/local/include) of fmt, spdlog, CLI11, nlohmann_json, GoogleTest or sqlite3.h (${#depfiles[@]} dependency files)"

ldd_out=$(ldd "$build/tune")
for lib in libfmt libspdlog libsqlite3; do
  line=$(grep -E "^\s*$lib\.so" <<<"$ldd_out" || true)
  if [[ $fetch_mode == 1 && $lib == libsqlite3 ]]; then
    # TUNE_FETCH_DEPS links SQLite statically (tune_sqlite3).
    [[ -z "$line" ]] || die "tune loads a shared $lib ($line); TUNE_FETCH_DEPS links it statically"
    note "tune loads no libsqlite3.so: the fetched SQLite is linked in"
    continue
  fi
  # The prefix's, or with TUNE_FETCH_DEPS the fetched ones beside the tune binary.
  where="$prefix/lib/"
  [[ $fetch_mode == 1 ]] && where="$build/"
  [[ "$line" == *"$where"* ]] || die "tune loads $lib from elsewhere than $where: '$line'"
  note "tune loads: $(sed 's/ (0x.*//; s/^\s*//' <<<"$line")"
done

# --- Tests and a study -----------------------------------------------------------------------------
say "ctest -L unit"
ctest_log="$work/$(basename "$build")-ctest.log"
if ! (cd "$build" && "$ctest" -L unit -j "$jobs" --output-on-failure) >"$ctest_log" 2>&1; then
  tail -n 60 "$ctest_log" >&2
  die "unit tests (the whole output: $ctest_log)"
fi
note "ctest -L unit: $(grep -E 'tests passed|tests failed' "$ctest_log" | tail -n 1)"

study_dir="$work/$(basename "$build")-study"
rm -rf "$study_dir"
mkdir -p "$study_dir"
say "a study: tune --study demo --n-trials 12 --storage sqlite:///.../floor.db"
db="sqlite:///$study_dir/floor.db"
run "the study" "$build/tune" --study demo --config "$root/configs/demo.json" --n-trials 12 \
  --storage "$db" --progress off
best=$("$build/tune" best-trial --study demo --storage "$db" --format json)
echo "$best" >>"$log"
trials=$("$build/tune" trials --study demo --storage "$db" --format csv | tail -n +2 | wc -l)
[[ $trials == 12 ]] || die "the study stored $trials trials, not 12"
best_line=$(/usr/bin/python3 -c 'import json, sys; t = json.load(sys.stdin)
print("trial %d, value %.4f, model %s" % (t["number"], t["value"], t["params"].get("model")))' <<<"$best")
note "study: configs/demo.json, 12 trials (TPE) into SQLite at $study_dir/floor.db; best: $best_line"

echo
echo "== check-floor-versions summary ($(date -u +%Y-%m-%dT%H:%MZ)) =="
printf '  %s\n' "${summary[@]}"
echo "== OK =="
