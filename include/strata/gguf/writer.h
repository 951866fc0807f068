// The GGUF container, write side. Writes the strict layout every reader accepts (§1.8):
// offsets are the running sum of padded sizes, padding is zeros, the data section starts
// at align_up(end of tensor infos). Tensor data is streamed tensor by tensor, so a 40 GB
// file never sits in RAM; an all-zero tensor can be left as a hole (sparse file).
//
//   gguf::Writer w;                                    // alignment 32
//   w.metadata().set("general.architecture", "qwen4exp");
//   w.add_tensor("token_embd.weight", quant::Type::F32, {8, 3}, gguf::TensorData::copy(bytes));
//   Status s = w.write("out.gguf");
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "strata/common/status.h"
#include "strata/gguf/gguf.h"
#include "strata/quant/types.h"

namespace strata::gguf {

// Where a tensor's bytes come from when the file is written.
class TensorSink {
 public:
  virtual ~TensorSink() = default;
  // Appends bytes to the tensor being written; the total must equal its nbytes.
  virtual Status write(const void* data, size_t size) = 0;
};

struct TensorData {
  enum class Kind { Bytes, Stream, Zeros };
  Kind kind = Kind::Zeros;
  std::shared_ptr<const std::vector<uint8_t>> owned;   // Kind::Bytes, owned copy
  std::span<const uint8_t> borrowed;                    // Kind::Bytes, caller keeps alive
  std::function<Status(TensorSink&)> stream;            // Kind::Stream, called once by write()

  static TensorData copy(std::span<const uint8_t> bytes);
  static TensorData own(std::vector<uint8_t> bytes);
  static TensorData borrow(std::span<const uint8_t> bytes);  // must live until write() returns
  static TensorData from_stream(std::function<Status(TensorSink&)> fn);
  // All zeros: the writer seeks over it instead of writing, leaving a hole (sparse file).
  static TensorData zeros();
};

class Writer {
 public:
  // alignment: a power of two. When not 32 it is also written as general.alignment (u32).
  explicit Writer(uint32_t alignment = 32);

  Metadata& metadata() { return metadata_; }
  const Metadata& metadata() const { return metadata_; }
  uint32_t alignment() const { return alignment_; }

  // Declares a tensor. ne is in ggml order (ne[0] = row length), 1 to 4 dims; shape and
  // type are checked here (block multiple, overflow, name length, duplicates). shard is
  // only used by write_split.
  Status add_tensor(std::string name, quant::Type type, std::vector<int64_t> ne, TensorData data,
                    uint32_t shard = 0);
  size_t tensor_count() const { return tensors_.size(); }

  // One file, every tensor (their shard field is ignored).
  Status write(const std::string& path) const;

  // A split set <prefix>-0000K-of-0000N.gguf with n_shards files. Shard 0 gets all metadata,
  // every shard gets split.no (u16), split.count (u16) and split.tensors.count (i32); each
  // tensor goes to the shard given in add_tensor (shard 0 may be left without tensors).
  // Returns the paths written.
  Result<std::vector<std::string>> write_split(const std::string& prefix, uint32_t n_shards) const;

  // Test hook: write with a specific version number in the header (default 3).
  void set_version(uint32_t version) { version_ = version; }

 private:
  struct Pending {
    TensorInfo info;   // data/file_offset unused
    TensorData data;
  };
  Status write_file(const std::string& path, const std::vector<const KeyValue*>& kvs,
                    const std::vector<const Pending*>& tensors) const;
  Status write_data(const std::string& path, const std::vector<uint8_t>& head,
                    const std::vector<const Pending*>& tensors) const;
  Status check_metadata() const;

  uint32_t alignment_;
  uint32_t version_ = 3;
  Metadata metadata_;
  std::vector<Pending> tensors_;
};

}  // namespace strata::gguf
