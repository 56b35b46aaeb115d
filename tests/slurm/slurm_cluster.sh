#!/usr/bin/env bash
# A private one-node Slurm on localhost for tests: munged, slurmctld and slurmd as this user (root),
# every file in STATE_DIR, free ports, no systemd, no cgroups, no accounting.
#
#   tests/slurm/slurm_cluster.sh start STATE_DIR [--watch PID]
#       Starts the daemons and waits (at most SLURM_START_TIMEOUT seconds, default 30) until
#       `sinfo` shows the node idle. Prints `export SLURM_CONF=STATE_DIR/slurm.conf` on stdout
#       (the clients sbatch, squeue, scancel, scontrol need it); everything else goes to stderr.
#       With --watch PID, a watchdog stops the daemons once PID has exited, so they never
#       outlive a test that was killed before its own `stop` ran.
#       Exit 0: ready; 77: Slurm cannot run here (packages missing, a daemon died or the node
#       never became idle), with the reason and the end of the daemons' logs on stderr; the
#       daemons are stopped then.
#   tests/slurm/slurm_cluster.sh stop STATE_DIR
#       Stops the daemons of STATE_DIR (SIGTERM, then SIGKILL after 5 s) and the jobs they ran.
#       Idempotent; leaves the files for post-mortems.
#
# Why this configuration: ProctrackType=proctrack/linuxproc and TaskPlugin=task/none need no
# cgroup file system (the cgroup plugins fail in containers and sandboxes); SlurmUser=root because
# the daemons run as the caller; no accounting (sacct cannot answer: use `scontrol show job`,
# which keeps a finished job for MinJobAge seconds); select/cons_tres with OverSubscribe=FORCE lets several one-CPU
# jobs share the node's CPUs, so a 3-task array runs at once on 2 cores; KillWait=10 is the time
# between the SIGTERM of a cancelled (or timed-out) job and its SIGKILL.
set -uo pipefail

usage() { echo "usage: $0 start|stop STATE_DIR [--watch PID]" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
state=$2
shift 2
watch_pid=""
while [ $# -gt 0 ]; do
  case "$1" in
    --watch) [ $# -ge 2 ] || usage; watch_pid=$2; shift 2 ;;
    *) usage ;;
  esac
done

log() { echo "slurm_cluster: $*" >&2; }

# Stops what this script started: the watchdog, the jobs' processes, then the daemons named by
# STATE/*.pid (each checked to still be that program, in case the pid was reused).
stop_daemons() {
  local pids=() name p
  for name in watchdog slurmd slurmctld munged; do
    [ -f "$state/$name.pid" ] || continue
    p=$(cat "$state/$name.pid" 2>/dev/null)
    rm -f "$state/$name.pid"
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null || continue
    case "$name:$(cat "/proc/$p/comm" 2>/dev/null)" in
      watchdog:bash | slurmd:slurmd | slurmctld:slurmctld | munged:munged) ;;
      *) continue ;;
    esac
    # The jobs go right after the watchdog (which would race with us), before the daemons.
    if [ "$name" = watchdog ]; then kill -KILL "$p" 2>/dev/null; continue; fi
    [ ${#pids[@]} -eq 0 ] && kill_jobs
    kill -TERM "$p" 2>/dev/null && pids+=("$p")
  done
  [ ${#pids[@]} -eq 0 ] && kill_jobs
  local deadline=$((SECONDS + 5)) alive
  while :; do
    alive=()
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
    [ ${#alive[@]} -eq 0 ] && break
    if [ $SECONDS -ge $deadline ]; then
      log "SIGKILL to ${alive[*]} (still running 5 s after SIGTERM)"
      for p in "${alive[@]}"; do kill -KILL "$p" 2>/dev/null; done
      break
    fi
    sleep 0.2
  done
}

# SIGKILLs the jobs' processes of this cluster: each slurmstepd and job process (their environment
# names our slurm.conf; a job's also has SLURM_JOB_ID), with all their descendants, never this
# script or its ancestors (a test that exported SLURM_CONF).
kill_jobs() {
  local conf="SLURM_CONF=$state/slurm.conf" self=() p pp env roots=() victims
  p=$$
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    self+=("$p")
    p=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')
  done
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    env=$(tr '\0' '\n' 2>/dev/null <"$d/environ") || continue
    grep -qx "$conf" <<<"$env" || continue
    [ "$(cat "$d/comm" 2>/dev/null)" = slurmstepd ] || grep -q '^SLURM_JOB_ID=' <<<"$env" || continue
    [[ " ${self[*]} " == *" $p "* ]] && continue
    roots+=("$p")
  done
  [ ${#roots[@]} -eq 0 ] && return 0
  # The roots and their descendants (one ps snapshot; a parent listed before its children or not).
  victims=$(ps -eo pid=,ppid= | awk -v roots="${roots[*]}" -v self="${self[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1
            m = split(self, s, " "); for (i = 1; i <= m; i++) mine[s[i]] = 1 }
    { parent[$1] = $2 }
    END { changed = 1
          while (changed) { changed = 0
            for (p in parent) if (!(p in keep) && (parent[p] in keep) && !(p in mine)) { keep[p] = 1; changed = 1 } }
          for (p in keep) print p }')
  # shellcheck disable=SC2086
  kill -KILL $victims 2>/dev/null
  log "killed the jobs' processes: $(echo $victims | tr '\n' ' ')"
}

# Prints the ends of the daemons' logs (for a failed start).
show_logs() {
  local f
  for f in munged.log slurmctld.log slurmd.log; do
    [ -s "$state/$f" ] || continue
    log "--- last lines of $state/$f:"
    tail -n 12 "$state/$f" | sed 's/^/    /' >&2
  done
}

skip() {
  log "SKIP: $*"
  show_logs
  stop_daemons
  exit 77
}

free_port() {
  /usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local missing=() prog
  for prog in munged slurmctld slurmd sinfo sbatch scontrol; do
    command -v "$prog" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$prog" >/dev/null 2>&1 ||
      missing+=("$prog")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "SKIP: missing ${missing[*]} (Debian: apt-get install slurmctld slurmd slurm-client munge," \
      "or scripts/install-deps.sh)"
    exit 77
  fi
  export PATH=$PATH:/usr/sbin
  if [ "$(id -u)" -ne 0 ]; then
    log "SKIP: needs root (slurmd starts jobs as their user; this harness runs everything as root)"
    exit 77
  fi

  mkdir -p "$state" || skip "cannot create $state"
  state=$(cd "$state" && pwd)
  stop_daemons  # a cluster left over by an interrupted run
  # munged wants its socket directory searchable by all and not writable by others, its key
  # readable by its user only.
  chmod 755 "$state"
  mkdir -p "$state/spool" "$state/statesave"
  rm -f "$state"/*.log "$state/munge.socket" "$state/munge.socket.lock"

  # munge
  if [ ! -s "$state/munge.key" ]; then
    (umask 077 && dd if=/dev/urandom of="$state/munge.key" bs=1024 count=1 status=none) ||
      skip "cannot write a munge key"
  fi
  chmod 600 "$state/munge.key"
  setsid munged --foreground --socket="$state/munge.socket" --key-file="$state/munge.key" \
    --pid-file="$state/munged.daemon.pid" --log-file="$state/munged.log" \
    --seed-file="$state/munged.seed" --num-threads=4 </dev/null >>"$state/munged.log" 2>&1 &
  echo $! >"$state/munged.pid"
  local deadline=$((SECONDS + 10))
  until munge -n -S "$state/munge.socket" 2>/dev/null | unmunge -S "$state/munge.socket" >/dev/null 2>&1; do
    kill -0 "$(cat "$state/munged.pid")" 2>/dev/null || skip "munged exited"
    [ $SECONDS -lt $deadline ] || skip "munged did not answer within 10 s"
    sleep 0.1
  done

  # slurm.conf
  local node ctld_port slurmd_port cpus gpus
  node=$(hostname -s)
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
  cpus=$(nproc)
  gpus=${SLURM_TEST_GPUS:-4}
  cat >"$state/slurm.conf" <<EOF
# Written by tests/slurm/slurm_cluster.sh: a private one-node cluster for tests.
ClusterName=tunetest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$state/munge.socket
CredType=cred/munge
StateSaveLocation=$state/statesave
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.daemon.pid
SlurmdPidFile=$state/slurmd.daemon.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# No accounting, job completion log or job resource gathering: AccountingStorageType,
# JobCompType and JobAcctGatherType (like SwitchType) stay at their defaults, which are none;
# naming the ".../none" plugins is left out so the file does not depend on which exist.
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=10
MinJobAge=600
InactiveLimit=0
SlurmdTimeout=30
MailProg=/bin/true
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node CPUs=$cpus RealMemory=1000 Gres=gpu:$gpus State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
  # Pretend cards, so that jobs ask --gres=gpu:N as on a real cluster: slurmd drops a GPU without
  # a device file and refuses a regular file, so each is a link to /dev/null. Jobs get
  # CUDA_VISIBLE_DEVICES as usual; there is nothing behind it.
  local i
  rm -rf "$state/gpu" "$state/gres.conf" && mkdir -p "$state/gpu"
  for ((i = 0; i < gpus; i++)); do
    ln -s /dev/null "$state/gpu/$i"
    echo "NodeName=$node Name=gpu File=$state/gpu/$i" >>"$state/gres.conf"
  done
  log "slurm.conf: $state/slurm.conf (node $node, $cpus CPUs, $gpus pretend GPUs, slurmctld port $ctld_port," \
    "slurmd port $slurmd_port)"

  export SLURM_CONF=$state/slurm.conf
  setsid slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$state/slurmctld.out" 2>&1 &
  echo $! >"$state/slurmctld.pid"
  setsid slurmd -D -f "$SLURM_CONF" -N "$node" </dev/null >>"$state/slurmd.out" 2>&1 &
  echo $! >"$state/slurmd.pid"

  if [ -n "$watch_pid" ]; then
    # Stops the cluster once the watched process is gone (kill -9 of a test, a ctest timeout).
    setsid bash -c 'while kill -0 '"$watch_pid"' 2>/dev/null && [ -f "$1/slurmd.pid" ]; do sleep 1; done
      rm -f "$1/watchdog.pid"; exec "$2" stop "$1"' watchdog "$state" "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" \
      </dev/null >>"$state/watchdog.log" 2>&1 &
    echo $! >"$state/watchdog.pid"
  fi

  local timeout=${SLURM_START_TIMEOUT:-30} t0=$SECONDS st=""
  deadline=$((SECONDS + timeout))
  while :; do
    kill -0 "$(cat "$state/slurmctld.pid")" 2>/dev/null ||
      skip "slurmctld exited during start ($(tail -n 3 "$state/slurmctld.out" 2>/dev/null | tr '\n' ' '))"
    kill -0 "$(cat "$state/slurmd.pid")" 2>/dev/null ||
      skip "slurmd exited during start ($(tail -n 3 "$state/slurmd.out" 2>/dev/null | tr '\n' ' '))"
    st=$(sinfo -h -n "$node" -o '%T' 2>/dev/null | head -n 1)
    case "$st" in
      idle) break ;;
      drain* | down* | fail* | inval*)
        skip "the node is $st: $(scontrol show node "$node" 2>/dev/null | grep -o 'Reason=.*')" ;;
    esac
    [ $SECONDS -lt $deadline ] || skip "the node was not idle within ${timeout} s (state: '${st:-no answer from slurmctld}')"
    sleep 0.3
  done
  log "ready in $((SECONDS - t0)) s: node $node idle (munged, slurmctld, slurmd pids" \
    "$(cat "$state/munged.pid") $(cat "$state/slurmctld.pid") $(cat "$state/slurmd.pid"))"
  echo "export SLURM_CONF=$state/slurm.conf"
}

case "$cmd" in
  start) start ;;
  stop)
    [ -d "$state" ] || exit 0
    state=$(cd "$state" && pwd)
    stop_daemons
    ;;
  *) usage ;;
esac
