// libFuzzer target: the safetensors parser (io/safetensors.hpp) and its JSON reader and writer
// (io/json.hpp) on arbitrary bytes, under ASan and UBSan. Malformed input must end in an
// sd::Error; a crash, a sanitizer report or any other exception is a finding, and so is JSON
// that reads back differently once written. Built and run by scripts/fuzz.sh (seeds:
// corpus/safetensors/).
#include <solder/io/json.hpp>
#include <solder/io/safetensors.hpp>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  namespace sd = solder;
  namespace json = sd::io::json;
  auto bytes = std::make_shared<std::vector<std::byte>>(size);
  if (size > 0) std::memcpy(bytes->data(), data, size);
  try {
    // Every accepted tensor is read in full through its dtype's conversion (flattened to rank
    // 1): ASan checks its bytes lie inside the input.
    for (auto const& [key, t] : sd::io::read_safetensors_bytes(bytes, "fuzz")) {
      sd::AnyTensor const flat(t.dtype(), {t.numel()}, t.owner(), t.bytes());
      if (t.dtype() == sd::DType::boolean) flat.to<bool, 1>(key);
      else if (sd::is_floating(t.dtype())) flat.to<double, 1>(key);
      else flat.to<std::int64_t, 1>(key);
    }
  } catch (sd::Error const&) {
  }

  // The same bytes as JSON text: whatever the reader accepts, the writer writes as JSON that
  // the reader accepts and that writes the same (outside the try: an error there is a finding).
  std::string_view const text(reinterpret_cast<char const*>(data), size);
  std::optional<std::string> written;
  try {
    written = json::dump(json::parse(text, "fuzz", sd::io::detail::max_json_depth));
  } catch (sd::Error const&) {
  }
  if (written && json::dump(json::parse(*written, "fuzz (written back)", sd::io::detail::max_json_depth)) != *written)
    std::abort();
  return 0;
}
