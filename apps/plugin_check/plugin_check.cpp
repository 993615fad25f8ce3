// fresco-plugin-check LIB: validates a plugin's ABI info and struct sizes, then runs every kernel it provides
// on its device against the double-precision references (op_cases.h, cases/*.cpp) on random inputs, and
// prints a PASS/FAIL table. Exit status 0 when every check passes, 1 when any fails (a kernel without a
// reference fails as unchecked), 64 on bad usage. Kernels whose device is absent on this machine are SKIPPED,
// not failed. Tested by tests/e2e/test_plugin_check.cpp (shipped plugins pass; broken test plugins fail with
// a reason).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device_buffers.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/ops.h"
#include "op_cases.h"

namespace {
using namespace fresco;

const char* dtype_list(uint32_t mask) {
  static std::string s;
  static const char* names[] = {"f32", "f16", "bf16", "i32", "i8", "u8"};
  s.clear();
  for (int i = 0; i < 6; ++i)
    if (mask & (1u << i)) s += (s.empty() ? "" : "|") + std::string(names[i]);
  return s.c_str();
}

FrTensor tensor_of(const check::Operand& o, void* data) {
  FrTensor t{};
  t.data = data;
  t.dtype = o.dtype;
  t.ndim = 4;
  for (int i = 0; i < 4; ++i) t.dims[i] = o.dims[i];
  return t;
}

FrRange range_of(const check::Operand& o, void* data) {
  FrRange r{};
  r.data = data;
  r.bytes = o.host.size();
  r.dtype = o.dtype;
  return r;
}

struct Results {
  std::vector<std::vector<uint8_t>> out, rout;
};

// Runs kernel k on case c's inputs on its device; returns what it wrote (throws fresco::Error on a kernel
// error).
Results run_raw(const FrKernelDef& k, const FrDeviceApi* api, const check::OpCase& c) {
  check::DeviceBuffers dev(api);
  auto place = [&](const std::vector<check::Operand>& ops, std::vector<void*>& ptrs) {
    for (const auto& o : ops) {
      void* p = static_cast<uint8_t*>(dev.alloc(o.host.size() + o.offset)) + o.offset;
      dev.upload(p, o.host);
      ptrs.push_back(p);
    }
  };
  std::vector<void*> pin, pout, prin, prout;
  place(c.in, pin);
  place(c.out, pout);
  place(c.rin, prin);
  place(c.rout, prout);
  std::vector<FrTensor> in, out;
  std::vector<FrRange> rin, rout;
  auto fill = [&](bool with_data) {
    in.clear(), out.clear(), rin.clear(), rout.clear();
    for (size_t i = 0; i < c.in.size(); ++i) in.push_back(tensor_of(c.in[i], with_data ? pin[i] : nullptr));
    for (size_t i = 0; i < c.out.size(); ++i)
      out.push_back(tensor_of(c.out[i], with_data ? pout[i] : nullptr));
    for (size_t i = 0; i < c.rin.size(); ++i)
      rin.push_back(range_of(c.rin[i], with_data ? prin[i] : nullptr));
    for (size_t i = 0; i < c.rout.size(); ++i)
      rout.push_back(range_of(c.rout[i], with_data ? prout[i] : nullptr));
  };
  FrCall call{};
  call.struct_size = sizeof(FrCall);
  auto point = [&] {
    call.in = in.data(), call.n_in = static_cast<uint32_t>(in.size());
    call.out = out.data(), call.n_out = static_cast<uint32_t>(out.size());
    call.rin = rin.data(), call.n_rin = static_cast<uint32_t>(rin.size());
    call.rout = rout.data(), call.n_rout = static_cast<uint32_t>(rout.size());
    call.params = c.params.empty() ? nullptr : c.params.data();
    call.params_size = static_cast<uint32_t>(c.params.size());
    call.stream = dev.stream();
  };
  fill(false);  // prepare sees shapes only, as in a real compile
  point();
  void* state = nullptr;
  uint64_t ws = 0;
  if (k.prepare)
    throw_if_error(k.prepare(dev.ctx(), &call, &state, &ws), std::string("prepare ") + k.op_name);
  struct StateGuard {
    const FrKernelDef& k;
    void* ctx;
    void* state;
    ~StateGuard() {
      if (state && k.destroy) k.destroy(ctx, state);
    }
  } guard{k, dev.ctx(), state};
  fill(true);
  point();
  call.state = state;
  call.workspace = ws ? dev.alloc(ws) : nullptr;
  call.workspace_bytes = ws;
  throw_if_error(k.run(dev.ctx(), &call), std::string("run ") + k.op_name);
  dev.sync();
  Results r;
  for (size_t i = 0; i < c.out.size(); ++i) r.out.push_back(dev.download(pout[i], c.out[i].host.size()));
  for (size_t i = 0; i < c.rout.size(); ++i) r.rout.push_back(dev.download(prout[i], c.rout[i].host.size()));
  return r;
}

double run_case(const FrKernelDef& k, const FrDeviceApi* api, const check::OpCase& c) {
  const Results r = run_raw(k, api, c);
  return c.error(r.out, r.rout);
}

std::vector<float> as_floats(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

check::Operand f32_operand(const std::vector<float>& v) {
  check::Operand o;
  o.host.resize(v.size() * 4);
  std::memcpy(o.host.data(), v.data(), o.host.size());
  o.dims[0] = 4;
  o.dims[3] = static_cast<int64_t>(v.size() / 4);
  return o;
}

// A custom op declared by a schema has no built-in reference: its forward kernel must run and give finite
// values, and its backward kernel must match central differences of the forward kernel (L = sum(y * R)).
// Returns {detail, passed}.
std::pair<std::string, bool> check_schema_op(const FrKernelDef& k, const FrOpSchema& s,
                                             const FrKernelDef* fwd, const FrDeviceApi* api, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> x(64), r(64);
  for (auto& v : x) v = d(rng);
  for (auto& v : r) v = d(rng);
  auto forward = [&](const std::vector<float>& in) {
    check::OpCase c;
    c.in = {f32_operand(in)};
    c.out = {f32_operand(std::vector<float>(in.size(), NAN))};
    return as_floats(run_raw(*fwd, api, c).out[0]);
  };
  if (std::strcmp(k.op_name, s.name) == 0) {
    for (float v : forward(x))
      if (!std::isfinite(v)) return {"forward wrote a non-finite value (or nothing)", false};
    return {"forward runs and writes finite values; checked through its backward", true};
  }
  const std::vector<float> y = forward(x);
  check::OpCase c;
  c.in = {f32_operand(r), f32_operand(x), f32_operand(y)};
  c.out = {f32_operand(std::vector<float>(x.size(), NAN))};
  const std::vector<float> dx = as_floats(run_raw(k, api, c).out[0]);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float h = 1e-2f;
    std::vector<float> xp = x, xm = x;
    xp[i] += h, xm[i] -= h;
    const std::vector<float> yp = forward(xp), ym = forward(xm);
    double num = 0;
    for (size_t j = 0; j < x.size(); ++j) num += (static_cast<double>(yp[j]) - ym[j]) * r[j];
    num /= 2.0 * h;
    worst = std::max(worst, std::fabs(dx[i] - num));
    scale = std::max(scale, std::fabs(num));
  }
  const double rel = worst / std::max(scale, 1e-30);
  char buf[128];
  std::snprintf(buf, sizeof buf, "vs finite differences of '%s': max rel err %.2e (tolerance 1e-02)", s.name,
                rel);
  return {buf, rel <= 1e-2};
}

int usage() {
  std::fprintf(stderr, "usage: fresco-plugin-check PLUGIN_FILE [--seed N]\n");
  return 64;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage();
  const std::string path = argv[1];
  uint32_t seed = 1;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = static_cast<uint32_t>(std::atoi(argv[++i]));
    else
      return usage();
  }
  try {
    auto& reg = PluginRegistry::instance();
    reg.load_default();  // the installed backends provide the devices of kernel-only plugins
    const PluginProbe p = reg.probe_file(path);
    int failed = 0, passed = 0, skipped = 0;
    auto row = [&](const char* what, const std::string& detail, const char* verdict) {
      std::printf("%-34s %-6s %s\n", what, verdict, detail.c_str());
      if (!std::strcmp(verdict, "FAIL")) ++failed;
      if (!std::strcmp(verdict, "PASS")) ++passed;
      if (!std::strcmp(verdict, "SKIP")) ++skipped;
    };
    std::printf("plugin %s\n", p.path.c_str());
    if (!p.ok) {
      row("load and ABI", p.reason, "FAIL");
      std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
      return 1;
    }
    row("load and ABI",
        std::string(p.abi.name ? p.abi.name : "?") + " " + (p.abi.version ? p.abi.version : "?") + ", ABI " +
            std::to_string(p.abi.abi_major) + "." + std::to_string(p.abi.abi_minor) + " (host " +
            std::to_string(FR_ABI_MAJOR) + "." + std::to_string(FR_ABI_MINOR) + ")",
        "PASS");
    row("struct sizes",
        "FrAbiInfo " + std::to_string(p.abi.struct_size) + ", FrPlugin " +
            std::to_string(p.table.struct_size) +
            (p.table.device ? ", FrDeviceApi " + std::to_string(p.table.device->struct_size)
                            : std::string()) +
            ", " + std::to_string(p.table.n_kernels) + " FrKernelDef",
        "PASS");
    if (p.table.n_kernels == 0 && !p.table.device) row("contents", "no device API and no kernels", "FAIL");
    for (uint32_t i = 0; i < p.table.n_kernels; ++i) {
      const FrKernelDef& k = p.table.kernels[i];
      const std::string what = std::string(k.op_name) + " [" + k.device + "]";
      const FrDeviceApi* api = p.table.device && std::strcmp(p.table.device->name, k.device) == 0
                                   ? p.table.device
                                   : reg.device(k.device);
      if (!api) {
        row(what.c_str(), std::string("no plugin provides device '") + k.device + "'", "SKIP");
        continue;
      }
      if (!api->device_count || api->device_count() <= 0) {
        row(what.c_str(), std::string("no ") + k.device + " device on this machine", "SKIP");
        continue;
      }
      if (std::strcmp(k.op_name, FR_OP_ALLREDUCE_MEAN) == 0) {  // needs a group of ranks on threads
        row(what.c_str(),
            "collective: not run here (a group of ranks; the backend's own tests, e.g. test_comm_threads)",
            "SKIP");
        continue;
      }
      check::OpCase c;
      if (!check::make_case(k.op_name, seed + i, &c)) {
        const FrOpSchema* schema = nullptr;  // a custom op this library declares?
        for (uint32_t j = 0; j < p.table.n_schemas; ++j)
          if (std::strcmp(p.table.schemas[j].name, k.op_name) == 0 ||
              (p.table.schemas[j].backward && std::strcmp(p.table.schemas[j].backward, k.op_name) == 0))
            schema = &p.table.schemas[j];
        const FrKernelDef* fwd = nullptr;
        for (uint32_t j = 0; schema && j < p.table.n_kernels; ++j)
          if (std::strcmp(p.table.kernels[j].op_name, schema->name) == 0 &&
              std::strcmp(p.table.kernels[j].device, k.device) == 0)
            fwd = &p.table.kernels[j];
        if (!schema || !fwd) {
          row(what.c_str(), "unchecked: no reference for this op", "FAIL");
          continue;
        }
        try {
          const auto [detail, ok] = check_schema_op(k, *schema, fwd, api, seed + i);
          row(what.c_str(), detail, ok ? "PASS" : "FAIL");
        } catch (const Error& e) {
          row(what.c_str(), e.what(), "FAIL");
        }
        continue;
      }
      if (!(k.dtype_mask & FR_DTYPE_BIT(c.dtype))) {
        row(what.c_str(), std::string("dtypes ") + dtype_list(k.dtype_mask) + ": no reference case", "SKIP");
        continue;
      }
      auto check_case = [&](const std::string& label, const check::OpCase& oc) {
        try {
          const double err = run_case(k, api, oc);
          char buf[96];
          std::snprintf(buf, sizeof buf, "max rel err %.2e (tolerance %.0e)", err, oc.tolerance);
          row(label.c_str(), buf, err <= oc.tolerance ? "PASS" : "FAIL");
        } catch (const Error& e) {
          row(label.c_str(), e.what(), "FAIL");
        }
      };
      check_case(what, c);
      for (const auto& [variant, vc] : check::make_variant_cases(k.op_name, seed + i)) {
        if ((vc.requires_flags & k.flags) != vc.requires_flags) {  // a form the kernel does not declare
          row((what + " " + variant).c_str(), "operand form not declared (FrKernelDef::flags)", "SKIP");
          continue;
        }
        check_case(what + " " + variant, vc);
      }
    }
    std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "fresco-plugin-check: error: %s\n", e.what());
    return e.exit_status();
  }
}
