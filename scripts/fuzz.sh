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
#
# A CPU budget: with FUZZ_CPU_SECONDS=N, a target runs in rounds of at most SECONDS wall seconds
# each, every round from the corpus the earlier ones grew, until the fuzzer's own CPU time (user +
# system, summed over the rounds) reaches N seconds. libFuzzer's -max_total_time counts wall
# seconds, which on a busy machine (or under `nice -n 19`, which takes only idle CPU) buy far less
# than as many CPU seconds; so while a round runs the script reads the fuzzer's CPU time from
# /proc/PID/stat every second and, once the budget is spent, asks it to stop (SIGUSR1: libFuzzer
# prints its final statistics and exits). A round's CPU time as counted is the fuzzer's rusage
# (bash's `times` in the subshell that waited for it), not the polled figure. A finding still
# ends the target's run. The line per target gives the CPU and wall seconds and the executions
# summed over the rounds, the number of rounds, and the corpus size and edges covered (`cov:`) at
# the end of the last round; FUZZ_SUMMARY holds each round's final lines. Round progress goes to
# stderr. On a shared machine run it as `nice -n 19 scripts/fuzz.sh ...`: the fuzzers inherit it
# (where the kernel groups processes by session, lower the session's weight too: `echo 19 >
# /proc/$$/autogroup`; docs/overview.md, "Fuzzing and sanitizers").
#   FUZZ_CPU_SECONDS=600 nice -n 19 scripts/fuzz.sh BUILD 600 [TARGET...]
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
# 0: one round of SECONDS wall seconds per target, as without a budget.
CPU_BUDGET=${FUZZ_CPU_SECONDS:-0}
case $CPU_BUDGET in
  '' | *[!0-9]*)
    echo "FUZZ_CPU_SECONDS must be a whole number of seconds, not '$CPU_BUDGET'" >&2
    exit 2
    ;;
esac
hz=$(getconf CLK_TCK)
summary=${FUZZ_SUMMARY:-$build/fuzz-summary.txt}
: > "$summary"
status=0

# "XmY.ZZZs" (bash's `times`) in milliseconds.
to_ms() {
  local m=${1%%m*} s=${1#*m}
  s=${s%s}
  local whole=${s%.*} frac=${s#*.}
  frac=$(printf '%-3.3s' "$frac")
  frac=${frac// /0}
  echo $((10#$m * 60000 + 10#$whole * 1000 + 10#$frac))
}
# Milliseconds as seconds with one decimal.
ms_s() { printf '%d.%d' $(($1 / 1000)) $((($1 % 1000) / 100)); }
# The CPU time (user + system) of process $1 so far, in milliseconds; nothing once it is gone.
proc_cpu_ms() {
  local stat rest
  read -r stat < "/proc/$1/stat" 2>/dev/null || return 1
  rest=${stat##*) }  # after "pid (comm) "; fields 14 and 15 (utime, stime) are its 12th and 13th
  read -r -a f <<< "$rest"
  echo $(((f[11] + f[12]) * 1000 / hz))
}

# One round of target $t: sets round_rc, round_cpu_ms, round_wall_ms. $1: the CPU milliseconds
# the round may use before it is asked to stop (0: no limit but the wall seconds).
run_round() {
  local allowed_ms=$1 round_log=$2
  local pid_file=$build/fuzz-logs/$t.pid times_file=$build/fuzz-logs/$t.times
  rm -f "$pid_file" "$times_file"
  local start=${EPOCHREALTIME/[.,]/}
  (
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
      "$program" -max_total_time="$seconds" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" \
      -print_final_stats=1 -artifact_prefix="$findings/" "${dict[@]}" \
      "$corpus" "$fuzz_dir/corpus/$t" > "$round_log" 2>&1 &
    echo $! > "$pid_file"
    wait $!
    rc=$?
    times > "$times_file"  # second line: the user and system time of the fuzzer, reaped above
    exit $rc
  ) &
  local sub=$! pid='' used asked=0
  if [ "$allowed_ms" -gt 0 ]; then
    while kill -0 "$sub" 2>/dev/null; do
      [ -z "$pid" ] && [ -s "$pid_file" ] && read -r pid < "$pid_file"
      if [ -n "$pid" ] && [ $asked -eq 0 ] && used=$(proc_cpu_ms "$pid") &&
        [ "$used" -ge "$allowed_ms" ]; then
        kill -USR1 "$pid" 2>/dev/null
        asked=1
      fi
      sleep 1
    done
  fi
  wait "$sub"
  round_rc=$?
  round_wall_ms=$(((${EPOCHREALTIME/[.,]/} - start) / 1000))
  local user=0m0.000s sys=0m0.000s
  [ -s "$times_file" ] && read -r user sys < <(sed -n 2p "$times_file")
  round_cpu_ms=$(($(to_ms "$user") + $(to_ms "$sys")))
  rm -f "$pid_file" "$times_file"
}

printf '%-16s %8s %8s %6s %12s %8s %8s %8s\n' target cpu_s wall_s rounds executions corpus cov \
  findings
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
  : > "$log"
  dict=()
  [ -f "$fuzz_dir/$t.dict" ] && dict=("-dict=$fuzz_dir/$t.dict")
  budget_ms=$((CPU_BUDGET * 1000))
  cpu_ms=0 wall_ms=0 execs=0 rounds=0 rc=0 found=0 last=''
  echo "== $t" >> "$summary"
  while :; do
    rounds=$((rounds + 1))
    allowed=0
    [ "$budget_ms" -gt 0 ] && allowed=$((budget_ms - cpu_ms))
    round_log=$build/fuzz-logs/$t.round.log
    run_round "$allowed" "$round_log"
    rc=$round_rc
    cpu_ms=$((cpu_ms + round_cpu_ms))
    wall_ms=$((wall_ms + round_wall_ms))
    {
      echo "== round $rounds"
      cat "$round_log"
    } >> "$log"
    # libFuzzer's last status line ("#N DONE cov: E ft: F corp: C/B ...", or the line before a
    # finding or a requested exit) and its final statistics.
    last=$(grep -E '^#[0-9]+' "$round_log" | tail -1)
    round_execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$round_log" | tail -1)
    execs=$((execs + ${round_execs:-0}))
    found=$(find "$findings" -type f -newer "$stamp" | wc -l)
    {
      echo "-- round $rounds: cpu $(ms_s $round_cpu_ms) s, wall $(ms_s $round_wall_ms) s, exit $rc"
      echo "$last"
      grep -E '^(Done|stat::|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' \
        "$round_log"
    } >> "$summary"
    of=''
    [ "$budget_ms" -gt 0 ] && of=" of $CPU_BUDGET"
    echo "  $t round $rounds: cpu $(ms_s $round_cpu_ms) s (in all $(ms_s $cpu_ms)$of s)," \
      "wall $(ms_s $round_wall_ms) s, exit $rc: ${last:-no status line}" >&2
    rm -f "$round_log"
    [ "$rc" -ne 0 ] || [ "$found" -ne 0 ] && break
    [ "$budget_ms" -gt 0 ] && [ "$cpu_ms" -lt "$budget_ms" ] || break
    # A round that spent no CPU time (the fuzzer could not start) would only repeat itself.
    [ "$round_cpu_ms" -gt 0 ] || break
  done
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<< "$last")
  printf '%-16s %8s %8s %6s %12s %8s %8s %8s\n' "$t" "$(ms_s $cpu_ms)" "$(ms_s $wall_ms)" \
    "$rounds" "$execs" "${corp:-?}" "${cov:-?}" "$found"
  echo "-- $t in all: cpu $(ms_s $cpu_ms) s, wall $(ms_s $wall_ms) s, $rounds round(s)," \
    "$execs executions, exit $rc, $found finding(s)" >> "$summary"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    echo "  $t: finding(s) in $findings, log $log" >&2
  fi
done
echo "libFuzzer's final lines: $summary"
exit $status
