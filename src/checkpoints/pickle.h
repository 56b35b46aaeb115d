// A restricted reader of Python pickles [tune_train, private] (plain C++, no LibTorch): the
// objects a PyTorch state dict is made of, nothing else, and nothing executed: the same promise
// as PyTorch's `torch.load(weights_only=True)`.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tune/status.h"

namespace tune {

struct PickleValue;
// Values live in a PickleArena and point at each other by address: a hostile pickle's deep or
// cyclic nesting costs no recursion to free.
using PickleRef = PickleValue*;

struct PickleValue {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    // An int beyond int64 (LONG1, LONG4): text = its little-endian two's-complement bytes. A
    // decimal INT or LONG beyond int64 is refused.
    kBigInt,
    kFloat,
    kString,
    kBytes,
    kTuple,
    kList,
    kDict,
    kGlobal,  // an accepted GLOBAL: text = "module.name"
    kObject,  // the caller's object (a tensor, a storage): text = its kind, id = its index
  };
  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;              // kBigInt, kString, kBytes, kGlobal, kObject
  int64_t id = 0;                // kObject
  std::vector<PickleRef> items;  // kTuple, kList (and sets)
  std::vector<std::pair<PickleRef, PickleRef>> entries;  // kDict, in insertion order
};

// The bounds of one pickle (Unpickle); a state dict needs a few thousand values.
inline constexpr size_t kPickleMaxStack = size_t{1} << 20;
inline constexpr size_t kPickleMaxMarks = size_t{1} << 16;
inline constexpr size_t kPickleMaxMemo = size_t{1} << 20;
inline constexpr size_t kPickleMaxValues = size_t{1} << 22;

// Owns every value of one or more pickles; addresses stay valid while it lives.
class PickleArena {
 public:
  size_t size() const { return values_.size(); }
  PickleRef New(PickleValue::Kind kind);
  PickleRef None() { return New(PickleValue::Kind::kNone); }
  PickleRef Int(int64_t v);
  PickleRef String(std::string s);
  PickleRef Tuple(std::vector<PickleRef> items);
  PickleRef Dict() { return New(PickleValue::Kind::kDict); }
  PickleRef Object(std::string kind, int64_t id);

 private:
  std::deque<PickleValue> values_;
};

// "None", "int", "str", "tuple", ..., the global's name, the object's kind: for messages.
std::string PickleKindName(const PickleValue& v);

// Python's pickle is a small stack machine whose GLOBAL and REDUCE opcodes name any importable
// callable and call it: loading an untrusted pickle in Python runs its author's code. Unpickle
// builds plain values (None, bools, ints, floats, strings, bytes, tuples, lists, dicts) itself,
// and hands every GLOBAL to `global`, which accepts a name from its allow-list or refuses it; a
// REDUCE (a call) is then answered by `reduce` with plain values, so no Python callable ever
// runs. Persistent ids (PyTorch's storages) go to `persistent_load`. An unset hook refuses what
// it would answer.
struct PickleHooks {
  // A GLOBAL module.name: Ok to accept it (a kGlobal value), else the error to stop with
  // (naming the global).
  std::function<Status(const std::string& module, const std::string& name)> global;
  // REDUCE (and BUILD on an object) of an accepted global: the value the call stands for.
  std::function<Result<PickleRef>(const std::string& global, PickleRef args, PickleArena& arena)>
      reduce;
  // BINPERSID / PERSID: the object a persistent id stands for.
  std::function<Result<PickleRef>(PickleRef pid, PickleArena& arena)> persistent_load;
};

// Reads one pickle of `data` starting at `pos` up to its STOP; `pos` is left after the STOP.
// Opcodes of protocols 0-5 that a state dict can contain are read; INST, OBJ, NEWOBJ,
// NEWOBJ_EX, EXT* and the out-of-band buffers are refused, and BUILD sets only a dict's
// attributes. Every length data is read by is checked against the bytes left (FRAME's length is
// a hint and ignored), and the pickle may hold at most kPickleMaxStack values on its stack,
// kPickleMaxMarks nested MARKs, kPickleMaxMemo memo entries and kPickleMaxValues values in all
// (those the hooks make included), checked after every opcode. Setting a dict's items is linear
// in their number (a repeated string key replaces its value). Values may refer to each other in
// cycles (the memo lets a list hold itself): a reader of the result must not recurse through it.
// Every error is InvalidArgument naming `what`, the opcode and its byte offset: for a pickle
// that is malformed, truncated or past a bound (naming the bound), or that uses what the hooks
// refuse; a hook's error is returned so, with its message (its own code is not kept).
Result<PickleRef> Unpickle(std::string_view data, size_t& pos, const PickleHooks& hooks,
                           const std::string& what, PickleArena& arena);

}  // namespace tune
