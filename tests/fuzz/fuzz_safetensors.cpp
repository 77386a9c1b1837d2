// libFuzzer target: the safetensors parser (io/safetensors.hpp) on arbitrary bytes, under ASan
// and UBSan. Malformed input must end in an sd::Error; a crash, a sanitizer report or any other
// exception is a finding. Built and run by scripts/fuzz.sh (seeds: corpus/safetensors/).
#include <solder/io/safetensors.hpp>

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  namespace sd = solder;
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
  return 0;
}
