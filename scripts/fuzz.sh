#!/bin/bash
# Runs the libFuzzer targets of a TUNE_FUZZ build (`make fuzz`; docs/overview.md, "Fuzzing and
# sanitizers"), each for SECONDS from its seeds (tests/fuzz/corpus/<target>/) and what earlier
# runs found (BUILD/fuzz-corpus/<target>/), with its dictionary (tests/fuzz/<target>.dict) when
# there is one. A run stops at the first finding; its input is written to
# BUILD/fuzz-findings/<target>/ (crash-*, leak-*, timeout-*, oom-*; those of earlier runs stay and
# are not counted again), its log to
# BUILD/fuzz-logs/<target>.log. Prints one line per target and libFuzzer's final lines to
# BUILD/fuzz-summary.txt; exits 1 when any target found something.
#   scripts/fuzz.sh BUILD SECONDS [TARGET...]
set -u
build=${1:?usage: scripts/fuzz.sh BUILD SECONDS [TARGET...]}
seconds=${2:?usage: scripts/fuzz.sh BUILD SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
fuzz_dir=$here/tests/fuzz
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for d in "$fuzz_dir"/corpus/*/; do targets+=("$(basename "$d")"); done
fi
# Slow inputs count as hangs; 2 GiB of memory as an out-of-memory finding.
TIMEOUT=${FUZZ_TIMEOUT:-10}
RSS_MB=${FUZZ_RSS_MB:-2048}
summary=${FUZZ_SUMMARY:-$build/fuzz-summary.txt}
: > "$summary"
status=0
printf '%-16s %8s %12s %8s %8s %8s\n' target seconds executions corpus cov findings
for t in "${targets[@]}"; do
  program=$build/fuzz/fuzz_$t
  if [ ! -x "$program" ]; then
    echo "$t: $program is not built" >&2
    status=1
    continue
  fi
  corpus=$build/fuzz-corpus/$t
  findings=$build/fuzz-findings/$t
  log=$build/fuzz-logs/$t.log
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  stamp=$build/fuzz-logs/$t.start  # findings of this run: newer than it
  touch "$stamp"
  dict=()
  [ -f "$fuzz_dir/$t.dict" ] && dict=("-dict=$fuzz_dir/$t.dict")
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$program" -max_total_time="$seconds" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
    -print_final_stats=1 -artifact_prefix="$findings/" "${dict[@]}" \
    "$corpus" "$fuzz_dir/corpus/$t" > "$log" 2>&1
  rc=$?
  # libFuzzer's last status line ("#N DONE cov: E ft: F corp: C/B ...", or the line before a
  # finding) and its final statistics.
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<< "$last")
  found=$(find "$findings" -type f -newer "$stamp" | wc -l)
  printf '%-16s %8s %12s %8s %8s %8s\n' "$t" "$seconds" "${execs:-?}" "${corp:-?}" \
    "${cov:-?}" "$found"
  {
    echo "== $t ($seconds s, exit $rc)"
    echo "$last"
    grep -E '^(Done|stat::|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' "$log"
  } >> "$summary"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    echo "  $t: finding(s) in $findings, log $log" >&2
  fi
done
echo "libFuzzer's final lines: $summary"
exit $status
