#include "checkpoints/pickle.h"

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <unordered_map>

#include "util/coding.h"

namespace tune {

PickleRef PickleArena::New(PickleValue::Kind kind) {
  values_.emplace_back();
  values_.back().kind = kind;
  return &values_.back();
}

PickleRef PickleArena::Int(int64_t v) {
  PickleRef r = New(PickleValue::Kind::kInt);
  r->integer = v;
  return r;
}

PickleRef PickleArena::String(std::string s) {
  PickleRef r = New(PickleValue::Kind::kString);
  r->text = std::move(s);
  return r;
}

PickleRef PickleArena::Tuple(std::vector<PickleRef> items) {
  PickleRef r = New(PickleValue::Kind::kTuple);
  r->items = std::move(items);
  return r;
}

PickleRef PickleArena::Object(std::string kind, int64_t id) {
  PickleRef r = New(PickleValue::Kind::kObject);
  r->text = std::move(kind);
  r->id = id;
  return r;
}

std::string PickleKindName(const PickleValue& v) {
  using K = PickleValue::Kind;
  switch (v.kind) {
    case K::kNone:
      return "None";
    case K::kBool:
      return "bool";
    case K::kInt:
    case K::kBigInt:
      return "int";
    case K::kFloat:
      return "float";
    case K::kString:
      return "str";
    case K::kBytes:
      return "bytes";
    case K::kTuple:
      return "tuple";
    case K::kList:
      return "list";
    case K::kDict:
      return "dict";
    case K::kGlobal:
      return v.text;
    case K::kObject:
      return v.text;
  }
  return "?";
}

namespace {

using K = PickleValue::Kind;

// The opcodes, by the names of CPython's Lib/pickle.py.
struct OpNameEntry {
  uint8_t op;
  const char* name;
};
constexpr OpNameEntry kOpNames[] = {{'(', "MARK"},
                                    {'.', "STOP"},
                                    {'0', "POP"},
                                    {'1', "POP_MARK"},
                                    {'2', "DUP"},
                                    {'F', "FLOAT"},
                                    {'I', "INT"},
                                    {'J', "BININT"},
                                    {'K', "BININT1"},
                                    {'L', "LONG"},
                                    {'M', "BININT2"},
                                    {'N', "NONE"},
                                    {'P', "PERSID"},
                                    {'Q', "BINPERSID"},
                                    {'R', "REDUCE"},
                                    {'S', "STRING"},
                                    {'T', "BINSTRING"},
                                    {'U', "SHORT_BINSTRING"},
                                    {'V', "UNICODE"},
                                    {'X', "BINUNICODE"},
                                    {'a', "APPEND"},
                                    {'b', "BUILD"},
                                    {'c', "GLOBAL"},
                                    {'d', "DICT"},
                                    {'}', "EMPTY_DICT"},
                                    {'e', "APPENDS"},
                                    {'g', "GET"},
                                    {'h', "BINGET"},
                                    {'i', "INST"},
                                    {'j', "LONG_BINGET"},
                                    {'l', "LIST"},
                                    {']', "EMPTY_LIST"},
                                    {'o', "OBJ"},
                                    {'p', "PUT"},
                                    {'q', "BINPUT"},
                                    {'r', "LONG_BINPUT"},
                                    {'s', "SETITEM"},
                                    {'t', "TUPLE"},
                                    {')', "EMPTY_TUPLE"},
                                    {'u', "SETITEMS"},
                                    {'G', "BINFLOAT"},
                                    {'B', "BINBYTES"},
                                    {'C', "SHORT_BINBYTES"},
                                    {0x80, "PROTO"},
                                    {0x81, "NEWOBJ"},
                                    {0x82, "EXT1"},
                                    {0x83, "EXT2"},
                                    {0x84, "EXT4"},
                                    {0x85, "TUPLE1"},
                                    {0x86, "TUPLE2"},
                                    {0x87, "TUPLE3"},
                                    {0x88, "NEWTRUE"},
                                    {0x89, "NEWFALSE"},
                                    {0x8a, "LONG1"},
                                    {0x8b, "LONG4"},
                                    {0x8c, "SHORT_BINUNICODE"},
                                    {0x8d, "BINUNICODE8"},
                                    {0x8e, "BINBYTES8"},
                                    {0x8f, "EMPTY_SET"},
                                    {0x90, "ADDITEMS"},
                                    {0x91, "FROZENSET"},
                                    {0x92, "NEWOBJ_EX"},
                                    {0x93, "STACK_GLOBAL"},
                                    {0x94, "MEMOIZE"},
                                    {0x95, "FRAME"},
                                    {0x96, "BYTEARRAY8"},
                                    {0x97, "NEXT_BUFFER"},
                                    {0x98, "READONLY_BUFFER"}};

const char* OpName(uint8_t op) {
  for (const auto& e : kOpNames) {
    if (e.op == op) return e.name;
  }
  return nullptr;
}

class Machine {
 public:
  Machine(std::string_view data, size_t& pos, const PickleHooks& hooks, const std::string& what,
          PickleArena& arena)
      : data_(data),
        pos_(pos),
        hooks_(hooks),
        what_(what),
        arena_(arena),
        values_at_start_(arena.size()) {}

  Result<PickleRef> Run() {
    while (true) {
      op_at_ = pos_;
      if (pos_ >= data_.size()) return Fail("the pickle ends before its STOP (truncated)");
      op_ = static_cast<uint8_t>(data_[pos_++]);
      if (op_ == '.') {
        if (stack_.empty()) return Fail("STOP with nothing on the stack");
        return stack_.back();
      }
      TUNE_RETURN_IF_ERROR(Step());
      TUNE_RETURN_IF_ERROR(WithinBounds());
    }
  }

 private:
  Status Fail(const std::string& why) const {
    const char* name = OpName(op_);
    return InvalidArgumentError(fmt::format("{}: pickle byte {} ({}): {}", what_, op_at_,
                                            name ? name : fmt::format("opcode 0x{:02x}", op_),
                                            why));
  }

  // The bounds of pickle.h, checked after every opcode (each adds at most a few values).
  Status WithinBounds() const {
    auto over = [&](const char* what, size_t bound) {
      return Fail(
          fmt::format("{} more than {} (a bound of this reader; a state dict needs a few "
                      "thousand): not a checkpoint tune can read",
                      what, bound));
    };
    if (stack_.size() > kPickleMaxStack) return over("the stack holds", kPickleMaxStack);
    if (marks_.size() > kPickleMaxMarks) return over("MARKs nest", kPickleMaxMarks);
    if (memo_.size() > kPickleMaxMemo) return over("the memo holds", kPickleMaxMemo);
    if (arena_.size() - values_at_start_ > kPickleMaxValues) {
      return over("the pickle builds", kPickleMaxValues);
    }
    return Status::Ok();
  }

  Status Need(size_t n) const {
    if (data_.size() - pos_ < n) {
      return Fail(fmt::format("needs {} more bytes, {} left (truncated)", n, data_.size() - pos_));
    }
    return Status::Ok();
  }

  Result<uint64_t> ReadLe(size_t n) {
    TUNE_RETURN_IF_ERROR(Need(n));
    const uint64_t v = DecodeLittleEndian(data_.data() + pos_, n);
    pos_ += n;
    return v;
  }

  Result<std::string> ReadBytes(uint64_t n) {
    if (n > data_.size() - pos_) {
      return Fail(fmt::format("a length of {} bytes, {} left (truncated)", n, data_.size() - pos_));
    }
    std::string s(data_.substr(pos_, n));
    pos_ += n;
    return s;
  }

  Result<std::string> ReadLine() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos)
      return Fail("a text argument without its newline (truncated)");
    std::string s(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }

  Result<PickleRef> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      return Fail("pops an empty stack");
    }
    PickleRef v = stack_.back();
    stack_.pop_back();
    return v;
  }

  Result<PickleRef> Top() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      return Fail("reads an empty stack");
    }
    return stack_.back();
  }

  // The values above the last MARK, removed with the mark.
  Result<std::vector<PickleRef>> PopMark() {
    if (marks_.empty()) return Fail("no MARK before it");
    const size_t at = marks_.back();
    marks_.pop_back();
    std::vector<PickleRef> items(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
    stack_.resize(at);
    return items;
  }

  void Push(PickleRef v) { stack_.push_back(v); }

  PickleRef NewInt(int64_t v) { return arena_.Int(v); }

  Status Memo(uint64_t key) {
    TUNE_ASSIGN_OR_RETURN(PickleRef top, Top());
    memo_[key] = top;
    return Status::Ok();
  }

  Status Get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return Fail(fmt::format("memo key {} was never stored", key));
    Push(it->second);
    return Status::Ok();
  }

  Status Global(const std::string& module, const std::string& name) {
    Status allowed =
        hooks_.global
            ? hooks_.global(module, name)
            : InvalidArgumentError(fmt::format("the global '{}.{}' is not allowed", module, name));
    if (!allowed.ok()) return Fail(allowed.message());
    PickleRef g = arena_.New(K::kGlobal);
    g->text = module + "." + name;
    Push(g);
    return Status::Ok();
  }

  // A repeated string key replaces its value (keys are names here), found through an index of
  // each dict's string keys: linear in the items, however many a hostile pickle sets.
  Status SetItems(PickleRef dict, const std::vector<PickleRef>& kv) {
    if (dict->kind != K::kDict) {
      return Fail(fmt::format("sets items of a {}, expected a dict", PickleKindName(*dict)));
    }
    if (kv.size() % 2 != 0) return Fail("an odd number of keys and values");
    auto [found, fresh] = dict_keys_.try_emplace(dict);
    std::unordered_map<std::string, size_t>& index = found->second;
    if (fresh) {  // entries set before this index existed (a dict built by a hook)
      for (size_t e = 0; e < dict->entries.size(); ++e) {
        if (dict->entries[e].first->kind == K::kString) {
          index.emplace(dict->entries[e].first->text, e);
        }
      }
    }
    for (size_t i = 0; i < kv.size(); i += 2) {
      if (kv[i]->kind == K::kString) {
        auto [it, inserted] = index.emplace(kv[i]->text, dict->entries.size());
        if (!inserted) {
          dict->entries[it->second].second = kv[i + 1];
          continue;
        }
      }
      dict->entries.emplace_back(kv[i], kv[i + 1]);
    }
    return Status::Ok();
  }

  Status Append(PickleRef list, const std::vector<PickleRef>& items) {
    if (list->kind != K::kList) {
      return Fail(fmt::format("appends to a {}, expected a list", PickleKindName(*list)));
    }
    list->items.insert(list->items.end(), items.begin(), items.end());
    return Status::Ok();
  }

  PickleRef Text(K kind, std::string s) {
    PickleRef r = arena_.New(kind);
    r->text = std::move(s);
    return r;
  }

  // One opcode: each family below answers for its own opcodes (nullopt: not one of them).
  Status Step() {
    if (std::optional<Status> s = StepStack()) return *s;
    if (std::optional<Status> s = StepNumber()) return *s;
    if (std::optional<Status> s = StepFloat()) return *s;
    if (std::optional<Status> s = StepText()) return *s;
    if (std::optional<Status> s = StepContainer()) return *s;
    if (std::optional<Status> s = StepDict()) return *s;
    if (std::optional<Status> s = StepMemo()) return *s;
    if (std::optional<Status> s = StepCall()) return *s;
    if (std::optional<Status> s = StepRefused()) return *s;
    return Fail("not a pickle opcode (a corrupt or truncated file?)");
  }

  // PROTO, FRAME, the stack and its marks, None, the booleans.
  std::optional<Status> StepStack() {
    switch (op_) {
      case 0x80: {  // PROTO
        TUNE_ASSIGN_OR_RETURN(uint64_t proto, ReadLe(1));
        if (proto > 5) return Fail(fmt::format("protocol {}; this reader knows 0 to 5", proto));
        return Status::Ok();
      }
      case 0x95:  // FRAME: a length hint only
        return ReadLe(8).status();
      case '(':
        marks_.push_back(stack_.size());
        return Status::Ok();
      case '0':
        return Pop().status();
      case '1':
        return PopMark().status();
      case '2': {
        TUNE_ASSIGN_OR_RETURN(PickleRef top, Top());
        Push(top);
        return Status::Ok();
      }
      case 'N':
        Push(arena_.None());
        return Status::Ok();
      case 0x88:
      case 0x89: {
        PickleRef b = arena_.New(K::kBool);
        b->boolean = op_ == 0x88;
        Push(b);
        return Status::Ok();
      }
      default:
        return std::nullopt;
    }
  }

  // Integers.
  std::optional<Status> StepNumber() {
    switch (op_) {
      case 'J': {
        TUNE_ASSIGN_OR_RETURN(uint64_t v, ReadLe(4));
        Push(NewInt(static_cast<int32_t>(static_cast<uint32_t>(v))));
        return Status::Ok();
      }
      case 'K': {
        TUNE_ASSIGN_OR_RETURN(uint64_t v, ReadLe(1));
        Push(NewInt(static_cast<int64_t>(v)));
        return Status::Ok();
      }
      case 'M': {
        TUNE_ASSIGN_OR_RETURN(uint64_t v, ReadLe(2));
        Push(NewInt(static_cast<int64_t>(v)));
        return Status::Ok();
      }
      case 0x8a:
      case 0x8b: {  // LONG1, LONG4: little-endian two's complement
        TUNE_ASSIGN_OR_RETURN(uint64_t n, ReadLe(op_ == 0x8a ? 1 : 4));
        TUNE_ASSIGN_OR_RETURN(std::string bytes, ReadBytes(n));
        if (n > 8) {
          Push(Text(K::kBigInt, std::move(bytes)));
          return Status::Ok();
        }
        Push(NewInt(DecodeLittleEndianSigned(bytes.data(), n)));
        return Status::Ok();
      }
      case 'I':
      case 'L': {  // INT, LONG: decimal text ("01"/"00" are True/False)
        TUNE_ASSIGN_OR_RETURN(std::string line, ReadLine());
        if (op_ == 'L' && !line.empty() && line.back() == 'L') line.pop_back();
        if (op_ == 'I' && (line == "01" || line == "00")) {
          PickleRef b = arena_.New(K::kBool);
          b->boolean = line == "01";
          Push(b);
          return Status::Ok();
        }
        try {
          size_t used = 0;
          const long long v = std::stoll(line, &used);
          if (used != line.size()) throw std::invalid_argument(line);
          Push(NewInt(v));
        } catch (const std::exception&) {
          return Fail(fmt::format("'{}' is not an int tune can hold", line.substr(0, 40)));
        }
        return Status::Ok();
      }
      default:
        return std::nullopt;
    }
  }

  // Floats.
  std::optional<Status> StepFloat() {
    switch (op_) {
      case 'G': {  // BINFLOAT: big-endian double
        TUNE_ASSIGN_OR_RETURN(std::string b, ReadBytes(8));
        const uint64_t bits = DecodeBigEndian(b.data(), 8);
        PickleRef r = arena_.New(K::kFloat);
        std::memcpy(&r->real, &bits, 8);
        Push(r);
        return Status::Ok();
      }
      case 'F': {
        TUNE_ASSIGN_OR_RETURN(std::string line, ReadLine());
        PickleRef r = arena_.New(K::kFloat);
        try {
          r->real = std::stod(line);
        } catch (const std::exception&) {
          return Fail(fmt::format("'{}' is not a float", line.substr(0, 40)));
        }
        Push(r);
        return Status::Ok();
      }
      default:
        return std::nullopt;
    }
  }

  // Strings and bytes.
  std::optional<Status> StepText() {
    switch (op_) {
      case 'X':
      case 0x8c:
      case 0x8d: {  // BINUNICODE (u32), SHORT_BINUNICODE (u8), BINUNICODE8 (u64)
        TUNE_ASSIGN_OR_RETURN(uint64_t n, ReadLe(op_ == 'X' ? 4 : op_ == 0x8c ? 1 : 8));
        TUNE_ASSIGN_OR_RETURN(std::string s, ReadBytes(n));
        Push(Text(K::kString, std::move(s)));
        return Status::Ok();
      }
      case 'V': {  // UNICODE: raw-unicode-escape text; plain ASCII names only
        TUNE_ASSIGN_OR_RETURN(std::string s, ReadLine());
        if (s.find('\\') != std::string::npos) return Fail("an escaped UNICODE string");
        Push(Text(K::kString, std::move(s)));
        return Status::Ok();
      }
      case 'T':
      case 'U': {  // BINSTRING (i32), SHORT_BINSTRING (u8): Python 2 str, read as text
        TUNE_ASSIGN_OR_RETURN(uint64_t n, ReadLe(op_ == 'T' ? 4 : 1));
        TUNE_ASSIGN_OR_RETURN(std::string s, ReadBytes(n));
        Push(Text(K::kString, std::move(s)));
        return Status::Ok();
      }
      case 'S': {  // STRING: a quoted repr
        TUNE_ASSIGN_OR_RETURN(std::string s, ReadLine());
        if (s.size() < 2 || (s.front() != '\'' && s.front() != '"') || s.back() != s.front() ||
            s.find('\\') != std::string::npos) {
          return Fail("a STRING that is not a plain quoted string");
        }
        Push(Text(K::kString, s.substr(1, s.size() - 2)));
        return Status::Ok();
      }
      case 'B':
      case 'C':
      case 0x8e:
      case 0x96: {  // BINBYTES (u32), SHORT_BINBYTES (u8), BINBYTES8, BYTEARRAY8 (u64)
        TUNE_ASSIGN_OR_RETURN(uint64_t n, ReadLe(op_ == 'B' ? 4 : op_ == 'C' ? 1 : 8));
        TUNE_ASSIGN_OR_RETURN(std::string s, ReadBytes(n));
        Push(Text(K::kBytes, std::move(s)));
        return Status::Ok();
      }
      default:
        return std::nullopt;
    }
  }

  // Tuples, lists and sets.
  std::optional<Status> StepContainer() {
    switch (op_) {
      case ')':
        Push(arena_.Tuple({}));
        return Status::Ok();
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op_ - 0x84u;
        std::vector<PickleRef> items(n);
        for (size_t i = n; i-- > 0;) {
          TUNE_ASSIGN_OR_RETURN(items[i], Pop());
        }
        Push(arena_.Tuple(std::move(items)));
        return Status::Ok();
      }
      case 't': {
        TUNE_ASSIGN_OR_RETURN(std::vector<PickleRef> items, PopMark());
        Push(arena_.Tuple(std::move(items)));
        return Status::Ok();
      }
      case ']':
      case 0x8f:  // EMPTY_SET: a list here
        Push(arena_.New(K::kList));
        return Status::Ok();
      case 'l':
      case 0x91: {  // LIST, FROZENSET
        TUNE_ASSIGN_OR_RETURN(std::vector<PickleRef> items, PopMark());
        PickleRef l = arena_.New(K::kList);
        l->items = std::move(items);
        Push(l);
        return Status::Ok();
      }
      case 'a': {
        TUNE_ASSIGN_OR_RETURN(PickleRef item, Pop());
        TUNE_ASSIGN_OR_RETURN(PickleRef list, Top());
        return Append(list, {item});
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        TUNE_ASSIGN_OR_RETURN(std::vector<PickleRef> items, PopMark());
        TUNE_ASSIGN_OR_RETURN(PickleRef list, Top());
        return Append(list, items);
      }
      default:
        return std::nullopt;
    }
  }
  // Dicts.
  std::optional<Status> StepDict() {
    switch (op_) {
      case '}':
        Push(arena_.Dict());
        return Status::Ok();
      case 'd': {
        TUNE_ASSIGN_OR_RETURN(std::vector<PickleRef> kv, PopMark());
        PickleRef d = arena_.Dict();
        TUNE_RETURN_IF_ERROR(SetItems(d, kv));
        Push(d);
        return Status::Ok();
      }
      case 's': {
        TUNE_ASSIGN_OR_RETURN(PickleRef value, Pop());
        TUNE_ASSIGN_OR_RETURN(PickleRef key, Pop());
        TUNE_ASSIGN_OR_RETURN(PickleRef dict, Top());
        return SetItems(dict, {key, value});
      }
      case 'u': {
        TUNE_ASSIGN_OR_RETURN(std::vector<PickleRef> kv, PopMark());
        TUNE_ASSIGN_OR_RETURN(PickleRef dict, Top());
        return SetItems(dict, kv);
      }
      default:
        return std::nullopt;
    }
  }

  // The memo: PUT and GET.
  std::optional<Status> StepMemo() {
    switch (op_) {
      case 'q': {
        TUNE_ASSIGN_OR_RETURN(uint64_t key, ReadLe(1));
        return Memo(key);
      }
      case 'r': {
        TUNE_ASSIGN_OR_RETURN(uint64_t key, ReadLe(4));
        return Memo(key);
      }
      case 0x94:
        return Memo(memo_.size());
      case 'p':
      case 'g': {
        TUNE_ASSIGN_OR_RETURN(std::string line, ReadLine());
        uint64_t key = 0;
        try {
          key = std::stoull(line);
        } catch (const std::exception&) {
          return Fail(fmt::format("memo key '{}' is not a number", line.substr(0, 40)));
        }
        return op_ == 'p' ? Memo(key) : Get(key);
      }
      case 'h': {
        TUNE_ASSIGN_OR_RETURN(uint64_t key, ReadLe(1));
        return Get(key);
      }
      case 'j': {
        TUNE_ASSIGN_OR_RETURN(uint64_t key, ReadLe(4));
        return Get(key);
      }
      default:
        return std::nullopt;
    }
  }

  // Globals, calls (REDUCE), BUILD and persistent ids.
  std::optional<Status> StepCall() {
    switch (op_) {
      case 'c': {
        TUNE_ASSIGN_OR_RETURN(std::string module, ReadLine());
        TUNE_ASSIGN_OR_RETURN(std::string name, ReadLine());
        return Global(module, name);
      }
      case 0x93: {  // STACK_GLOBAL
        TUNE_ASSIGN_OR_RETURN(PickleRef name, Pop());
        TUNE_ASSIGN_OR_RETURN(PickleRef module, Pop());
        if (module->kind != K::kString || name->kind != K::kString) {
          return Fail("STACK_GLOBAL's module and name are not strings");
        }
        return Global(module->text, name->text);
      }
      case 'R': {
        TUNE_ASSIGN_OR_RETURN(PickleRef args, Pop());
        TUNE_ASSIGN_OR_RETURN(PickleRef callable, Pop());
        if (callable->kind != K::kGlobal) {
          return Fail(fmt::format("calls a {}, not an allowed global", PickleKindName(*callable)));
        }
        if (args->kind != K::kTuple) {
          return Fail(fmt::format("calls {} with a {}, expected a tuple", callable->text,
                                  PickleKindName(*args)));
        }
        if (!hooks_.reduce) return Fail(fmt::format("{} cannot be called", callable->text));
        Result<PickleRef> r = hooks_.reduce(callable->text, args, arena_);
        if (!r.ok()) return Fail(r.status().message());
        Push(*r);
        return Status::Ok();
      }
      case 'b': {  // BUILD: an object's state; only a dict's attributes (OrderedDict._metadata)
        TUNE_ASSIGN_OR_RETURN(PickleRef state, Pop());
        TUNE_ASSIGN_OR_RETURN(PickleRef obj, Top());
        const bool empty_state =
            state->kind == K::kNone || (state->kind == K::kDict && state->entries.empty());
        if (obj->kind == K::kDict || empty_state) return Status::Ok();
        return Fail(fmt::format("sets the state of a {}; only a dict's attributes are read",
                                PickleKindName(*obj)));
      }
      case 'Q':
      case 'P': {
        PickleRef pid;
        if (op_ == 'Q') {
          TUNE_ASSIGN_OR_RETURN(pid, Pop());
        } else {
          TUNE_ASSIGN_OR_RETURN(std::string line, ReadLine());
          pid = Text(K::kString, std::move(line));
        }
        if (!hooks_.persistent_load) return Fail("a persistent id, and none is expected here");
        Result<PickleRef> r = hooks_.persistent_load(pid, arena_);
        if (!r.ok()) return Fail(r.status().message());
        Push(*r);
        return Status::Ok();
      }
      default:
        return std::nullopt;
    }
  }
  // What a state dict never contains: instances of classes, extensions, out-of-band buffers.
  std::optional<Status> StepRefused() {
    switch (op_) {
      case 'i':
      case 'o':
      case 0x81:
      case 0x92:
        return Fail(
            "creates an instance of a class; a state dict holds none, and tune creates none");
      case 0x82:
      case 0x83:
      case 0x84:
        return Fail("a copyreg extension code; a state dict uses none");
      case 0x97:
      case 0x98:
        return Fail("an out-of-band buffer; a state dict uses none");
      default:
        return std::nullopt;
    }
  }

  std::string_view data_;
  size_t& pos_;
  const PickleHooks& hooks_;
  const std::string& what_;
  PickleArena& arena_;
  std::vector<PickleRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleRef> memo_;
  std::unordered_map<PickleRef, std::unordered_map<std::string, size_t>> dict_keys_;
  const size_t values_at_start_;
  size_t op_at_ = 0;
  uint8_t op_ = 0;
};

}  // namespace

Result<PickleRef> Unpickle(std::string_view data, size_t& pos, const PickleHooks& hooks,
                           const std::string& what, PickleArena& arena) {
  Machine machine(data, pos, hooks, what, arena);
  return machine.Run();
}

}  // namespace tune
