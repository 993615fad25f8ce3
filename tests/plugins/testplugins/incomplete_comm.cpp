// Test plugin: hands back a collective backend (ABI 1.1 FrCommApi) without its functions, which the loader
// must refuse.
#include "fresco/plugin.h"

namespace {
const FrCommApi kComm = {sizeof(FrCommApi), 0,       "broken", "cpu",   nullptr,
                         nullptr,           nullptr, nullptr,  nullptr, nullptr};
}  // namespace

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-incomplete-comm", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  out->comm = &kComm;
  return nullptr;
}
