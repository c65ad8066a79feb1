// The build's paths for the tests (tests/test_paths.h): KVSCOPE_SOURCE_DIR and KVSCOPE_BINARY are
// defined for this file only (CMakeLists.txt), once with the kvscope binary and once with the
// one built on the CUDA emulation.
#include "tests/test_paths.h"

#include <cstdlib>

namespace kvs::test {
namespace {

std::string from_env(const char* name, const char* otherwise) {
  const char* value = std::getenv(name);
  return value && *value ? value : otherwise;
}

}  // namespace

std::string source_path(const std::string& rel) { return std::string(KVSCOPE_SOURCE_DIR) + "/" + rel; }

// The GPU machine's bundle (scripts/gpu-bundle.sh) runs tests where ../shared is elsewhere.
std::string shared_path(const std::string& rel) {
  return from_env("KVSCOPE_SHARED_DIR", KVSCOPE_SOURCE_DIR "/../shared") + "/" + rel;
}

std::string kvscope_binary() { return from_env("KVSCOPE_BINARY", KVSCOPE_BINARY); }

}  // namespace kvs::test
