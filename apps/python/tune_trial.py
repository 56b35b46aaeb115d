"""tune_trial: your training script's side of a tune study.

tune runs your script once per trial (the ``command`` objective, docs/config.md). This module
speaks tune's line protocol for you and brings the in-process memory guard to PyTorch:

    import tune_trial

    p = tune_trial.params({"lr": 3e-5, "batch_size": 16})   # the trial's params (defaults by hand)
    with tune_trial.memory_guard():          # cap at the budget; out of memory -> pruned, learned
        for epoch in range(epochs):
            ...
            tune_trial.report(accuracy, epoch)
            if tune_trial.should_prune():
                raise tune_trial.TrialPruned()
    tune_trial.finish(accuracy)

Standard library only; PyTorch is imported by memory_guard() and Hugging Face's transformers by
hf_callback(), never at import. Outside a tune trial (the script run by hand) params() returns
the defaults and the reporting functions do nothing, so one script serves both.

tune puts this file's directory on the program's PYTHONPATH; `tune python-path` prints it.
"""

import gc
import json
import os
import sys
import time
import traceback

__all__ = [
    "TrialPruned",
    "finish",
    "hf_callback",
    "in_trial",
    "memory_budget",
    "memory_guard",
    "number",
    "params",
    "report",
    "set_constraint",
    "should_prune",
    "study_name",
]

PROTOCOL_VERSION = 1

_last_step = None


class TrialPruned(SystemExit):
    """Raise it when should_prune() says so: the program exits quietly (status 0) and tune
    records the trial PRUNED at its last reported step (Optuna's ``optuna.TrialPruned``)."""

    def __init__(self, message="pruned"):
        super().__init__(0)
        self.message = message


def in_trial():
    """True when tune started this process for a trial."""
    return "TUNE_TRIAL_NUMBER" in os.environ


def number():
    """The trial number, or None outside a trial."""
    n = os.environ.get("TUNE_TRIAL_NUMBER")
    return int(n) if n is not None else None


def study_name():
    """The study's name, or None outside a trial."""
    return os.environ.get("TUNE_STUDY_NAME")


def params(defaults=None):
    """The trial's active params as a dict (their JSON types: int, float, str, bool), over
    `defaults` for the keys the trial does not set. Outside a trial: a copy of `defaults`."""
    out = dict(defaults or {})
    path = os.environ.get("TUNE_PARAMS_FILE")
    if path:
        with open(path, encoding="utf-8") as f:
            out.update(json.load(f))
    return out


def memory_budget():
    """The bytes this trial may use on its device (with --jobs and a ``memory`` section: its
    reservation plus the guard's margin), or None when tune set no budget."""
    b = os.environ.get("TUNE_MEMORY_BUDGET")
    return int(b) if b else None


def _emit(obj):
    if not in_trial():
        return
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _number(value, what):
    try:
        v = float(value)  # a 0-d tensor or numpy scalar too
    except (TypeError, ValueError):
        raise TypeError(f"tune_trial.{what}: expected a number, got {value!r}") from None
    return v


def report(value, step):
    """An intermediate value at `step` (an integer >= 0): stored on the trial and shown to the
    pruner (Optuna's ``trial.report``). A repeated step keeps its first value."""
    global _last_step
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"tune_trial.report: step must be an integer >= 0, got {step!r}")
    _emit({"step": step, "value": _number(value, "report")})
    _last_step = step


def should_prune(timeout=30.0):
    """Whether the pruner stops the trial at the last reported step (Optuna's
    ``trial.should_prune``). tune answers each report in the trial's pruner file; this waits
    for the answer (at most `timeout` seconds, then False). A pruned trial's program is also
    sent SIGTERM by tune shortly after; ending it yourself (TrialPruned) is tidier."""
    path = os.environ.get("TUNE_PRUNER_FILE")
    if not in_trial() or not path or _last_step is None:
        return False
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        answer = json.loads(line)
                    except ValueError:
                        continue  # a line tune is still writing
                    if answer.get("step") == _last_step:
                        return bool(answer.get("prune"))
        except FileNotFoundError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def set_constraint(name, value):
    """A constraint value (<= 0: satisfied), stored as the trial's ``constraints:<name>``
    (Optuna 5.0's ``trial.set_constraint``)."""
    _emit({"constraints": {str(name): _number(value, "set_constraint")}})


def finish(value=None, values=None):
    """The trial's final value (`values`: one per objective of a multi-objective study). The
    last call counts."""
    if (value is None) == (values is None):
        raise ValueError("tune_trial.finish: give either value or values")
    if values is not None:
        _emit({"values": [_number(v, "finish") for v in values]})
    else:
        _emit({"value": _number(value, "finish")})


# Messages of the errors a PyTorch allocator raises when it cannot allocate: the CUDA caching
# allocator, cuBLAS/cuDNN workspaces, and the CPU allocator (for instance under an address-space
# limit, RLIMIT_AS).
_OOM_MARKERS = (
    "out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "can't allocate memory",
)


def _is_out_of_memory(exc):
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    if torch is not None:
        for cls in (getattr(torch, "OutOfMemoryError", None),
                    getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None)):
            if isinstance(cls, type) and isinstance(exc, cls):
                return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _OOM_MARKERS)


class memory_guard:
    """The memory guard for a PyTorch training loop, as tune's own trainer has it:

    - on entry, on a CUDA device with a budget (memory_budget()), caps PyTorch's caching
      allocator there (``set_per_process_memory_fraction``), so that a wrong prediction runs
      only this trial out of memory, and resets the peak counters;
    - an out-of-memory error inside (CUDA, or the CPU allocator) frees the trial's tensors
      (the traceback's frames are cleared, the garbage collector runs, the CUDA cache is
      emptied), tells tune, which records the trial PRUNED with its config and learns the
      limit, and ends the program (status 1); outside a trial the error propagates;
    - on a normal exit, reports the allocated and reserved peaks (CUDA), which tune records on
      the trial (``memory`` user attribute) and fits.

    `device`: a torch.device or string; default: CUDA's current device when CUDA is available,
    else the CPU (where tune measures the resident set itself).
    """

    def __init__(self, device=None):
        self._device_arg = device
        self.device = None
        self.cuda = False

    def __enter__(self):
        import torch  # the guard is for PyTorch programs

        dev = torch.device(self._device_arg) if self._device_arg is not None else (
            torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available()
            else torch.device("cpu"))
        self.device = dev
        self.cuda = dev.type == "cuda"
        if self.cuda:
            budget = memory_budget()
            if budget:
                total = torch.cuda.get_device_properties(dev).total_memory
                torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total), dev)
            torch.cuda.reset_peak_memory_stats(dev)
        return self

    def _free(self, tb):
        if tb is not None:
            traceback.clear_frames(tb)
        gc.collect()
        torch = sys.modules.get("torch")
        if self.cuda and torch is not None:
            torch.cuda.empty_cache()

    def peaks(self):
        """(allocated, reserved) peak bytes since entry on CUDA; (None, None) elsewhere."""
        if not self.cuda:
            return None, None
        import torch
        return (torch.cuda.max_memory_allocated(self.device),
                torch.cuda.max_memory_reserved(self.device))

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and _is_out_of_memory(exc):
            message = " ".join(str(exc).split())[:400] or exc_type.__name__
            self._free(tb)
            if not in_trial():
                return False
            _emit({"out_of_memory": f"{exc_type.__name__}: {message}"})
            sys.stderr.write(f"tune_trial: out of memory, trial ends: {message}\n")
            sys.stderr.flush()
            raise SystemExit(1)
        if exc is None:
            allocated, reserved = self.peaks()
            if allocated is not None:
                _emit({"memory_peak": int(allocated), "memory_peak_reserved": int(reserved)})
        return False


def hf_callback(metric=None):
    """A Hugging Face ``TrainerCallback`` that reports each evaluation to tune (step: the
    optimizer step, as Optuna's integration reports ``global_step``), stops a pruned trial
    (TrialPruned), and gives the trial its value when training ends: the metric of the model the
    Trainer ends with, that is the evaluation it kept as best with ``load_best_model_at_end``
    (``state.best_global_step``), else the last evaluation. A later finish() overrides it.

    `metric`: the evaluation metric (``"eval_accuracy"`` or ``"accuracy"``); default: the
    Trainer's ``metric_for_best_model``, else ``eval_loss``.

        trainer = Trainer(..., callbacks=[tune_trial.hf_callback("accuracy")])

    Imports transformers when called.
    """
    from transformers import TrainerCallback

    class TuneCallback(TrainerCallback):
        def __init__(self):
            self.values = {}  # global_step -> the metric there
            self.last = None

        def _key(self, args):
            name = metric or getattr(args, "metric_for_best_model", None) or "loss"
            return name if name.startswith("eval_") else "eval_" + name

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            key = self._key(args)
            value = (metrics or {}).get(key)
            if value is None:
                sys.stderr.write(f"tune_trial: no '{key}' in the evaluation's metrics "
                                 f"{sorted(metrics or {})}\n")
                return
            value = float(value)
            step = int(state.global_step)
            self.last = value
            self.values.setdefault(step, value)
            report(value, step)
            if should_prune():
                raise TrialPruned()

        def final_value(self, args, state):
            """The metric of the model training ended with (None: no evaluation)."""
            best = getattr(state, "best_global_step", None)
            if (getattr(args, "load_best_model_at_end", False)
                    and getattr(state, "best_model_checkpoint", None) and best in self.values):
                return self.values[best]
            return self.last

        def on_train_end(self, args, state, control, **kwargs):
            value = self.final_value(args, state)
            if value is None:
                sys.stderr.write("tune_trial: no evaluation during training, so no value: set "
                                 "eval_strategy, or call tune_trial.finish(value) after "
                                 "trainer.evaluate()\n")
                return
            finish(value)

    return TuneCallback()
