#!/usr/bin/env bash
# The CUDA variant of tune on Debian 13: links against Debian's CUDA LibTorch and starts on a
# machine without a GPU (docs/gpu.md#debian-13s-cuda-libtorch). `scripts/check-debian13.sh --cuda`.
#
# What it does (as root, like scripts/check-debian13.sh, whose root it copies once):
#   1. Its own Debian 13 root (TUNE_DEBIAN13_CUDA_ROOT, default /var/cache/tune/debian13-cuda):
#      libtorch-cuda-dev (contrib) conflicts with the CPU root's libtorch-dev. Mounts and a clean
#      clone of HEAD as in check-debian13.sh.
#   2. scripts/install-deps.sh --cuda in it: libtorch-cuda-dev 2.6 and nvidia-cuda-toolkit 12.4
#      with the CUDA libraries they pull (~3 GB once, kept in the root).
#   3. cuDNN: Debian's nvidia-cudnn (which libtorch-cuda needs) ships only the symlink
#      libcudnn.so.9 -> libcudnn.so.9.0.0 and downloads the library from NVIDIA's site in its
#      postinst when NVIDIA's license is accepted in debconf (the default answer). Without access
#      to NVIDIA's site that fails the install, so this declines the license (TUNE_CUDNN_DOWNLOAD=1
#      accepts it) and, when TUNE_CUDNN_LIB (default: /usr/local/cuda/lib/libcudnn.so.9 of this
#      machine, if there) names a cuDNN 9 library, copies it to where the symlink points;
#      otherwise libtorch_cuda.so, which links libcudnn.so.9, cannot be loaded, and the runs below
#      show the loader's error.
#   4. Configures tune against the CUDA LibTorch (build-cuda in the clone), builds tune,
#      tune_torch and the cuda tests, and prints tune_torch's link line and its NEEDED entries.
#   5. Runs, each under `timeout 300` (a hang would show as exit 124): `tune --version`, a train
#      study with `--device cuda`, `tune estimate --device cuda --measure`, and `ctest -L cuda`.
#      The output and exit status of each are printed.
# Logs: TUNE_DEBIAN13_LOGS (default build/debian13) /cuda-*.log.
# Exit status: 0 when it got through (whatever tune printed: read the output), 1 when the check
# itself could not run (install or build failed: the message says which).
set -euo pipefail

SUITE=trixie
src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seed_root=${TUNE_DEBIAN13_ROOT:-/var/cache/tune/debian13}
root=${TUNE_DEBIAN13_CUDA_ROOT:-/var/cache/tune/debian13-cuda}
# shellcheck source=scripts/debian13-root.sh
. "$src_dir/scripts/debian13-root.sh"

log_dir=${TUNE_DEBIAN13_LOGS:-$src_dir/build/debian13}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
mkdir -p "$log_dir"
log_dir=$(cd "$log_dir" && pwd)
cudnn=${TUNE_CUDNN_LIB:-/usr/local/cuda/lib/libcudnn.so.9}

root_prepare
root_clone "$src_dir"

# nvidia-cudnn's postinst downloads cuDNN from NVIDIA when its debconf question is answered
# "I Agree", the default; without access to developer.download.nvidia.com that fails ("curl: (6)
# Could not resolve host") and leaves libtorch-cuda unconfigured. Declined here unless
# TUNE_CUDNN_DOWNLOAD=1; cuDNN then comes from TUNE_CUDNN_LIB (below).
answer="I Decline"
[ "${TUNE_CUDNN_DOWNLOAD:-0}" = 1 ] && answer="I Agree"
root_run "echo 'nvidia-cudnn nvidia-cudnn/question select $answer' | debconf-set-selections"
log "scripts/install-deps.sh --cuda, nvidia-cudnn's license question answered '$answer'" \
    "(log: $log_dir/cuda-install.log)"
root_run "dpkg --configure -a; cd /src/tune && scripts/install-deps.sh --cuda" \
  > "$log_dir/cuda-install.log" 2>&1 ||
  die "install-deps.sh --cuda failed: $(tail -n 20 "$log_dir/cuda-install.log")"

cudnn_so=$root/usr/lib/x86_64-linux-gnu/libcudnn.so.9
if [ -e "$cudnn_so" ]; then
  log "cuDNN: $(readlink -f "$cudnn_so" | sed "s#^$root##") is there"
elif [ -f "$cudnn" ]; then
  log "cuDNN: nvidia-cudnn downloaded nothing; copying $(readlink -f "$cudnn") (this machine's)" \
      "to /usr/lib/x86_64-linux-gnu/libcudnn.so.9 in the root"
  rm -f "$cudnn_so"
  cp -L "$cudnn" "$cudnn_so"
else
  log "cuDNN: MISSING: no /usr/lib/x86_64-linux-gnu/libcudnn.so.9 in the root (nvidia-cudnn" \
      "downloads it from NVIDIA when its license is accepted) and TUNE_CUDNN_LIB ($cudnn) is" \
      "not a file"
fi

# The CPU root's compiler cache: what does not include LibTorch compiles the same here.
if [ -d "$seed_root/var/cache/ccache" ]; then
  mkdir -p "$root/var/cache/ccache"
  cp -a -n "$seed_root/var/cache/ccache/." "$root/var/cache/ccache/"
fi
log "configure and build the CUDA variant (log: $log_dir/cuda-build.log)"
root_run "cd /src/tune && cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DTUNE_BUILD_BENCH=OFF -DTUNE_WERROR=ON && \
  cmake --build build-cuda -j $jobs --target tune tune_torch tune_torch_cuda_tests" \
  > "$log_dir/cuda-build.log" 2>&1 || die "the CUDA build failed: $(tail -n 30 "$log_dir/cuda-build.log")"
grep -E 'LibTorch|CUDA|tune_torch' "$log_dir/cuda-build.log" | grep -E '^--' || true

echo "--- tune_torch's link line (build-cuda/CMakeFiles/tune_torch.dir/link.txt) ---"
cat "$root/src/tune/build-cuda/CMakeFiles/tune_torch.dir/link.txt"
echo "--- NEEDED of libtune_torch.so ---"
root_run "readelf -d /src/tune/build-cuda/libtune_torch.so | grep NEEDED"

# A tiny train study (two topics) for `tune --device cuda`.
mkdir -p "$root/tmp/cuda-check"
{
  echo "sentence,topic"
  for i in $(seq 0 31); do
    if [ $((i % 2)) = 0 ]; then echo "\"rain and cloud today $i\",weather"
    else echo "\"goal and match today $i\",sports"; fi
  done
} > "$root/tmp/cuda-check/train.csv"
cp "$root/tmp/cuda-check/train.csv" "$root/tmp/cuda-check/val.csv"
cat > "$root/tmp/cuda-check/study.json" <<'EOF'
{"direction": "maximize", "n_trials": 1,
 "search_space": {"learning_rate": {"type": "float", "low": 0.001, "high": 0.005, "log": true}},
 "objective": {"type": "train", "model": "tiny-bert", "init": "scratch", "epochs": 1,
   "batch_size": 8, "max_length": 16,
   "data": {"train": "train.csv", "validation": "val.csv", "text_column": "sentence",
            "label_column": "topic"}}}
EOF

run_shown() { # prints `$ command`, its output and exit status (300 s at most)
  echo "\$ $1"
  local rc=0
  root_run "cd /tmp/cuda-check && timeout 300 $1" 2>&1 || rc=$?
  echo "[exit status $rc]"
}

echo "--- runs on this machine ($(nvidia-smi -L 2>/dev/null || echo 'no nvidia-smi: no NVIDIA driver')) ---"
tune=/src/tune/build-cuda/tune
run_shown "$tune --version"
run_shown "$tune --study cuda-check --config study.json --storage memory --device cuda"
run_shown "$tune estimate --model tiny-bert --batch-size 8 --max-length 32 --device cuda --measure"
run_shown "sh -c 'cd /src/tune/build-cuda && ctest -L cuda --output-on-failure 2>&1 | tail -n 20'"
