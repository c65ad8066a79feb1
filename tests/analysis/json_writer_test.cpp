// The CLI's --json writer: a flat object in insertion order, its arrays of numbers, strings and
// booleans, non-finite numbers as null, strings escaped (quotes, control bytes, bytes not UTF-8).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/json_writer.h"

namespace kvs {
namespace {

TEST(JsonObject, ValuesAndArraysInInsertionOrder) {
  JsonObject o;
  o.add("n", 3).add("x", 0.5).add("s", "a\"b").add_bool("t", true).add_null("z");
  o.add("ints", std::vector<int>{1, -2}).add("reals", std::vector<double>{0.25, std::nan("")});
  o.add("names", std::vector<std::string>{"h2o", "line\nbreak", "\xC3"});
  o.add("flags", std::vector<bool>{true, false});
  o.add("none", std::vector<std::string>{});
  EXPECT_EQ(o.str(), "{\"n\":3,\"x\":0.5,\"s\":\"a\\\"b\",\"t\":true,\"z\":null,\"ints\":[1,-2],"
                     "\"reals\":[0.25,null],\"names\":[\"h2o\",\"line\\nbreak\",\"\\\\xC3\"],"
                     "\"flags\":[true,false],\"none\":[]}");
}

}  // namespace
}  // namespace kvs
