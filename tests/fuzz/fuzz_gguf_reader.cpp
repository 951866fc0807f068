// libFuzzer target for the GGUF reader: any byte string must either parse or be rejected
// with a message, never read out of bounds, overflow or allocate without bound. On success
// it also walks what was parsed (dump, tensor views) so that bad views would be touched.
#include <cstddef>
#include <cstdint>
#include <span>

#include "strata/gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = strata::gguf::File::parse(std::span<const uint8_t>(data, size), "fuzz");
  if (!file.ok()) {
    if (file.error().empty()) __builtin_trap();  // every rejection must say why
    return 0;
  }
  std::string dump = strata::gguf::dump_canonical(*file);
  volatile uint8_t sink = 0;
  for (const strata::gguf::TensorInfo& t : file->tensors()) {
    // The views must lie inside the input: touch the first and last byte of each.
    if (t.nbytes > 0) sink = sink ^ t.data[0] ^ t.data[t.nbytes - 1];
  }
  (void)sink;
  (void)dump;
  return 0;
}
