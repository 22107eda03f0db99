// safetensors_header.cpp - the JSON header: checking one that was read, making one to write.
// The only file that includes nlohmann::json (kept out of every header of ours).
//
// A header comes from a file that may be corrupt or hostile, so nothing in it is trusted: every
// field's JSON type is checked before it is read, integers are range-checked before any
// arithmetic, and the entries are checked together against the data buffer's size before the
// caller allocates anything.
//
// Why a SAX handler rather than json::parse: the DOM parser keeps duplicate keys silently (the
// spec forbids them), and its callback variant rescans the parent object after every nested
// object, which is quadratic in the number of tensors - a 100 MB header of tiny entries would
// hang. Here each top-level value ("__metadata__" or one tensor entry) is built as a small DOM,
// checked, and dropped: time is linear, memory is the checked entries plus one entry.
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <set>

#include "framework/io/safetensors_format.hpp"

namespace headgrad::io::detail {
namespace {

using Json = nlohmann::json;

// Nesting depth: the top object is 0, an entry 1, its shape array 2. One level more is allowed
// so that "shape": [[1]] gets the precise "must be an integer" message; deeper is refused.
constexpr std::size_t kMaxNesting = 3;
// No valid array has more than 8 elements (shape); the headroom keeps "shape has 9 dimensions"
// precise while a 50-million-element array is refused before it is built.
constexpr std::size_t kMaxArrayElements = 64;

// What files call each dtype.
const char* file_dtype_name(DType d) {
  switch (d) {
  case DType::f32: return "F32";
  case DType::f64: return "F64";
  case DType::i64: return "I64";
  case DType::bool8: return "BOOL";
  }
  return "?";
}

bool dtype_from_file(const std::string& s, DType& out) {
  for (DType d : {DType::f32, DType::f64, DType::i64, DType::bool8})
    if (s == file_dtype_name(d)) { out = d; return true; }
  return false;
}

// The spec's other dtypes: files that are valid but hold what this framework cannot represent.
bool is_spec_dtype(const std::string& s) {
  static const std::set<std::string> spec = {"U8",  "I8",      "I16",     "U16",     "F16",     "BF16",
                                             "I32", "U32",     "U64",     "C64",     "F4",      "F6_E2M3",
                                             "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0"};
  return spec.count(s) != 0;
}

// Text from the file, fit for an error message: JSON-quoted (control characters escaped) and
// cut short, so a megabyte-long name cannot become a megabyte-long exception.
std::string show(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}
std::string quote_name(const std::string& name) { return show(Json(name)); }

// nlohmann's parse errors echo the bytes last read, which may be anything: keep printable ASCII.
std::string sanitize(std::string s) {
  const auto pos = s.find("] ");
  if (s.rfind("[json.exception.", 0) == 0 && pos != std::string::npos) s = s.substr(pos + 2);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  if (s.size() > 300) s = s.substr(0, 297) + "...";
  return s;
}

// A JSON integer >= 0. nlohmann stores non-negative integers as unsigned, negative ones as
// signed, and anything with a fraction or exponent, or beyond 64 bits, as a float.
bool get_u64(const Json& v, std::uint64_t& out) {
  if (v.is_number_unsigned()) { out = v.get<std::uint64_t>(); return true; }
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    out = static_cast<std::uint64_t>(v.get<std::int64_t>());
    return true;
  }
  return false;
}

std::string offsets_str(std::uint64_t b, std::uint64_t e) { return fmt::format("[{}, {}]", b, e); }

std::map<std::string, std::string> read_metadata(const Json& m, const std::string& where) {
  if (!m.is_object()) fail(where, fmt::format("\"__metadata__\" must be an object of strings, got {}", m.type_name()));
  std::map<std::string, std::string> out;
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it.value().is_string())
      fail(where, fmt::format("\"__metadata__\" value for {} must be a string, got {} {}", quote_name(it.key()),
                              it.value().type_name(), show(it.value())));
    out.emplace(it.key(), it.value().get<std::string>());
  }
  return out;
}

// One tensor entry, checked on its own and against the data buffer's size.
Entry read_entry(const std::string& name, const Json& v, std::uint64_t data_size, const std::string& where) {
  const std::string t = "tensor " + quote_name(name);
  if (!v.is_object()) fail(where, fmt::format("{}: entry must be an object, got {}", t, v.type_name()));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!v.contains(field)) fail(where, fmt::format("{}: missing \"{}\"", t, field));
  Entry e;
  e.name = name;

  const Json& dt = v["dtype"];
  if (!dt.is_string())
    fail(where, fmt::format("{}: \"dtype\" must be a string, got {} {}", t, dt.type_name(), show(dt)));
  const std::string dts = dt.get<std::string>();
  if (!dtype_from_file(dts, e.dtype)) {
    if (is_spec_dtype(dts))
      fail(where, fmt::format("{}: dtype {} is not supported (headgrad reads F32, F64, I64 and BOOL)", t,
                              quote_name(dts)));
    fail(where, fmt::format("{}: unknown dtype {}", t, quote_name(dts)));
  }

  // shape: at most kMaxDims non-negative integers. The product of the nonzero ones must fit in
  // int64, because Dims::numel and contiguous_strides multiply unchecked - even for a tensor with
  // a 0 dim, whose partial products are formed before the 0 is reached.
  const Json& sh = v["shape"];
  if (!sh.is_array())
    fail(where, fmt::format("{}: \"shape\" must be an array, got {} {}", t, sh.type_name(), show(sh)));
  if (sh.size() > static_cast<std::size_t>(kMaxDims))
    fail(where, fmt::format("{}: shape has {} dimensions; headgrad supports at most {}", t, sh.size(), kMaxDims));
  std::vector<std::int64_t> dims;
  std::uint64_t nonzero_product = 1;
  bool has_zero = false;
  for (std::size_t i = 0; i < sh.size(); ++i) {
    std::uint64_t d = 0;
    if (!get_u64(sh[i], d))
      fail(where, fmt::format("{}: shape entry {} must be a non-negative integer, got {}", t, i, show(sh[i])));
    if (d == 0) has_zero = true;
    if (d > static_cast<std::uint64_t>(INT64_MAX) ||
        __builtin_mul_overflow(nonzero_product, d == 0 ? 1 : d, &nonzero_product) ||
        nonzero_product > static_cast<std::uint64_t>(INT64_MAX))
      fail(where, fmt::format("{}: shape {} is too large (its element count overflows 64 bits)", t, show(sh)));
    dims.push_back(static_cast<std::int64_t>(d));
  }
  e.shape = Dims(dims);
  const std::uint64_t numel = has_zero ? 0 : nonzero_product;

  const Json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    fail(where, fmt::format("{}: \"data_offsets\" must be an array of two integers, got {}", t, show(off)));
  if (!get_u64(off[0], e.begin) || !get_u64(off[1], e.end))
    fail(where, fmt::format("{}: \"data_offsets\" must be non-negative integers, got {}", t, show(off)));
  if (e.begin > e.end)
    fail(where, fmt::format("{}: data_offsets {} end before they begin", t, offsets_str(e.begin, e.end)));
  if (e.end > data_size)
    fail(where, fmt::format("{}: data_offsets {} run past the end of the data buffer ({} bytes)", t,
                            offsets_str(e.begin, e.end), data_size));
  // numel <= INT64_MAX, so only the multiplication by the element size can overflow.
  std::uint64_t nbytes = 0;
  const bool overflow = __builtin_mul_overflow(numel, std::uint64_t{dtype_size(e.dtype)}, &nbytes);
  const std::uint64_t span = e.end - e.begin;
  if (overflow || nbytes != span)
    fail(where, fmt::format("{}: shape {} of {} needs {} bytes, but data_offsets {} span {}", t, show(sh), dts,
                            overflow ? std::string("more than 2^64") : std::to_string(nbytes),
                            offsets_str(e.begin, e.end), span));
  return e;
}

// The SAX handler (the interface nlohmann::json::sax_parse calls). `stack` holds the open
// containers; stack[0] is the top object, whose values are not stored but handed, once complete,
// to read_metadata / read_entry.
class HeaderReader {
public:
  HeaderReader(std::uint64_t data_size, const std::string& where) : data_size_(data_size), where_(where) {}
  Layout layout;

  bool null() { return add(Json(nullptr), "null"); }
  bool boolean(bool v) { return add(Json(v), "boolean"); }
  bool number_integer(Json::number_integer_t v) { return add(Json(v), "number"); }
  bool number_unsigned(Json::number_unsigned_t v) { return add(Json(v), "number"); }
  bool number_float(Json::number_float_t v, const std::string&) { return add(Json(v), "number"); }
  bool string(std::string& v) { return add(Json(std::move(v)), "string"); }
  bool binary(Json::binary_t&) { return true; } // never produced by the JSON lexer
  bool start_object(std::size_t) { return open(false); }
  bool start_array(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    Frame& top = stack_.back();
    // A tensor (a key of the top object) or a metadata entry: counted before it is stored.
    if ((stack_.size() == 1 || (stack_.size() == 2 && stack_[0].key == "__metadata__")) &&
        ++entries_ > kMaxSafetensorsEntries)
      fail(where_, fmt::format("header has more than {} entries (tensors and metadata); headgrad reads at most that many",
                               kMaxSafetensorsEntries));
    if (!top.keys.insert(k).second) {
      if (stack_.size() == 1)
        fail(where_, k == "__metadata__" ? std::string("duplicate \"__metadata__\" in the header")
                                         : fmt::format("duplicate tensor name {} in the header", quote_name(k)));
      if (stack_.size() == 2) {
        const std::string& owner = stack_[0].key;
        const std::string in =
            owner == "__metadata__" ? std::string("\"__metadata__\"") : "tensor " + quote_name(owner);
        fail(where_, fmt::format("duplicate key {} in {}", quote_name(k), in));
      }
      fail(where_, fmt::format("duplicate key {} in the header", quote_name(k)));
    }
    // A tensor entry's other fields are ignored, as the reference reader does: not even stored.
    top.skip_next = stack_.size() == 2 && stack_[0].key != "__metadata__" && k != "dtype" && k != "shape" &&
                    k != "data_offsets";
    top.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const Json::exception& e) {
    fail(where_, "header is not valid JSON: " + sanitize(e.what()));
  }

private:
  struct Frame {
    Json value;                // the container being built (unused for the top object)
    bool is_array = false;
    bool skip = false;         // an ignored field's subtree: nothing is stored
    bool skip_next = false;    // the value after the current key is to be ignored
    std::size_t count = 0;     // elements so far (arrays)
    std::string key;           // the current key (objects)
    std::set<std::string> keys; // seen keys (objects), for the duplicate check
  };

  // Counts an element of the innermost array and says whether the new value is to be dropped.
  bool enter_child() {
    Frame& p = stack_.back();
    if (p.is_array && ++p.count > kMaxArrayElements)
      fail(where_, fmt::format("header has an array with more than {} elements", kMaxArrayElements));
    const bool skip = p.skip || p.skip_next;
    p.skip_next = false;
    return skip;
  }

  // Stores a finished value (scalar or closed container) in its parent, or hands it over.
  void store(Json&& v, bool skip) {
    Frame& p = stack_.back();
    if (stack_.size() == 1) {
      if (p.key == "__metadata__") layout.metadata = read_metadata(v, where_);
      else layout.entries.push_back(read_entry(p.key, v, data_size_, where_));
    } else if (!skip) {
      if (p.is_array) p.value.push_back(std::move(v));
      else p.value[p.key] = std::move(v);
    }
  }

  bool add(Json&& v, const char* type) {
    if (stack_.empty()) fail(where_, fmt::format("header must be a JSON object, got {}", type));
    store(std::move(v), enter_child());
    return true;
  }

  bool open(bool is_array) {
    if (stack_.empty()) {
      if (is_array) fail(where_, "header must be a JSON object, got array");
      stack_.emplace_back();
      return true;
    }
    if (stack_.size() > kMaxNesting) fail(where_, "header nests objects or arrays deeper than the format allows");
    Frame f;
    f.skip = enter_child();
    f.is_array = is_array;
    f.value = is_array ? Json::array() : Json::object();
    stack_.push_back(std::move(f));
    return true;
  }

  bool close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    if (!stack_.empty()) store(std::move(f.value), f.skip);
    return true;
  }

  std::vector<Frame> stack_;
  std::uint64_t entries_ = 0; // tensors and metadata entries met so far
  std::uint64_t data_size_;
  const std::string& where_;
};

} // namespace

void fail(const std::string& where, const std::string& problem) {
  throw std::invalid_argument(where + ": " + problem);
}

Layout parse_header(std::string_view header, std::uint64_t data_size, const std::string& where) {
  if (header.empty()) fail(where, "header is empty (expected a JSON object)");
  // nlohmann's lexer takes a NUL byte for the end of input, so "{}\0<anything>" would parse and
  // the bytes after the NUL would hide in the header. A raw NUL is never valid JSON: refuse it.
  if (const auto nul = header.find('\0'); nul != std::string_view::npos)
    fail(where, fmt::format("header is not valid JSON: NUL byte at offset {}", nul));
  HeaderReader reader(data_size, where);
  // strict: only whitespace may follow the object (the spec's space padding).
  (void)Json::sax_parse(header.begin(), header.end(), &reader, Json::input_format_t::json, true);
  // The spec requires the very first byte to be '{': leading whitespace is valid JSON but not a
  // valid header.
  if (header.front() != '{') fail(where, "header must begin with '{' (found leading whitespace)");
  Layout out = std::move(reader.layout);

  // The spec: the entries must index the whole buffer - sorted by offset, each starts where the
  // previous one ended, the last ends at the end of the file. A hole could hide a second payload
  // (a polyglot file); trailing bytes are a hole at the end.
  std::stable_sort(out.entries.begin(), out.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : out.entries) {
    if (e.begin < pos)
      fail(where, fmt::format("tensors {} (data_offsets {}) and {} (data_offsets {}) overlap", quote_name(prev->name),
                              offsets_str(prev->begin, prev->end), quote_name(e.name), offsets_str(e.begin, e.end)));
    if (e.begin > pos)
      fail(where, fmt::format("bytes [{}, {}) of the data buffer belong to no tensor (the format forbids holes)",
                              pos, e.begin));
    pos = e.end;
    prev = &e;
  }
  if (pos != data_size)
    fail(where, fmt::format("{} trailing bytes after the last tensor's data (bytes [{}, {}) of the data buffer "
                            "belong to no tensor)", data_size - pos, pos, data_size));
  return out;
}

std::string make_header(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                        const std::string& where, std::uint64_t& data_size) {
  // Assembled by hand (linear in the number of tensors, and in the given order); nlohmann only
  // quotes the strings. Compact like the reference writer; strict: invalid UTF-8 throws.
  auto str = [&](const std::string& s) {
    try {
      return Json(s).dump();
    } catch (const Json::type_error&) {
      fail(where, fmt::format("{} is not valid UTF-8", show(Json(s))));
    }
  };
  std::string s = "{";
  if (!metadata.empty()) {
    s += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) s += ',';
      first = false;
      s += str(k);
      s += ':';
      s += str(v);
    }
    s += "}";
  }
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(where, "the tensor name \"__metadata__\" is reserved for the metadata");
    if (!seen.insert(name).second) fail(where, fmt::format("duplicate tensor name {}", quote_name(name)));
    if (!t.defined()) fail(where, fmt::format("tensor {} is undefined", quote_name(name)));
    const std::uint64_t nbytes = static_cast<std::uint64_t>(t.numel()) * dtype_size(t.dtype());
    s += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", s.size() > 1 ? "," : "",
                     str(name), file_dtype_name(t.dtype()), fmt::join(t.shape(), ","), offset, offset + nbytes);
    offset += nbytes;
  }
  s += "}";
  s.append((8 - s.size() % 8) % 8, ' '); // so the data buffer starts 8-byte aligned in the file
  data_size = offset;
  return s;
}

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

std::uint64_t check_header_length(const unsigned char* first8, std::uint64_t file_size, const std::string& where) {
  if (file_size < 8)
    fail(where, fmt::format("file is {} bytes, too short for the 8-byte header length", file_size));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | first8[i];
  if (n > file_size - 8)
    fail(where, fmt::format("header length {} is larger than the rest of the file ({} bytes)", n, file_size - 8));
  if (n > kMaxSafetensorsHeaderBytes)
    fail(where, fmt::format("header length {} exceeds the limit of {} bytes", n, kMaxSafetensorsHeaderBytes));
  return n;
}

} // namespace headgrad::io::detail
