"""tune_trial.py, the module for users' training scripts, through the real tune binary.

1. Outside a trial the module is inert: params() gives the defaults, reports print nothing.
2. The Hugging Face Trainer adapter reports, prunes and finishes through the protocol.
3. A plain PyTorch loop (tests/data/torch_loop.py, Debian's python3-torch) runs as a command
   objective under --jobs 2 with a memory section: its intermediate values are stored, a trial
   the threshold pruner stops ends early, a real out-of-memory error of PyTorch's CPU allocator
   (an address-space limit, RLIMIT_AS) is recorded PRUNED with its config and the study goes on,
   and the peaks are recorded on the trials.

Usage: tune_trial_test.py TUNE_BINARY SOURCE_DIR. Skips (exit 77) without python3-torch.
"""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def load_module(tune):
    where = subprocess.run([tune, "python-path"], capture_output=True, text=True, check=True)
    path = os.path.join(where.stdout.strip(), "tune_trial.py")
    assert os.path.isfile(path), path
    spec = importlib.util.spec_from_file_location("tune_trial", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_outside_a_trial(tt):
    for var in [v for v in os.environ if v.startswith("TUNE_")]:
        del os.environ[var]
    assert not tt.in_trial()
    assert tt.params({"lr": 0.1}) == {"lr": 0.1}
    assert tt.memory_budget() is None and tt.number() is None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tt.report(0.5, 0)
        tt.finish(0.5)
        tt.set_constraint("latency", 0.1)
    assert out.getvalue() == "", out.getvalue()
    assert tt.should_prune() is False
    assert issubclass(tt.TrialPruned, SystemExit) and tt.TrialPruned().code == 0
    for bad in (-1, 1.5, True):
        try:
            tt.report(0.5, bad)
        except ValueError:
            continue
        raise AssertionError(f"report accepted step {bad!r}")
    print("outside a trial: inert, as documented")


ADAPTER_PROGRAM = r"""
import sys, types
if "--stub" in sys.argv:  # transformers is not installed: its base class only
    sys.modules["transformers"] = types.SimpleNamespace(TrainerCallback=object)
import tune_trial
# --best: load_best_model_at_end, and the Trainer kept step 10's checkpoint as the best.
args = types.SimpleNamespace(metric_for_best_model="accuracy",
                             load_best_model_at_end="--best" in sys.argv)
control = types.SimpleNamespace(should_training_stop=False)
cb = tune_trial.hf_callback()
for step, acc in ((10, 0.5), (20, 0.75)):
    cb.on_evaluate(args, types.SimpleNamespace(global_step=step), control,
                   metrics={"eval_loss": 1.0, "eval_accuracy": acc})
end = types.SimpleNamespace(global_step=20, best_global_step=10,
                            best_model_checkpoint="out/checkpoint-10")
cb.on_train_end(args, end, control)
"""


def check_trainer_adapter(tt_dir, work):
    """hf_callback's reports, prune and final value through tune's protocol, with transformers'
    TrainerCallback when it is importable, else a stand-in base class (the callback's own logic
    is what runs; a real Trainer drives it in the python_trainer test): the value is the last
    evaluation's, or with load_best_model_at_end the evaluation the Trainer kept."""
    real = subprocess.run(["/usr/bin/python3", "-c", "import transformers"],
                          capture_output=True).returncode == 0
    pruner = os.path.join(work, "pruner.jsonl")
    env = dict(os.environ, PYTHONPATH=tt_dir, TUNE_TRIAL_NUMBER="0", TUNE_PRUNER_FILE=pruner)
    argv = ["/usr/bin/python3", "-c", ADAPTER_PROGRAM] + ([] if real else ["--stub"])
    for answers, expected_code in (([False, False], 0), ([True], 0)):
        with open(pruner, "w") as f:
            for step, prune in zip((10, 20), answers):
                f.write(json.dumps({"step": step, "prune": prune}) + "\n")
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert run.returncode == expected_code, run.stderr
        lines = [json.loads(x) for x in run.stdout.splitlines()]
        if answers == [True]:  # pruned at the first evaluation: no second report, no value
            assert lines == [{"step": 10, "value": 0.5}], lines
        else:
            assert lines == [{"step": 10, "value": 0.5}, {"step": 20, "value": 0.75},
                             {"value": 0.75}], lines
    with open(pruner, "w") as f:
        f.write("".join(json.dumps({"step": s, "prune": False}) + "\n" for s in (10, 20)))
    run = subprocess.run(argv + ["--best"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1]) == {"value": 0.5}, run.stdout
    print("Trainer adapter: reports eval_accuracy at global_step, prunes, finishes with the last "
          "evaluation (load_best_model_at_end: the kept one) "
          f"({'transformers' if real else 'stand-in TrainerCallback: transformers not installed'})")


def run_study(tune, source, work):
    config = {
        "direction": "maximize",
        "n_trials": 6,
        "sampler": {"name": "random", "seed": 2},
        "pruner": {"name": "threshold", "lower": 0.7, "n_warmup_steps": 1},
        "search_space": {
            "lr": {"type": "float", "low": 0.01, "high": 0.1, "log": True},
            "hidden": [16, 32, 65536],
            "batch_size": [64, 1536],
        },
        "enqueue_trials": [
            {"lr": 0.03, "hidden": 32, "batch_size": 64},      # learns: COMPLETE
            {"lr": 1e-7, "hidden": 16, "batch_size": 64},      # stays at chance: pruned
            {"lr": 0.03, "hidden": 65536, "batch_size": 1536},  # out of memory
            {"lr": 0.05, "hidden": 16, "batch_size": 64},      # the study goes on
        ],
        "objective": {
            "type": "command",
            "argv": ["/usr/bin/python3", os.path.join(source, "tests/data/torch_loop.py")],
            "env": {"TORCH_LOOP_ADDRESS_SPACE_MIB": "256"},
            "timeout": 300,
            "memory": {"device_memory": "8GiB", "device": "cpu", "model": "torch-loop",
                       "batch_size": "{batch_size}", "boundary_probes": False},
        },
    }
    path = os.path.join(work, "loop.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    storage = "sqlite:///" + os.path.join(work, "loop.db")
    run = subprocess.run([tune, "--study", "loop", "--config", path, "--storage", storage,
                          "--jobs", "2"], capture_output=True, text=True, cwd=work)
    print(run.stderr[-3000:])
    assert run.returncode == 0, run.returncode
    trials = subprocess.run([tune, "trials", "--study", "loop", "--storage", storage,
                             "--format", "json"], capture_output=True, text=True, check=True)
    return {t["number"]: t for t in json.loads(trials.stdout)}


def check_study(trials):
    assert len(trials) == 6, sorted(trials)
    learned, chance, oom, after = (trials[n] for n in range(4))

    steps = learned["intermediate_values"]
    assert learned["state"] == "COMPLETE", learned
    assert sorted(int(s) for s in steps) == list(range(6)), steps
    assert learned["values"][0] == steps["5"] and learned["values"][0] > 0.9, learned

    assert chance["state"] == "PRUNED", chance
    assert sorted(int(s) for s in chance["intermediate_values"]) == [0, 1], chance
    assert not chance["user_attrs"].get("oom"), chance

    assert oom["state"] == "PRUNED", oom
    attrs = oom["user_attrs"]
    assert attrs["oom"] is True, attrs
    assert attrs["oom_config"]["hidden"] == 65536 and attrs["oom_config"]["batch_size"] == 1536
    assert "can't allocate memory" in attrs["oom_config"]["error"], attrs["oom_config"]
    assert attrs["memory"]["oom"] is True, attrs["memory"]

    assert after["state"] == "COMPLETE", after
    for t in (learned, after):
        memory = t["user_attrs"]["memory"]
        assert memory["peak"] > 0 and memory["peak_source"] == "max_rss", memory
    print("study: 2 complete, 1 pruned at step 1, 1 out of memory with its config, peaks "
          "recorded")


def main():
    tune, source = sys.argv[1], sys.argv[2]
    tt = load_module(tune)
    check_outside_a_trial(tt)
    with tempfile.TemporaryDirectory() as work:
        check_trainer_adapter(os.path.dirname(tt.__file__), work)
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"]).returncode != 0:
        print("SKIP: python3-torch is not installed (scripts/install-deps.sh installs it)")
        return SKIP
    with tempfile.TemporaryDirectory() as work:
        check_study(run_study(tune, source, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
