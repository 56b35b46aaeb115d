#include "checkpoints/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <utility>

#include "tune/json.h"
#include "util/coding.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

// The format caps the header at 100 MB (safetensors' MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

}  // namespace

int64_t SafetensorsTensorInfo::numel() const {
  // 0 for any dimension of 0, before a product of the others could overflow.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

CheckpointTensor SafetensorsTensorInfo::ToCheckpointTensor() const {
  CheckpointTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  t.storage_begin = begin;
  t.storage_bytes = bytes;
  return t;
}

namespace {

Status NotSafetensors(const std::string& path, const std::string& what) {
  return InvalidArgumentError(fmt::format("{}: not a valid safetensors file: {}", path, what));
}

// The header: 8 bytes of little-endian length, then that many bytes of JSON (an object).
Result<Json> ReadHeader(const std::string& path, uint64_t size, uint64_t& header_len) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open", path));
  if (size < 8) {
    return NotSafetensors(path,
                          fmt::format("{} bytes, shorter than the 8-byte header length", size));
  }
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  header_len = DecodeFixed64(len_bytes);
  if (header_len > size - 8) {
    return NotSafetensors(
        path, fmt::format("the header length {} goes beyond the end of the file ({} bytes); the "
                          "file is truncated or not safetensors",
                          header_len, size));
  }
  if (header_len > kMaxHeaderBytes) {
    return NotSafetensors(
        path, fmt::format("the header length {} is over the format's limit of {} bytes", header_len,
                          kMaxHeaderBytes));
  }
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) return NotSafetensors(path, "cannot read the header");
  Json doc = Json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return NotSafetensors(path, "the header is not valid JSON");
  if (!doc.is_object()) return NotSafetensors(path, "the header is not a JSON object");
  return doc;
}

// A tensor's dtype and its element size; nullopt for a dtype tune does not read.
std::optional<std::pair<TensorDtype, int64_t>> ParseDtype(const Json& dtype) {
  if (!dtype.is_string()) return std::nullopt;
  for (TensorDtype d : {TensorDtype::kF32, TensorDtype::kF16, TensorDtype::kBF16, TensorDtype::kF64,
                        TensorDtype::kI64, TensorDtype::kI32, TensorDtype::kI16, TensorDtype::kI8,
                        TensorDtype::kU8, TensorDtype::kBool}) {
    if (dtype.get<std::string>() == TensorDtypeName(d))
      return std::make_pair(d, TensorDtypeSize(d));
  }
  return std::nullopt;
}

// A tensor's shape into t.shape and its element count; an error message when it is bad.
std::optional<std::string> ParseShape(const Json& shape, SafetensorsTensorInfo& t,
                                      uint64_t& numel) {
  if (!shape.is_array()) return "\"shape\" is not an array";
  numel = 1;
  for (const Json& s : shape) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0) {
      return fmt::format("bad dimension {} in shape {}", s.dump(), shape.dump());
    }
    const auto d = s.get<uint64_t>();
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / 16 / d) {
      return fmt::format("shape {} is too large", shape.dump());
    }
    numel *= d;
    t.shape.push_back(static_cast<int64_t>(d));
  }
  return std::nullopt;
}

// One tensor entry of the header, checked against the data that follows it.
Result<SafetensorsTensorInfo> ParseTensor(const std::string& path, const std::string& name,
                                          const Json& entry, uint64_t data_start,
                                          uint64_t data_size) {
  auto tensor_error = [&](const std::string& what) {
    return InvalidArgumentError(fmt::format("{}: tensor '{}': {}", path, name, what));
  };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    return tensor_error("needs \"dtype\", \"shape\" and \"data_offsets\"");
  }
  SafetensorsTensorInfo t;
  t.name = name;
  const auto dtype = ParseDtype(entry["dtype"]);
  if (!dtype) {
    return tensor_error(
        fmt::format("unknown dtype {}; valid: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL",
                    entry["dtype"].dump()));
  }
  t.dtype = dtype->first;
  uint64_t numel = 0;
  if (auto bad = ParseShape(entry["shape"], t, numel)) return tensor_error(*bad);
  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return tensor_error(
        fmt::format("\"data_offsets\" must be [begin, end], got {}", offsets.dump()));
  }
  const auto begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    return tensor_error(fmt::format(
        "data_offsets [{}, {}] lie outside the {} bytes of data after the header; the file is "
        "truncated or corrupt",
        begin, end, data_size));
  }
  const uint64_t want = numel * static_cast<uint64_t>(dtype->second);
  if (end - begin != want) {
    return tensor_error(fmt::format("{} {} needs {} bytes but data_offsets [{}, {}] hold {}",
                                    TensorDtypeName(t.dtype), ShapeString(t.shape), want, begin,
                                    end, end - begin));
  }
  t.begin = data_start + begin;
  t.bytes = want;
  return t;
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return NotFoundError(fmt::format("{}: cannot open: {}", path, ec.message()));
  uint64_t header_len = 0;
  TUNE_ASSIGN_OR_RETURN(Json doc, ReadHeader(path, size, header_len));
  SafetensorsFile file;
  file.path_ = path;
  const uint64_t data_start = 8 + header_len;
  for (const auto& [name, entry] : doc.items()) {
    if (name != "__metadata__") {
      TUNE_ASSIGN_OR_RETURN(file.tensors_[name],
                            ParseTensor(path, name, entry, data_start, size - data_start));
      continue;
    }
    if (!entry.is_object()) return NotSafetensors(path, "__metadata__ is not an object");
    for (const auto& [k, v] : entry.items()) {
      if (!v.is_string()) {
        return NotSafetensors(path, fmt::format("__metadata__ '{}' is not a string", k));
      }
      file.metadata_[k] = v.get<std::string>();
    }
  }
  return file;
}

const SafetensorsTensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<std::vector<float>> SafetensorsFile::ReadFloats(const SafetensorsTensorInfo& t) const {
  return ReadTensorFloats(path_, t.ToCheckpointTensor());
}

Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  // nlohmann's object keeps keys sorted; the format does not care about the order.
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (!IsFloatDtype(t.dtype)) {
      return InvalidArgumentError(
          fmt::format("tensor '{}': can only write F32, F16 or BF16", t.name));
    }
    int64_t numel = 1;
    for (int64_t s : t.shape) numel *= s;
    if (numel != static_cast<int64_t>(t.values.size())) {
      return InvalidArgumentError(fmt::format("tensor '{}': shape {} needs {} values, got {}",
                                              t.name, ShapeString(t.shape), numel,
                                              t.values.size()));
    }
    const uint64_t bytes = static_cast<uint64_t>(numel * TensorDtypeSize(t.dtype));
    header[t.name] = {{"dtype", TensorDtypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';  // align the data, as the reference writer does
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InternalError(fmt::format("{}: cannot write", path));
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xffu));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors) {
    for (float v : t.values) {
      if (t.dtype == TensorDtype::kF32) {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        for (int i = 0; i < 4; ++i) out.put(static_cast<char>((bits >> (8 * i)) & 0xffu));
      } else {
        const uint16_t bits = t.dtype == TensorDtype::kF16 ? FloatToHalf(v) : FloatToBfloat16(v);
        out.put(static_cast<char>(bits & 0xffu));
        out.put(static_cast<char>(bits >> 8));
      }
    }
  }
  if (!out) return InternalError(fmt::format("{}: write failed", path));
  return Status::Ok();
}

}  // namespace tune
