#!/usr/bin/env python3
"""tune's tracking against the real parts (docs/config.md, "tracking").

A real `mlflow server` (tune's Python environment: SQLite backend, loopback, a free port) records
a study whose command objective gives COMPLETE, pruned (the median pruner), out-of-memory and
failed trials; MLflow's own client (mlflow.search_runs, MlflowClient.get_metric_history) reads
back every run, param, metric step and status, and they equal tune's storage. Then the server is
stopped in the middle of a second study: the study goes on and ends 0, with a warning and the
count of trials not recorded; with the server back, `tune export --mlflow` records exactly those.
TensorBoard's EventAccumulator reads every scalar of both studies' runs back equal (as float32),
and those of a train trial's history (a study Optuna writes with the "train" attribute, exported
with `tune export --tensorboard`).

    tracking_peer_test.py TUNE [VENV_PYTHON]

Exit 77 (skipped, with a banner) without tune's Python environment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
import venv_python  # noqa: E402

TUNE = os.path.abspath(sys.argv[1])
PYTHON = venv_python.find("tracking_peers", sys.argv[2] if len(sys.argv) > 2 else None,
                          ("mlflow", "tensorboard"))
venv_python.run_here(PYTHON)

import numpy as np  # noqa: E402

STATUS = {"COMPLETE": "FINISHED", "FAIL": "FAILED", "PRUNED": "KILLED"}

# The trial program: argv kind x. ok: three steps then a value; bad: a poor first step, then
# waits to be pruned; oom: CUDA's message on stderr (PRUNED, reason oom); fail: exit 3 (FAIL).
TRIAL_SH = r"""#!/bin/sh
kind=$1; x=$2
sleep "${TRIAL_SLEEP:-0}"
case "$kind" in
  ok)   for s in 0 1 2; do echo "{\"step\": $s, \"value\": $(awk "BEGIN { print $x + 1 / ($s + 1) }")}"; done
        echo "{\"value\": $x}" ;;
  bad)  echo '{"step": 0, "value": 100.5}'; sleep 30 ;;
  oom)  echo 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 1 ;;
  fail) echo 'boom' >&2; exit 3 ;;
esac
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    def __init__(self, tmp: str):
        self.tmp, self.port, self.proc = tmp, free_port(), None
        self.uri = f"http://127.0.0.1:{self.port}"

    def start(self):
        log = open(os.path.join(self.tmp, "mlflow-server.log"), "ab")
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "1", "--backend-store-uri", f"sqlite:///{self.tmp}/mlflow.db",
             "--default-artifact-root", f"{self.tmp}/artifacts"],
            stdout=log, stderr=log, start_new_session=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"mlflow server exited {self.proc.returncode}: see {log.name}")
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        sys.exit("mlflow server did not answer /health in 120 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def write_config(tmp: str, name: str, trials: list, mlflow_uri: str, tb_dir: str) -> str:
    script = os.path.join(tmp, "trial.sh")
    with open(script, "w") as f:
        f.write(TRIAL_SH)
    os.chmod(script, 0o755)
    config = {
        "direction": "minimize",
        "sampler": {"name": "random", "seed": 0},
        "pruner": {"name": "median", "n_startup_trials": 2, "n_warmup_steps": 0},
        "search_space": {"kind": {"type": "categorical", "choices": ["ok", "bad", "oom", "fail"]},
                         "x": {"type": "float", "low": 0.0, "high": 1.0}},
        "objective": {"type": "command", "argv": ["/bin/sh", script, "{kind}", "{x}"]},
        "enqueue_trials": [{"kind": k, "x": x} for k, x in trials],
        "n_trials": len(trials),
        "tracking": {"mlflow": {"uri": mlflow_uri}, "tensorboard": tb_dir},
    }
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def run_tune(args: list, env=None) -> subprocess.CompletedProcess:
    r = subprocess.run([TUNE] + args, capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, **(env or {})))
    return r


def stored_trials(storage: str, study: str) -> list:
    r = run_tune(["export", "--study", study, "--storage", storage, "--format", "json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["trials"]


def check_mlflow(uri: str, study: str, trials: list) -> dict:
    """Every finished trial of tune's storage is one run with its params, metric steps, status."""
    import mlflow
    from mlflow.tracking import MlflowClient
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    runs = mlflow.search_runs(experiment_names=[study], output_format="list", max_results=10000)
    by_number = {int(r.data.tags["tune.trial_number"]): r for r in runs}
    finished = [t for t in trials if t["state"] in STATUS]
    assert sorted(by_number) == sorted(t["number"] for t in finished), \
        (sorted(by_number), [t["number"] for t in finished])
    assert len(runs) == len(finished), "one run per trial"
    statuses = {}
    for t in finished:
        run = by_number[t["number"]]
        assert run.info.run_name == str(t["number"])
        assert run.info.status == STATUS[t["state"]], (t["number"], run.info.status, t["state"])
        statuses[run.info.status] = statuses.get(run.info.status, 0) + 1
        assert run.data.tags["state"] == t["state"]
        want_params = {k: str(v) for k, v in t["params"].items()}
        assert run.data.params == want_params, (run.data.params, want_params)
        history = client.get_metric_history(run.info.run_id, "intermediate_value")
        got = sorted((m.step, m.value) for m in history)
        want = sorted((int(s), v) for s, v in t["intermediate_values"].items())
        assert got == want, (t["number"], got, want)
        if t["state"] == "COMPLETE":
            assert run.data.metrics["value"] == t["value"], (run.data.metrics, t["value"])
        else:
            assert "value" not in run.data.metrics
        reason = run.data.tags.get("reason")
        # A trial the pruner stopped: its name, live and from `tune export` alike (tune records
        # it on the trial: system attribute pruned_by).
        want = [t["user_attrs"]["reason"]] if "reason" in t["user_attrs"] else \
            ["median"] if t["state"] == "PRUNED" else [None]
        assert reason in want, (t["number"], reason, want)
    exp = client.get_experiment_by_name(study)
    counts = {s: sum(t["state"] == s for t in finished) for s in STATUS}
    for s, n in counts.items():
        assert exp.tags[f"tune.trials.{s}"] == str(n), (exp.tags, counts)
    return {"statuses": statuses, "by_number": by_number, "client": client}


def check_tensorboard(tb_dir: str, study: str, trials: list):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    n_scalars = 0
    best = None
    for t in sorted(trials, key=lambda t: t["number"]):
        if t["state"] not in STATUS:
            continue
        ea = EventAccumulator(os.path.join(tb_dir, study, f"trial_{t['number']}"),
                              size_guidance={"scalars": 0})
        ea.Reload()
        tags = ea.Tags()["scalars"]
        want = sorted((int(s), np.float32(v)) for s, v in t["intermediate_values"].items())
        got = sorted((e.step, np.float32(e.value)) for e in ea.Scalars("intermediate_value")) \
            if "intermediate_value" in tags else []
        assert got == want, (t["number"], got, want)
        n_scalars += len(got)
        if t["state"] == "COMPLETE":
            (e,) = ea.Scalars("value")
            assert np.float32(e.value) == np.float32(t["value"])
            n_scalars += 1
            best = t["value"] if best is None else min(best, t["value"])
    ea = EventAccumulator(os.path.join(tb_dir, study, "study"), size_guidance={"scalars": 0})
    ea.Reload()
    got_best = [np.float32(e.value) for e in ea.Scalars("best_value")]
    assert got_best[-1] == np.float32(best), (got_best, best)
    return n_scalars


def train_history_study(tmp: str, storage: str, tb_dir: str):
    """A train trial's history (written by Optuna) through `tune export --tensorboard`."""
    import optuna
    history = [{"epoch": e, "train_loss": 1.0 / (e + 1), "validation_loss": 0.9 / (e + 1),
                "accuracy": 0.5 + 0.1 * e, "macro_f1": 0.4 + 0.1 * e,
                "optimizer_steps": 25 * (e + 1), "learning_rate": 2e-5 * (3 - e),
                "seconds": 1.0, "eval_seconds": 0.1} for e in range(3)]
    study = optuna.create_study(study_name="trained", storage=storage, direction="maximize")
    study.add_trial(optuna.trial.create_trial(
        params={"lr": 2e-5}, distributions={"lr": optuna.distributions.FloatDistribution(
            1e-6, 1e-3, log=True)}, value=0.6, intermediate_values={0: 0.4, 1: 0.5, 2: 0.6},
        user_attrs={"train": {"history": history, "metric": "macro_f1"}}))
    r = run_tune(["export", "--study", "trained", "--storage", storage, "--tensorboard", tb_dir])
    assert r.returncode == 0, r.stderr
    again = run_tune(["export", "--study", "trained", "--storage", storage, "--tensorboard", tb_dir])
    assert again.returncode == 2 and "already holds event files of study 'trained'" in again.stderr, \
        again.stderr  # a second set of files would show every trial twice
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(os.path.join(tb_dir, "trained", "trial_0"), size_guidance={"scalars": 0})
    ea.Reload()
    names = {"train/loss": "train_loss", "eval/loss": "validation_loss",
             "eval/accuracy": "accuracy", "eval/macro_f1": "macro_f1",
             "train/learning_rate": "learning_rate"}
    assert set(names) <= set(ea.Tags()["scalars"]), ea.Tags()["scalars"]
    for tag, key in names.items():
        got = [(e.step, np.float32(e.value)) for e in ea.Scalars(tag)]
        want = [(h["optimizer_steps"], np.float32(h[key])) for h in history]
        assert got == want, (tag, got, want)
    epochs = [(e.step, e.value) for e in ea.Scalars("train/epoch")]
    assert epochs == [(25, 1.0), (50, 2.0), (75, 3.0)], epochs
    print(f"TensorBoard: a train trial's {len(names) + 1} histories of 3 steps read back equal "
          f"(tags: {', '.join(sorted(ea.Tags()['scalars']))})")


def main():
    with tempfile.TemporaryDirectory(prefix="tune-tracking-") as tmp:
        server = MlflowServer(tmp)
        start = time.time()
        server.start()
        print(f"mlflow server {server.uri} up in {time.time() - start:.1f}s")
        storage = f"sqlite:///{tmp}/tune.db"
        tb_dir = os.path.join(tmp, "tb")
        try:
            # 1. Every outcome, read back by MLflow's client.
            trials = [("ok", 0.1), ("ok", 0.2), ("ok", 0.3), ("bad", 0.5), ("oom", 0.6),
                      ("fail", 0.7), ("ok", 0.05), ("bad", 0.8)]
            config = write_config(tmp, "outcomes", trials, server.uri, tb_dir)
            r = run_tune(["--study", "outcomes", "--config", config, "--storage", storage])
            assert r.returncode == 0, r.stderr
            stored = stored_trials(storage, "outcomes")
            got = check_mlflow(server.uri, "outcomes", stored)
            print(f"MLflow runs by status: {dict(sorted(got['statuses'].items()))} "
                  f"(tune: {dict(sorted((s, sum(t['state'] == s for t in stored)) for s in STATUS))})")
            want = {}
            for t in stored:
                want[STATUS[t["state"]]] = want.get(STATUS[t["state"]], 0) + 1
            assert got["statuses"] == want and set(want) == set(STATUS.values()), got["statuses"]
            reasons = sorted({t["user_attrs"].get("reason", "") for t in stored} - {""})
            assert reasons == ["oom"], reasons  # and the pruner's, checked per run above
            t0 = got["by_number"][0]
            hist = got["client"].get_metric_history(t0.info.run_id, "intermediate_value")
            print("trial 0's intermediate_value history: "
                  + ", ".join(f"step {m.step}: {m.value:.6g}" for m in sorted(hist, key=lambda m: m.step))
                  + f"; value {t0.data.metrics['value']}; params {t0.data.params}")
            n = check_tensorboard(tb_dir, "outcomes", stored)
            print(f"TensorBoard: {n} scalars of {len(stored)} trials and the study's best_value "
                  f"read back equal")

            # 2. The server stopped mid-study.
            trials = [("ok", 0.01 * i) for i in range(12)]
            config = write_config(tmp, "outage", trials, server.uri, tb_dir)
            proc = subprocess.Popen([TUNE, "--study", "outage", "--config", config, "--storage",
                                     storage], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=dict(os.environ, TRIAL_SLEEP="0.4"))
            import mlflow
            mlflow.set_tracking_uri(server.uri)
            deadline = time.time() + 60
            while time.time() < deadline:
                exp = mlflow.get_experiment_by_name("outage")
                if exp and len(mlflow.search_runs([exp.experiment_id], output_format="list")) >= 3:
                    break
                time.sleep(0.1)
            server.stop()
            out, err = proc.communicate(timeout=120)
            print("--- tune's stderr with the server stopped after 3 runs (tracking lines) ---")
            for line in err.splitlines():
                if "MLflow" in line or "This run" in line:
                    print(line)
            assert proc.returncode == 0, err
            assert "not recorded" in err, err
            stored = stored_trials(storage, "outage")
            assert sum(t["state"] in STATUS for t in stored) == 12, "the study went on"
            server.start()
            r = run_tune(["export", "--study", "outage", "--storage", storage,
                          "--mlflow", server.uri])
            print("--- tune export --mlflow with the server back ---\n" + r.stderr.strip())
            assert r.returncode == 0, r.stderr
            got = check_mlflow(server.uri, "outage", stored)
            assert sum(got["statuses"].values()) == 12, got["statuses"]
            r = run_tune(["export", "--study", "outage", "--storage", storage,
                          "--mlflow", server.uri])
            assert r.returncode == 0 and "recorded 0 trial(s)" in r.stderr, r.stderr
            check_mlflow(server.uri, "outage", stored)  # still one run per trial

            # 3. Two workers of one study, at once: every trial of both is a run, and the
            # experiment's counts are the whole study's (the last worker to end sets them from
            # the storage).
            config = write_config(tmp, "workers", [], server.uri, tb_dir)
            with open(config) as f:
                doc = json.load(f)
            doc["search_space"]["kind"]["choices"] = ["ok"]
            doc["pruner"] = {"name": "nop"}
            doc["n_trials"] = 8  # the study's, over both workers
            with open(config, "w") as f:
                json.dump(doc, f)
            env = dict(os.environ, TRIAL_SLEEP="0.2")
            workers = [subprocess.Popen([TUNE, "--study", "workers", "--config", config,
                                         "--storage", storage], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=env)
                       for _ in range(2)]
            for w in workers:
                _, err = w.communicate(timeout=120)
                assert w.returncode == 0, err
            stored = stored_trials(storage, "workers")
            assert sum(t["state"] == "COMPLETE" for t in stored) >= 8, stored
            got = check_mlflow(server.uri, "workers", stored)  # the counts too
            exp = got["client"].get_experiment_by_name("workers")
            print(f"two workers: {len(got['by_number'])} runs; experiment counts "
                  f"{ {k: v for k, v in sorted(exp.tags.items()) if k.startswith('tune.trials')} }")

            # 4. A train trial's history in TensorBoard.
            train_history_study(tmp, storage, tb_dir)
        finally:
            server.stop()
    print("tracking_peers: OK")


if __name__ == "__main__":
    main()
