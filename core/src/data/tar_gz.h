// One pass over the regular files of a .tar.gz (ustar and GNU long names), for the dataset loaders that read
// straight from an archive (jpeg_folder.cpp, cifar_binary.cpp). Tested through
// tests/core/test_jpeg_folder.cpp and test_cifar_binary.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fresco::data {

// A path's components ("a/b/c" -> {a, b, c}), without empty ones and ".".
std::vector<std::string> path_components(const std::string& p);

// For every regular file of `archive` in order: `want(path)` says whether to read it (what it declines is
// skipped unread; kStop ends the pass), and `take(path, bytes)` receives what it accepts. A file larger
// than max_bytes is kBadData naming it ("... is too large for <what>"); a truncated or corrupt archive is
// kBadData, one that cannot be opened kIo.
enum class TarWant { kSkip, kRead, kStop };
void read_tar_gz(const std::string& archive, const std::function<TarWant(const std::string& path)>& want,
                 const std::function<void(const std::string& path, std::vector<uint8_t>&& bytes)>& take,
                 uint64_t max_bytes, const std::string& what);

}  // namespace fresco::data
