#!/usr/bin/env bash
# The GPU checks of one short session on a borrowed GPU machine (docs/gpu.md#the-gpu-checks),
# in order of value, each within what is left of one deadline, so that the session ends on time
# with whatever was measured:
#   1. the GPU kit (scripts/gpu/build.sh): tune, its CUDA tests and the training benchmark built
#      against python3's LibTorch with CUDA, then `ctest -L cuda`;
#   1b. the trainer's speed (issue 43): bench/train_throughput.{cpp,py}, tune's trainer vs
#      PyTorch's fastest eager loop (fused AdamW, foreach clipping, autocast, no .item() per
#      step) on bert-base at (8,128), (32,256), (16,512), bf16 then fp32, each run within its own
#      deadline: speed.jsonl;
#   1c. issue 63's throughput table (bench/run_throughput_table.sh): tune per attention mode
#      beside (a) PyTorch's fastest eager loop with SDPA, (b) torch.compile of it, (c) the
#      hand-written loop, unpadded and padded, and deberta-v3-base beside transformers' own
#      DebertaV2, bf16, with the MFU against TUNE_GPU_PEAK_TFLOPS (default 989, an H100/H200's
#      dense bf16): table.jsonl, table.md;
#   2. the estimator against the caching allocator: `tune estimate --device cuda --measure` for
#      the catalog's encoders at a grid of shapes and two precisions (six processes at once: each
#      measures its own allocator's peaks); 2b. TorchScript models' fits probed on the card;
#   3. co-running trials (bench/gpu_corun.py): how trials that share the card slow each other
#      down, and the card's utilisation as NVML reports it (needs only python3's torch);
#   4. a short study on the card: configs/criteria.json's space (from scratch, a slice of the
#      fortunes data the kit carries in .gpu-kit/data/fortunes), `--jobs auto` on a 24 GiB
#      budget: admission, reservations and the status line with NVML's utilisation;
#   5. other processes on the card (issue 42): a ballast process (python3's torch) holds 8 GiB
#      while a study of step 4's space without device_memory runs: its budget must be the card
#      less the ballast and its growth margin ("Device memory budget" in others.log), no trial
#      out of memory at run time;
#   6. installed (issue 46): build-with-torch.sh --check, cmake --install of the kit's build, the
#      installed tune --version, tune_trial's memory guard catching a CUDA out-of-memory error;
#   7. a poisoned CUDA context (issue 45): a real device-side assert in a trial in process, the
#      study continued in a fresh process (sticky.log, sticky-trials.json).
#
# Usage: scripts/gpu/checks.sh RESULTS_DIR [SECONDS]   (SECONDS: the deadline, default 540)
# Environment: TUNE_GPU_CHECKS, the steps to run (default: "kit speed table estimates torchscript
# corun study others"); TUNE_GPU_EST_IDS, the estimates' configurations to run (default: all 54);
# TUNE_GPU_SPEED_PRECISIONS, the speed step's precisions (default: "bf16 fp32").
# RESULTS_DIR: checks.log, corun.json, kit/ (build.sh's results), estimates.jsonl,
#   speed.jsonl, speed.err, allocator.txt, torchscript.jsonl, study.log, study-trials.json,
#   study-summary.txt,
#   others.log, others-trials.json. Exit status 0 (what failed is in checks.log).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/gpu/checks.sh RESULTS_DIR [SECONDS]" >&2; exit 2; }
src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
deadline=$((SECONDS + ${2:-540}))
build=${TUNE_GPU_BUILD:-$src_dir/build-gpu}
exec > >(tee "$out/checks.log") 2>&1

left() { echo $((deadline - SECONDS)); }
# within SECONDS_AT_MOST COMMAND...: the command, killed at that many seconds or the deadline.
within() {
  local cap=$1 t
  shift
  t=$(left)
  [ "$cap" -lt "$t" ] && t=$cap
  if [ "$t" -lt 10 ]; then
    echo "checks: skipped (deadline): $*"
    return 124
  fi
  timeout --kill-after=5 "$t" "$@"
}
steps=" ${TUNE_GPU_CHECKS:-kit speed table estimates torchscript corun study others} "
wanted() { [[ $steps == *" $1 "* ]]; }
mark() { echo "checks: [$((SECONDS))s, $(left)s left] $*"; }

mark "start"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$out/gpu.txt"

# 1. The GPU kit: tune and the CUDA tests only (the full suite is CI's, on the CPU).
mark "1. GPU kit"
wanted kit && TUNE_GPU_BENCH=ON TUNE_GPU_CTEST_ARGS=skip \
  TUNE_GPU_TARGETS="tune tune_torch_cuda_tests tune_bench_train_throughput" \
  within 400 bash "$src_dir/scripts/gpu/build.sh" "$out/kit" ||
  echo "checks: build.sh failed or ran out of time (kit/summary.txt)"
if [ ! -x "$build/tune" ]; then
  mark "no tune binary: only the co-running trials"
  within 90 python3 "$src_dir/bench/gpu_corun.py" --out "$out/corun.json"
  exit 0
fi
export LD_LIBRARY_PATH=$build/kit-root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$build/kit-root/usr/bin:$PATH
tune=$build/tune
work_ts=$(mktemp -d)

# 1b. The trainer's speed: tune vs PyTorch eager on the card, the same model and batches.
mark "1b. speed"
speed_bin=$build/bench/tune_bench_train_throughput
if wanted speed && [ -x "$speed_bin" ]; then
  for row in "8 128 20" "32 256 10" "16 512 10"; do
    read -r b t n <<< "$row"
    for precision in ${TUNE_GPU_SPEED_PRECISIONS:-bf16 fp32}; do
      args=(--name bert-base --layers 12 --hidden 768 --heads 12 --intermediate 3072
            --vocab 30522 --batch "$b" --length "$t" --steps "$n" --device cuda
            --precision "$precision")
      within 60 "$speed_bin" "${args[@]}" >> "$out/speed.jsonl" \
        2>> "$out/speed.err"
      echo "speed tune ${b}x$t $precision exit $?"
      within 60 python3 "$src_dir/bench/train_throughput.py" "${args[@]}" >> "$out/speed.jsonl" \
        2>> "$out/speed.err"
      echo "speed pytorch ${b}x$t $precision exit $?"
    done
  done
fi

# 1c. Issue 63's throughput table, each run within 60 s, the step within 240 s.
mark "1c. throughput table"
if wanted table && [ -x "$speed_bin" ]; then
  peak=${TUNE_GPU_PEAK_TFLOPS:-989}
  ROWS="bert-base-uncased 8 128 20;bert-base-uncased 32 256 10;bert-large-uncased 16 256 10;microsoft/deberta-v3-base 16 256 10" \
    PEAK_TFLOPS=$peak DEADLINE=60 within 240 bash "$src_dir/bench/run_throughput_table.sh" \
    "$speed_bin" python3 "$out/table.jsonl" cuda bf16
  echo "table exit $?"
  python3 "$src_dir/bench/format_throughput.py" "$out/table.jsonl" --peak-tflops "$peak" \
    > "$out/table.md" 2>> "$out/table.jsonl.err"
fi

# 2. The estimator against the caching allocator.
mark "2. estimates"
estimate() { # ID MODEL BATCH LENGTH PRECISION [more options]
  local id=$1 model=$2 b=$3 t=$4 p=$5
  shift 5
  within 90 "$tune" estimate --model "$model" --batch-size "$b" --max-length "$t" --precision "$p" \
    --device cuda --measure --format json "$@" > "$out/est-$id.json" 2> "$out/est-$id.err"
  echo "est-$id exit $?"
}
# A grid per model (two lengths, two batch sizes) so that the formulas' per-token and
# per-attention-score terms can be fitted to the card, fp32 beside bf16 for two encoders.
configs=(
  # First, as the deadline may cut the list: issue 63's SDPA CUDA terms (memory.md#sdpa), per
  # kernel: unpadded bf16 batches take FlashAttention, padded ones (--measure-padded: a mask) the
  # memory-efficient kernel, fp32 the memory-efficient kernel either way; 120 and 200 tokens are
  # widened to 128 and 208 when padded (DeBERTa's always: its bias is a mask).
  "43 bert-base-uncased 32 128 bf16 --attention sdpa"
  "44 bert-base-uncased 32 128 bf16 --attention sdpa --measure-padded"
  "45 bert-base-uncased 16 512 bf16 --attention sdpa"
  "46 bert-base-uncased 16 512 bf16 --attention sdpa --measure-padded"
  "47 bert-base-uncased 32 256 fp32 --attention sdpa --measure-padded"
  "48 roberta-large 16 384 bf16 --attention sdpa --measure-padded"
  "49 bert-base-uncased 16 512 bf16 --attention sdpa --measure-padded --gradient-checkpointing"
  "50 xlm-roberta-base 24 120 bf16 --attention sdpa --measure-padded"
  "51 bert-large-uncased 16 200 bf16 --attention sdpa --measure-padded --fused-qkv"
  "52 bert-base-uncased 32 256 bf16 --measure-padded"
  "53 microsoft/deberta-v3-base 16 256 bf16 --attention sdpa --measure-padded"
  "54 microsoft/deberta-v3-base 8 200 bf16 --attention sdpa"
  "1 bert-base-uncased 32 128 bf16" "2 bert-base-uncased 16 512 bf16"
  "3 bert-base-uncased 32 256 fp32" "4 roberta-base 32 256 bf16"
  "5 xlm-roberta-base 16 256 bf16" "6 microsoft/deberta-v3-base 16 256 bf16"
  "7 bert-large-uncased 16 256 bf16" "8 roberta-large 16 384 bf16"
  "9 microsoft/deberta-v3-large 8 384 bf16" "10 roberta-large 8 256 fp32"
  "11 bert-base-uncased 16 512 bf16 --gradient-checkpointing"
  "12 microsoft/deberta-v3-base 32 512 bf16"
  "13 bert-base-uncased 8 128 bf16" "14 bert-base-uncased 64 128 bf16"
  "15 bert-base-uncased 8 512 bf16" "16 bert-base-uncased 32 512 bf16"
  "17 bert-base-uncased 8 128 fp32" "18 bert-base-uncased 32 128 fp32"
  "19 bert-base-uncased 8 512 fp32" "20 bert-base-uncased 32 512 fp32"
  "21 microsoft/deberta-v3-base 8 128 bf16" "22 microsoft/deberta-v3-base 32 128 bf16"
  "23 microsoft/deberta-v3-base 8 512 bf16" "24 microsoft/deberta-v3-base 16 256 fp32"
  "25 xlm-roberta-base 32 128 bf16" "26 bert-large-uncased 32 512 bf16"
  "27 bert-large-uncased 8 128 bf16" "28 roberta-large 8 128 bf16"
  "29 microsoft/deberta-v3-large 16 512 bf16" "30 microsoft/deberta-v3-large 8 128 bf16"
  "31 bert-base-uncased 32 512 bf16 --gradient-checkpointing"
  "32 roberta-large 16 384 bf16 --gradient-checkpointing"
  # Held out from the CUDA terms fitted to 1-32 (2026-11-26): shapes none of them had.
  "33 bert-base-uncased 24 384 bf16" "34 microsoft/deberta-v3-base 24 384 bf16"
  "35 roberta-large 24 256 bf16 --gradient-checkpointing" "36 xlm-roberta-base 8 512 bf16"
  "37 bert-large-uncased 8 384 fp32" "38 microsoft/deberta-v3-large 4 256 fp32"
  "39 roberta-base 48 192 bf16" "40 microsoft/deberta-v3-base 12 448 bf16 --gradient-checkpointing"
  "41 bert-large-uncased 24 320 bf16" "42 xlm-roberta-base 40 160 fp32"
)
# Six at a time; `wait` on their ids alone (a bare `wait` would also wait for the log's tee).
pids=()
wanted estimates || configs=()
for c in "${configs[@]}"; do
  # TUNE_GPU_EST_IDS ("33 34 ..."): only these configurations.
  [ -z "${TUNE_GPU_EST_IDS:-}" ] || [[ " $TUNE_GPU_EST_IDS " == *" ${c%% *} "* ]] || continue
  # shellcheck disable=SC2086
  estimate $c &
  pids+=($!)
  if [ "${#pids[@]}" -ge 6 ]; then
    wait "${pids[@]}"
    pids=()
  fi
done
[ "${#pids[@]}" -eq 0 ] || wait "${pids[@]}"
for f in "$out"/est-*.json; do
  [ -s "$f" ] && python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' \
    "$f" >> "$out/estimates.jsonl" 2>/dev/null
done
rm -f "$out"/est-*.json
tail -n +1 "$out"/est-*.err > "$out/estimates.err" 2>/dev/null
rm -f "$out"/est-*.err
# The caching allocator's settings in force (tune turns on expandable segments; debug log).
wanted estimates && within 60 "$tune" --log-level debug estimate --model bert-base-uncased \
  --batch-size 8 --max-length 128 --precision bf16 --device cuda --measure 2>&1 |
  grep -i "caching allocator" > "$out/allocator.txt"

# 2b. TorchScript models' probes on the card (issue 33): the fit of peaks measured at small
#     shapes on CUDA against a measured run at the requested shape.
mark "2b. TorchScript fits"
if wanted torchscript; then
  for kind in ${TUNE_GPU_TS_KINDS:-block-attention lstm cnn}; do
    within 30 python3 "$src_dir/scripts/torchscript_models.py" "$kind" --out "$work_ts/$kind.pt" \
      --vocab-size 8000 --num-labels 4 > /dev/null 2>> "$out/torchscript.err" || continue
    for shape in "16 256" "32 128"; do
      read -r b t <<< "$shape"
      within 60 "$tune" estimate --model "$work_ts/$kind.pt" --batch-size "$b" --max-length "$t" \
        --num-labels 4 --device cuda --measure --format json > "$work_ts/o.json" \
        2>> "$out/torchscript.err"
      echo "torchscript $kind ${b}x$t exit $?"
      [ -s "$work_ts/o.json" ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["kind"]=sys.argv[2]; print(json.dumps(d))' \
        "$work_ts/o.json" "$kind" >> "$out/torchscript.jsonl"
    done
  done
fi

# 3. Co-running trials (python3's torch alone).
mark "3. co-running trials"
wanted corun && within 90 python3 "$src_dir/bench/gpu_corun.py" --phase 2 --out "$out/corun.json" ||
  echo "checks: gpu_corun.py failed or ran out of time"

# 4. A short study on the card, --jobs auto on a 24 GiB budget.
mark "4. study"
data=$src_dir/.gpu-kit/data/fortunes
work=$(mktemp -d)
if ! wanted study && ! wanted others; then
  :
elif [ -f "$data/train.jsonl" ]; then
  head -n 800 "$data/train.jsonl" > "$work/train.jsonl"
  head -n 200 "$data/validation.jsonl" > "$work/validation.jsonl"
  python3 - "$src_dir/configs/criteria.json" "$work" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
o = c["objective"]
o["data"] = {"train": sys.argv[2] + "/train.jsonl", "validation": sys.argv[2] + "/validation.jsonl"}
o["init"] = "scratch"
o["epochs"] = 2
o.pop("patience", None)
c["storage"] = "sqlite:///" + sys.argv[2] + "/gpu.db"
json.dump(c, open(sys.argv[2] + "/criteria-gpu.json", "w"), indent=1)
EOF
  if wanted study; then
    within 150 "$tune" --study gpu --config "$work/criteria-gpu.json" --n-trials 24 --jobs auto \
      > "$out/study.log" 2>&1
    echo "study exit $?"
    "$tune" trials --study gpu --storage "sqlite:///$work/gpu.db" --format json \
      > "$out/study-trials.json" 2>&1
    "$tune" summary --study gpu --storage "sqlite:///$work/gpu.db" > "$out/study-summary.txt" 2>&1
  fi
else
  echo "checks: no $data/train.jsonl: the studies skipped"
fi

# 5. Other processes on the card: a ballast holds 8 GiB during a study with the card's budget.
mark "5. others"
if wanted others && [ -f "$work/criteria-gpu.json" ]; then
  python3 - "$work" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1] + "/criteria-gpu.json"))
c["objective"]["memory"].pop("device_memory", None)  # the card's total, less the others
c["storage"] = "sqlite:///" + sys.argv[1] + "/others.db"
json.dump(c, open(sys.argv[1] + "/others.json", "w"), indent=1)
EOF
  python3 -c 'import sys, time, torch
x = torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
print("ballast holds 8 GiB", flush=True)
time.sleep(float(sys.argv[1]))' 150 > "$out/others-ballast.log" 2>&1 &
  ballast=$!
  sleep 10
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv >> "$out/others-ballast.log" 2>&1
  within 120 "$tune" --study others --config "$work/others.json" --n-trials 6 --jobs 2 \
    > "$out/others.log" 2>&1
  echo "others exit $?"
  kill "$ballast" 2> /dev/null
  "$tune" trials --study others --storage "sqlite:///$work/others.db" --format json \
    > "$out/others-trials.json" 2>&1
  echo "others: $(grep -c "Device memory budget" "$out/others.log") budget line(s)"
fi
# 6. Installed (issue 46): scripts/build-with-torch.sh finds this machine's torch and nvcc, the
# kit's build installs into a prefix, and the installed tune says CUDA is usable; the module's
# memory guard on the card: a CUDA out-of-memory error caught, the peaks reported.
mark "6. install"
if wanted install; then
  within 30 "$src_dir/scripts/build-with-torch.sh" --check --python python3 > "$out/install.log" 2>&1
  echo "build-with-torch --check exit $?" >> "$out/install.log"
  within 60 cmake --install "$build" --prefix "$work/prefix" >> "$out/install.log" 2>&1 &&
    (cd / && "$work/prefix/bin/tune" --version) >> "$out/install.log" 2>&1
  PYTHONPATH="$("$work/prefix/bin/tune" python-path 2>/dev/null)" TUNE_TRIAL_NUMBER=0     within 60 python3 -c 'import torch, tune_trial
try:
    with tune_trial.memory_guard():
        x = torch.empty(1 << 20, device="cuda")
        y = torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
except SystemExit as e:
    print("guard ended the trial with", e.code)' >> "$out/install.log" 2>&1
  tail -n 12 "$out/install.log"
fi
# 7. A poisoned CUDA context (issue 45): a real device-side assert (a loss over an out-of-range
# label, TUNE_TEST_STICKY_CUDA_ERROR=1:real) in the first trial of a 3-trial study in process:
# that trial FAIL with CUDA's error and device_lost, the study continued in a fresh process.
mark "7. sticky"
if wanted sticky && [ -f "$work/criteria-gpu.json" ]; then
  python3 - "$work" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1] + "/criteria-gpu.json"))
c["storage"] = "sqlite:///" + sys.argv[1] + "/sticky.db"
c["objective"]["epochs"] = 1
json.dump(c, open(sys.argv[1] + "/sticky.json", "w"), indent=1)
EOF
  TUNE_TEST_STICKY_CUDA_ERROR=1:real within 120 "$tune" --study sticky --config "$work/sticky.json" \
    --n-trials 3 --jobs 1 > "$out/sticky.log" 2>&1
  echo "sticky exit $?"
  "$tune" trials --study sticky --storage "sqlite:///$work/sticky.db" --format json \
    > "$out/sticky-trials.json" 2>&1
  grep -E "device-side|fresh process|Stopping" "$out/sticky.log" | cut -c1-300
fi
mark "done"
exit 0
