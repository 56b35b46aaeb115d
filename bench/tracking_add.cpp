// Issue 66: what tracking costs the study's own thread. A study hands each finished trial to the
// tracker (Tracker::Add) on its loop; everything else (the TensorBoard files, MLflow's requests)
// happens on the tracker's threads. This times every Add call of N trials like the function
// objective's (two float params, five intermediate values, a value) into a TensorBoard sink in
// DIR, one trial every --interval-us (the study's pace), then Finish, and prints one JSON line:
// the Add calls' median, 99th percentile and mean in microseconds, the tracker threads' CPU per
// trial (the process's CPU time less the calling thread's), and Finish's time.
//
// Usage: tune_bench_tracking_add DIR [--trials N] [--interval-us U]
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tracking/tracker.h"
#include "tracking/tracking_options.h"

namespace {

double CpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: {} DIR [--trials N] [--interval-us U]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int trials = 1000;
  int interval_us = 1000;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--trials") {
      trials = std::atoi(argv[i + 1]);
    } else if (flag == "--interval-us") {
      interval_us = std::atoi(argv[i + 1]);
    } else {
      fmt::print(stderr, "unknown option '{}'\n", flag);
      return 2;
    }
  }
  using namespace tune;
  const TrackedStudy study{"bench", {StudyDirection::kMinimize}, "median"};
  TrackingOptions options;
  options.tensorboard = dir;
  Tracker tracker(NewSinks(options, study), study, {});

  std::vector<double> add_us;
  add_us.reserve(static_cast<size_t>(trials));
  const double cpu_self0 = CpuSeconds(RUSAGE_SELF);
  const double cpu_thread0 = CpuSeconds(RUSAGE_THREAD);
  auto next = std::chrono::steady_clock::now();
  for (int n = 0; n < trials; ++n) {
    FrozenTrial t;
    t.number = n;
    t.state = TrialState::kComplete;
    t.params = {{"x0", 0.1 * n}, {"x1", -0.2 * n}};
    t.distributions = {{"x0", FloatDistribution{-10, 10, false}},
                       {"x1", FloatDistribution{-10, 10, false}}};
    for (int step = 0; step < 5; ++step) t.intermediate_values[step] = 1.0 / (n + step + 1);
    t.values = {0.01 * n};
    t.datetime_start = Clock::now();
    t.datetime_complete = Clock::now();
    const auto a = std::chrono::steady_clock::now();
    tracker.Add(t);
    const auto b = std::chrono::steady_clock::now();
    add_us.push_back(std::chrono::duration<double, std::micro>(b - a).count());
    next += std::chrono::microseconds(interval_us);
    std::this_thread::sleep_until(next);  // the study's own work between trials
  }
  const double cpu_thread1 = CpuSeconds(RUSAGE_THREAD);
  const auto f0 = std::chrono::steady_clock::now();
  const std::vector<SinkCounts> counts = tracker.Finish(60);
  const double finish_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count();
  const double cpu_self1 = CpuSeconds(RUSAGE_SELF);
  const double tracker_cpu = (cpu_self1 - cpu_self0) - (cpu_thread1 - cpu_thread0);

  std::vector<double> sorted = add_us;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : add_us) sum += v;
  fmt::print(
      "{{\"trials\": {}, \"interval_us\": {}, \"add_median_us\": {:.2f}, \"add_p99_us\": {:.2f}, "
      "\"add_mean_us\": {:.2f}, \"tracker_cpu_us_per_trial\": {:.1f}, \"finish_s\": {:.3f}, "
      "\"recorded\": {}, \"missed\": {}}}\n",
      trials, interval_us, sorted[sorted.size() / 2], sorted[sorted.size() * 99 / 100],
      sum / static_cast<double>(add_us.size()), 1e6 * tracker_cpu / trials, finish_s,
      counts.empty() ? 0 : counts[0].recorded, counts.empty() ? 0 : counts[0].missed);
  return counts.empty() || counts[0].missed != 0 ? 1 : 0;
}
