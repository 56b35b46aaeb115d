// glibc malloc settings for CPU training [tune_torch]. No LibTorch types here.
#pragma once

namespace tune::internal {

// Pins glibc's mmap threshold at 32 MiB and its trim threshold at 64 MiB for the whole process
// (mallopt), once; a no-op without glibc or when MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_
// are set in the environment (the user's choice wins).
//
// Why: LibTorch's CPU allocator is malloc. glibc starts with a 128 KiB mmap threshold and a
// 128 KiB trim threshold and raises both only when a process frees an mmapped chunk (to that
// chunk's size, at most 32 MiB; trim: twice that). Whether that happens depends on the process's
// allocation history: the Python interpreter ends up at 16/32 MiB, tune's trainer (its tensors
// served from the brk heap) stayed near 0.5/1 MiB, so every step shrank the heap when its
// activations and gradients were freed and page-faulted it back in on the next step. Measured on
// the small model of bench/run_train_bench.sh, 1 thread, 2 x 8 steps: 574k page faults and 1.4 s
// of system time, against 262k and 0.45 s for the same training in PyTorch; 226k and 0.5 s with
// these settings. These are the values glibc's own adjustment reaches at most; they change no
// tensor allocation, only which memory malloc keeps: up to 64 MiB of freed heap stays mapped
// between steps.
void ConfigureCpuMalloc();

// Returns the free memory malloc holds to the system (malloc_trim(0): every free page, also
// inside the heap). Called once per run, after the run's release: the thresholds above keep the
// heap between steps, this keeps trials of different shapes from piling up fragmented free heap
// over a long study (measured: the resident set of a 400-trial study of mixed shapes grew from
// 222 to 455 MiB while malloc's in-use bytes stayed at 45-48 MiB). A no-op without glibc.
void ReleaseFreeCpuMemory();

}  // namespace tune::internal
