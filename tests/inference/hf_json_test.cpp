// The strict JSON parser: values, escapes, order of keys, and rejected documents with positions.
#include <gtest/gtest.h>

#include "inference/json.h"
#include "loader_test_util.h"

namespace kvs {
namespace {

using testing::input_error_of;

TEST(Json, ParsesValues) {
  const Json j = Json::parse(
      R"( {"a": 1, "b": [true, false, null, -2.5e3, 0], "c": {"d": "x\u00e9\n\ud83d\ude42"}, "a": 7} )",
      "doc");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.keys(), (std::vector<std::string>{"a", "b", "c", "a"}));
  EXPECT_EQ(j.get_number("a", 0), 7);  // the last duplicate wins
  const Json* b = j.find("b");
  ASSERT_TRUE(b && b->is_array());
  ASSERT_EQ(b->size(), 5u);
  EXPECT_TRUE(b->items()[0].as_bool());
  EXPECT_FALSE(b->items()[1].as_bool());
  EXPECT_TRUE(b->items()[2].is_null());
  EXPECT_EQ(b->items()[3].as_number(), -2500.0);
  EXPECT_EQ(j.find("c")->get_string("d", ""), "x\xC3\xA9\n\xF0\x9F\x99\x82");
  EXPECT_EQ(j.get_string("missing", "fallback"), "fallback");
  EXPECT_EQ(j.get_bool("a", true), true);  // wrong type -> fallback
}

TEST(Json, RejectsBadDocuments) {
  EXPECT_EQ(input_error_of([] { Json::parse("{\"a\": 1,\n \"b\": }", "cfg.json"); }),
            "cfg.json: invalid JSON at line 2, column 7 (unexpected character)");
  EXPECT_EQ(input_error_of([] { Json::parse("[1, 2", "x"); }),
            "x: invalid JSON at line 1, column 6 (expected ']')");
  EXPECT_EQ(input_error_of([] { Json::parse("{} {}", "x"); }),
            "x: invalid JSON at line 1, column 4 (unexpected content after the document)");
  EXPECT_NE(input_error_of([] { Json::parse("01", "x"); }).find("unexpected content"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { Json::parse("\"\\ud800\"", "x"); }).find("unpaired surrogate"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { Json::parse("\"a\tb\"", "x"); }).find("control character"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { Json::parse("", "x"); }).find("unexpected end of input"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { Json::parse("[1.]", "x"); }).find("invalid number"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { Json::parse("1e999", "x"); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(input_error_of([] { Json::parse("tru", "x"); }).find("invalid literal"),
            std::string::npos);
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  EXPECT_NE(input_error_of([&] { Json::parse(deep, "x"); }).find("nesting deeper than 256"),
            std::string::npos);
  EXPECT_EQ(input_error_of([] { Json::parse_file("/nonexistent/config.json"); }),
            "/nonexistent/config.json: cannot open");
}

}  // namespace
}  // namespace kvs
