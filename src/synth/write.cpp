// Writing a plan: the split set on disk (write_pack) or one unsplit file in RAM-backed storage
// opened at once (open_in_memory), or one unsplit file of holes only (write_shape_pack). All go
// through gguf::Writer, so a synthetic pack is laid out byte for byte like any file the engine
// loads, and the n-gram table is a hole.
//
// Speed: a full pack is 37-111 GB of random blocks. Each tensor is generated in batches of
// about 64 MiB by all cores (split at chunk boundaries) while the previous batch is written,
// so the disk and the generators overlap.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "internal.h"
#include "strata/gguf/writer.h"

namespace strata::synth {
namespace {

constexpr uint64_t kBatchTarget = uint64_t{64} << 20;

unsigned thread_count(const WriteOptions& o) {
  return o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
}

// Fills dst = bytes [offset, offset + size) of t with up to `threads` workers, each taking a
// run of whole chunks (so no chunk is generated twice).
Status generate_parallel(const Plan& plan, const TensorPlan& t, uint64_t offset, std::span<uint8_t> dst,
                         unsigned threads) {
  const uint64_t chunk = detail::chunk_bytes(t);
  const uint64_t n_chunks = (dst.size() + chunk - 1) / chunk;
  if (threads <= 1 || n_chunks <= 1) return generate(plan, t, offset, dst);
  const uint64_t per = (n_chunks + threads - 1) / threads * chunk;
  std::vector<std::future<Status>> parts;
  for (uint64_t lo = 0; lo < dst.size(); lo += per) {
    const uint64_t n = std::min<uint64_t>(per, dst.size() - lo);
    parts.push_back(std::async(std::launch::async, [&plan, &t, offset, lo, n, dst] {
      return generate(plan, t, offset + lo, dst.subspan(lo, n));
    }));
  }
  Status result;
  for (auto& f : parts) {
    Status s = f.get();
    if (result.ok() && !s.ok()) result = s;
  }
  return result;
}

struct ProgressState {
  const std::function<void(const Progress&)>* callback = nullptr;
  uint64_t done = 0;
  uint64_t total = 0;
  void report(std::string_view tensor) const {
    if (callback && *callback) (*callback)(Progress{done, total, tensor});
  }
};

// The stream callback of one tensor: generate batch k+1 while batch k goes to the file.
Status stream_tensor(const Plan& plan, const TensorPlan& t, gguf::TensorSink& sink, unsigned threads,
                     ProgressState& progress) {
  const uint64_t chunk = detail::chunk_bytes(t);
  const uint64_t batch = std::min(t.nbytes, std::max(chunk, kBatchTarget / chunk * chunk));
  std::vector<uint8_t> buffers[2];
  auto launch = [&](uint64_t pos, int which) {
    buffers[which].resize(static_cast<size_t>(std::min(batch, t.nbytes - pos)));
    return std::async(std::launch::async, [&plan, &t, pos, which, threads, &buffers] {
      return generate_parallel(plan, t, pos, buffers[which], threads);
    });
  };
  int which = 0;
  std::future<Status> pending = launch(0, which);
  for (uint64_t pos = 0; pos < t.nbytes;) {
    STRATA_TRY(pending.get());
    const uint64_t len = buffers[which].size();
    if (pos + len < t.nbytes) pending = launch(pos + len, 1 - which);
    Status written = sink.write(buffers[which].data(), buffers[which].size());
    if (!written.ok()) {
      if (pending.valid()) pending.wait();  // the worker still uses the other buffer
      return written;
    }
    pos += len;
    which = 1 - which;
    progress.done += len;
    progress.report(t.name);
  }
  return Status::ok_status();
}

// Declares every tensor on a writer; `single_file` puts all of them in shard 0; `shape_only`
// leaves every tensor a hole (the bytes come from generate() later, see write_shape_pack).
Status add_tensors(gguf::Writer& w, const Plan& plan, bool single_file, bool shape_only, unsigned threads,
                   ProgressState& progress) {
  w.metadata() = plan.metadata;
  for (const TensorPlan& t : plan.tensors) {
    gguf::TensorData data = gguf::TensorData::zeros();
    if (!shape_only && t.init != Init::Zeros) {
      data = gguf::TensorData::from_stream([&plan, &t, threads, &progress](gguf::TensorSink& sink) {
        return stream_tensor(plan, t, sink, threads, progress);
      });
    }
    STRATA_TRY(w.add_tensor(t.name, t.type, t.ne, std::move(data), single_file ? 0 : t.shard));
  }
  return Status::ok_status();
}

}  // namespace

Result<std::vector<std::string>> write_pack(const Plan& plan, const std::string& dir, const WriteOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::error(fmt::format("synth: cannot create {}: {}", dir, ec.message()));
  ProgressState progress{&options.progress, 0, plan.written_bytes()};
  gguf::Writer w;
  STRATA_TRY(add_tensors(w, plan, false, false, thread_count(options), progress));
  const std::string prefix = (std::filesystem::path(dir) / plan.prefix).string();
  auto paths = w.write_split(prefix, static_cast<uint32_t>(plan.shards.size()));
  if (!paths) return paths.status();
  // The plan promised exact sizes (the dry run prints them); a difference is a bug here.
  for (size_t s = 0; s < paths->size(); ++s) {
    const uint64_t size = std::filesystem::file_size((*paths)[s], ec);
    if (ec || size != plan.shards[s].file_bytes) {
      return Status::error(fmt::format("synth: {}: {} bytes written (expected {} from the plan)", (*paths)[s],
                                       ec ? 0 : size, plan.shards[s].file_bytes));
    }
  }
  return paths;
}

RamPack& RamPack::operator=(RamPack&& other) noexcept {
  if (this != &other) {
    if (!path_.empty()) ::unlink(path_.c_str());
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

RamPack::~RamPack() {
  if (!path_.empty()) ::unlink(path_.c_str());
}

Result<RamPack> write_ram_pack(const Plan& plan, const MemoryOptions& options) {
  static std::atomic<uint64_t> counter{0};
  RamPack pack((std::filesystem::path(options.ram_dir) /
                fmt::format("strata-synth-{}-{}.gguf", ::getpid(), counter++)).string());
  ProgressState progress{&options.write.progress, 0, plan.written_bytes()};
  gguf::Writer w;
  STRATA_TRY(add_tensors(w, plan, true, false, thread_count(options.write), progress));
  Status written = w.write(pack.path());
  if (!written.ok()) {
    return Status::error(fmt::format("synth: in-memory pack in {} (needs a RAM-backed directory with {:.1f} GB free): {}",
                                     options.ram_dir, static_cast<double>(plan.written_bytes()) / 1e9,
                                     written.message()));
  }
  return pack;
}

Status write_shape_pack(const Plan& plan, const std::string& path) {
  ProgressState progress{nullptr, 0, 0};
  gguf::Writer w;
  STRATA_TRY(add_tensors(w, plan, true, true, 1, progress));
  Status written = w.write(path);
  if (!written.ok()) return Status::error(fmt::format("synth: shape-only pack {}: {}", path, written.message()));
  return Status::ok_status();
}

Result<gguf::Model> open_in_memory(const Plan& plan, const MemoryOptions& options) {
  auto pack = write_ram_pack(plan, options);
  if (!pack) return pack.status();
  return gguf::Model::open(pack->path());  // the RamPack unlinks it on return; the mapping stays
}

}  // namespace strata::synth
