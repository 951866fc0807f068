// A bounded little-endian cursor over bytes that may come from a hostile file. Every read
// checks the remaining length first, so the parser cannot step outside the mapping whatever
// the file claims; a failed read leaves the position unchanged.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace strata::gguf::detail {

class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Reads a trivially copyable little-endian value. This engine only targets little-endian
  // hosts (x86-64, aarch64), so a memcpy is the decode.
  template <class T>
  bool read(T* out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool read_string(uint64_t length, std::string* out) {
    if (remaining() < length) return false;
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += length;
    return true;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF decoding assumes a little-endian host");

}  // namespace strata::gguf::detail
