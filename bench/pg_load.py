#!/usr/bin/env python3
"""PostgreSQL: how many tune workers one server carries (issue 45, item 4).

Measures a tune worker's per-trial query mix against PostgreSQL and replays it, with pgbench, for
many simulated workers against one server; reports trials/s, queries per trial, the server's CPU
time per trial and the latency of a trial's storage work, and the worker count at which a server
saturates (docs/benchmarks.md, "PostgreSQL: workers per server").

Usage (as root or as a user that may run initdb; `all` takes about 2 hours on 2 cores,
--quick about 50 minutes):
  bench/pg_load.py all [--out DIR] [--quick]
      capture, then load: study sizes 1000 and 5000 at 8, 32, 128, 256 workers with 6-s trials
      (60-s trials compressed 10x), the proposals (--variant batched, --reads-from-step 5) and
      random_page_cost = 1.1 at 5000 trials and 128/256 workers, and (not with --quick) runs
      where the server keeps up: 60-s trials with 128 workers, 180-s trials with 256, and 60-s
      trials with 256 workers at 5000 trials for tune and the proposals; then DIR/summary.md
  bench/pg_load.py capture [--out DIR] [--sizes 0,100,1000] [--workers 1,8,32]
      real tune workers (a command objective that sleeps and prints {"step", "value"} lines;
      TPE, median pruner, heartbeat 60 s, criteria.json's 9-parameter space) against a
      throwaway server; per phase: statements per trial by kind and table, rows, execution
      time, server CPU per trial (pg_stat_statements, /proc); the first phase's statements in
      order (log_statement = all) go to DIR/statements-1-worker.tsv
  bench/pg_load.py load [--out DIR] [--workers 8,32,128,256] [--study-size 1000]
      [--trial-seconds 6] [--model-seconds 60] [--steps 10] [--heartbeat 60] [--duration 60]
      [--variant tune|batched] [--reads-from-step K] [--set NAME=VALUE] [--append]
      pgbench clients, each looping over one trial's statements (tune's SQL and counts, see
      make_script) against a tune-created study of N trials (copies of its trials past
      --base-trials); the training is a \\sleep of --trial-seconds per trial (heartbeats and the
      stale check are counted for --model-seconds)
  bench/pg_load.py summary --out DIR                DIR/summary.md from DIR/*.json
  bench/pg_load.py server start DIR | server stop DIR
  bench/pg_load.py objective                        the command objective (run by tune)

Server CPU per trial does not depend on the compression while the server keeps up; an
overloaded server (lock convoys on the study row, 256 runnable backends on 2 cores) spends more
CPU per trial, so the saturation estimate uses, per worker count, a run that kept up.

Options common to all: --tune PATH (default build/tune, else /work/main/build/tune),
--keep (leave the server running and print its directory), --server DIR (use a server that
`bench/pg_load.py server start DIR` started; `server stop DIR` stops it).

The server is Debian's PostgreSQL 15 (initdb/pg_ctl from /usr/lib/postgresql/*/bin, or
$PG_BINDIR), run as the `postgres` user when this runs as root, on 127.0.0.1 with its own data
directory, fsync on (the default), pg_stat_statements preloaded, max_connections 300. Server
CPU = utime+stime of the postmaster, its live children and its reaped children (/proc: cutime,
cstime), so it counts exited backends too and nothing of pgbench or tune.

Without PostgreSQL (no initdb/pg_ctl/pgbench/psql, or the server does not start) it prints why
and exits 77 (skipped).

Needs: python3 (standard library only), PostgreSQL server with pg_stat_statements and
pgbench (Debian: postgresql-15); for `capture` and to create the study, a built tune.
"""
import argparse
import csv
import json
import math
import os
import platform
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def skip(reason):
    print(f"pg_load: SKIPPED: {reason}", file=sys.stderr)
    sys.exit(SKIP)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# The command objective: sleeps DUR seconds in STEPS steps, reporting a learning curve.

def objective_main():
    params = json.load(open(os.environ["TUNE_PARAMS_FILE"]))
    steps = int(os.environ.get("PG_LOAD_STEPS", "10"))
    dur = float(os.environ.get("PG_LOAD_DUR", "1.5"))
    lr = float(params.get("learning_rate", 1e-5))
    drop = float(params.get("dropout", 0.1))
    wd = float(params.get("weight_decay", 0.05))
    number = int(os.environ.get("TUNE_TRIAL_NUMBER", "0"))
    # A plateau that depends on the parameters (best near lr 3e-5, dropout 0.1), plus noise.
    noise = ((number * 2654435761) % 1000) / 1000.0 - 0.5
    final = 0.9 - 0.08 * abs(math.log10(lr) + 4.5) - 0.3 * abs(drop - 0.1) - 0.2 * wd + 0.04 * noise
    value = 0.0
    for i in range(steps):
        time.sleep(dur / steps)
        value = final * (1 - math.exp(-(i + 1) / 3.0))
        print(json.dumps({"step": i, "value": value}), flush=True)
    print(json.dumps({"value": value}), flush=True)


# ------------------------------------------------------------------------------------------
# A throwaway PostgreSQL server.

def pg_bindir():
    cands = [os.environ.get("PG_BINDIR", "")]
    base = "/usr/lib/postgresql"
    if os.path.isdir(base) and not os.environ.get("PG_BINDIR"):
        for v in sorted(os.listdir(base), key=lambda s: (len(s), s), reverse=True):
            cands.append(os.path.join(base, v, "bin"))
    for c in cands:
        if c and os.path.exists(os.path.join(c, "initdb")) and os.path.exists(os.path.join(c, "pg_ctl")):
            return c
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A PostgreSQL server in DIR (data in DIR/data, socket in DIR), or one already started there."""

    def __init__(self, directory):
        self.dir = os.path.abspath(directory)
        self.state_file = os.path.join(self.dir, "state.json")
        self.bindir = pg_bindir()
        self.port = None
        self.run_as = None
        self.db = "studies"

    # --- lifecycle
    def start(self, max_connections=300, extra=None):
        if not self.bindir:
            skip("no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or $PG_BINDIR")
        for tool in ("psql", "pgbench"):
            if not (shutil.which(tool) or os.path.exists(os.path.join(self.bindir, tool))):
                skip(f"no {tool} (Debian: postgresql-15, postgresql-client-15)")
        ext = os.path.join(os.path.dirname(self.bindir), "lib", "pg_stat_statements.so")
        if not os.path.exists(ext):
            skip(f"no pg_stat_statements ({ext}; Debian: postgresql-15)")
        os.makedirs(self.dir, exist_ok=True)
        self.run_as = None
        if os.geteuid() == 0:
            for user in ("postgres", "nobody"):
                try:
                    pw = pwd.getpwnam(user)
                except KeyError:
                    continue
                self.run_as = user
                os.chown(self.dir, pw.pw_uid, pw.pw_gid)
                break
            if not self.run_as:
                skip("running as root and there is no postgres or nobody user to run the server")
        data = os.path.join(self.dir, "data")
        if not os.path.exists(os.path.join(data, "PG_VERSION")):
            r = self._as_server_user([os.path.join(self.bindir, "initdb"), "-D", data, "-A", "trust",
                                      "-U", "postgres", "-E", "UTF8", "--no-sync"])
            if r.returncode != 0:
                skip(f"initdb failed: {r.stdout[-500:]}{r.stderr[-500:]}")
        self.port = free_port()
        conf = {
            "port": self.port,
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.dir}'",
            "max_connections": max_connections,
            "shared_preload_libraries": "'pg_stat_statements'",
            "pg_stat_statements.max": 10000,
            "pg_stat_statements.track": "'top'",
            # csvlog, for capture's statement log (log_statement is switched on and off by reload)
            "logging_collector": "on",
            "log_destination": "'csvlog'",
            "log_directory": "'log'",
        }
        conf.update(extra or {})
        with open(os.path.join(data, "postgresql.auto.conf"), "w") as f:
            for k, v in conf.items():
                f.write(f"{k} = {v}\n")
        if self.run_as:
            pw = pwd.getpwnam(self.run_as)
            os.chown(os.path.join(data, "postgresql.auto.conf"), pw.pw_uid, pw.pw_gid)
        r = self._as_server_user([os.path.join(self.bindir, "pg_ctl"), "-D", data, "-l",
                                  os.path.join(self.dir, "server.log"), "-w", "-t", "60", "start"])
        if r.returncode != 0:
            tail = ""
            try:
                tail = open(os.path.join(self.dir, "server.log")).read()[-800:]
            except OSError:
                pass
            skip(f"the PostgreSQL server did not start: {r.stdout[-300:]} {tail}")
        json.dump({"port": self.port, "run_as": self.run_as, "bindir": self.bindir},
                  open(self.state_file, "w"))
        self.psql("SELECT 1", db="postgres")
        return self

    def attach(self):
        st = json.load(open(self.state_file))
        self.port, self.run_as, self.bindir = st["port"], st["run_as"], st["bindir"]
        return self

    def stop(self, remove=False):
        data = os.path.join(self.dir, "data")
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            self._as_server_user([os.path.join(self.bindir, "pg_ctl"), "-D", data, "-m", "fast",
                                  "-w", "stop"])
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)

    def set_conf(self, **kv):
        for k, v in kv.items():
            self.psql(f"ALTER SYSTEM SET {k} = '{v}'", db="postgres")
        self.psql("SELECT pg_reload_conf()", db="postgres")

    def _as_server_user(self, argv):
        if self.run_as:
            argv = ["runuser", "-u", self.run_as, "--"] + argv
        return subprocess.run(argv, capture_output=True, text=True, cwd="/")

    # --- access
    def url(self, db=None):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db or self.db}"

    def psql(self, sql, db=None, check=True):
        db = db or self.db
        r = subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                            "-d", db, "-v", "ON_ERROR_STOP=1", "-AtF", "\t", "-c", sql],
                           capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"psql failed: {sql[:200]}: {r.stderr}")
        return [line.split("\t") for line in r.stdout.splitlines() if line != ""]

    def version(self):
        return self.psql("SELECT version()", db="postgres")[0][0]

    def postmaster_pid(self):
        with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
            return int(f.readline())

    def cpu_seconds(self):
        """utime+stime of the postmaster, its children alive now, and its reaped children."""
        tick = os.sysconf("SC_CLK_TCK")
        pm = self.postmaster_pid()
        total = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    s = f.read()
            except OSError:
                continue
            fields = s[s.rfind(")") + 2:].split()
            ppid = int(fields[1])
            utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
            if int(pid) == pm:
                total += utime + stime + cutime + cstime
            elif ppid == pm:
                total += utime + stime
        return total / tick


def open_server(args, tag):
    if args.server:
        return Server(args.server).attach(), False
    d = tempfile.mkdtemp(prefix=f"pg-load-{tag}-")
    srv = Server(d).start()
    return srv, True


def ensure_db(srv, db=None):
    db = db or srv.db
    if not srv.psql(f"SELECT 1 FROM pg_database WHERE datname = '{db}'", db="postgres"):
        srv.psql(f"CREATE DATABASE {db}", db="postgres")
    srv.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", db=db)


# ------------------------------------------------------------------------------------------
# The study: the criteria study's space (9 parameters, 3 of them conditional), TPE, the median
# pruner as criteria.json has it, heartbeat 60 s, a command objective reporting every step.

def study_config(steps, dur, heartbeat):
    return {
        "direction": "maximize",
        "sampler": {"name": "tpe"},
        "pruner": {"name": "median", "n_startup_trials": 5, "n_warmup_steps": 5},
        "heartbeat_interval": heartbeat,
        "search_space": {
            "model": {"type": "model", "choices": [
                "bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large",
                "microsoft/deberta-v3-base", "microsoft/deberta-v3-large", "xlm-roberta-base"]},
            "learning_rate": {"type": "float", "low": 5e-6, "high": 1e-4, "log": True},
            "weight_decay": {"type": "float", "low": 0.0, "high": 0.1},
            "warmup_ratio": {"type": "float", "low": 0.0, "high": 0.2},
            "dropout": {"type": "float", "low": 0.0, "high": 0.3},
            "classifier_layers": {"type": "int", "low": 0, "high": 3},
        },
        "conditional": [
            {"when": {"model.heavy": True}, "search_space": {
                "batch_size": {"type": "categorical", "choices": [8, 12, 16]},
                "grad_accum": {"type": "categorical", "choices": [1, 2, 3, 4]},
                "max_length": {"type": "int", "low": 128, "high": 384, "step": 32}}},
            {"when": {"model.heavy": False}, "search_space": {
                "batch_size": {"type": "categorical", "choices": [8, 12, 16, 24, 32, 48, 64]},
                "grad_accum": {"type": "categorical", "choices": [1, 2, 3, 4, 6, 8]},
                "max_length": {"type": "int", "low": 128, "high": 512, "step": 32}}},
        ],
        "objective": {"type": "command",
                      "argv": [sys.executable, os.path.abspath(__file__), "objective"],
                      "env": {"PG_LOAD_STEPS": str(steps), "PG_LOAD_DUR": str(dur)}},
    }


def find_tune(args):
    for c in [args.tune, os.path.join(ROOT, "build", "tune"), "/work/main/build/tune"]:
        if c and os.access(c, os.X_OK):
            return os.path.abspath(c)
    return None


def start_workers(tune, srv, cfg_path, study, n_workers, timeout=None, n_trials=None, wdir=None):
    """Starts n_workers tune processes on the study; returns them."""
    argv = [tune, "--study", study, "--config", cfg_path, "--storage", srv.url(),
            "--progress", "off", "--log-level", "warn"]
    if timeout:
        argv += ["--timeout", str(timeout)]
    if n_trials:
        argv += ["--n-trials", str(n_trials)]
    procs = []
    for i in range(n_workers):
        err = open(os.path.join(wdir or "/tmp", f"worker-{i}.log"), "a")
        for _ in range(60):  # the binary may briefly vanish while it is relinked
            if os.access(tune, os.X_OK):
                break
            time.sleep(2)
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=wdir))
    return procs


def wait_workers(procs, wdir):
    rcs = [p.wait() for p in procs]
    bad = [rc for rc in rcs if rc != 0]
    if bad:
        log(f"warning: {len(bad)} of {len(procs)} workers exited non-zero ({bad[:4]}); see {wdir}")
    return rcs


def study_id(srv, study):
    if srv.psql("SELECT to_regclass('studies') IS NULL")[0][0] == "t":
        return None
    rows = srv.psql(f"SELECT study_id FROM studies WHERE study_name = '{study}'")
    return int(rows[0][0]) if rows else None


def trial_count(srv, sid, finished_only=False):
    cond = " AND state IN ('COMPLETE', 'PRUNED', 'FAIL')" if finished_only else ""
    return int(srv.psql(f"SELECT count(*) FROM trials WHERE study_id = {sid}{cond}")[0][0])


def stat_reset(srv):
    srv.psql("SELECT pg_stat_statements_reset()")


def stat_read(srv):
    rows = srv.psql(
        "SELECT calls, rows, total_exec_time, regexp_replace(query, '\\s+', ' ', 'g') "
        "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
        f"WHERE d.datname = '{srv.db}' AND query NOT ILIKE '%pg_stat_statements%' "
        "AND query NOT ILIKE '%pg_database%' ORDER BY calls DESC")
    return [{"calls": int(c), "rows": int(r), "exec_ms": float(t), "query": q} for c, r, t, q in rows]


def classify(query):
    """(kind, table) of a statement: SELECT/INSERT/UPDATE/DELETE/TXN and its main table."""
    q = query.strip()
    word = q.split()[0].upper() if q else ""
    if word in ("BEGIN", "COMMIT", "ROLLBACK", "SET"):
        return "TXN", "-"
    m = {"SELECT": r"\bFROM\s+([a-z_]+)", "INSERT": r"INTO\s+([a-z_]+)",
         "UPDATE": r"UPDATE\s+([a-z_]+)", "DELETE": r"FROM\s+([a-z_]+)"}.get(word)
    table = "-"
    if m:
        mm = re.search(m, q, re.I)
        if mm:
            table = mm.group(1)
        if word == "SELECT" and re.search(r"JOIN\s+([a-z_]+)", q, re.I):
            table = table + "+" + re.search(r"JOIN\s+([a-z_]+)", q, re.I).group(1)
    if word == "SELECT" and "FOR UPDATE" in q.upper():
        word = "SELECT FOR UPDATE"
    return word, table


# ------------------------------------------------------------------------------------------
# capture: real tune workers

def capture(args, srv=None):
    tune = find_tune(args)
    if not tune:
        skip("no tune binary (build it, or pass --tune)")
    own = False
    if srv is None:
        srv, own = open_server(args, "capture")
    srv.db = "capture"
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    wdir = tempfile.mkdtemp(prefix="pg-load-workers-")
    try:
        ensure_db(srv)
        results = {"machine": machine_info(srv), "idle_server_cpu_s_per_s": idle_cpu(srv),
                   "phases": []}
        cfg_path = os.path.join(wdir, "study.json")
        fast = study_config(args.steps, 0.0, args.heartbeat)
        fast_path = os.path.join(wdir, "fast.json")
        json.dump(fast, open(fast_path, "w"), indent=1)
        study = args.study
        sizes = [int(x) for x in args.sizes.split(",")]
        workers = [int(x) for x in args.workers.split(",")]
        phases = [(size, 1) for size in sizes] + [(sizes[-1], w) for w in workers if w > 1]
        for i, (size, w) in enumerate(phases):
            sid = study_id(srv, study)
            have = trial_count(srv, sid) if sid else 0
            if size > have:
                log(f"growing the study to {size} trials (fast objective, 2 workers)")
                wait_workers(start_workers(tune, srv, fast_path, study, 2, n_trials=size, wdir=wdir), wdir)
                have = trial_count(srv, study_id(srv, study))
            # Trials long enough that the workers stay mostly asleep (2 cores run them all).
            t_trial = args.trial_seconds if w == 1 else max(args.trial_seconds, w / 3.0)
            cfg = study_config(args.steps, t_trial, args.heartbeat)
            json.dump(cfg, open(cfg_path, "w"), indent=1)
            duration = max(args.phase_seconds, 6 * t_trial)
            warmup = t_trial + 3
            log(f"capture: study size {have}, {w} worker(s), trials of {t_trial:.1f} s, "
                f"{duration:.0f} s (+{warmup:.0f} s warm-up left out)")
            first = i == 0 and args.log_statements
            if first:
                srv.set_conf(log_statement="all")
            procs = start_workers(tune, srv, cfg_path, study, w, timeout=duration + warmup, wdir=wdir)
            time.sleep(warmup)
            sid = study_id(srv, study)
            stat_reset(srv)
            done0 = trial_count(srv, sid, finished_only=True)
            before = trial_count(srv, sid)
            cpu0, t0 = srv.cpu_seconds(), time.time()
            wait_workers(procs, wdir)
            cpu1, t1 = srv.cpu_seconds(), time.time()
            stats = stat_read(srv)
            if first:
                srv.set_conf(log_statement="none")
            done1 = trial_count(srv, sid, finished_only=True)
            n = done1 - done0
            states = dict((s, int(c)) for s, c in srv.psql(
                f"SELECT state, count(*) FROM trials WHERE study_id = {sid} AND number >= {before} GROUP BY 1"))
            reports = float(srv.psql(
                f"SELECT count(*)::float / greatest(count(DISTINCT v.trial_id), 1) FROM trial_intermediate_values v "
                f"JOIN trials t USING (trial_id) WHERE t.study_id = {sid} AND t.number >= {before}")[0][0])
            phase = {"study_size": have, "workers": w, "trials": n, "states_of_new_trials": states,
                     "reports_per_trial": reports, "wall_s": t1 - t0, "trial_seconds": t_trial,
                     "steps": args.steps, "heartbeat_interval": args.heartbeat,
                     "server_cpu_s": cpu1 - cpu0, "loadavg_end": loadavg(), "statements": stats}
            summarize_phase(phase)
            results["phases"].append(phase)
            json.dump(results, open(os.path.join(out, "capture.json"), "w"), indent=1)
        if args.log_statements:
            keep_statement_log(srv, out)
        write_capture_csv(results, out)
        shutil.rmtree(wdir, ignore_errors=True)
        return results
    finally:
        if own and not args.keep:
            srv.stop(remove=True)
        elif own:
            log(f"server kept: --server {srv.dir}")


def keep_statement_log(srv, out):
    """The statements of the first phase in order (csvlog), as a compact text file."""
    logdir = os.path.join(srv.dir, "data", "log")
    if not os.path.isdir(logdir):
        return
    lines = []
    for name in sorted(os.listdir(logdir)):
        if not name.endswith(".csv"):
            continue
        with open(os.path.join(logdir, name), newline="") as f:
            for row in csv.reader(f):
                if len(row) > 13 and row[13].startswith(("statement:", "execute ")):
                    msg = re.sub(r"^execute [^:]+: ", "", row[13])
                    msg = re.sub(r"^statement: ", "", msg)
                    if "pg_stat_statements" in msg or "pg_database" in msg or "pg_reload_conf" in msg \
                            or "ALTER SYSTEM" in msg:
                        continue
                    msg = re.sub(r"\s+", " ", msg)
                    detail = row[14] if len(row) > 14 else ""
                    lines.append(f"{row[3]}\t{msg}\t{detail}")
    with open(os.path.join(out, "statements-1-worker.tsv"), "w") as f:
        f.write("pid\tstatement\tdetail\n")
        f.write("\n".join(lines) + "\n")


def summarize_phase(p):
    n = max(p["trials"], 1)
    calls = sum(s["calls"] for s in p["statements"])
    non_txn = sum(s["calls"] for s in p["statements"] if classify(s["query"])[0] != "TXN")
    rows = sum(s["rows"] for s in p["statements"])
    exec_ms = sum(s["exec_ms"] for s in p["statements"])
    p["summary"] = {"statements_per_trial": calls / n, "queries_per_trial": non_txn / n,
                    "rows_per_trial": rows / n, "exec_ms_per_trial": exec_ms / n,
                    "server_cpu_ms_per_trial": 1000 * p["server_cpu_s"] / n}
    log(f"  {p['trials']} trials ({p['states_of_new_trials']}), {p['reports_per_trial']:.1f} reports/trial: "
        f"{non_txn / n:.0f} queries/trial (+{(calls - non_txn) / n:.0f} BEGIN/COMMIT), "
        f"{rows / n:.0f} rows/trial, exec {exec_ms / n:.1f} ms/trial, server CPU "
        f"{1000 * p['server_cpu_s'] / n:.1f} ms/trial")


def write_capture_csv(results, out):
    with open(os.path.join(out, "capture-statements.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["study_size", "workers", "trials", "kind", "table", "calls_per_trial",
                    "rows_per_trial", "exec_ms_per_trial", "query"])
        for p in results["phases"]:
            n = max(p["trials"], 1)
            for s in p["statements"]:
                kind, table = classify(s["query"])
                w.writerow([p["study_size"], p["workers"], p["trials"], kind, table,
                            f"{s['calls'] / n:.3f}", f"{s['rows'] / n:.2f}",
                            f"{s['exec_ms'] / n:.4f}", s["query"]])


def machine_info(srv=None):
    info = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "uptime": read_uptime(),
            "platform": platform.platform(), "nproc": os.cpu_count()}
    try:
        info["lscpu"] = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()[:15]
    except OSError:
        pass
    if srv:
        info["postgresql"] = srv.version()
        info["pgbench"] = subprocess.run(["pgbench", "--version"], capture_output=True, text=True).stdout.strip()
    return info


def idle_cpu(srv, seconds=5.0):
    """The server's own CPU use with no clients (background processes), per second."""
    c0 = srv.cpu_seconds()
    time.sleep(seconds)
    return (srv.cpu_seconds() - c0) / seconds


def read_uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


# ------------------------------------------------------------------------------------------
# load: pgbench clients replaying one worker's per-trial statements
#
# One pgbench "transaction" (one run of the script) is one step of a trial; a client's
# variables persist between runs, so the script is a small state machine over :j:
#   j = 0        stale-trial check (once per heartbeat interval), the n_trials count, the new
#                trial (study row lock, count, INSERT, first heartbeat), the sampler's read of
#                the study (History), the TPE system attribute and the 9 parameters;
#   j = 1 .. S   \sleep T'/S (the training), a heartbeat when one is due, the report (upsert
#                of the intermediate value) and the pruner's read of the study (History);
#   j = S        also the tell (state, value) and the read-back of the trial.
# History is tune's incremental read (src/study/study.cpp, Study::History; rdb_storage.cpp,
# GetTrialsSince): every trial that was unfinished at this worker's previous read by primary
# key (about W of them with W workers), the trials created since by trial_id range, then their
# child rows: per trial (5 queries each) up to 8 trials, else 5 joins from the oldest of them
# (trial_id >= min). With W simulated workers the unfinished trials are the W newest ids before
# the previous read, and a trial's progress j/(S+1) says how many trials the others created
# since it started (W * j/(S+1)), so reads return the rows tune's reads return.

PARAMS = [
    ("model", "categorical", 7, '{"name": "CategoricalDistribution", "attributes": {"choices": ["bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large", "microsoft/deberta-v3-base", "microsoft/deberta-v3-large", "xlm-roberta-base"]}}'),
    ("learning_rate", "float", 0, '{"name": "FloatDistribution", "attributes": {"step": null, "low": 5e-06, "high": 0.0001, "log": true}}'),
    ("weight_decay", "float", 0, '{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 0.1, "log": false}}'),
    ("warmup_ratio", "float", 0, '{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 0.2, "log": false}}'),
    ("dropout", "float", 0, '{"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 0.3, "log": false}}'),
    ("classifier_layers", "int", 3, '{"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 0, "high": 3}}'),
    ("batch_size", "categorical", 6, '{"name": "CategoricalDistribution", "attributes": {"choices": [8, 12, 16, 24, 32, 48, 64]}}'),
    ("grad_accum", "categorical", 5, '{"name": "CategoricalDistribution", "attributes": {"choices": [1, 2, 3, 4, 6, 8]}}'),
    ("max_length", "int", 512, '{"name": "IntDistribution", "attributes": {"log": false, "step": 32, "low": 128, "high": 512}}'),
]
TRIAL_COLS = "trial_id, number, study_id, state, datetime_start, datetime_complete"
CHILDREN = [("param_name, param_value, distribution_json", "trial_params"),
            ("objective, value, value_type", "trial_values"),
            ("step, intermediate_value, intermediate_value_type", "trial_intermediate_values"),
            ('"key", value_json', "trial_user_attributes"),
            ('"key", value_json', "trial_system_attributes")]
PER_TRIAL_LOAD_LIMIT = 8  # rdb_storage.cpp kPerTrialLoadLimit


def sql_str(text):
    return "'" + text.replace("'", "''") + "'"


def make_script(W, S, trial_seconds, model_seconds, heartbeat, sid, offset, lookback=2.0,
                variant="tune", reads_from_step=0):
    """The pgbench script of one simulated worker (see above). `lookback`: the oldest trial
    that a History read's child joins start from, in units of W trials before the newest.
    variant "batched" (a proposal, not what tune does): History reads the unfinished trials in
    one query and the child rows of exactly the trials it needs, by trial_id = ANY(ids), in one
    query per table, instead of one query per trial and joins over every trial from the oldest
    unfinished one. reads_from_step K (a proposal): the pruner's History read only after the
    reports of steps >= K (the median pruner's n_warmup_steps: it cannot prune before)."""
    L = []
    add = L.append
    head = "SELECT number, state, study_id FROM trials WHERE trial_id = :tid FOR UPDATE;"
    rc = "BEGIN ISOLATION LEVEL READ COMMITTED;"
    ro = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;"
    stale_per_trial = min(1.0, model_seconds / heartbeat) if heartbeat > 0 else 0.0
    extra_heartbeats = int(model_seconds // heartbeat) if heartbeat > 0 else 0
    hb_steps = sorted({max(1, min(S, round(k * heartbeat / model_seconds * S)))
                       for k in range(1, extra_heartbeats + 1)})
    sleep_us = int(round(trial_seconds / S * 1e6))

    back = max(W, int(round(lookback * W)))

    def history(fresh):
        """One History() read: U = W unfinished trials by id, the new ones by range, children."""
        add("\\set minid :hprev - %d" % (back - 1))
        add("\\set firstnum :hprev - %d" % (offset - 1))
        add(ro)
        if variant == "batched":
            # the ids tune holds: bound as one array parameter; here generated server-side
            add("\\set lo :hprev - %d" % (W - 1))
            add("\\set hi :hprev + %d" % fresh)
            add(f"SELECT {TRIAL_COLS} FROM trials WHERE trial_id = ANY(ARRAY(SELECT "
                "generate_series(:lo::integer, :hprev::integer)));")
            add(f"SELECT {TRIAL_COLS} FROM trials WHERE study_id = :sid AND trial_id > :hprev AND "
                "number >= :firstnum ORDER BY trial_id;")
            for cols, table in CHILDREN:
                add(f"SELECT trial_id, {cols} FROM {table} WHERE trial_id = ANY(ARRAY(SELECT "
                    "generate_series(:lo::integer, :hi::integer)));")
            add("COMMIT;")
            return
        for i in range(W):  # the unfinished ones: the oldest, then the W-1 newest
            add("\\set id :hprev - %d" % (back - 1 if i == 0 else W - 1 - i))
            add(f"SELECT {TRIAL_COLS} FROM trials WHERE trial_id = :id;")
        add(f"SELECT {TRIAL_COLS} FROM trials WHERE study_id = :sid AND trial_id > :hprev AND "
            "number >= :firstnum ORDER BY trial_id;")
        if W + fresh <= PER_TRIAL_LOAD_LIMIT:
            for cols, table in CHILDREN:
                for i in range(W + fresh):
                    k = W - 1 - i
                    add("\\set id :hprev %s %d" % ("-" if k >= 0 else "+", abs(k)))
                    add(f"SELECT trial_id, {cols} FROM {table} WHERE trial_id = :id;")
        else:
            for cols, table in CHILDREN:
                add(f"SELECT c.trial_id, {cols} FROM trials t JOIN {table} c ON c.trial_id = "
                    "t.trial_id WHERE t.study_id = :sid AND t.trial_id >= :minid;")
        add("COMMIT;")

    add(f"\\set sid {sid}")
    add("\\if :j = 0")
    add("\\if :first = 1")
    add(f"\\set delay random(0, {int(trial_seconds * 1e6)})")  # spread the clients' phases
    add("\\sleep :delay us")
    add("\\set first 0")
    add("\\endif")
    if stale_per_trial > 0:
        add(f"\\if random(1, 1000000) <= {int(stale_per_trial * 1e6)}")
        add(ro)
        add("SELECT 1 FROM studies WHERE study_id = :sid;")
        add("SELECT CURRENT_TIMESTAMP;")
        add("SELECT t.trial_id, h.heartbeat FROM trials t JOIN trial_heartbeats h ON h.trial_id = "
            "t.trial_id WHERE t.study_id = :sid AND t.state = 'RUNNING';")
        add("COMMIT;")
        add("\\endif")
    add(ro)
    add("SELECT state, COUNT(*) FROM trials WHERE study_id = :sid GROUP BY state;")
    add("COMMIT;")
    add(rc)
    add("SELECT 1 FROM studies WHERE study_id = :sid FOR UPDATE;")
    add("SELECT state, COUNT(*) FROM trials WHERE study_id = :sid GROUP BY state;")
    # tune passes the number it counted; here the id sequence gives it (same row, same lock)
    add("INSERT INTO trials (trial_id, number, study_id, state, datetime_start, datetime_complete) "
        "VALUES (nextval('trials_trial_id_seq'), currval('trials_trial_id_seq') - %d, :sid, "
        "'RUNNING', LOCALTIMESTAMP, NULL) RETURNING trial_id AS tid \\gset" % offset)
    add("SELECT CURRENT_TIMESTAMP;")
    add("INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (:tid, LOCALTIMESTAMP) "
        "ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat;")
    add("COMMIT;")
    add("\\set hprev :tid - 1")
    add("\\set hcur :tid")
    history(fresh=max(1, math.ceil(W / (S + 1))))
    add("\\set hprev :hcur")
    rel = json.dumps(json.dumps({"classifier_layers": 1, "dropout": 0.1, "learning_rate": 3e-05,
                                 "model": "roberta-base", "warmup_ratio": 0.1, "weight_decay": 0.01}))
    add(rc)
    add(head)
    add("INSERT INTO trial_system_attributes (trial_id, \"key\", value_json) VALUES (:tid, "
        # (pgbench would take ':relative_params' in a literal for a variable)
        f"'tpe' || chr(58) || 'relative_params' || chr(58) || '0', {sql_str(rel)}) ON CONFLICT (trial_id, \"key\") DO UPDATE SET "
        "value_json = excluded.value_json;")
    add("COMMIT;")
    for name, kind, hi, dist in PARAMS:
        if kind == "float":
            add("\\set pv random(0, 1000000) * 0.0000001")
        else:
            add(f"\\set pv random(0, {hi})")
        add(rc)
        add(head)
        add("INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES "
            f"(:tid, '{name}', :pv, {sql_str(dist)}) ON CONFLICT (trial_id, param_name) DO UPDATE "
            "SET param_value = excluded.param_value, distribution_json = excluded.distribution_json;")
        add("COMMIT;")
    add("\\else")
    add(f"\\sleep {sleep_us} us")
    for k in hb_steps:
        add(f"\\if :j = {k}")
        add(rc)
        add(head)
        add("SELECT CURRENT_TIMESTAMP;")
        add("INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (:tid, LOCALTIMESTAMP) "
            "ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat;")
        add("COMMIT;")
        add("\\endif")
    add("\\set step :j - 1")
    add("\\set v random(0, 1000000) * 0.000001")
    add(rc)
    add(head)
    add("INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, "
        "intermediate_value_type) VALUES (:tid, :step, :v, 'FINITE') ON CONFLICT (trial_id, step) "
        "DO UPDATE SET intermediate_value = excluded.intermediate_value, intermediate_value_type = "
        "excluded.intermediate_value_type;")
    add("COMMIT;")
    add("\\set hcur :tid + (%d * :j) / %d" % (W, S + 1))
    if reads_from_step > 0:
        add(f"\\if :step >= {reads_from_step}")
    history(fresh=math.ceil(W / (S + 1)))
    add("\\set hprev :hcur")
    if reads_from_step > 0:
        add("\\endif")
    add("\\endif")
    add(f"\\if :j = {S}")
    add(rc)
    add(head)
    add("UPDATE trials SET state = 'COMPLETE', datetime_complete = LOCALTIMESTAMP WHERE trial_id = :tid;")
    add("DELETE FROM trial_values WHERE trial_id = :tid;")
    add("INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (:tid, 0, :v, 'FINITE');")
    add("COMMIT;")
    add(ro)
    add(f"SELECT {TRIAL_COLS} FROM trials WHERE trial_id = :tid;")
    for cols, table in CHILDREN:
        add(f"SELECT trial_id, {cols} FROM {table} WHERE trial_id = :tid;")
    add("COMMIT;")
    add("\\set j 0")
    add("\\else")
    add("\\set j :j + 1")
    add("\\endif")
    return "\n".join(L) + "\n"


def queries_per_trial(W, S, variant="tune", reads_from_step=0, model_seconds=60.0, heartbeat=60.0):
    """The statements (without BEGIN/COMMIT) that make_script sends for one trial."""
    stale = min(1.0, model_seconds / heartbeat) if heartbeat > 0 else 0.0
    hb = len({max(1, min(S, round(k * heartbeat / model_seconds * S)))
              for k in range(1, int(model_seconds // heartbeat) + 1)}) if heartbeat > 0 else 0

    def hist(fresh):
        if variant == "batched":
            return 7
        return W + 1 + (5 * (W + fresh) if W + fresh <= PER_TRIAL_LOAD_LIMIT else 5)

    reads = S if not reads_from_step else max(0, S - reads_from_step)
    return (3 * stale + 1 + 5 + hist(max(1, math.ceil(W / (S + 1)))) + 2 + 2 * len(PARAMS)
            + 2 * S + 3 * hb + reads * hist(math.ceil(W / (S + 1))) + 4 + 6)


def work_based(r):
    """Trials/s and per-trial figures from the work the server did in the window (statements
    executed / statements per trial), which holds when trials take longer than the window
    (overload): completions in a window then miss the trials still under way."""
    q = queries_per_trial(r["workers"], r["steps"], r.get("variant", "tune"),
                          r.get("reads_from_step", 0), r["model_trial_seconds"], r["heartbeat_interval"])
    done = sum(st["calls"] for st in r["statements"] if classify(st["query"])[0] != "TXN")
    eq = done / q
    return {"queries_per_trial_script": q, "trial_equivalents": eq,
            "trials_per_s_work": eq / r["window_s"],
            "server_cpu_ms_per_trial_work": 1000 * r["server_cpu_s"] / eq if eq else float("nan"),
            "rows_per_trial_work": sum(st["rows"] for st in r["statements"]) / eq if eq else float("nan")}


def restore_study(srv, sid, n):
    """Deletes the trials numbered >= n (what a load run added) and resets the id sequence."""
    sub = f"(SELECT trial_id FROM trials WHERE study_id = {sid} AND number >= {n})"
    for t in ("trial_params", "trial_values", "trial_intermediate_values", "trial_user_attributes",
              "trial_system_attributes", "trial_heartbeats"):
        srv.psql(f"DELETE FROM {t} WHERE trial_id IN {sub}")
    srv.psql(f"DELETE FROM trials WHERE study_id = {sid} AND number >= {n}")
    srv.psql("SELECT setval('trials_trial_id_seq', (SELECT max(trial_id) FROM trials))")
    srv.psql("VACUUM ANALYZE")


def clone_study(srv, sid, target):
    """Grows the study to `target` trials by copying its trials (and their rows) with new numbers."""
    n0 = trial_count(srv, sid)
    while True:
        n = trial_count(srv, sid)
        if n >= target:
            break
        k = min(n0, target - n)
        shift_id = int(srv.psql("SELECT max(trial_id) FROM trials")[0][0])
        srv.psql(f"""
BEGIN;
INSERT INTO trials (trial_id, number, study_id, state, datetime_start, datetime_complete)
  SELECT trial_id + {shift_id}, number + {n}, study_id, state, datetime_start, datetime_complete
  FROM trials WHERE study_id = {sid} AND number < {k} AND state <> 'RUNNING';
INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json)
  SELECT c.trial_id + {shift_id}, param_name, param_value, distribution_json FROM trial_params c
  JOIN trials t USING (trial_id) WHERE t.study_id = {sid} AND t.number < {k} AND t.state <> 'RUNNING';
INSERT INTO trial_values (trial_id, objective, value, value_type)
  SELECT c.trial_id + {shift_id}, objective, value, value_type FROM trial_values c
  JOIN trials t USING (trial_id) WHERE t.study_id = {sid} AND t.number < {k} AND t.state <> 'RUNNING';
INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type)
  SELECT c.trial_id + {shift_id}, step, intermediate_value, intermediate_value_type
  FROM trial_intermediate_values c JOIN trials t USING (trial_id)
  WHERE t.study_id = {sid} AND t.number < {k} AND t.state <> 'RUNNING';
INSERT INTO trial_user_attributes (trial_id, "key", value_json)
  SELECT c.trial_id + {shift_id}, "key", value_json FROM trial_user_attributes c
  JOIN trials t USING (trial_id) WHERE t.study_id = {sid} AND t.number < {k} AND t.state <> 'RUNNING';
INSERT INTO trial_system_attributes (trial_id, "key", value_json)
  SELECT c.trial_id + {shift_id}, "key", value_json FROM trial_system_attributes c
  JOIN trials t USING (trial_id) WHERE t.study_id = {sid} AND t.number < {k} AND t.state <> 'RUNNING';
INSERT INTO trial_heartbeats (trial_id, heartbeat)
  SELECT c.trial_id + {shift_id}, heartbeat FROM trial_heartbeats c
  JOIN trials t USING (trial_id) WHERE t.study_id = {sid} AND t.number < {k} AND t.state <> 'RUNNING';
COMMIT;""")
        if trial_count(srv, sid) == n:
            raise RuntimeError("clone_study: no trials copied")
    # renumber densely (copies skipped RUNNING trials, which a finished base study has none of)
    srv.psql(f"""UPDATE trials t SET number = r.rn - 1 FROM
      (SELECT trial_id, row_number() OVER (ORDER BY number, trial_id) AS rn FROM trials
       WHERE study_id = {sid}) r WHERE t.trial_id = r.trial_id AND t.number <> r.rn - 1""")


def prepare_study(args, srv, size):
    """The study of `size` finished trials: tune-created (fast objective), cloned past 1000."""
    sid = study_id(srv, args.study)
    have = trial_count(srv, sid) if sid else 0
    base = min(size, args.base_trials)
    if have < base:
        tune = find_tune(args)
        if not tune:
            skip("no tune binary to create the study (build it, or pass --tune)")
        wdir = tempfile.mkdtemp(prefix="pg-load-workers-")
        path = os.path.join(wdir, "fast.json")
        json.dump(study_config(args.steps, 0.0, args.heartbeat), open(path, "w"), indent=1)
        log(f"creating the study with tune: {base} trials (fast objective, 2 workers)")
        wait_workers(start_workers(tune, srv, path, args.study, 2, n_trials=base, wdir=wdir), wdir)
        shutil.rmtree(wdir, ignore_errors=True)
        sid = study_id(srv, args.study)
    srv.psql(f"UPDATE trials SET state = 'FAIL', datetime_complete = LOCALTIMESTAMP "
             f"WHERE study_id = {sid} AND state = 'RUNNING'")
    if trial_count(srv, sid) < size:
        log(f"growing the study to {size} trials (copies of its trials)")
        clone_study(srv, sid, size)
    restore_study(srv, sid, size)
    return sid


def cpu_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        fields = s[s.rfind(")") + 2:].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def load_run(args, srv, sid, spec, out):
    """One pgbench run: spec = {size, workers, trial_seconds, duration, variant, reads_from_step}."""
    size, W, T = spec["size"], spec["workers"], spec["trial_seconds"]
    variant, reads_from_step = spec.get("variant", "tune"), spec.get("reads_from_step", 0)
    settings = spec.get("settings") or {}
    S = args.steps
    restore_study(srv, sid, size)
    if settings:
        srv.set_conf(**settings)
    offset = int(srv.psql(f"SELECT max(trial_id) - max(number) FROM trials WHERE study_id = {sid}")[0][0])
    if int(srv.psql("SELECT max(trial_id) FROM trials")[0][0]) != int(
            srv.psql(f"SELECT max(trial_id) FROM trials WHERE study_id = {sid}")[0][0]):
        raise RuntimeError("the study's last trial must hold the largest trial_id")
    script = make_script(W, S, T, args.model_seconds, args.heartbeat, sid, offset, args.lookback,
                         variant, reads_from_step)
    tag = f"n{size}-w{W}-t{T:g}-{variant}{reads_from_step or ''}" + "".join(
        f"-{k}{v}" for k, v in settings.items())
    rundir = tempfile.mkdtemp(prefix=f"pg-load-{tag}-")
    path = os.path.join(rundir, "trial.sql")
    open(path, "w").write(script)
    if args.keep_scripts:
        open(os.path.join(out, f"script-{tag}.sql"), "w").write(script)
    warm = args.warmup if args.warmup is not None else max(10.0, 1.5 * T)
    window = spec.get("duration", args.duration)
    total = int(math.ceil(warm + window + 2))
    argv = ["pgbench", "-n", "-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres",
            "-M", "prepared", "-c", str(W), "-j", str(min(W, args.threads)), "-T", str(total),
            "-D", "j=0", "-D", "first=1", "-l", "--log-prefix", os.path.join(rundir, "log"),
            "-f", path, "studies"]
    load0 = loadavg()
    log(f"load: study {size} trials, {W} workers, trials of {T:g} s ({S} steps), {variant}"
        + (f" reads from step {reads_from_step}" if reads_from_step else "")
        + "".join(f" {k}={v}" for k, v in settings.items()) + ", "
        f"{warm:.0f} s warm-up + {window:.0f} s measured; load average {load0:.2f}")
    t_start = time.time()
    pgb = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=rundir)
    deadline = time.time() + warm
    while time.time() < deadline and pgb.poll() is None:
        time.sleep(0.2)
    if pgb.poll() is not None:
        raise RuntimeError(f"pgbench stopped early ({pgb.returncode}): {pgb.stdout.read()[-1500:]}")
    stat_reset(srv)
    cpu0, c0, t0 = srv.cpu_seconds(), cpu_of(pgb.pid), time.time()
    time.sleep(window)
    cpu1, c1, t1 = srv.cpu_seconds(), cpu_of(pgb.pid), time.time()
    stats = stat_read(srv)
    n_study_end = trial_count(srv, sid)
    output, _ = pgb.communicate()
    load1 = loadavg()
    for k in settings:
        srv.psql(f"ALTER SYSTEM RESET {k}", db="postgres")
    if settings:
        srv.psql("SELECT pg_reload_conf()", db="postgres")
    if pgb.returncode != 0:
        log(f"pgbench exited {pgb.returncode}: {output[-1500:]}")
    # per-client runs -> trials of S+1 runs; storage time = run latencies minus the sleeps
    runs = {}
    for name in os.listdir(rundir):
        if not name.startswith("log."):
            continue
        for line in open(os.path.join(rundir, name)):
            f = line.split()
            if len(f) < 6:
                continue
            client, no, lat_us, end = int(f[0]), int(f[1]), int(f[2]), int(f[4]) + int(f[5]) / 1e6
            runs.setdefault(client, []).append((no, lat_us, end))
    storage_ms, ended = [], 0
    sleep_total = T  # S sleeps of T/S; the first trial's random start delay is left out below
    for client, rr in runs.items():
        rr.sort()
        for k in range(len(rr) // (S + 1)):
            part = rr[k * (S + 1):(k + 1) * (S + 1)]
            end = part[-1][2]
            if t0 <= end <= t1:
                ended += 1
                if k > 0:  # trial 0 holds the start-up delay
                    storage_ms.append((sum(p[1] for p in part) / 1e6 - sleep_total) * 1000)
    n = ended if ended > 0 else float("nan")
    queries = sum(s["calls"] for s in stats if classify(s["query"])[0] != "TXN")
    # pg_stat_statements does not see pgbench's BEGIN/COMMIT: count the script's transactions
    stale = min(1.0, args.model_seconds / args.heartbeat) if args.heartbeat > 0 else 0.0
    hb = int(args.model_seconds // args.heartbeat) if args.heartbeat > 0 else 0
    reads = S if not reads_from_step else max(0, S - reads_from_step)
    txn = 2 * n * (stale + 2 + 1 + 1 + len(PARAMS) + S + reads + min(hb, S) + 2)
    rows = sum(s["rows"] for s in stats)
    exec_ms = sum(s["exec_ms"] for s in stats)
    res = {
        "study_size": size, "study_size_end": n_study_end, "workers": W, "steps": S,
        "latency_samples": len(storage_ms),
        "variant": variant, "reads_from_step": reads_from_step, "settings": settings,
        "trial_seconds": T, "model_trial_seconds": args.model_seconds, "lookback": args.lookback,
        "heartbeat_interval": args.heartbeat, "window_s": t1 - t0, "trials": ended,
        "trials_per_s": ended / (t1 - t0),
        "demanded_trials_per_s": W / T,
        "queries_per_trial": queries / n, "begin_commit_per_trial": txn / n,
        "rows_per_trial": rows / n, "exec_ms_per_trial": exec_ms / n,
        "server_cpu_s": cpu1 - cpu0, "server_cpu_ms_per_trial": 1000 * (cpu1 - cpu0) / n,
        "server_cores_busy": (cpu1 - cpu0) / (t1 - t0),
        "pgbench_cpu_s": c1 - c0, "pgbench_cpu_ms_per_trial": 1000 * (c1 - c0) / n,
        "storage_ms_p50": percentile(storage_ms, 0.5), "storage_ms_p99": percentile(storage_ms, 0.99),
        "idle_note": "server_cpu_s includes the server's background processes",
        "storage_ms_mean": statistics.fmean(storage_ms) if storage_ms else float("nan"),
        "loadavg_start": load0, "loadavg_end": load1, "pgbench_rc": pgb.returncode,
        "pgbench_tail": output[-600:], "statements": stats,
    }
    log(f"  {res['trials_per_s']:.2f} trials/s (demanded {W / T:.2f}), {res['queries_per_trial']:.0f} "
        f"queries/trial, server CPU {res['server_cpu_ms_per_trial']:.1f} ms/trial "
        f"({res['server_cores_busy']:.2f} cores busy), storage p50 {res['storage_ms_p50']:.0f} ms "
        f"p99 {res['storage_ms_p99']:.0f} ms, pgbench {res['pgbench_cpu_ms_per_trial']:.1f} ms/trial, "
        f"load {load1:.2f}")
    shutil.rmtree(rundir, ignore_errors=True)
    return res


def load(args, specs, srv=None):
    own = False
    if srv is None:
        srv, own = open_server(args, "load")
    srv.db = "studies"
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    try:
        ensure_db(srv)
        path = os.path.join(out, "load.json")
        results = {"machine": machine_info(srv), "idle_server_cpu_s_per_s": idle_cpu(srv),
                   "runs": []}
        if os.path.exists(path) and args.append:
            results["runs"] = json.load(open(path))["runs"]
        sid, size_now = None, None
        for spec in specs:
            if spec["size"] != size_now:
                sid = prepare_study(args, srv, spec["size"])
                size_now = spec["size"]
            res = load_run(args, srv, sid, spec, out)
            results["runs"].append(res)
            json.dump(results, open(path, "w"), indent=1)
            write_load_csv(results, out)
        if sid:
            restore_study(srv, sid, size_now)
        return results
    finally:
        if own and not args.keep:
            srv.stop(remove=True)
        elif own:
            log(f"server kept: --server {srv.dir}")


def parse_list(text, cast=int):
    return [cast(x) for x in str(text).split(",") if x != ""]


def write_load_csv(results, out):
    cols = ["variant", "reads_from_step", "study_size", "study_size_end", "workers", "trial_seconds", "model_trial_seconds",
            "window_s", "trials", "trials_per_s", "demanded_trials_per_s", "queries_per_trial",
            "begin_commit_per_trial", "rows_per_trial", "exec_ms_per_trial", "server_cpu_ms_per_trial",
            "server_cores_busy", "pgbench_cpu_ms_per_trial", "storage_ms_p50", "storage_ms_p99",
            "storage_ms_mean", "loadavg_start", "loadavg_end"]
    with open(os.path.join(out, "load.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in results["runs"]:
            w.writerow([f"{r[c]:.4g}" if isinstance(r[c], float) else r[c] for c in cols])
    with open(os.path.join(out, "load-statements.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["study_size", "workers", "kind", "table", "calls_per_trial", "rows_per_trial",
                    "exec_ms_per_trial", "query"])
        for r in results["runs"]:
            n = max(r["trials"], 1)
            for s in r["statements"]:
                kind, table = classify(s["query"])
                w.writerow([r["study_size"], r["workers"], kind, table, f"{s['calls'] / n:.3f}",
                            f"{s['rows'] / n:.2f}", f"{s['exec_ms'] / n:.4f}", s["query"]])


# ------------------------------------------------------------------------------------------

def run_all(args):
    """capture, then the load runs listed in the usage (module docstring); then summary.md."""
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    if args.server:
        srv, own = Server(args.server).attach(), False
    else:
        srv, own = Server(tempfile.mkdtemp(prefix="pg-load-all-")).start(), True
    try:
        t = args.trial_seconds or 6.0
        workers = parse_list(args.workers or "8,32,128,256")
        sizes = parse_list(args.study_size or "1000,5000")
        if not args.skip_capture:
            cap = argparse.Namespace(**vars(args))
            cap.workers = args.capture_workers
            cap.trial_seconds = 1.5
            capture(cap, srv)
        m = args.model_seconds
        specs = [{"size": n, "workers": w, "trial_seconds": t} for n in sizes for w in workers]
        big, many = sizes[-1], [x for x in workers if x >= 128]
        for w in many:
            specs += [{"size": big, "workers": w, "trial_seconds": t, "variant": "batched"},
                      {"size": big, "workers": w, "trial_seconds": t, "reads_from_step": 5},
                      {"size": big, "workers": w, "trial_seconds": t, "variant": "batched",
                       "reads_from_step": 5},
                      {"size": big, "workers": w, "trial_seconds": t,
                       "settings": {"random_page_cost": "1.1"}}]
        if not args.quick:
            # c(W) where the server keeps up: uncompressed (and 3x longer) trials
            for n in sizes:
                specs += [{"size": n, "workers": w, "trial_seconds": m, "duration": 3 * m}
                          for w in many[:1]]
                specs += [{"size": n, "workers": w, "trial_seconds": 3 * m, "duration": 6 * m}
                          for w in many[1:]]
            for w in many[-1:]:
                specs += [{"size": big, "workers": w, "trial_seconds": m, "duration": 3 * m},
                          {"size": big, "workers": w, "trial_seconds": m, "duration": 3 * m,
                           "variant": "batched"},
                          {"size": big, "workers": w, "trial_seconds": m, "duration": 3 * m,
                           "variant": "batched", "reads_from_step": 5},
                          {"size": big, "workers": w, "trial_seconds": m, "duration": 3 * m,
                           "settings": {"random_page_cost": "1.1"}}]
        specs.sort(key=lambda sp: sp["size"])  # grow the study once
        load(args, specs, srv)
        summarize(out)
    finally:
        if own and not args.keep:
            srv.stop(remove=True)
        elif own:
            log(f"server kept: --server {srv.dir}")


def saturation(points, T, P):
    """Workers W at which W/T trials/s need P cores, c(W) interpolated linearly between the
    measured (W, cpu s per trial) points and extrapolated from the last two."""
    pts = sorted(points)
    if len(pts) < 2:
        return None
    def c(w):
        for (w0, c0), (w1, c1) in zip(pts, pts[1:]):
            if w <= w1:
                return c0 + (c1 - c0) * (w - w0) / (w1 - w0)
        (w0, c0), (w1, c1) = pts[-2], pts[-1]
        return c1 + (c1 - c0) * (w - w1) / (w1 - w0)
    w = 1.0
    while w < 100000:
        if w * c(w) / T >= P:
            return w
        w += 1
    return None


def summarize(out):
    """summary.md (and summary.json) from capture.json and load.json in `out`."""
    lines = []
    add = lines.append
    summary = {}
    cap_path, load_path = os.path.join(out, "capture.json"), os.path.join(out, "load.json")
    if os.path.exists(cap_path):
        cap = json.load(open(cap_path))
        add("## Capture: real tune workers\n")
        add("| study size | workers | trial s | trials | reports/trial | queries/trial | BEGIN+COMMIT/trial | rows/trial | server CPU ms/trial |")
        add("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for ph in cap["phases"]:
            sm = ph["summary"]
            add(f"| {ph['study_size']} | {ph['workers']} | {ph['trial_seconds']:.1f} | {ph['trials']} | "
                f"{ph['reports_per_trial']:.1f} | {sm['queries_per_trial']:.0f} | "
                f"{sm['statements_per_trial'] - sm['queries_per_trial']:.0f} | {sm['rows_per_trial']:.0f} | "
                f"{sm['server_cpu_ms_per_trial']:.1f} |")
        add("")
        for ph in cap["phases"]:
            n = max(ph["trials"], 1)
            add(f"### Capture: statements per trial, study size {ph['study_size']}, {ph['workers']} worker(s)\n")
            add("| calls/trial | rows/trial | exec ms/trial | kind | table | statement |")
            add("|---:|---:|---:|---|---|---|")
            for st in sorted(ph["statements"], key=lambda x: -x["calls"]):
                if st["calls"] / n < 0.05:
                    continue
                kind, table = classify(st["query"])
                add(f"| {st['calls'] / n:.2f} | {st['rows'] / n:.1f} | {st['exec_ms'] / n:.2f} | {kind} | "
                    f"{table} | `{st['query'][:90]}` |")
            add("")
    if os.path.exists(load_path):
        ld = json.load(open(load_path))
        runs = ld["runs"]
        add("## Load: pgbench workers\n")
        add("Per trial from the work done in the window (statements executed / the script's "
            "statements per trial); completed trials and the measured statements per completed "
            "trial in brackets (equal in steady state).\n")
        add("| study size | variant | workers | trial s | trials/s: done (completed) | demanded | queries/trial: script (measured) | rows/trial | server CPU ms/trial | server cores busy | pgbench CPU ms/trial | storage p50 / p99 ms (trials) | load avg |")
        add("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in runs:
            r.update(work_based(r))
            var = r.get("variant", "tune") + (f", reads from step {r['reads_from_step']}" if r.get("reads_from_step") else "")
            var += "".join(f", {k} = {v}" for k, v in (r.get("settings") or {}).items())
            add(f"| {r['study_size']} | {var} | {r['workers']} | {r['trial_seconds']:g} | "
                f"{r['trials_per_s_work']:.2f} ({r['trials_per_s']:.2f}) | {r['demanded_trials_per_s']:.2f} | "
                f"{r['queries_per_trial_script']:.0f} ({r['queries_per_trial']:.0f}) | "
                f"{r['rows_per_trial_work']:.0f} | {r['server_cpu_ms_per_trial_work']:.0f} | "
                f"{r['server_cores_busy']:.2f} | {1000 * r['pgbench_cpu_s'] / r['trial_equivalents']:.0f} | "
                f"{r['storage_ms_p50']:.0f} / {r['storage_ms_p99']:.0f} ({r.get('latency_samples', '?')}) | "
                f"{r['loadavg_start']:.1f}–{r['loadavg_end']:.1f} |")
        add("")
        base = [r for r in runs if r.get("variant", "tune") == "tune" and not r.get("reads_from_step")
                and not r.get("settings") and r["steps"] == 10]

        def kept_up(r):
            return r["trials_per_s_work"] >= 0.9 * r["demanded_trials_per_s"]

        def pick(cands):
            """The run that measures c(W) best: one that kept up (the longest trials), else the
            one with the longest trials (flagged): overload itself costs CPU per trial."""
            ok = [r for r in cands if kept_up(r)]
            return max(ok or cands, key=lambda r: (r["trial_seconds"], r["window_s"]))

        summary["saturation"] = {}
        add("Server CPU per trial c(W) for the saturation estimate (per study size and workers, "
            "the run that kept up with the demanded trials/s, the longest trials first; * = none "
            "kept up, overload inflates c):\n")
        add("| study size | workers | trial s of the run | server CPU ms/trial | cores needed at 60-s trials |")
        add("|---:|---:|---:|---:|---:|")
        for n in sorted({r["study_size"] for r in base}):
            pts = []
            for w in sorted({r["workers"] for r in base if r["study_size"] == n}):
                r = pick([r for r in base if r["study_size"] == n and r["workers"] == w])
                c = r["server_cpu_ms_per_trial_work"] / 1000
                pts.append((w, c))
                add(f"| {n} | {w} | {r['trial_seconds']:g}{'' if kept_up(r) else ' *'} | {1000 * c:.0f} | "
                    f"{w * c / 60:.2f} |")
            for T, P in ((60.0, 2), (60.0, 1), (60.0, 4), (300.0, 2)):
                w = saturation(pts, T, P)
                summary["saturation"][f"N={n} T={T:g} P={P}"] = w
            summary["saturation"][f"N={n} c(W)"] = pts
        add("")
        for key, w in summary["saturation"].items():
            if "c(W)" not in key:
                add(f"- {key}: saturates at about {w} workers")
        for n in sorted({r["study_size"] for r in base}):
            for T in sorted({r["trial_seconds"] for r in base if r["study_size"] == n}):
                rs = sorted([r for r in base if r["study_size"] == n and r["trial_seconds"] == T],
                            key=lambda r: r["workers"])
                add(f"- study size {n}, {T:g}-s trials on this machine: kept up (>= 90 % of the demanded "
                    f"trials/s) at {[r['workers'] for r in rs if kept_up(r)]}, not at "
                    f"{[r['workers'] for r in rs if not kept_up(r)]}")
        add("")
        # dominant statements: the largest run that kept up
        steady = [r for r in base if kept_up(r)]
        for r in sorted(steady, key=lambda r: (r["study_size"], r["workers"]))[-2:]:
            n = r["trial_equivalents"]
            tot = sum(st["exec_ms"] for st in r["statements"]) or 1
            add(f"### Dominant statements: study size {r['study_size']}, {r['workers']} workers, "
                f"{r['trial_seconds']:g}-s trials (kept up)\n")
            add("| share of exec time | calls/trial | rows/trial | exec ms/trial | statement |")
            add("|---:|---:|---:|---:|---|")
            for st in sorted(r["statements"], key=lambda x: -x["exec_ms"])[:10]:
                add(f"| {100 * st['exec_ms'] / tot:.0f} % | {st['calls'] / n:.1f} | {st['rows'] / n:.0f} | "
                    f"{st['exec_ms'] / n:.1f} | `{st['query'][:100]}` |")
            add("")
    val_path = os.path.join(out, "load-validate.json")
    if os.path.exists(val_path) and os.path.exists(cap_path):
        add("## Generator vs real workers (same workers, trial length and study size; 7 reports)\n")
        add("| workers | real: queries/trial | real: rows/trial | real: server CPU ms/trial | pgbench: queries/trial | pgbench: rows/trial | pgbench: server CPU ms/trial |")
        add("|---:|---:|---:|---:|---:|---:|---:|")
        for r in json.load(open(val_path))["runs"]:
            r.update(work_based(r))
            for ph in cap["phases"]:
                if ph["workers"] == r["workers"]:
                    sm = ph["summary"]
                    add(f"| {r['workers']} | {sm['queries_per_trial']:.0f} | {sm['rows_per_trial']:.0f} | "
                        f"{sm['server_cpu_ms_per_trial']:.0f} | {r['queries_per_trial_script']:.0f} | "
                        f"{r['rows_per_trial_work']:.0f} | {r['server_cpu_ms_per_trial_work']:.0f} |")
        add("")
    if os.path.exists(load_path):
        summary["runs"] = [{k: v for k, v in r.items() if k not in ("statements", "pgbench_tail")}
                           for r in runs]
    open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
    json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
    print("\n".join(lines))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "objective":
        objective_main()
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["all", "capture", "load", "server", "summary"])
    ap.add_argument("rest", nargs="*")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-results", "pg-load"))
    ap.add_argument("--server", help="a server directory from `server start DIR`")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--tune")
    ap.add_argument("--study", default="pg_load")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--heartbeat", type=float, default=60)
    ap.add_argument("--trial-seconds", type=float, default=None)
    # capture
    ap.add_argument("--sizes", default="0,100,1000")
    ap.add_argument("--workers", default=None)
    ap.add_argument("--phase-seconds", type=float, default=60)
    ap.add_argument("--no-log-statements", dest="log_statements", action="store_false",
                    help="capture: do not log the first phase's statements in order")
    # load
    ap.add_argument("--study-size", default=None, help="load: 1000; all: 1000,5000")
    ap.add_argument("--base-trials", type=int, default=1000,
                    help="load: trials run by tune for the study; larger sizes copy them")
    ap.add_argument("--model-seconds", type=float, default=60,
                    help="load: the real trial duration the heartbeats are counted for")
    ap.add_argument("--duration", type=float, default=60, help="load: measured seconds per run")
    ap.add_argument("--lookback", type=float, default=2.0,
                    help="load: History's child joins read the trials from lookback*W before the "
                         "newest (real workers: about 2, bench/data/.../capture-statements.csv)")
    ap.add_argument("--warmup", type=float, default=None)
    ap.add_argument("--threads", type=int, default=2, help="load: pgbench threads")
    ap.add_argument("--variant", choices=["tune", "batched"], default="tune",
                    help="load: tune's History reads, or the batched proposal")
    ap.add_argument("--reads-from-step", type=int, default=0,
                    help="load: proposal: the pruner's reads only after steps >= K")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="load: a server setting for the runs (ALTER SYSTEM; reset after), "
                         "e.g. random_page_cost=1.1")
    ap.add_argument("--keep-scripts", action="store_true")
    ap.add_argument("--append", action="store_true", help="load: add to the runs in OUT/load.json")
    # all
    ap.add_argument("--capture-workers", default="1,8,32,64")
    ap.add_argument("--skip-capture", action="store_true")
    ap.add_argument("--quick", action="store_true", help="all: no uncompressed 60-s runs")
    args = ap.parse_args()
    if args.command == "server":
        if len(args.rest) != 2 or args.rest[0] not in ("start", "stop"):
            ap.error("server start DIR | server stop DIR")
        srv = Server(args.rest[1])
        if args.rest[0] == "start":
            srv.start()
            ensure_db(srv)
            print(srv.dir)
        else:
            srv.attach().stop()
        return
    if args.command == "capture":
        args.workers = args.workers or "1,8,32"
        args.trial_seconds = args.trial_seconds or 1.5
        capture(args)
    elif args.command == "load":
        settings = dict(kv.split("=", 1) for kv in args.set)
        specs = [{"size": n, "workers": w, "trial_seconds": args.trial_seconds or 6.0,
                  "variant": args.variant, "reads_from_step": args.reads_from_step,
                  "settings": settings, "duration": args.duration}
                 for n in parse_list(args.study_size or "1000")
                 for w in parse_list(args.workers or "8,32,128,256")]
        load(args, specs)
    elif args.command == "all":
        run_all(args)
    elif args.command == "summary":
        summarize(os.path.abspath(args.out))


if __name__ == "__main__":
    main()
