#!/usr/bin/env bash
# Issue 63's throughput table: tune's trainer per attention mode beside PyTorch's references in
# the same run, on one device -- (a) PyTorch's fastest eager loop (SDPA, autocast, fused AdamW,
# foreach clipping, no .item() per step), (b) torch.compile of (a), (c) the hand-written loop --
# and deberta-v3-base beside Hugging Face's own DebertaV2 (eager, as users run it). Each
# bert-base row runs unpadded and padded (lengths as real text's, bench/train_throughput.py).
# Raw JSON lines go to OUT; bench/format_throughput.py makes the table.
#
# Usage: bench/run_throughput_table.sh TUNE_BENCH PYTHON OUT [DEVICE [PRECISION]]
#   TUNE_BENCH: a tune_bench_train_throughput (built against the LibTorch under test);
#   PYTHON: a Python whose torch is >= 2.0 (tune's environment, .venv/bin/python).
# Environment: ROWS (default: the issue's rows, "MODEL BATCH LENGTH STEPS" separated by ";"),
# THREADS (CPU threads, default: every core), PEAK_TFLOPS (for the MFU column), SIDES (default
# "tune-eager tune-sdpa tune-sdpa-fused tune-sdpa-fused-kernels-graphs hand eager compile"; a
# tune side is tune-ATTENTION[-fused][-kernels][-graphs]: "-fused" sets tune's fused_qkv,
# "-kernels" fused_elementwise, "-graphs" cuda_graphs "on"), DEADLINE (seconds per run, default
# 900).
set -uo pipefail
bench=${1:?usage: bench/run_throughput_table.sh TUNE_BENCH PYTHON OUT [DEVICE [PRECISION]]}
python=${2:?usage}
out=${3:?usage}
device=${4:-cpu}
precision=${5:-fp32}
here=$(cd "$(dirname "$0")" && pwd)
threads=${THREADS:-$(nproc)}
deadline=${DEADLINE:-900}
rows=${ROWS:-"bert-base-uncased 8 128 20;bert-base-uncased 32 256 10;bert-base-uncased 16 512 10;bert-large-uncased 16 256 10;microsoft/deberta-v3-base 16 256 10"}
sides=${SIDES:-tune-eager tune-sdpa tune-sdpa-fused tune-sdpa-fused-kernels-graphs hand eager compile}
mkdir -p "$(dirname "$out")"
: >> "$out"

run() { # LABEL COMMAND...: one JSON line to $out, or a line saying why not to stderr
  local label=$1
  shift
  local line
  line=$(timeout "$deadline" "$@" 2>>"$out.err" | grep '^{' | tail -1)
  if [ -n "$line" ]; then
    echo "$line" >> "$out"
    echo "$label: ok" >&2
  else
    echo "$label: no result (see $out.err)" >&2
  fi
}

IFS=';' read -ra row_list <<< "$rows"
for row in "${row_list[@]}"; do
  read -r model b t steps <<< "$row"
  [ -z "$model" ] && continue
  pads="0 1"
  case $model in *deberta*) pads="0" ;; esac
  for padded in $pads; do
    common=(--model "$model" --batch "$b" --length "$t" --steps "$steps" --device "$device"
            --precision "$precision" --threads "$threads" --padded "$padded")
    label="$model ${b}x$t $([ "$padded" = 1 ] && echo padded || echo unpadded)"
    case $model in
      *deberta*)
        run "$label tune" "$bench" "${common[@]}" --attention eager
        run "$label transformers" "$python" "$here/train_throughput.py" "${common[@]}" \
          --loop transformers --peak-tflops "${PEAK_TFLOPS:-0}"
        continue ;;
    esac
    for side in $sides; do
      case $side in
        tune-*)  # tune-ATTENTION[-fused][-kernels][-graphs]
          rest=${side#tune-}
          extra=()
          if [[ $rest == *-graphs ]]; then extra+=(--cuda-graphs on); rest=${rest%-graphs}; fi
          if [[ $rest == *-kernels ]]; then extra+=(--fused-elementwise 1); rest=${rest%-kernels}; fi
          if [[ $rest == *-fused ]]; then extra+=(--fused-qkv 1); rest=${rest%-fused}; fi
          run "$label $side" "$bench" "${common[@]}" --attention "$rest" "${extra[@]}" ;;
        *) run "$label $side" "$python" "$here/train_throughput.py" "${common[@]}" \
             --loop "$side" --peak-tflops "${PEAK_TFLOPS:-0}" ;;
      esac
    done
  done
done
