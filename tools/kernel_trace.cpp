// kernel_trace: a CUPTI injection library that writes every kernel, memcpy and memset the process
// runs on the GPU, with its device timestamps, to the file named by STRATA_KERNEL_TRACE.
//
// Why: ncu times one kernel at a time (serialised, no programmatic dependent launch), and the
// bench's per-stage events add a launch between stages, so neither shows what a kernel costs
// inside the decode graph, where the next kernel's CTAs start before the previous one ends. CUPTI's
// concurrent-kernel records do: start and end of every graph node as it ran. bench/kernel_trace.py
// turns them into the time each kernel adds to a replay.
//
// Built and run by bench/kernel-trace.sh (the CUDA driver loads it through CUDA_INJECTION64_PATH,
// so the engine is the binary it always is). Output, one line per record, tab separated:
//   K start_ns end_ns correlation graph_id graph_node stream gridX gridY gridZ block name
//   C|S start_ns end_ns correlation graph_id graph_node stream bytes
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <mutex>

namespace {

constexpr size_t kBufferBytes = 8u << 20;

std::FILE* g_out = nullptr;
std::mutex g_mutex;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "kernel_trace: %s: %s\n", what, msg != nullptr ? msg : "unknown CUPTI error");
}

// The demangled name when it demangles, else the name as recorded.
void write_name(const char* mangled) {
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::fputs(status == 0 && plain != nullptr ? plain : mangled, g_out);
  std::free(plain);
}

// A memcpy ('C') or memset ('S') record: the fields both kinds have.
template <class Record>
void write_transfer(char tag, const Record* m) {
  std::fprintf(g_out, "%c\t%llu\t%llu\t%u\t%u\t%llu\t%u\t%llu\n", tag, static_cast<unsigned long long>(m->start),
               static_cast<unsigned long long>(m->end), m->correlationId, m->graphId,
               static_cast<unsigned long long>(m->graphNodeId), m->streamId, static_cast<unsigned long long>(m->bytes));
}

void write_record(const CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      std::fprintf(g_out, "K\t%llu\t%llu\t%u\t%u\t%llu\t%u\t%d\t%d\t%d\t%d\t", static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->correlationId, k->graphId,
                   static_cast<unsigned long long>(k->graphNodeId), k->streamId, k->gridX, k->gridY, k->gridZ, k->blockX);
      write_name(k->name);
      std::fputc('\n', g_out);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: write_transfer('C', reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec)); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: write_transfer('S', reinterpret_cast<const CUpti_ActivityMemset4*>(rec)); break;
    default: break;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    const std::lock_guard<std::mutex> lock(g_mutex);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) write_record(rec);
  }
  std::free(buffer);
}

void flush_at_exit() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (g_out != nullptr) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH).
extern "C" int InitializeInjection() {
  const char* path = std::getenv("STRATA_KERNEL_TRACE");
  if (path == nullptr) {
    std::fprintf(stderr, "kernel_trace: STRATA_KERNEL_TRACE (the output file) is not set; tracing nothing\n");
    return 1;
  }
  g_out = std::fopen(path, "w");
  if (g_out == nullptr) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return 1;
  }
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register callbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable memcpy");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memset");
  std::atexit(flush_at_exit);
  return 1;
}
