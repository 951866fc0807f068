// .npy v1.0: magic "\x93NUMPY", version 1.0, a u16 header length, then a Python dict literal
// padded with spaces and ending in '\n' so the data starts on a 64-byte boundary.
#include "strata/reference/npy.h"

#include <bit>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

namespace strata::reference {

Status write_npy_f32(const std::string& path, std::span<const float> data, int64_t rows, int64_t cols) {
  static_assert(std::endian::native == std::endian::little, "the .npy header says '<f4'");
  if (rows < 0 || cols < 0 || static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) != data.size()) {
    return Status::error(fmt::format("npy: {}: shape [{}, {}] does not match {} values", path, rows, cols, data.size()));
  }
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  const size_t prefix = 10;  // magic (6) + version (2) + header length (2)
  const size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return Status::error(fmt::format("npy: cannot open {} for writing", path));
  const uint16_t len = static_cast<uint16_t>(header.size());
  const unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(len & 0xFF),
                                  static_cast<unsigned char>(len >> 8)};
  bool ok = std::fwrite(head, 1, sizeof(head), f.get()) == sizeof(head) &&
            std::fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
            std::fwrite(data.data(), sizeof(float), data.size(), f.get()) == data.size();
  ok = (std::fclose(f.release()) == 0) && ok;
  if (!ok) return Status::error(fmt::format("npy: write to {} failed", path));
  return Status::ok_status();
}

}  // namespace strata::reference
