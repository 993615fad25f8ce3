// A CUPTI injection library that records when every kernel, memset and memcpy ran on the device, also inside
// replayed CUDA graphs, so the overlap of the five streams in a captured step can be read off (the lent GPU
// has no Nsight Systems). Load it with CUDA_INJECTION64_PATH=.../libfresco_cupti_trace.so; it writes CSV to
// FRESCO_TRACE_OUT (default fresco_trace.csv) at exit: kind, name, start_ns, end_ns, stream, correlation (the
// graph launch's: one per replay), graph node, grid and block. FRESCO_TRACE_KEEP=N keeps the last N records
// (default 200000). bench/trace/timeline.py summarises a file. A diagnostic, not part of the product.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

namespace {

struct Record {
  const char* kind;
  std::string name;
  uint64_t start, end;
  uint32_t stream, correlation;
  uint64_t node;
  int grid, block;
};

// On the heap and never freed: CUPTI may deliver buffers while the process exits, after write_records.
std::mutex& records_mutex = *new std::mutex;
std::deque<Record>& records = *new std::deque<Record>;
size_t keep = 200000;
bool closed = false;  // under records_mutex: set once the file is written; later records are dropped

constexpr size_t kBufferBytes = 8u << 20;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "cupti_trace: %s failed: %s\n", what, text ? text : "?");
}

std::string short_name(const char* mangled) {
  if (!mangled) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  // Template arguments and parameter lists make names long; keep the function's name and its first template
  // arguments, without commas (the output is CSV).
  if (s.size() > 120) s.resize(120);
  std::replace(s.begin(), s.end(), ',', ';');
  return s;
}

void push(Record r) {
  std::lock_guard<std::mutex> lock(records_mutex);
  if (closed) return;
  records.push_back(std::move(r));
  while (records.size() > keep) records.pop_front();
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* a = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
    switch (a->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
        const long long grid = static_cast<long long>(k->gridX) * k->gridY * k->gridZ;
        push({"kernel", short_name(k->name), k->start, k->end, k->streamId, k->correlationId, k->graphNodeId,
              static_cast<int>(std::min<long long>(grid, INT32_MAX)), k->blockX * k->blockY * k->blockZ});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
        push({"memset", std::to_string(m->bytes) + " bytes", m->start, m->end, m->streamId, m->correlationId,
              m->graphNodeId, 0, 0});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
        push({"memcpy", std::to_string(m->bytes) + " bytes kind " + std::to_string(m->copyKind), m->start,
              m->end, m->streamId, m->correlationId, m->graphNodeId, 0, 0});
        break;
      }
      default:
        break;
    }
  }
  std::free(buffer);
}

void write_records() {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  const char* path = std::getenv("FRESCO_TRACE_OUT");
  if (!path || !*path) path = "fresco_trace.csv";
  std::FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cupti_trace: cannot write %s\n", path);
    return;
  }
  std::fprintf(f, "kind,name,start_ns,end_ns,stream,correlation,graph_node,grid,block\n");
  std::lock_guard<std::mutex> lock(records_mutex);
  closed = true;
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped)
    std::fprintf(stderr, "cupti_trace: CUPTI dropped %zu records\n", dropped);
  for (const Record& r : records)
    std::fprintf(f, "%s,%s,%llu,%llu,%u,%u,%llu,%d,%d\n", r.kind, r.name.c_str(),
                 static_cast<unsigned long long>(r.start), static_cast<unsigned long long>(r.end), r.stream,
                 r.correlation, static_cast<unsigned long long>(r.node), r.grid, r.block);
  std::fclose(f);
  std::fprintf(stderr, "cupti_trace: %zu records -> %s\n", records.size(), path);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (const char* k = std::getenv("FRESCO_TRACE_KEEP")) keep = std::max(1L, std::atol(k));
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memsets");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable memcpys");
  std::atexit(write_records);
  return 1;
}
