// In-memory storage: the reference backend (`--storage memory`). Lives as long as the process.
// Thread-safe (one mutex).
#pragma once

#include <memory>

#include "tune/storages/storage.h"

namespace tune {

std::unique_ptr<Storage> NewInMemoryStorage();

}  // namespace tune
