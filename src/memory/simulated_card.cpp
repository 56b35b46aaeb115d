#include "memory/simulated_card.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "util/text.h"

namespace tune {
namespace {

constexpr uint64_t kMagic = 0x74756e6563617232;  // "tunecar2": slots with a busy share
constexpr size_t kSlots = 1024;

std::string ShmName(const std::string& name) { return "/tune-card-" + name; }

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

bool Alive(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace

struct SimulatedCard::Shared {
  std::atomic<uint64_t> magic;  // kMagic once initialised
  std::atomic<int32_t> state;   // 0 new, 1 initialising, 2 ready
  int64_t capacity;
  int64_t total;  // the bytes of all slots; guarded by mu
  pthread_mutex_t mu;
  struct Slot {
    pid_t pid;  // 0: free
    int64_t bytes;
    double busy;  // its busy share alone while it computes, else 0
  } slots[kSlots];

  // REQUIRES: mu held. Frees the slots of dead processes; returns the bytes of the live ones.
  int64_t Reclaim() {
    for (Slot& s : slots) {
      if (s.pid != 0 && !Alive(s.pid)) {
        total -= s.bytes;
        s = Slot{0, 0, 0.0};
      }
    }
    return total;
  }

  // REQUIRES: mu held. This process's slot, claimed if needed (nullptr when all are taken).
  Slot* Mine() {
    const pid_t me = getpid();
    Slot* free_slot = nullptr;
    for (Slot& s : slots) {
      if (s.pid == me) return &s;
      if (s.pid == 0 && free_slot == nullptr) free_slot = &s;
    }
    if (free_slot != nullptr) *free_slot = Slot{me, 0, 0.0};
    return free_slot;
  }
};

namespace {

// Locks the card's mutex; recovers it when its owner died holding it.
class CardLock {
 public:
  explicit CardLock(pthread_mutex_t* mu) : mu_(mu) {
    if (pthread_mutex_lock(mu_) == EOWNERDEAD) pthread_mutex_consistent(mu_);
  }
  ~CardLock() { pthread_mutex_unlock(mu_); }
  CardLock(const CardLock&) = delete;
  CardLock& operator=(const CardLock&) = delete;

 private:
  pthread_mutex_t* mu_;
};

void Initialise(SimulatedCard::Shared* s, int64_t capacity) {
  int32_t expected = 0;
  if (s->state.compare_exchange_strong(expected, 1)) {
    s->capacity = capacity;
    s->total = 0;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    std::memset(static_cast<void*>(s->slots), 0, sizeof s->slots);
    s->magic.store(kMagic);
    s->state.store(2);
    return;
  }
  while (s->state.load() != 2) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace

Result<std::unique_ptr<SimulatedCard>> SimulatedCard::Open(const std::string& name,
                                                           int64_t capacity) {
  if (!ValidName(name)) {
    return InvalidArgumentError(
        fmt::format("simulated card name '{}': use 1-64 letters, digits, '-', '_' or '.'", name));
  }
  if (capacity <= 0) return InvalidArgumentError("a simulated card needs a capacity > 0 bytes");
  const std::string shm = ShmName(name);
  const int fd = shm_open(shm.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0) {
    return FailedPreconditionError(
        fmt::format("cannot open the simulated card /dev/shm{}: {}", shm, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size < static_cast<off_t>(sizeof(Shared))) {
    (void)!ftruncate(fd, sizeof(Shared));  // zero-filled: state 0
  }
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    return FailedPreconditionError(
        fmt::format("cannot map the simulated card /dev/shm{}: {}", shm, std::strerror(errno)));
  }
  auto* shared = static_cast<Shared*>(p);
  Initialise(shared, capacity);
  if (shared->capacity != capacity) {
    const int64_t existing = shared->capacity;
    munmap(p, sizeof(Shared));
    return FailedPreconditionError(fmt::format(
        "the simulated card '{}' exists with {} ({} requested); use another name, or remove "
        "/dev/shm{} when no run uses it",
        name, FormatBytes(existing), FormatBytes(capacity), shm));
  }
  return std::unique_ptr<SimulatedCard>(new SimulatedCard(name, shared));
}

SimulatedCard::~SimulatedCard() { munmap(shared_, sizeof(Shared)); }

Status SimulatedCard::Charge(int64_t bytes) {
  CardLock lock(&shared_->mu);
  Shared::Slot* mine = shared_->Mine();
  if (mine == nullptr) return ResourceExhaustedError("the simulated card has no free slot");
  if (bytes > 0 && shared_->total + bytes > shared_->capacity &&
      shared_->Reclaim() + bytes > shared_->capacity) {
    return ResourceExhaustedError(fmt::format(
        "simulated card '{}' out of memory: tried to allocate {}; {} of {} in use ({} by this "
        "process)",
        name_, FormatBytes(bytes), FormatBytes(shared_->total), FormatBytes(shared_->capacity),
        FormatBytes(mine->bytes)));
  }
  const int64_t change = std::max(bytes, -mine->bytes);  // never below nothing
  mine->bytes += change;
  shared_->total += change;
  return Status::Ok();
}

int64_t SimulatedCard::used() const {
  CardLock lock(&shared_->mu);
  return shared_->Reclaim();
}

int64_t SimulatedCard::mine() const {
  CardLock lock(&shared_->mu);
  for (const Shared::Slot& s : shared_->slots) {
    if (s.pid == getpid()) return s.bytes;
  }
  return 0;
}

int64_t SimulatedCard::capacity() const { return shared_->capacity; }

std::vector<std::pair<pid_t, int64_t>> SimulatedCard::holders() const {
  CardLock lock(&shared_->mu);
  shared_->Reclaim();
  std::vector<std::pair<pid_t, int64_t>> out;
  for (const Shared::Slot& s : shared_->slots) {
    if (s.pid != 0 && s.bytes > 0) out.emplace_back(s.pid, s.bytes);
  }
  return out;
}

double GpuStretch(int64_t busy, double sum_busy, double own, const CardCompute& compute) {
  if (busy <= 1) return std::max(1.0, sum_busy);
  const double sliced = 1.0 + compute.slicing;
  const double interleaved = sliced * (1.0 + compute.interleave * static_cast<double>(busy - 1));
  if (!(own > 0.0)) return interleaved;
  // The step (g + h) x sum_busy x sliced, written as h + g x stretch, with h / g = (1 - own) / own.
  const double saturated = (sum_busy * sliced - (1.0 - own)) / own;
  return std::max(interleaved, saturated);
}

Status SimulatedCard::SetBusy(double share) {
  if (!(share >= 0.0 && share <= 1.0)) {
    return InvalidArgumentError(fmt::format("a busy share is in [0, 1], got {}", share));
  }
  CardLock lock(&shared_->mu);
  Shared::Slot* mine = shared_->Mine();
  if (mine == nullptr) return ResourceExhaustedError("the simulated card has no free slot");
  mine->busy = share;
  return Status::Ok();
}

CardLoad SimulatedCard::load() const {
  CardLock lock(&shared_->mu);
  shared_->Reclaim();
  CardLoad load;
  for (const Shared::Slot& s : shared_->slots) {
    if (s.pid == 0 || s.busy <= 0.0) continue;
    ++load.busy;
    load.sum_busy += s.busy;
  }
  return load;
}

Result<double> SimulatedCard::RunSteps(const MicroSteps& steps, double time_scale,
                                       const CardCompute& compute) {
  if (!(time_scale > 0.0) || steps.count < 0 || steps.gpu_seconds < 0 || steps.host_seconds < 0) {
    return InvalidArgumentError("RunSteps: the time scale must be > 0 and the steps >= 0");
  }
  TUNE_RETURN_IF_ERROR(SetBusy(steps.busy_share()));
  using Clock = std::chrono::steady_clock;
  const auto tick = std::chrono::milliseconds(5);
  double done = 0.0, simulated = 0.0;
  Clock::time_point last = Clock::now();
  while (done < steps.count) {
    const CardLoad now = load();
    const double step =
        steps.host_seconds +
        steps.gpu_seconds * GpuStretch(now.busy, now.sum_busy, steps.busy_share(), compute);
    if (!(step > 0.0)) break;
    // Sleeps one tick, or less when the steps left end sooner at this rate.
    const double left_real = (steps.count - done) * step * time_scale;
    std::this_thread::sleep_for(std::min<Clock::duration>(
        tick,
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(left_real))));
    const Clock::time_point t = Clock::now();
    const double dt = std::chrono::duration<double>(t - last).count() / time_scale;
    last = t;
    const double advanced = std::min(dt / step, steps.count - done);
    done += advanced;
    simulated += advanced * step;
  }
  TUNE_RETURN_IF_ERROR(SetBusy(0.0));
  return simulated;
}

Status SimulatedCard::Remove(const std::string& name) {
  if (shm_unlink(ShmName(name).c_str()) != 0 && errno != ENOENT) {
    return InternalError(
        fmt::format("cannot remove the simulated card '{}': {}", name, std::strerror(errno)));
  }
  return Status::Ok();
}

namespace {
std::unique_ptr<SimulatedCard>& ProcessCardSlot() {
  static std::unique_ptr<SimulatedCard> card;
  return card;
}
}  // namespace

SimulatedCard* ProcessSimulatedCard() { return ProcessCardSlot().get(); }

Status SetProcessSimulatedCard(const std::string& name, int64_t capacity) {
  if (ProcessCardSlot() && ProcessCardSlot()->name() == name) return Status::Ok();
  TUNE_ASSIGN_OR_RETURN(ProcessCardSlot(), SimulatedCard::Open(name, capacity));
  return Status::Ok();
}

}  // namespace tune

namespace {

// Cards opened through the C functions, by name.
tune::SimulatedCard* CardFor(const char* name, int64_t capacity) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<tune::SimulatedCard>> cards;
  std::lock_guard lock(mu);
  auto it = cards.find(name);
  if (it != cards.end()) return it->second.get();
  auto card = tune::SimulatedCard::Open(name, capacity);
  if (!card.ok()) {
    std::fprintf(stderr, "tune: %s\n", card.status().message().c_str());
    return nullptr;
  }
  return cards.emplace(name, std::move(card).value()).first->second.get();
}

}  // namespace

extern "C" {

int tune_simulated_card_charge(const char* name, int64_t capacity, int64_t bytes) {
  tune::SimulatedCard* card = CardFor(name, capacity);
  if (card == nullptr) return -1;
  const tune::Status s = card->Charge(bytes);
  if (s.ok()) return 0;
  std::fprintf(stderr, "%s\n", s.message().c_str());
  return s.code() == tune::StatusCode::kResourceExhausted ? 1 : -1;
}

int64_t tune_simulated_card_used(const char* name, int64_t capacity) {
  tune::SimulatedCard* card = CardFor(name, capacity);
  return card == nullptr ? -1 : card->used();
}

int64_t tune_simulated_card_load(const char* name, int64_t capacity, double* sum_busy) {
  tune::SimulatedCard* card = CardFor(name, capacity);
  if (card == nullptr) return -1;
  const tune::CardLoad load = card->load();
  if (sum_busy != nullptr) *sum_busy = load.sum_busy;
  return load.busy;
}

}  // extern "C"
