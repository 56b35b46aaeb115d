// Another process on a simulated card, for the CLI tests of the memory guard: a forked child
// charging bytes through libtune_train's C function (TUNE_TRAIN_LIBRARY), as a program in another
// language would, and holding them until killed. It is not one of tune's processes, so tune counts
// it as another process on the card (a desktop, a notebook).
#pragma once

#include <dlfcn.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace tune::testing {

// The holder's pid, or -1 when it could not charge the card.
inline pid_t HoldOnSimulatedCard(const std::string& name, int64_t capacity, int64_t bytes) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    void* lib = dlopen(TUNE_TRAIN_LIBRARY, RTLD_NOW);
    using Charge = int (*)(const char*, int64_t, int64_t);
    auto charge =
        lib ? reinterpret_cast<Charge>(dlsym(lib, "tune_simulated_card_charge")) : nullptr;
    const bool ok = charge != nullptr && charge(name.c_str(), capacity, bytes) == 0;
    (void)!write(ready[1], ok ? "y" : "n", 1);
    pause();
    _exit(0);
  }
  char c = 0;
  const bool ok = child > 0 && read(ready[0], &c, 1) == 1 && c == 'y';
  close(ready[0]);
  close(ready[1]);
  return ok ? child : -1;
}

}  // namespace tune::testing
