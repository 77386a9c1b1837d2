// Safetensors files (Hugging Face's format; what PyTorch's safetensors package reads and
// writes): 8 bytes holding the header's length N (u64, little-endian), N bytes of JSON header
//   {"__metadata__": {"format": "pt"}, "key": {"dtype": "F32", "shape": [2, 3],
//    "data_offsets": [0, 24]}, ...}
// then the data section: every tensor's bytes, row-major, little-endian, at its offsets.
//
//   read_safetensors(path)              the tensors, in header order, pointing into the file
//                                       mapped read-only (the mapping lives as long as any)
//   read_safetensors_bytes(bytes)       the same parser on bytes in memory
//   read_safetensors_metadata(path)     the __metadata__ strings
//   read_safetensors_index(path)        a sharded checkpoint (model.safetensors.index.json)
//   save_safetensors(dict or module, path, metadata)
//   load_safetensors(module, path)      read (single file or index), then nn::load_state_dict
//   load_tensor<T, R>(path, key)        one tensor, converted as sd::DType says
//
// A file is untrusted input: every check of the reference implementation (huggingface/
// safetensors, tensor.rs) is made before any tensor is built, and anything wrong is an
// sd::Error naming the file and the key or field. No alignment is assumed (AnyTensor reads
// unaligned). A mapped file truncated by another process while in use faults on access (SIGBUS),
// as with any mmap reader.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "../core/any_tensor.hpp"
#include "../core/error.hpp"
#include "../core/files.hpp"
#include "../core/tensor.hpp"
#include "../nn/module.hpp"
#include "json.hpp"

namespace solder::io {

namespace detail {

using solder::detail::check;
using solder::detail::fail;

inline constexpr std::uint64_t max_header_size = 100'000'000;  // the reference's cap
// A valid header nests 3 deep (header, entry, shape); the limit bounds what a hostile one costs.
inline constexpr int max_json_depth = 16;

struct DTypeName {
  std::string_view name;
  DType dtype;
};
inline constexpr DTypeName dtype_names[] = {
    {"F64", DType::float64}, {"F32", DType::float32}, {"F16", DType::float16}, {"BF16", DType::bfloat16},
    {"I64", DType::int64},   {"I32", DType::int32},   {"I16", DType::int16},   {"I8", DType::int8},
    {"U8", DType::uint8},    {"BOOL", DType::boolean}};

inline std::string_view file_dtype(DType t) {
  for (auto const& d : dtype_names)
    if (d.dtype == t) return d.name;
  fail("safetensors: no file dtype for ", name_of(t));
}

// A number as written, anything else by its JSON type (never a whole hostile sub-document).
inline std::string describe(json::Value const& j) { return j.is_number() ? json::dump(j) : std::string(j.type_name()); }

// A file's bytes, mapped read-only; `owner` unmaps them when the last user lets go.
struct MappedFile {
  std::shared_ptr<void const> owner;
  std::byte const* data = nullptr;
  std::size_t size = 0;
};
inline MappedFile map_file(std::string const& path) {
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, "safetensors: cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  bool const stat_ok = ::fstat(fd, &st) == 0;
  int const stat_errno = errno;
  MappedFile m;
  void* p = MAP_FAILED;
  if (stat_ok && S_ISREG(st.st_mode) && st.st_size > 0) {  // mmap refuses a length of 0
    m.size = static_cast<std::size_t>(st.st_size);
    p = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  int const map_errno = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  check(stat_ok, "safetensors: cannot stat '", path, "': ", std::strerror(stat_errno));
  check(S_ISREG(st.st_mode), "safetensors: '", path, "' is not a regular file");
  if (m.size == 0) return m;
  check(p != MAP_FAILED, "safetensors: cannot map '", path, "': ", std::strerror(map_errno));
  m.data = static_cast<std::byte const*>(p);
  m.owner = std::shared_ptr<void const>(p, [size = m.size](void const* q) { ::munmap(const_cast<void*>(q), size); });
  return m;
}

struct Contents {
  nn::StateDict tensors;
  std::map<std::string, std::string> metadata;
};

struct Entry {
  std::string const* key;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};

// One tensor's header entry, checked on its own: fields, dtype, shape, offsets within the data
// section, and a byte count that matches shape and dtype (computed without overflow).
inline Entry parse_entry(std::string const& key, json::Value const& v, std::string const& file,
                         std::uint64_t data_size) {
  std::string const where = "safetensors: '" + file + "': tensor '" + key + "'";
  check(v.object() != nullptr, where, ": the entry is a JSON ", v.type_name(), ", not an object");
  auto field = [&](char const* name) -> json::Value const& {
    json::Value const* found = v.find(name);
    check(found != nullptr, where, ": no '", name, "' field");
    return *found;
  };
  Entry e{&key, DType::float32, {}, 0, 0};

  json::Value const& dtype = field("dtype");
  std::string const* dtype_text = dtype.string();
  check(dtype_text != nullptr, where, ": 'dtype' is a JSON ", dtype.type_name(), ", not a string");
  auto known = std::find_if(std::begin(dtype_names), std::end(dtype_names),
                            [&](DTypeName const& d) { return d.name == *dtype_text; });
  check(known != std::end(dtype_names), where, ": dtype '", *dtype_text,
        "' is not supported (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL are)");
  e.dtype = known->dtype;

  json::Value const& shape = field("shape");
  check(shape.array() != nullptr, where, ": 'shape' is a JSON ", shape.type_name(), ", not an array");
  constexpr auto int64_max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::int64_t numel = 1;  // as the reference: any partial product that overflows is an error
  for (json::Value const& d : *shape.array()) {
    std::optional<std::uint64_t> const dim = d.as_uint64();
    check(dim && *dim <= int64_max, where, ": 'shape' holds ", describe(d), ", not a non-negative 64-bit integer");
    auto const n = static_cast<std::int64_t>(*dim);
    check(n == 0 || numel <= std::numeric_limits<std::int64_t>::max() / n, where, ": the element count of shape ",
          json::dump(shape), " overflows 64 bits");
    numel *= n;
    e.shape.push_back(n);
  }
  auto const elem = static_cast<std::int64_t>(size_of(e.dtype));
  check(numel <= std::numeric_limits<std::int64_t>::max() / elem, where, ": the byte count of shape ",
        json::dump(shape), " overflows 64 bits");

  json::Value::Array const* offsets = field("data_offsets").array();
  std::optional<std::uint64_t> begin, end;
  if (offsets && offsets->size() == 2) begin = (*offsets)[0].as_uint64(), end = (*offsets)[1].as_uint64();
  check(begin && end, where, ": 'data_offsets' is not an array of two non-negative integers");
  e.begin = *begin;
  e.end = *end;
  check(e.begin <= e.end, where, ": 'data_offsets' [", e.begin, ", ", e.end, "] begin after they end");
  check(e.end <= data_size, where, ": 'data_offsets' [", e.begin, ", ", e.end, "] run past the data section's ",
        data_size, " bytes");
  check(static_cast<std::uint64_t>(numel * elem) == e.end - e.begin, where, ": shape ", json::dump(shape), " of ",
        *dtype_text, " needs ", numel * elem, " bytes, 'data_offsets' [", e.begin, ", ", e.end, "] hold ",
        e.end - e.begin);
  return e;
}

// The parser behind every reader. `data` (kept alive by `owner`) holds the whole file.
inline Contents parse(std::byte const* data, std::size_t size, std::shared_ptr<void const> const& owner,
                      std::string const& file) {
  std::string const where = "safetensors: '" + file + "'";
  check(size >= 8, where, ": ", size, " bytes, too short to hold the header's length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | std::to_integer<std::uint64_t>(data[i]);
  check(n <= max_header_size, where, ": header length ", n, " exceeds the limit of ", max_header_size, " bytes");
  check(n <= size - 8, where, ": header length ", n, " runs past the end of the file (", size, " bytes)");
  std::string_view const text(reinterpret_cast<char const*>(data + 8), n);
  // As the reference: the header starts with '{' (no whitespace or byte-order mark before it),
  // so valid JSON is an object.
  check(!text.empty() && text.front() == '{', where, ": the header does not start with '{'");
  json::Value const header = json::parse(text, where + ": header", max_json_depth);
  std::uint64_t const data_size = size - 8 - n;

  Contents c;
  std::vector<Entry> entries;
  for (auto const& [key, v] : *header.object()) {
    if (key != "__metadata__") {
      entries.push_back(parse_entry(key, v, file, data_size));
      continue;
    }
    check(v.object() != nullptr, where, ": '__metadata__' is a JSON ", v.type_name(), ", not an object");
    for (auto const& [k, s] : *v.object()) {
      check(s.string() != nullptr, where, ": '__metadata__' value '", k, "' is a JSON ", s.type_name(),
            ", not a string");
      c.metadata.emplace(k, *s.string());
    }
  }

  // In offset order the tensors must tile the data section exactly: no hole, no overlap.
  std::vector<Entry const*> by_offset;
  for (auto const& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](Entry const* a, Entry const* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  for (Entry const* e : by_offset) {
    check(e->begin == covered, where, ": tensor '", *e->key, "' starts at data offset ", e->begin, ", ",
          e->begin < covered ? "overlapping the tensor before it, which ends at "
                             : "leaving a hole: the tensors before it end at ",
          covered);
    covered = e->end;
  }
  check(covered == data_size, where, ": the tensors cover ", covered, " bytes of data, the file holds ", data_size,
        " after the header");

  std::byte const* const section = data + 8 + n;
  for (auto& e : entries) c.tensors.insert(*e.key, AnyTensor(e.dtype, std::move(e.shape), owner, section + e.begin));
  return c;
}

inline Contents read(std::string const& path) {
  MappedFile m = map_file(path);
  return parse(m.data, m.size, m.owner, path);
}

// A file written beside its destination and renamed over it once complete: a failed save
// leaves the destination as it was (and readers still mapping the old file keep their data).
class TempFile {
 public:
  explicit TempFile(std::string const& dest) : dest_(dest) {
    static std::atomic<unsigned> counter{0};
    for (int tries = 0; fd_ < 0; ++tries) {
      path_ = dest + "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + ".tmp";
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      // A name taken (a killed save's leftover) moves on to the next.
      if (fd_ < 0 && (errno != EEXIST || tries == 100))
        fail("safetensors: cannot create '", path_, "': ", std::strerror(errno));
    }
  }
  TempFile(TempFile const&) = delete;
  TempFile& operator=(TempFile const&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }

  void write(void const* bytes, std::size_t n) {
    auto const* p = static_cast<char const*>(bytes);
    while (n > 0) {
      ssize_t const w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("safetensors: cannot write '", path_, "': ", std::strerror(errno));
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  void commit() {
    int err = ::fsync(fd_) == 0 ? 0 : errno;
    if (::close(fd_) != 0 && err == 0) err = errno;
    fd_ = -1;
    check(err == 0, "safetensors: cannot write '", path_, "': ", std::strerror(err));
    if (::rename(path_.c_str(), dest_.c_str()) != 0)
      fail("safetensors: cannot rename '", path_, "' to '", dest_, "': ", std::strerror(errno));
    committed_ = true;
  }

 private:
  std::string dest_, path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace detail

// The tensors of a safetensors file, in header order. They point into the file, mapped
// read-only; the mapping is released when the last of them is.
inline nn::StateDict read_safetensors(std::string const& path) { return detail::read(path).tensors; }

// The same from bytes in memory (the tensors share ownership of them). `name` stands for the
// file in error messages.
inline nn::StateDict read_safetensors_bytes(std::shared_ptr<std::vector<std::byte> const> bytes,
                                            std::string const& name = "<memory>") {
  detail::check(bytes != nullptr, "safetensors: '", name, "': no bytes");
  return detail::parse(bytes->data(), bytes->size(), bytes, name).tensors;
}

// The header's __metadata__ (empty when there is none). The whole file is validated.
inline std::map<std::string, std::string> read_safetensors_metadata(std::string const& path) {
  return detail::read(path).metadata;
}

// A sharded checkpoint: Hugging Face's model.safetensors.index.json, whose "weight_map" names
// the shard file of every key. Shards are files in the index's directory (a name with a path
// separator, or "." or "..", is refused); each must hold exactly the keys the map gives it.
// The tensors come shard by shard (in name order), each shard's in its header order.
inline nn::StateDict read_safetensors_index(std::string const& path) {
  using detail::check;
  std::string const where = "safetensors index '" + path + "'";
  detail::MappedFile m = detail::map_file(path);
  check(m.size <= detail::max_header_size, where, ": ", m.size, " bytes, over the limit of ",
        detail::max_header_size);
  auto const index = json::parse({reinterpret_cast<char const*>(m.data), m.size}, where, detail::max_json_depth);
  json::Value const* map = index.find("weight_map");  // (nullptr when the index is not an object)
  check(map != nullptr && map->object() != nullptr, where, ": no \"weight_map\" object");

  std::map<std::string, std::string> shard_of;  // a map: one lookup per tensor of a large checkpoint
  std::set<std::string> shards;
  for (auto const& [key, shard] : *map->object()) {
    std::string const* name = shard.string();
    check(name != nullptr, where, ": the shard of '", key, "' is a JSON ", shard.type_name(), ", not a file name");
    bool const plain = name->find_first_of(std::string("/\\\0", 3)) == std::string::npos;
    check(plain && !name->empty() && *name != "." && *name != "..", where, ": the shard of '", key, "' is '", *name,
          "', not a file name in the index's directory");
    shard_of.emplace(key, *name);
    shards.insert(*name);
  }
  auto const dir = solder::detail::parent_dir(path);
  nn::StateDict all;
  for (auto const& shard : shards) {
    auto const shard_path = solder::detail::join_path(dir, shard);
    for (auto const& [key, t] : read_safetensors(shard_path)) {
      auto named = shard_of.find(key);
      check(named != shard_of.end() && named->second == shard, where, ": shard '", shard, "' holds '", key,
            "', which the index ", named == shard_of.end() ? "does not list" : "places in '" + named->second + "'");
      all.insert(key, t);
    }
  }
  for (auto const& [key, shard] : *map->object())  // in document order: the first missing is named
    check(all.contains(key), where, ": '", key, "' is not in its shard '", *shard.string(), "'");
  return all;
}

// Writes the tensors in the dict's order, each one's bytes contiguous at increasing offsets,
// after a compact JSON header padded with spaces to a multiple of 8 bytes (as the reference
// writer). `metadata` becomes __metadata__ when not empty.
inline void save_safetensors(nn::StateDict const& dict, std::string const& path,
                             std::map<std::string, std::string> const& metadata = {}) {
  using detail::check;
  std::string const where = "safetensors: '" + path + "'";
  std::string header = "{";
  if (!metadata.empty()) {
    std::string fields;
    for (auto const& [key, value] : metadata) {
      // Two statements: the key is checked before the value's message names it.
      fields += (fields.empty() ? "" : ",") + json::quote(key, where + ": a metadata key");
      fields += ':' + json::quote(value, where + ": the metadata value of '" + key + "'");
    }
    header += "\"__metadata__\":{" + fields + "}";
  }
  std::uint64_t offset = 0;
  for (auto const& [key, t] : dict) {
    check(key != "__metadata__", where, ": a tensor cannot be named '__metadata__'");
    check(t.bytes() != nullptr || t.nbytes() == 0, where, ": tensor '", key, "' has no data");
    std::string shape;
    for (std::int64_t n : t.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(n);
    header += (header.size() > 1 ? "," : "") + json::quote(key, where + ": a tensor key") + R"(:{"dtype":")" +
              std::string(detail::file_dtype(t.dtype())) + R"(","shape":[)" + shape + R"(],"data_offsets":[)" +
              std::to_string(offset) + "," + std::to_string(offset + t.nbytes()) + "]}";
    offset += t.nbytes();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(std::uint64_t{header.size()} >> (8 * i));
  detail::TempFile out(path);
  out.write(length, 8);
  out.write(header.data(), header.size());
  for (auto const& [key, t] : dict) out.write(t.bytes(), t.nbytes());
  out.commit();
}

// A module's state_dict (parameters and buffers, PyTorch's keys).
template <nn::Module M>
void save_safetensors(M const& module, std::string const& path,
                      std::map<std::string, std::string> const& metadata = {}) {
  save_safetensors(nn::state_dict(module), path, metadata);
}

// nn::load_state_dict from a file, or from a sharded checkpoint when path ends with ".index.json".
template <nn::Module M>
nn::LoadResult load_safetensors(M& module, std::string const& path, nn::LoadOptions const& o = {}) {
  bool const sharded = std::string_view(path).ends_with(".index.json");
  return nn::load_state_dict(module, sharded ? read_safetensors_index(path) : read_safetensors(path), o);
}

// One tensor of a file as a new host tensor of element type T and rank R.
template <class T, int R>
BasicTensor<T, dynamic_extents<R>(), Host> load_tensor(std::string const& path, std::string const& key) {
  auto const dict = read_safetensors(path);
  AnyTensor const* t = dict.find(key);
  detail::check(t != nullptr, "safetensors: '", path, "': no tensor '", key, "'");
  return t->to<T, R>(key);
}

}  // namespace solder::io
