#include "checkpoints/pytorch_bin.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unzip.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "checkpoints/pickle.h"
#include "util/coding.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using K = PickleValue::Kind;

// The typed storages of torch.save, by their global's name.
struct StorageType {
  const char* name;
  TensorDtype dtype;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", TensorDtype::kF32},     {"HalfStorage", TensorDtype::kF16},
    {"BFloat16Storage", TensorDtype::kBF16}, {"DoubleStorage", TensorDtype::kF64},
    {"LongStorage", TensorDtype::kI64},      {"IntStorage", TensorDtype::kI32},
    {"ShortStorage", TensorDtype::kI16},     {"CharStorage", TensorDtype::kI8},
    {"ByteStorage", TensorDtype::kU8},       {"BoolStorage", TensorDtype::kBool}};

// Globals a state dict may name and what they stand for.
const std::set<std::string>& CallableGlobals() {
  static const std::set<std::string> globals = {"collections.OrderedDict",
                                                "torch._utils._rebuild_tensor_v2",
                                                "torch._utils._rebuild_tensor",
                                                "torch._utils._rebuild_parameter",
                                                "torch._utils._rebuild_parameter_with_state",
                                                "torch._tensor._rebuild_from_type_v2",
                                                "torch.Size",
                                                "_codecs.encode"};
  return globals;
}
const std::set<std::string>& ValueGlobals() {
  static const std::set<std::string> globals = [] {
    std::set<std::string> g = {"torch.Tensor", "torch.nn.parameter.Parameter"};
    for (const auto& s : kStorageTypes) g.insert(std::string("torch.") + s.name);
    for (const char* d : {"float32", "float16", "bfloat16", "float64", "int64", "int32", "int16",
                          "int8", "uint8", "bool", "float", "half", "double", "long", "int"}) {
      g.insert(std::string("torch.") + d);
    }
    return g;
  }();
  return globals;
}

std::optional<TensorDtype> StorageDtype(const std::string& global) {
  for (const auto& s : kStorageTypes) {
    if (global == std::string("torch.") + s.name) return s.dtype;
  }
  return std::nullopt;
}

// A storage a persistent id named: its key, dtype and, for a legacy view, an element offset.
struct Storage {
  std::string key;
  TensorDtype dtype = TensorDtype::kF32;
  int64_t numel = 0;
  int64_t view_offset = 0;
};

// A tensor a rebuild function made.
struct Tensor {
  size_t storage = 0;
  int64_t storage_offset = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

Result<int64_t> AsInt(PickleRef v, const std::string& what) {
  if (v->kind == K::kInt) return v->integer;
  if (v->kind == K::kBool) return int64_t{v->boolean};
  return InvalidArgumentError(fmt::format("{} is a {}, expected an int", what, PickleKindName(*v)));
}

Result<std::vector<int64_t>> AsInts(PickleRef v, const std::string& what) {
  if (v->kind != K::kTuple && v->kind != K::kList) {
    return InvalidArgumentError(
        fmt::format("{} is a {}, expected a tuple of ints", what, PickleKindName(*v)));
  }
  std::vector<int64_t> out;
  for (PickleRef item : v->items) {
    TUNE_ASSIGN_OR_RETURN(int64_t i, AsInt(item, what));
    out.push_back(i);
  }
  return out;
}

// collections.OrderedDict() or OrderedDict([(k, v), ...]).
Result<PickleRef> MakeOrderedDict(const std::vector<PickleRef>& a, PickleArena& arena) {
  PickleRef d = arena.Dict();
  if (a.empty()) return d;
  if (a.size() == 1 && a[0]->kind == K::kList) {  // OrderedDict([(k, v), ...])
    for (PickleRef kv : a[0]->items) {
      if (kv->kind != K::kTuple || kv->items.size() != 2) {
        return InvalidArgumentError("collections.OrderedDict of items that are not pairs");
      }
      d->entries.emplace_back(kv->items[0], kv->items[1]);
    }
    return d;
  }
  return InvalidArgumentError("collections.OrderedDict called with arguments it does not take");
}

// Protocol 2's bytes: _codecs.encode(str, 'latin1').
Result<PickleRef> Latin1Bytes(const std::vector<PickleRef>& a, PickleArena& arena) {
  if (a.size() != 2 || a[0]->kind != K::kString || a[1]->kind != K::kString ||
      a[1]->text != "latin1") {
    return InvalidArgumentError("_codecs.encode other than (str, 'latin1')");
  }
  PickleRef b = arena.New(K::kBytes);
  // The str holds code points < 256 as UTF-8; latin1 makes each one byte.
  const std::string& s = a[0]->text;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      b->text.push_back(static_cast<char>(c));
    } else if ((c & 0xe0) == 0xc0 && i + 1 < s.size()) {
      b->text.push_back(static_cast<char>(((c & 0x1f) << 6) | (s[++i] & 0x3f)));
    } else {
      return InvalidArgumentError("_codecs.encode of a character beyond latin1");
    }
  }
  return b;
}

// The state dict's reader: the unpickler's hooks, and the storages and tensors they made.
class StateDictReader {
 public:
  explicit StateDictReader(bool legacy) : legacy_(legacy) {}

  PickleHooks Hooks() {
    PickleHooks h;
    h.global = [](const std::string& module, const std::string& name) {
      const std::string g = module + "." + name;
      if (CallableGlobals().count(g) || ValueGlobals().count(g)) return Status::Ok();
      return InvalidArgumentError(fmt::format(
          "refused the global '{}': a state dict needs only collections.OrderedDict, "
          "torch._utils._rebuild_tensor_v2 and its kin, torch's storages and dtypes (what "
          "torch.load(weights_only=True) accepts); tune executes nothing from a checkpoint",
          g));
    };
    h.reduce = [this](const std::string& g, PickleRef args, PickleArena& arena) {
      return Reduce(g, args, arena);
    };
    h.persistent_load = [this](PickleRef pid, PickleArena& arena) {
      return PersistentLoad(pid, arena);
    };
    return h;
  }

  const std::vector<Storage>& storages() const { return storages_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  Result<PickleRef> PersistentLoad(PickleRef pid, PickleArena& arena) {
    // ('storage', storage_type, key, location, numel[, view_metadata (legacy)])
    if (pid->kind != K::kTuple || pid->items.size() < 5 || pid->items[0]->kind != K::kString ||
        pid->items[0]->text != "storage") {
      return InvalidArgumentError(fmt::format(
          "a persistent id that is not a storage ('storage', type, key, location, size): a {}",
          PickleKindName(*pid)));
    }
    const auto& item = pid->items;
    if (item[1]->kind != K::kGlobal || !StorageDtype(item[1]->text)) {
      return InvalidArgumentError(fmt::format("a storage of type {}; expected a typed storage ({})",
                                              PickleKindName(*item[1]), "torch.FloatStorage, ..."));
    }
    if (item[2]->kind != K::kString) {
      return InvalidArgumentError(
          fmt::format("a storage key that is a {}, not a str", PickleKindName(*item[2])));
    }
    Storage s;
    s.dtype = *StorageDtype(item[1]->text);
    s.key = item[2]->text;
    TUNE_ASSIGN_OR_RETURN(s.numel, AsInt(item[4], "a storage's size"));
    if (s.numel < 0)
      return InvalidArgumentError(fmt::format("storage '{}': size {}", s.key, s.numel));
    if (legacy_ && item.size() >= 6 && item[5]->kind == K::kTuple) {
      // view_metadata: (view_key, offset, view_size) of the root storage.
      if (item[5]->items.size() != 3) {
        return InvalidArgumentError(fmt::format("storage '{}': a view of {} fields, expected 3",
                                                s.key, item[5]->items.size()));
      }
      TUNE_ASSIGN_OR_RETURN(s.view_offset, AsInt(item[5]->items[1], "a storage view's offset"));
      if (s.view_offset < 0) {
        return InvalidArgumentError(
            fmt::format("storage '{}': a view at offset {}", s.key, s.view_offset));
      }
    }
    storages_.push_back(s);
    return arena.Object("storage", static_cast<int64_t>(storages_.size() - 1));
  }

  Result<PickleRef> RebuildTensor(const std::vector<PickleRef>& a, PickleArena& arena) {
    if (a.size() < 4 || a[0]->kind != K::kObject || a[0]->text != "storage") {
      return InvalidArgumentError(
          "torch._utils._rebuild_tensor_v2 without (storage, offset, size, stride, ...)");
    }
    Tensor t;
    t.storage = static_cast<size_t>(a[0]->id);
    TUNE_ASSIGN_OR_RETURN(t.storage_offset, AsInt(a[1], "a tensor's storage offset"));
    TUNE_ASSIGN_OR_RETURN(t.shape, AsInts(a[2], "a tensor's size"));
    TUNE_ASSIGN_OR_RETURN(t.strides, AsInts(a[3], "a tensor's stride"));
    t.storage_offset += storages_[t.storage].view_offset;
    tensors_.push_back(std::move(t));
    return arena.Object("tensor", static_cast<int64_t>(tensors_.size() - 1));
  }

  Result<PickleRef> Reduce(const std::string& g, PickleRef args, PickleArena& arena) {
    const std::vector<PickleRef>& a = args->items;
    if (g == "collections.OrderedDict") return MakeOrderedDict(a, arena);
    if (g == "torch._utils._rebuild_tensor_v2" || g == "torch._utils._rebuild_tensor") {
      return RebuildTensor(a, arena);
    }
    if (g == "torch._utils._rebuild_parameter" ||
        g == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != K::kObject || a[0]->text != "tensor") {
        return InvalidArgumentError(fmt::format("{} of something that is not a tensor", g));
      }
      return a[0];
    }
    if (g == "torch._tensor._rebuild_from_type_v2") {
      // (func, new_type, args, state): a tensor subclass; only plain tensors and parameters.
      if (a.size() != 4 || a[0]->kind != K::kGlobal || a[1]->kind != K::kGlobal ||
          a[2]->kind != K::kTuple) {
        return InvalidArgumentError(
            "torch._tensor._rebuild_from_type_v2 with unexpected arguments");
      }
      if (a[1]->text != "torch.Tensor" && a[1]->text != "torch.nn.parameter.Parameter") {
        return InvalidArgumentError(fmt::format(
            "a tensor of type {}; tune reads torch.Tensor and torch.nn.Parameter", a[1]->text));
      }
      if (!CallableGlobals().count(a[0]->text) || a[0]->text == g) {
        return InvalidArgumentError(fmt::format("{} cannot rebuild a tensor", a[0]->text));
      }
      return Reduce(a[0]->text, a[2], arena);
    }
    if (g == "torch.Size") {
      if (a.size() == 1 && (a[0]->kind == K::kTuple || a[0]->kind == K::kList)) {
        return arena.Tuple(a[0]->items);
      }
      return InvalidArgumentError("torch.Size of something that is not a tuple");
    }
    if (g == "_codecs.encode") return Latin1Bytes(a, arena);
    return InvalidArgumentError(fmt::format("{} cannot be called", g));
  }

  bool legacy_;
  std::vector<Storage> storages_;
  std::vector<Tensor> tensors_;
};

// The state dict: a dict of name -> tensor. Nested dicts (a training checkpoint's {"model": ...})
// are refused, naming the entry.
Result<std::vector<std::pair<std::string, size_t>>> StateDictEntries(PickleRef root,
                                                                     const std::string& path) {
  if (root->kind != K::kDict) {
    return InvalidArgumentError(fmt::format(
        "{}: holds a {}, not a state dict (a dict of name -> tensor, as save_pretrained writes)",
        path, PickleKindName(*root)));
  }
  std::vector<std::pair<std::string, size_t>> out;
  for (const auto& [k, v] : root->entries) {
    if (k->kind != K::kString) {
      return InvalidArgumentError(
          fmt::format("{}: a state dict key that is a {}, not a str", path, PickleKindName(*k)));
    }
    if (v->kind == K::kObject && v->text == "tensor") {
      out.emplace_back(k->text, static_cast<size_t>(v->id));
    } else if (v->kind == K::kDict) {
      return InvalidArgumentError(fmt::format(
          "{}: entry '{}' is a dict: this is a training checkpoint, not a state dict; tune reads "
          "a flat state dict (name -> tensor), as save_pretrained writes. Save that entry alone: "
          "torch.save(torch.load(path, weights_only=True)['{}'], 'pytorch_model.bin')",
          path, k->text, k->text));
    }
    // Other values (a version number, None) are not weights: ignored.
  }
  if (out.empty()) {
    return InvalidArgumentError(fmt::format("{}: the state dict holds no tensors", path));
  }
  return out;
}

// The tensors in the checkpoint's vocabulary, with `begin` giving each storage's byte offset in
// the file and `bytes` its size; checked against their storages.
Result<std::vector<CheckpointTensor>> MakeTensors(
    const StateDictReader& reader, const std::vector<std::pair<std::string, size_t>>& entries,
    const std::map<std::string, std::pair<uint64_t, uint64_t>>& storage_at,
    const std::string& path) {
  std::vector<CheckpointTensor> out;
  for (const auto& [name, index] : entries) {
    const Tensor& t = reader.tensors()[index];
    const Storage& s = reader.storages()[t.storage];
    auto at = storage_at.find(s.key);
    if (at == storage_at.end()) {
      return InvalidArgumentError(fmt::format(
          "{}: tensor '{}': its storage '{}' is not in the file (truncated?)", path, name, s.key));
    }
    CheckpointTensor c;
    c.name = name;
    c.dtype = s.dtype;
    c.shape = t.shape;
    c.strides = t.strides;
    c.storage_begin = at->second.first;
    c.storage_bytes = at->second.second;
    c.storage_offset = t.storage_offset;
    TUNE_RETURN_IF_ERROR(CheckTensorBounds(c, path));
    out.push_back(std::move(c));
  }
  return out;
}

// --- The zip format ----------------------------------------------------------------------------

struct ZipEntry {
  uint64_t begin = 0;  // of the entry's data in the file
  uint64_t size = 0;
  int method = 0;
};

class Zip {
 public:
  explicit Zip(const std::string& path) : file_(unzOpen64(path.c_str())) {}
  ~Zip() {
    if (file_ != nullptr) unzClose(file_);
  }
  Zip(const Zip&) = delete;
  Zip& operator=(const Zip&) = delete;
  unzFile get() const { return file_; }

 private:
  unzFile file_;
};

Result<std::string> ReadEntry(unzFile zip, const std::string& name, const std::string& path) {
  if (unzLocateFile(zip, name.c_str(), 1) != UNZ_OK || unzOpenCurrentFile(zip) != UNZ_OK) {
    return InvalidArgumentError(fmt::format("{}: cannot open the archive's {}", path, name));
  }
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = unzReadCurrentFile(zip, buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1ull << 31)) {
      unzCloseCurrentFile(zip);
      return InvalidArgumentError(fmt::format("{}: {} is over 2 GiB", path, name));
    }
  }
  const int closed = unzCloseCurrentFile(zip);
  if (n < 0 || closed != UNZ_OK) {
    return InvalidArgumentError(
        fmt::format("{}: cannot read the archive's {} (corrupt or truncated; minizip error {})",
                    path, name, n < 0 ? n : closed));
  }
  return out;
}

// Every entry of the archive: where its data starts, its size and compression.
Result<std::map<std::string, ZipEntry>> ListZip(unzFile zip, const std::string& path) {
  std::map<std::string, ZipEntry> entries;
  for (int rc = unzGoToFirstFile(zip); rc == UNZ_OK; rc = unzGoToNextFile(zip)) {
    unz_file_info64 info;
    char name[4096];
    if (unzGetCurrentFileInfo64(zip, &info, name, sizeof name, nullptr, 0, nullptr, 0) != UNZ_OK ||
        unzOpenCurrentFile(zip) != UNZ_OK) {
      return InvalidArgumentError(
          fmt::format("{}: a corrupt entry in the archive's directory", path));
    }
    ZipEntry e;
    e.begin = unzGetCurrentFileZStreamPos64(zip);
    e.size = info.uncompressed_size;
    e.method = static_cast<int>(info.compression_method);
    unzCloseCurrentFile(zip);
    entries[name] = e;
  }
  return entries;
}

// The folder holding data.pkl ("archive/", the saved file's stem, ...): torch.save puts every
// entry under one.
Result<std::string> ArchivePrefix(const std::map<std::string, ZipEntry>& entries,
                                  const std::string& path) {
  const std::string tail = "data.pkl";
  for (const auto& [name, e] : entries) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.compare(slash + 1, std::string::npos, tail) == 0) {
      return name.substr(0, slash + 1);
    }
  }
  return InvalidArgumentError(
      fmt::format("{}: a zip archive without <name>/data.pkl: not a torch.save checkpoint", path));
}

Result<PytorchCheckpoint> ReadZip(const std::string& path, uint64_t file_size) {
  Zip zip(path);
  if (zip.get() == nullptr) {
    return InvalidArgumentError(fmt::format(
        "{}: starts as a zip archive but its directory cannot be read: the file is truncated or "
        "corrupt",
        path));
  }
  TUNE_ASSIGN_OR_RETURN(auto entries, ListZip(zip.get(), path));
  TUNE_ASSIGN_OR_RETURN(std::string prefix, ArchivePrefix(entries, path));
  if (entries.count(prefix + "byteorder")) {
    TUNE_ASSIGN_OR_RETURN(std::string order, ReadEntry(zip.get(), prefix + "byteorder", path));
    if (order != "little") {
      return InvalidArgumentError(fmt::format(
          "{}: saved on a '{}'-endian machine; tune reads little-endian checkpoints", path, order));
    }
  }
  TUNE_ASSIGN_OR_RETURN(std::string pickle, ReadEntry(zip.get(), prefix + "data.pkl", path));
  StateDictReader reader(/*legacy=*/false);
  PickleArena arena;
  size_t pos = 0;
  TUNE_ASSIGN_OR_RETURN(PickleRef root,
                        Unpickle(pickle, pos, reader.Hooks(), path + ": data.pkl", arena));
  TUNE_ASSIGN_OR_RETURN(auto state, StateDictEntries(root, path));
  // Where each storage the tensors use lies in the file.
  std::map<std::string, std::pair<uint64_t, uint64_t>> storage_at;
  for (const Storage& s : reader.storages()) {
    auto it = entries.find(prefix + "data/" + s.key);
    if (it == entries.end()) continue;  // reported by MakeTensors, naming the tensor
    const ZipEntry& e = it->second;
    if (e.method != 0) {
      return InvalidArgumentError(
          fmt::format("{}: storage '{}' is compressed (zip method {}); torch.save stores storages "
                      "uncompressed, and tune reads only those",
                      path, s.key, e.method));
    }
    if (e.begin > file_size || e.size > file_size - e.begin) {
      return InvalidArgumentError(fmt::format(
          "{}: storage '{}' ({} bytes at offset {}) goes past the end of the file ({} bytes): "
          "truncated",
          path, s.key, e.size, e.begin, file_size));
    }
    const uint64_t declared =
        static_cast<uint64_t>(s.numel) * static_cast<uint64_t>(TensorDtypeSize(s.dtype));
    if (declared > e.size) {
      return InvalidArgumentError(fmt::format(
          "{}: storage '{}' declares {} bytes, the archive holds {}: truncated or corrupt", path,
          s.key, declared, e.size));
    }
    storage_at[s.key] = {e.begin, e.size};
  }
  PytorchCheckpoint out;
  out.format = "zip";
  TUNE_ASSIGN_OR_RETURN(out.tensors, MakeTensors(reader, state, storage_at, path));
  return out;
}

// --- The legacy format -------------------------------------------------------------------------

class Mapped {
 public:
  explicit Mapped(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const char*>(p);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    close(fd);
  }
  ~Mapped() {
    if (data_ != nullptr) munmap(const_cast<char*>(data_), size_);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  std::string_view view() const { return {data_, size_}; }
  bool ok() const { return data_ != nullptr; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// The legacy format's storages, after its pickles (from `pos`): for each key of the list, in
// order, an int64 element count and the raw bytes. {key: (offset in the file, bytes)}.
Result<std::map<std::string, std::pair<uint64_t, uint64_t>>> LegacyStorages(
    std::string_view data, size_t pos, PickleRef keys, const std::vector<Storage>& storages,
    const std::string& path) {
  std::map<std::string, TensorDtype> dtype_of;
  for (const Storage& s : storages) dtype_of[s.key] = s.dtype;
  // Then each storage, in the keys' order: int64 element count, raw bytes.
  std::map<std::string, std::pair<uint64_t, uint64_t>> storage_at;
  for (PickleRef key : keys->items) {
    if (key->kind != K::kString || !dtype_of.count(key->text)) {
      return InvalidArgumentError(
          fmt::format("{}: the storage list names a storage no tensor uses", path));
    }
    if (data.size() - pos < 8) {
      return InvalidArgumentError(
          fmt::format("{}: storage '{}' is missing: the file is truncated", path, key->text));
    }
    const uint64_t numel = DecodeFixed64(data.data() + pos);
    pos += 8;
    const auto size = static_cast<uint64_t>(TensorDtypeSize(dtype_of[key->text]));
    if (numel > (data.size() - pos) / size) {
      return InvalidArgumentError(
          fmt::format("{}: storage '{}' of {} elements goes past the end of the file: truncated",
                      path, key->text, numel));
    }
    storage_at[key->text] = {pos, numel * size};
    pos += numel * size;
  }
  return storage_at;
}

Result<PytorchCheckpoint> ReadLegacy(const std::string& path) {
  Mapped file(path);
  if (!file.ok()) return NotFoundError(fmt::format("{}: cannot read", path));
  const std::string_view data = file.view();
  PickleArena arena;
  size_t pos = 0;
  PickleHooks plain;  // the header pickles hold plain values only
  plain.global = [](const std::string& module, const std::string& name) {
    return InvalidArgumentError(
        fmt::format("refused the global '{}.{}' in the legacy header", module, name));
  };
  TUNE_ASSIGN_OR_RETURN(PickleRef magic,
                        Unpickle(data, pos, plain, path + ": magic number", arena));
  // 0x1950a86a20f9469cfc6c, torch.serialization's MAGIC_NUMBER, little-endian.
  const std::string kMagic("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10);
  if (magic->kind != K::kBigInt || magic->text != kMagic) {
    return InvalidArgumentError(fmt::format(
        "{}: a pickle, but not a PyTorch checkpoint (no torch.save magic number)", path));
  }
  TUNE_ASSIGN_OR_RETURN(PickleRef version, Unpickle(data, pos, plain, path + ": version", arena));
  if (version->kind != K::kInt || version->integer != 1001) {
    return InvalidArgumentError(fmt::format("{}: legacy format version {}; tune reads 1001", path,
                                            version->kind == K::kInt ? version->integer : -1));
  }
  TUNE_ASSIGN_OR_RETURN(PickleRef sys_info,
                        Unpickle(data, pos, plain, path + ": system info", arena));
  if (sys_info->kind == K::kDict) {
    for (const auto& [k, v] : sys_info->entries) {
      if (k->kind == K::kString && k->text == "little_endian" && v->kind == K::kBool &&
          !v->boolean) {
        return InvalidArgumentError(fmt::format(
            "{}: saved on a big-endian machine; tune reads little-endian checkpoints", path));
      }
    }
  }
  StateDictReader reader(/*legacy=*/true);
  TUNE_ASSIGN_OR_RETURN(PickleRef root, Unpickle(data, pos, reader.Hooks(), path, arena));
  TUNE_ASSIGN_OR_RETURN(auto state, StateDictEntries(root, path));
  TUNE_ASSIGN_OR_RETURN(PickleRef keys, Unpickle(data, pos, plain, path + ": storage keys", arena));
  if (keys->kind != K::kList) {
    return InvalidArgumentError(
        fmt::format("{}: the storage keys are a {}, not a list", path, PickleKindName(*keys)));
  }
  TUNE_ASSIGN_OR_RETURN(auto storage_at, LegacyStorages(data, pos, keys, reader.storages(), path));
  PytorchCheckpoint out;
  out.format = "legacy";
  TUNE_ASSIGN_OR_RETURN(out.tensors, MakeTensors(reader, state, storage_at, path));
  return out;
}

}  // namespace

Result<PytorchCheckpoint> ReadPytorchCheckpoint(const std::string& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return NotFoundError(fmt::format("{}: cannot open: {}", path, ec.message()));
  std::ifstream in(path, std::ios::binary);
  char head[512] = {};
  in.read(head, sizeof head);
  const auto got = static_cast<size_t>(in.gcount());
  if (got >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0) return ReadZip(path, size);
  // A safetensors file under a .bin name (an 8-byte little-endian header length, then '{'),
  // before the pickle test: a header length can start with 0x80.
  const uint64_t header = got >= 9 ? DecodeFixed64(head) : 0;
  if (got >= 9 && head[8] == '{' && header > 0 && header <= size - 8) {
    return InvalidArgumentError(fmt::format(
        "{}: not a PyTorch checkpoint: it is a safetensors file; name it model.safetensors", path));
  }
  if (got >= 2 && static_cast<uint8_t>(head[0]) == 0x80 && static_cast<uint8_t>(head[1]) <= 5) {
    return ReadLegacy(path);
  }
  if (got >= 262 && std::memcmp(head + 257, "ustar", 5) == 0) {
    return InvalidArgumentError(fmt::format(
        "{}: the tar format of torch.save before PyTorch 0.1.10 (2017), which tune does not read; "
        "re-save it with a "
        "current PyTorch: torch.save(torch.load(path), path)",
        path));
  }
  return InvalidArgumentError(fmt::format(
      "{}: not a PyTorch checkpoint (neither a torch.save zip archive nor a legacy pickle)", path));
}

}  // namespace tune
