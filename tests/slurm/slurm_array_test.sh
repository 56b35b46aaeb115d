#!/usr/bin/env bash
# The cluster recipe (docs/cluster.md) on a real, private one-node Slurm: a 3-task
# `sbatch --array` of scripts/slurm/tune-array.sbatch on one PostgreSQL study of 6 enqueued
# configurations; one task is cancelled (scancel) while its trial runs. Checks that every
# configuration ends COMPLETE exactly once, that nothing stays RUNNING or WAITING, that the
# cancelled worker's trial is FAIL with a fail_reason naming SIGTERM, and that the cancelled
# worker exits 0 before Slurm's SIGKILL (KillWait).
#
#   tests/slurm/slurm_array_test.sh TUNE_BINARY
#
# PostgreSQL: TUNE_TEST_POSTGRES_URL (an admin URL that may CREATE DATABASE), else the state file
# named by TUNE_TEST_POSTGRES_STATE (ctest's postgres_server fixture: url=... or error=...), else
# a server started here (tune_test_postgres_server beside the binary's tests/, else initdb and
# pg_ctl as the postgres user) and stopped at the end. Slurm: tests/slurm/slurm_cluster.sh.
# Exit 0: passed; 1: failed, saying which check; 77: skipped (no Slurm, no PostgreSQL, not root),
# saying why. Bounded by SLURM_TEST_TIMEOUT seconds (default 90). KEEP=1 keeps the work
# directory (always kept when the test fails): the workers' logs, the Slurm daemons' logs.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cluster=$here/slurm_cluster.sh
batch=$repo/scripts/slurm/tune-array.sbatch
study=slurm_array
n_configs=6
trial_seconds=6 # each trial's program runs this long
budget=${SLURM_TEST_TIMEOUT:-90}

t0=$(date +%s.%N)
elapsed() { /usr/bin/python3 -c "import time; print(f'{time.time() - $t0:.1f}')"; }
say() { echo "[$(elapsed)s] $*"; }
skip() { say "SKIP: $*"; exit 77; }
fail() { say "FAIL: $*"; failed=1; exit 1; }
left() { /usr/bin/python3 -c "import time; print(int($t0 + $budget - time.time()))"; }

[ $# -eq 1 ] || { echo "usage: $0 TUNE_BINARY" >&2; exit 2; }
tune=$1
[ "$(id -u)" -eq 0 ] || skip "needs root (the private Slurm runs its daemons and jobs as root)"

failed=0
work=""
db=""
admin_url=""
own_pg=""
slurm_started=0
cleanup() {
  local rc=$?
  [ $slurm_started -eq 1 ] && "$cluster" stop "$work/slurm" 2>/dev/null
  if [ -n "$db" ] && [ -n "$admin_url" ]; then
    psql -q -X "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
  fi
  case "$own_pg" in
    helper:*) "${own_pg#helper:}" stop "$work/postgres.state" >/dev/null 2>&1 ;;
    pg_ctl:*) runuser -u postgres -- "${own_pg#pg_ctl:}/pg_ctl" -D "$work/pg/data" -m immediate -w \
      stop >/dev/null 2>&1 ;;
  esac
  if [ -n "$work" ]; then
    if [ $rc -ne 1 ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$work"; else echo "(files kept in $work)"; fi
  fi
  exit $rc
}
trap cleanup EXIT
trap 'say "interrupted"; exit 1' INT TERM

# The binary may be relinked right now by a build: wait a little for it.
for _ in $(seq 1 30); do [ -x "$tune" ] && break; sleep 1; done
[ -x "$tune" ] || fail "no tune binary at $tune"
tune=$(cd "$(dirname "$tune")" && pwd)/$(basename "$tune")

work=$(mktemp -d /tmp/tune-slurm-test-XXXXXX)
chmod 755 "$work" # the postgres user reaches its server's files below it
mkdir -p "$work/marks" "$work/logs"

free_port() {
  /usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- PostgreSQL ------------------------------------------------------------------------------
command -v psql >/dev/null || skip "psql is missing (Debian: apt-get install postgresql-client)"
if [ -n "${TUNE_TEST_POSTGRES_URL:-}" ]; then
  admin_url=$TUNE_TEST_POSTGRES_URL
  say "PostgreSQL: TUNE_TEST_POSTGRES_URL"
elif [ -n "${TUNE_TEST_POSTGRES_STATE:-}" ] && [ -f "$TUNE_TEST_POSTGRES_STATE" ]; then
  reason=$(sed -n 's/^error=//p' "$TUNE_TEST_POSTGRES_STATE")
  [ -z "$reason" ] || skip "the PostgreSQL test server could not start: $reason"
  admin_url=$(sed -n 's/^url=//p' "$TUNE_TEST_POSTGRES_STATE")
  [ -n "$admin_url" ] || skip "no url= in $TUNE_TEST_POSTGRES_STATE"
  say "PostgreSQL: the ctest fixture's server ($TUNE_TEST_POSTGRES_STATE)"
else
  helper=${TUNE_TEST_POSTGRES_SERVER:-$(dirname "$tune")/tests/tune_test_postgres_server}
  if [ -x "$helper" ]; then
    own_pg=helper:$helper
    "$helper" start "$work/postgres.state" >"$work/postgres.log" 2>&1
    reason=$(sed -n 's/^error=//p' "$work/postgres.state" 2>/dev/null)
    [ -z "$reason" ] || skip "could not start a PostgreSQL server: $reason"
    admin_url=$(sed -n 's/^url=//p' "$work/postgres.state")
  else
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -x "$bindir/initdb" ] || skip "no PostgreSQL server (Debian: apt-get install postgresql)"
    id postgres >/dev/null 2>&1 || skip "no 'postgres' user to run a PostgreSQL server as"
    own_pg=pg_ctl:$bindir
    mkdir -p "$work/pg" && chown postgres "$work/pg"
    port=$(free_port)
    runuser -u postgres -- "$bindir/initdb" -D "$work/pg/data" -U postgres -A trust -E UTF8 \
      --no-locale --no-sync >"$work/postgres.log" 2>&1 || skip "initdb failed: $(tail -n 3 "$work/postgres.log")"
    runuser -u postgres -- "$bindir/pg_ctl" -D "$work/pg/data" -l "$work/pg/server.log" -w -t 30 \
      -o "-p $port -k $work/pg -c listen_addresses=127.0.0.1 -c fsync=off" start \
      >>"$work/postgres.log" 2>&1 || skip "pg_ctl start failed: $(tail -n 3 "$work/pg/server.log")"
    admin_url=postgresql://postgres@127.0.0.1:$port/postgres
  fi
  say "PostgreSQL: started a server for this test ($admin_url)"
fi
db=tune_slurm_$$_$RANDOM
psql -q -X "$admin_url" -c "CREATE DATABASE $db" >"$work/psql.log" 2>&1 ||
  { reason=$(head -n 2 "$work/psql.log"); db=""; skip "cannot create a database on $admin_url: $reason"; }
storage=${admin_url%/*}/$db # the admin URL with the new database (no query part in these URLs)
case "$admin_url" in *\?*) storage=$(/usr/bin/python3 -c 'import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$admin_url" "$db") ;; esac

# --- Slurm -----------------------------------------------------------------------------------
t_slurm=$(date +%s.%N)
if ! conf=$("$cluster" start "$work/slurm" --watch $$ 2>"$work/slurm-start.log"); then
  rc=$?
  sed 's/^/    /' "$work/slurm-start.log"
  [ $rc -eq 77 ] && skip "Slurm cannot start here (above)"
  fail "slurm_cluster.sh start exited $rc"
fi
slurm_started=1
eval "$conf"
export SLURM_CONF
say "Slurm: one node up in $(/usr/bin/python3 -c "import time; print(f'{time.time() - $t_slurm:.1f}')") s" \
  "($(sinfo -h -o '%N, %c CPUs, %G, %T' | head -n 1); $SLURM_CONF)"

# --- The study -------------------------------------------------------------------------------
# The trial program: writes a marker naming its array task and trial, reports a value each
# second for trial_seconds, then its final value. Slurm's scancel sends SIGTERM to every process
# of the job, this one included: it dies of it, as most training scripts do.
cat >"$work/objective.py" <<EOF
import json, os, sys, time
task = os.environ.get("SLURM_ARRAY_TASK_ID", "none")
trial = os.environ["TUNE_TRIAL_NUMBER"]
width = int(os.environ["TUNE_PARAM_WIDTH"])
open(os.path.join(sys.argv[1], f"task{task}-trial{trial}"), "w").write(f"{time.time()}\n")
for step in range($trial_seconds):
    time.sleep(1)
    print(json.dumps({"step": step, "value": width + 1.0 / (step + 1)}), flush=True)
print(json.dumps({"value": float(width)}))
EOF
{
  echo '{'
  echo '  "description": "tests/slurm/slurm_array_test.sh",'
  echo '  "direction": "minimize",'
  echo "  \"n_trials\": $n_configs,"
  echo '  "sampler": {"name": "random", "seed": 1},'
  echo "  \"search_space\": {\"width\": {\"type\": \"int\", \"low\": 1, \"high\": $n_configs}},"
  echo "  \"enqueue_trials\": [$(seq -s ', ' -f '{"width": %g}' 1 $n_configs)],"
  echo "  \"objective\": {\"type\": \"command\", \"argv\": [\"/usr/bin/python3\", \"$work/objective.py\", \"$work/marks\"]},"
  echo '  "heartbeat_interval": 1,'
  echo '  "grace_period": 5,'
  echo '  "retry_failed": 2'
  echo '}'
} >"$work/study.json"

# No study yet: the three workers start together and create it, and each would enqueue the
# configurations if that were not one transaction on an empty study (the check below that every
# configuration is COMPLETE exactly once would then fail: some ran twice or more).
say "no study '$study' yet on PostgreSQL database $db: the workers create it ($n_configs enqueued configurations, width 1..$n_configs)"

# --- The array -------------------------------------------------------------------------------
job=$(sbatch --parsable --array=0-2 --chdir="$work/logs" --export="ALL,TUNE=$tune" "$batch" \
  --study "$study" --config "$work/study.json" --storage "$storage" --progress lines \
  --progress-interval 2 2>"$work/sbatch.log") || fail "sbatch failed: $(cat "$work/sbatch.log")"
job=${job%%;*}
say "sbatch --array=0-2 scripts/slurm/tune-array.sbatch: job $job"

# Wait for task 1's trial to be RUNNING, then cancel task 1 mid-trial.
victim=""
while [ -z "$victim" ]; do
  [ "$(left)" -gt 0 ] || fail "array task 1 never ran a trial ($(squeue -h -j "$job" -o '%i %T %R' | tr '\n' ';'))"
  mark=$(ls "$work/marks" | sed -n 's/^task1-trial//p' | sort -n | tail -n 1)
  if [ -n "$mark" ] && timeout 30 "$tune" trials --study "$study" --storage "$storage" --state RUNNING \
    --format csv 2>/dev/null | cut -d, -f1 | grep -qx "$mark"; then
    victim=$mark
  else
    sleep 0.3
  fi
done
say "task 1 runs trial $victim; running: $(squeue -h -j "$job" -t R -o '%i' | tr '\n' ' ')"
sleep 1.5 # well into the trial: it has reported steps and heartbeats
t_cancel=$(date +%s.%N)
scancel "${job}_1" || fail "scancel ${job}_1 failed"
say "scancel ${job}_1"
while squeue -h -j "${job}_1" -t R,CG 2>/dev/null | grep -q .; do
  [ "$(left)" -gt 0 ] || fail "task 1 still there $(elapsed) s after the scancel"
  sleep 0.2
done
cancel_s=$(/usr/bin/python3 -c "import time; print(f'{time.time() - $t_cancel:.1f}')")
say "task 1 gone ${cancel_s} s after the scancel (Slurm's KillWait: 10 s)"

# The other two finish the study, the cancelled trial's retry included.
while squeue -h -j "$job" 2>/dev/null | grep -q .; do
  if [ "$(left)" -le 0 ]; then
    say "the array is still running after ${budget} s:"
    squeue -j "$job" | sed 's/^/    /'
    fail "the array did not end within the test's ${budget} s"
  fi
  sleep 0.5
done
say "the array ended"

# --- Results ---------------------------------------------------------------------------------
echo
echo "Array tasks (scontrol show job $job):"
printf '  %-6s %-10s %-9s %s\n' task state exit "its log's closing line"
declare -A task_state task_exit
for task in 0 1 2; do
  line=$(scontrol -o show job "${job}_$task" 2>/dev/null | head -n 1)
  st=$(grep -o 'JobState=[A-Z_]*' <<<"$line" | cut -d= -f2)
  ex=$(grep -o ' ExitCode=[0-9:]*' <<<"$line" | cut -d= -f2)
  task_state[$task]=${st:-?}
  task_exit[$task]=${ex:-?}
  log=$(ls "$work"/logs/tune-*_"$task".out 2>/dev/null | head -n 1)
  last=$( [ -n "$log" ] && { grep -E '^This run:' "$log" || grep -v '^\s*$' "$log"; } | tail -n 1 | cut -c1-110)
  printf '  %-6s %-10s %-9s %s\n' "$task" "${st:-?}" "${ex:-?}" "$last"
done
echo
echo "Cancelled worker's log (task 1):"
sed 's/^/  | /' "$work"/logs/tune-*_1.out 2>/dev/null | cut -c1-200
echo

timeout 30 "$tune" trials --study "$study" --storage "$storage" --format json >"$work/trials.json" 2>"$work/trials.err" ||
  fail "tune trials failed: $(cat "$work/trials.err")"
/usr/bin/python3 - "$work/trials.json" "$n_configs" "$victim" <<'EOF' || failed=1
import json, sys
trials = json.load(open(sys.argv[1]))
n_configs, victim = int(sys.argv[2]), int(sys.argv[3])
problems = []

def width(t):
    p = t.get("params") or {}
    if "width" in p:
        return p["width"]
    return ((t.get("system_attrs") or {}).get("fixed_params") or {}).get("width")

print("Trials:")
print(f"  {'number':>6}  {'state':8}  {'width':>5}  {'value':>5}  notes")
for t in sorted(trials, key=lambda t: t["number"]):
    sa, ua = t.get("system_attrs") or {}, t.get("user_attrs") or {}
    notes = []
    if "failed_trial" in sa:
        notes.append(f"retry of trial {sa['failed_trial']} (retry_history {sa.get('retry_history')})")
    if ua.get("fail_reason"):
        notes.append(f"fail_reason: {ua['fail_reason']}")
    value = "" if t.get("value") is None else f"{t['value']:g}"
    print(f"  {t['number']:>6}  {t['state']:8}  {str(width(t)):>5}  {value:>5}  {'; '.join(notes)}")

for w in range(1, n_configs + 1):
    done = [t["number"] for t in trials if t["state"] == "COMPLETE" and width(t) == w]
    if len(done) != 1:
        problems.append(f"configuration width={w} has {len(done)} COMPLETE trials {done}, not 1")
for state in ("RUNNING", "WAITING"):
    left = [t["number"] for t in trials if t["state"] == state]
    if left:
        problems.append(f"trials {left} are still {state}")
cancelled = next((t for t in trials if t["number"] == victim), None)
if cancelled is None:
    problems.append(f"the cancelled trial {victim} is missing")
else:
    reason = (cancelled.get("user_attrs") or {}).get("fail_reason", "")
    print(f"\nThe cancelled worker's trial {victim}: {cancelled['state']}, fail_reason: {reason!r}")
    if cancelled["state"] != "FAIL":
        problems.append(f"the cancelled trial {victim} is {cancelled['state']}, not FAIL")
    if "SIGTERM" not in reason:
        problems.append(f"the cancelled trial's fail_reason does not name SIGTERM: {reason!r}")
    retries = [t for t in trials if (t.get("system_attrs") or {}).get("failed_trial") == victim]
    print(f"Its retries: {[(t['number'], t['state']) for t in retries] or 'none'}")
    if not any(t["state"] == "COMPLETE" for t in retries):
        problems.append(f"no COMPLETE retry of the cancelled trial {victim} (system attribute failed_trial={victim})")
for p in problems:
    print(f"CHECK FAILED: {p}")
sys.exit(1 if problems else 0)
EOF

echo
[ "${task_exit[1]}" = "0:0" ] ||
  { say "CHECK FAILED: the cancelled worker (task 1) exited ${task_exit[1]}, not 0:0 (exit status 0, no signal)"; failed=1; }
/usr/bin/python3 -c "import sys; sys.exit(0 if $cancel_s < 10 else 1)" ||
  { say "CHECK FAILED: task 1 took ${cancel_s} s to end after the scancel: Slurm's SIGKILL (KillWait 10 s) ended it, not tune"; failed=1; }
for task in 0 2; do
  [ "${task_state[$task]}" = COMPLETED ] && [ "${task_exit[$task]}" = "0:0" ] ||
    { say "CHECK FAILED: task $task ended ${task_state[$task]} with exit ${task_exit[$task]}, not COMPLETED 0:0"; failed=1; }
done
if [ $failed -ne 0 ]; then
  say "FAIL (Slurm logs: $work/slurm; workers' logs: $work/logs)"
  exit 1
fi
say "PASS: every configuration COMPLETE exactly once, nothing RUNNING or WAITING, the cancelled trial FAIL by SIGTERM and retried, the cancelled worker exited 0 in ${cancel_s} s"
exit 0
