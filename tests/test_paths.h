// Test support: where the tests find the checkout, the shared test models (../shared beside it)
// and the kvscope binary. The paths are compiled into tests/test_paths.cpp alone, not defined for
// every test, so that a test compiles to the same object in any checkout (ccache reuses it).
#pragma once
#include <string>

namespace kvs::test {

std::string source_path(const std::string& rel);  // <checkout>/rel
std::string shared_path(const std::string& rel);  // <../shared>/rel; $KVSCOPE_SHARED_DIR overrides
std::string kvscope_binary();  // the command line built beside the test; $KVSCOPE_BINARY overrides

}  // namespace kvs::test
