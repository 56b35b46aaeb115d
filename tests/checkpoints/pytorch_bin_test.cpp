// Reading pytorch_model.bin without executing it (pytorch_bin.h, pickle.h, checkpoint_weights.h):
// the restricted unpickler on hand-written pickles (what it reads, what it refuses, hostile
// nesting), then checkpoints written by Debian's python3-torch (torch.save's zip and legacy
// formats, views, shared storages, F32/F16/BF16, shards) read equal, to the bit, to the same
// tensors written as safetensors by python3-torch's own float conversion.
#include "checkpoints/pytorch_bin.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "checkpoints/checkpoint_weights.h"
#include "checkpoints/pickle.h"
#include "testing/temp_dir.h"

namespace tune {
namespace {

using K = PickleValue::Kind;
using namespace std::string_literals;

Result<PickleRef> Read(const std::string& bytes, PickleArena& arena,
                       const PickleHooks& hooks = {}) {
  size_t pos = 0;
  return Unpickle(bytes, pos, hooks, "test.pkl", arena);
}

// BINUNICODE s.
std::string Str(const std::string& s) {
  std::string out = "X";
  const auto n = static_cast<uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + s;
}

const std::string kProto2 = "\x80\x02";

TEST(Unpickle, ReadsPlainValuesAndTheMemo) {
  // {'a': 5, 'b': (-1, 300, 'a'), 'c': [True, None, 2.5], 'd': <memo 1 = 'a'>}
  const std::string p = kProto2 + "}q\x00("s + Str("a") + "q\x01K\x05"s + Str("b") +
                        "J\xff\xff\xff\xff" + "M\x2c\x01h\x01\x87"s + Str("c") + "](\x88N"s +
                        "G\x40\x04\x00\x00\x00\x00\x00\x00"s + "e" + Str("d") + "h\x01u."s;
  PickleArena arena;
  auto r = Read(p, arena);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PickleValue& d = **r;
  ASSERT_EQ(d.kind, K::kDict);
  ASSERT_EQ(d.entries.size(), 4u);
  EXPECT_EQ(d.entries[0].first->text, "a");
  EXPECT_EQ(d.entries[0].second->integer, 5);
  const PickleValue& t = *d.entries[1].second;
  ASSERT_EQ(t.kind, K::kTuple);
  ASSERT_EQ(t.items.size(), 3u);
  EXPECT_EQ(t.items[0]->integer, -1);
  EXPECT_EQ(t.items[1]->integer, 300);
  EXPECT_EQ(t.items[2], d.entries[0].first);  // the memo gives the same object back
  const PickleValue& l = *d.entries[2].second;
  ASSERT_EQ(l.items.size(), 3u);
  EXPECT_TRUE(l.items[0]->boolean);
  EXPECT_EQ(l.items[1]->kind, K::kNone);
  EXPECT_EQ(l.items[2]->real, 2.5);
  EXPECT_EQ(d.entries[3].second->text, "a");
}

TEST(Unpickle, Long1ReadsSignedAndBigIntegers) {
  PickleArena arena;
  auto neg = Read(kProto2 + std::string("\x8a\x02\x00\xff.", 5), arena);  // -256
  ASSERT_TRUE(neg.ok()) << neg.status().ToString();
  EXPECT_EQ((*neg)->integer, -256);
  auto big = Read(kProto2 + std::string("\x8a\x0a") + std::string(10, '\x01') + ".", arena);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ((*big)->kind, K::kBigInt);
  EXPECT_EQ((*big)->text, std::string(10, '\x01'));
}

TEST(Unpickle, RefusesAGlobalTheHooksRefuseNamingIt) {
  // cos\nsystem\n(S'touch x'\ntR.  -- what pickle.dumps of an os.system __reduce__ looks like.
  const std::string p = "cos\nsystem\n(X\x07\x00\x00\x00touch xtR.";
  PickleArena arena;
  bool called = false;
  PickleHooks hooks;
  hooks.global = [](const std::string& m, const std::string& n) {
    return InvalidArgumentError("refused the global '" + m + "." + n + "'");
  };
  hooks.reduce = [&](const std::string&, PickleRef, PickleArena& a) -> Result<PickleRef> {
    called = true;
    return a.None();
  };
  auto r = Read(p, arena, hooks);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("os.system"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("test.pkl: pickle byte 0 (GLOBAL)"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(called);
  // Without hooks, every global is refused.
  auto bare = Read(p, arena);
  EXPECT_FALSE(bare.ok());
}

TEST(Unpickle, RefusesInstancesExtensionsAndBadInput) {
  PickleArena arena;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kProto2 + "}.", ""},                                 // fine
      {kProto2 + "}", "truncated"},                         // no STOP
      {kProto2 + "X\xff\xff\x00\x00ab."s, "truncated"},     // length past the end
      {kProto2 + "h\x07.", "memo key 7 was never stored"},  // GET of nothing
      {kProto2 + "})\x81.", "creates an instance"},         // NEWOBJ
      {kProto2 + "\x82\x01.", "extension"},                 // EXT1
      {kProto2 + "0.", "empty stack"},                      // POP of nothing
      {kProto2 + "K\x07K\x01K\x02s.", "expected a dict"},   // SETITEM on an int
      {kProto2 + "\xff.", "not a pickle opcode"},           // garbage
      {"\x80\x09}.", "protocol 9"},                         // unknown protocol
      {kProto2 + "}K\x01u.", "no MARK"},                    // SETITEMS without a MARK
  };
  for (const auto& [bytes, expect] : cases) {
    auto r = Read(bytes, arena);
    if (expect.empty()) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    } else {
      ASSERT_FALSE(r.ok()) << expect;
      EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
    }
  }
}

TEST(Unpickle, HostileNestingCostsNoRecursion) {
  // A million lists, each appended into the next (and a list appended into itself): the values
  // live in the arena, so reading and freeing them cannot overflow the stack.
  std::string nest = kProto2 + "]";
  for (int i = 0; i < 1'000'000; ++i) nest += "]";
  for (int i = 0; i < 1'000'000; ++i) nest += "a";
  nest += "2a.";  // DUP + APPEND: the outermost list holds itself
  PickleArena arena;
  auto r = Read(nest, arena);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->kind, K::kList);
  EXPECT_EQ((*r)->items.size(), 2u);
  EXPECT_EQ((*r)->items[1], *r);
}

// pickle.h's bounds: each one past its limit stops the read with a message naming it, before
// the memory it would take (a 2 GiB data.pkl of pushes would otherwise hold billions of values).
TEST(Unpickle, EachBoundStopsAHostilePickleNamingIt) {
  struct Case {
    std::string name, bytes, message;
  };
  const std::vector<Case> cases = {
      {"stack", kProto2 + std::string(kPickleMaxStack + 1, 'N') + ".",
       "the stack holds more than 1048576"},
      {"marks", kProto2 + std::string(kPickleMaxMarks + 1, '(') + ".",
       "MARKs nest more than 65536"},
      {"memo", kProto2 + "N" + std::string(kPickleMaxMemo + 1, '\x94') + ".",
       "the memo holds more than 1048576"},
      // Push and pop: the stack stays small, the values built grow.
      {"values",
       [] {
         std::string b = kProto2;
         for (size_t i = 0; i <= kPickleMaxValues; ++i) b += "N0";
         return b + "N.";
       }(),
       "the pickle builds more than 4194304"},
  };
  for (const Case& c : cases) {
    PickleArena arena;
    auto r = Read(c.bytes, arena);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("a bound of this reader"), std::string::npos);
  }
}

// A dict whose items a pickle sets one by one is read in time linear in them: 200,000 keys (and
// each set again) take well under a second, not the hours a scan per key would.
TEST(Unpickle, SettingManyDictItemsIsLinear) {
  std::string b = kProto2 + "}";
  for (int round = 0; round < 2; ++round) {
    b += "(";
    for (int i = 0; i < 200'000; ++i) b += Str("k" + std::to_string(i)) + (round ? "\x88" : "N");
    b += "u";
  }
  b += ".";
  PickleArena arena;
  const auto start = std::chrono::steady_clock::now();
  auto r = Read(b, arena);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->entries.size(), 200'000u);
  EXPECT_EQ((*r)->entries[123].second->kind, K::kBool);  // the second round replaced the value
  EXPECT_LT(seconds, 10.0);
}

TEST(PytorchBin, RefusesWhatIsNotACheckpoint) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "x.bin").string();
  std::ofstream(path, std::ios::binary) << "hello, this is text";
  auto r = ReadPytorchCheckpoint(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a PyTorch checkpoint"), std::string::npos)
      << r.status().message();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << std::string("PK\x03\x04garbage", 11);
  r = ReadPytorchCheckpoint(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated or corrupt"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(ReadPytorchCheckpoint((dir.path() / "none.bin").string()).status().code(),
            StatusCode::kNotFound);
  // torch.save's first format (PyTorch 0.1.1 to 0.1.9): a tar archive whose first member is
  // `sys_info`; a POSIX tar header has "ustar" at byte 257.
  std::string tar(1024, '\0');
  std::memcpy(tar.data(), "sys_info", 8);
  std::memcpy(tar.data() + 257,
              "ustar\x00"
              "00",
              8);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << tar;
  r = ReadPytorchCheckpoint(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the tar format of torch.save before PyTorch 0.1.10"),
            std::string::npos)
      << r.status().message();
}

// --- Files written by python3-torch ------------------------------------------------------------

bool HavePythonTorch() {
  return std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0;
}

// Runs a Python script (with torch imported and OUT = dir) and expects it to succeed.
void Python(const std::filesystem::path& dir, const std::string& body) {
  const std::string script = (dir / "make.py").string();
  std::ofstream(script) << "import collections, io, json, os, pickle, struct, zipfile\n"
                           "import torch\n"
                           "OUT = '"
                        << dir.string() << "'\n"
                        << R"(
def safetensors(path, tensors):
    # Every tensor as F32 (python3-torch's own conversion from F16/BF16), contiguous.
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw))); f.write(raw)
        for b in blobs: f.write(b)
)" << body;
  const std::string cmd = "/usr/bin/python3 '" + script + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << body;
}

// Every tensor of `got` equals the same-named tensor of `want`, bit for bit.
void ExpectSameTensors(const CheckpointWeights& got, const CheckpointWeights& want) {
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (const auto& [name, w] : want.tensors()) {
    const CheckpointTensor* g = got.Find(name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->shape, w.shape) << name;
    auto gv = got.ReadFloats(*g);
    auto wv = want.ReadFloats(w);
    ASSERT_TRUE(gv.ok()) << gv.status().ToString();
    ASSERT_TRUE(wv.ok()) << wv.status().ToString();
    ASSERT_EQ(gv->size(), wv->size()) << name;
    if (gv->empty()) continue;  // an empty tensor: memcmp of null pointers is undefined (UBSan)
    EXPECT_EQ(std::memcmp(gv->data(), wv->data(), gv->size() * sizeof(float)), 0) << name;
  }
}

constexpr const char* kStateDict = R"(
torch.manual_seed(3)
w = torch.randn(6, 4)
joint = torch.randn(10)
sd = collections.OrderedDict()
sd["emb.weight"] = w
sd["tied.weight"] = w                                  # one storage, two names
sd["t.weight"] = torch.randn(4, 6).t()                 # a transposed view
sd["a.bias"] = joint[:4]                               # slices of one storage
sd["b.bias"] = joint[4:].view(2, 3)                    # at storage offset 4
sd["h.weight"] = torch.randn(3, 5).half()
sd["bf.weight"] = torch.randn(7).bfloat16()
sd["scalar"] = torch.tensor(2.5)
sd["empty"] = torch.zeros(0, 3)
sd["step"] = torch.nn.Parameter(torch.randn(2, 2))     # a Parameter, not a plain tensor
sd._metadata = collections.OrderedDict([("", {"version": 1})])
safetensors(os.path.join(OUT, "ref.safetensors"), sd)
)";

TEST(PytorchBin, ReadsTorchSaveZipAndLegacyEqualToSafetensors) {
  if (!HavePythonTorch()) GTEST_SKIP() << "python3-torch is not installed";
  testing::TempDir dir;
  Python(dir.path(), std::string(kStateDict) + R"(
torch.save(sd, os.path.join(OUT, "zip.bin"))
torch.save(sd, os.path.join(OUT, "legacy.bin"), _use_new_zipfile_serialization=False)
torch.save(sd, os.path.join(OUT, "proto4.bin"), pickle_protocol=4)
)");
  auto ref = CheckpointWeights::Open((dir.path() / "ref.safetensors").string());
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (const char* file : {"zip.bin", "legacy.bin", "proto4.bin"}) {
    SCOPED_TRACE(file);
    auto bin = CheckpointWeights::Open((dir.path() / file).string());
    ASSERT_TRUE(bin.ok()) << bin.status().ToString();
    ExpectSameTensors(*bin, *ref);
    EXPECT_EQ(bin->Find("h.weight")->dtype, TensorDtype::kF16);
    EXPECT_EQ(bin->Find("bf.weight")->dtype, TensorDtype::kBF16);
    // The tied tensors share one storage; the slice starts 4 elements in.
    EXPECT_EQ(bin->Find("tied.weight")->storage_begin, bin->Find("emb.weight")->storage_begin);
    EXPECT_EQ(bin->Find("b.bias")->storage_offset, 4);
    EXPECT_EQ(bin->Find("t.weight")->strides, (std::vector<int64_t>{1, 6}));
  }
  EXPECT_EQ(CheckpointWeights::Open((dir.path() / "zip.bin").string())->format(), "pytorch zip");
  EXPECT_EQ(CheckpointWeights::Open((dir.path() / "legacy.bin").string())->format(),
            "pytorch legacy");
}

TEST(PytorchBin, ReadsShardedCheckpointsThroughTheirIndex) {
  if (!HavePythonTorch()) GTEST_SKIP() << "python3-torch is not installed";
  testing::TempDir dir;
  Python(dir.path(), std::string(kStateDict) + R"(
names = list(sd)
parts = [collections.OrderedDict((k, sd[k]) for k in names[:5]),
         collections.OrderedDict((k, sd[k]) for k in names[5:])]
for kind in ("bin", "safetensors"):
    wm = {}
    for i, part in enumerate(parts, 1):
        name = f"pytorch_model-{i:05d}-of-00002.bin" if kind == "bin" else f"model-{i:05d}-of-00002.safetensors"
        torch.save(part, os.path.join(OUT, name)) if kind == "bin" else safetensors(os.path.join(OUT, name), part)
        wm.update({k: name for k in part})
    index = "pytorch_model.bin.index.json" if kind == "bin" else "model.safetensors.index.json"
    json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, open(os.path.join(OUT, index), "w"))
bad = {"weight_map": dict(wm, **{"emb.weight": "model-00002-of-00002.safetensors"})}
json.dump(bad, open(os.path.join(OUT, "wrong.index.json"), "w"))
json.dump({"weight_map": {"x": "gone.bin"}}, open(os.path.join(OUT, "missing.index.json"), "w"))
)");
  auto ref = CheckpointWeights::Open((dir.path() / "ref.safetensors").string());
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  for (const char* index : {"pytorch_model.bin.index.json", "model.safetensors.index.json"}) {
    SCOPED_TRACE(index);
    auto w = CheckpointWeights::Open((dir.path() / index).string());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ(w->files().size(), 2u);
    EXPECT_NE(w->format().find(", 2 shards"), std::string::npos) << w->format();
    ExpectSameTensors(*w, *ref);
  }
  EXPECT_EQ(*FindWeightsFile(dir.path()), (dir.path() / "model.safetensors.index.json").string());
  auto wrong = CheckpointWeights::Open((dir.path() / "wrong.index.json").string());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("tensor 'emb.weight' in model-00002-of-00002"),
            std::string::npos)
      << wrong.status().message();
  auto missing = CheckpointWeights::Open((dir.path() / "missing.index.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("gone.bin is missing"), std::string::npos)
      << missing.status().message();
}

TEST(PytorchBin, RefusesHostileAndDamagedArchives) {
  if (!HavePythonTorch()) GTEST_SKIP() << "python3-torch is not installed";
  testing::TempDir dir;
  Python(dir.path(), R"(
class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + os.path.join(OUT, "EXECUTED"),))
class Fake: pass
FAKE = Fake()
class Past:
    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, (FAKE, 1000, (4, 3), (3, 1), False, collections.OrderedDict()))
class Fits:
    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, (FAKE, 0, (4, 3), (3, 1), False, collections.OrderedDict()))
class P(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.FloatStorage, "0", "cpu", 12) if obj is FAKE else None
def archive(name, obj, storages={}, method=zipfile.ZIP_STORED, byteorder=None):
    buf = io.BytesIO(); P(buf, protocol=2).dump(obj)
    with zipfile.ZipFile(os.path.join(OUT, name), "w", method) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for k, v in storages.items(): z.writestr("archive/data/" + k, v)
        if byteorder: z.writestr("archive/byteorder", byteorder)
archive("system.bin", collections.OrderedDict(x=Payload()))
archive("past.bin", collections.OrderedDict(x=Past()), {"0": bytes(48)})
archive("short.bin", collections.OrderedDict(x=Past()), {"0": bytes(20)})
archive("deflated.bin", collections.OrderedDict(x=Fits()), {"0": bytes(48)}, method=zipfile.ZIP_DEFLATED)
archive("pickled.bin", {"x": torch.zeros(3)})  # pickle.dump of a tensor, not torch.save
archive("big.bin", collections.OrderedDict(), byteorder="big")
archive("nested.bin", {"model": collections.OrderedDict(w=1)})
torch.save({"w": torch.zeros(64)}, os.path.join(OUT, "good.bin"))
raw = open(os.path.join(OUT, "good.bin"), "rb").read()
open(os.path.join(OUT, "truncated.bin"), "wb").write(raw[: len(raw) // 2])
)");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"system.bin", "refused the global 'posix.system'"},
      {"past.bin", "needs 4048 bytes of its storage, which holds 48"},
      {"short.bin", "declares 48 bytes, the archive holds 20"},
      {"deflated.bin", "storage '0' is compressed"},
      {"pickled.bin", "refused the global 'torch.storage._load_from_bytes'"},
      {"big.bin", "'big'-endian"},
      {"nested.bin", "entry 'model' is a dict"},
      {"truncated.bin", "truncated or corrupt"},
  };
  for (const auto& [file, expect] : cases) {
    auto r = CheckpointWeights::Open((dir.path() / file).string());
    ASSERT_FALSE(r.ok()) << file;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << file;
    EXPECT_NE(r.status().message().find(expect), std::string::npos)
        << file << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(file), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "EXECUTED"));
}

// Fuzzing (tests/fuzz/corpus/pytorch_{zip,legacy}/finding-expand-stride0.bin, saved by PyTorch:
// {"w": torch.ones(1).expand(2**40)}): a view that repeats its one-element storage 2^40 times
// passed the bounds check, and reading it allocated 4 TiB of floats.
TEST(PytorchBin, RefusesAViewThatRepeatsItsStoragePastTheBound) {
  for (const char* format : {"pytorch_zip", "pytorch_legacy"}) {
    const std::string path = std::string(TUNE_SOURCE_DIR) + "/tests/fuzz/corpus/" + format +
                             "/finding-expand-stride0.bin";
    auto r = ReadPytorchCheckpoint(path);
    ASSERT_FALSE(r.ok()) << format;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(
        r.status().message().find(path + ": tensor 'w': F32 [1099511627776] with strides "
                                         "[0] is a view of 1099511627776 elements over a storage "
                                         "of 1; tune reads a view that repeats its storage only "
                                         "up to 16777216 elements"),
        std::string::npos)
        << r.status().message();
  }
}

TEST(CheckTensorBounds, AViewMayRepeatItsStorageUpToTheBound) {
  CheckpointTensor t;
  t.name = "w";
  t.storage_bytes = 4;  // one F32
  t.strides = {0};
  t.shape = {kMaxRepeatedViewElements};
  EXPECT_TRUE(CheckTensorBounds(t, "f.bin").ok());
  t.shape = {kMaxRepeatedViewElements + 1};
  EXPECT_NE(CheckTensorBounds(t, "f.bin").message().find("only up to 16777216 elements"),
            std::string::npos);
  // Dimensions whose product overflows int64, with stride 0, are too large, not undefined.
  t.shape = {int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31};
  t.strides = {0, 0, 0};
  EXPECT_NE(CheckTensorBounds(t, "f.bin").message().find("is too large"), std::string::npos);
  // A tensor with no element is in bounds whatever its other dimensions.
  t.shape = {int64_t{1} << 62, int64_t{1} << 62, 0};
  t.strides = {};
  EXPECT_TRUE(CheckTensorBounds(t, "f.bin").ok());
  EXPECT_EQ(t.numel(), 0);
}

}  // namespace
}  // namespace tune
