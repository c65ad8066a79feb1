// Policy specs, run names and the registry's validation of names, parameters and budgets.
#include <gtest/gtest.h>

#include "analysis/policy.h"
#include "inference/errors.h"
#include "sim_fixture.h"

using namespace kvs;
using kvs::test::policy;
using kvs::test::shape_of;

static std::string error_of(const std::string& text, int budget, const ModelShape& shape) {
  try {
    make_policy(parse_policy_spec(text, budget), shape);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(PolicySpec, ParsesNameParamsAndListContinuation) {
  PolicySpec s = parse_policy_spec("omnikv:filters=2,8,18,wait=0", 64);
  EXPECT_EQ(s.name, "omnikv");
  EXPECT_EQ(s.budget, 64);
  ASSERT_EQ(s.params.size(), 2u);
  EXPECT_EQ(s.params["filters"], "2,8,18");
  EXPECT_EQ(s.params["wait"], "0");
  EXPECT_EQ(parse_policy_spec("h2o:budget=16,heavy=4", 64).budget, 16);
  EXPECT_EQ(parse_policy_spec("h2o:budget=16,heavy=4", 64).params.count("budget"), 0u);
}

TEST(PolicySpec, RunNames) {
  EXPECT_EQ(parse_policy_spec("streamingllm", 36).run_name(), "streamingllm_b36");
  EXPECT_EQ(parse_policy_spec("h2o:heavy=8", 32).run_name(), "h2o_heavy8_b32");
  EXPECT_EQ(parse_policy_spec("full", 32).run_name(), "full");
  EXPECT_EQ(parse_policy_spec("duoattention:pattern=/a/b/lr=0.02-x_y/", 64).run_name(),
            "duoattention_patternlr-0.02-x-y_b64");
  EXPECT_EQ(parse_policy_spec("omnikv:filters=1,3", 8).run_name(), "omnikv_filters1-3_b8");
  // The filter layers are a set: given in another order, the same run under the same name.
  EXPECT_EQ(parse_policy_spec("omnikv:filters=3,1", 8).run_name(), "omnikv_filters1-3_b8");
  EXPECT_EQ(parse_policy_spec("omnikv:filters=12,3,0,wait=2", 8).params.at("filters"), "0,3,12");
  EXPECT_EQ(parse_policy_spec("omnikv:filters=3,x", 8).params.at("filters"), "3,x") << "for the policy to refuse";
}

TEST(PolicySpec, MalformedSpecsAreInputErrors) {
  EXPECT_THROW(parse_policy_spec(":a=1", 8), InputError);
  EXPECT_THROW(parse_policy_spec("h2o:", 8), InputError);
  EXPECT_THROW(parse_policy_spec("h2o:heavy", 8), InputError);
  EXPECT_THROW(parse_policy_spec("h2o:=3", 8), InputError);
  EXPECT_THROW(parse_policy_spec("h2o:heavy=1,heavy=2", 8), InputError);
  EXPECT_THROW(parse_policy_spec("h2o:budget=x", 8), InputError);
}

TEST(Registry, KnowsEveryPolicy) {
  const ModelShape shape = shape_of(4, 4, 2);
  const std::vector<std::string> names = policy_names();
  ASSERT_EQ(names.size(), 12u);
  for (const std::string& n : names) {
    auto p = make_policy(parse_policy_spec(n, 16), shape);
    EXPECT_EQ(p->spec().name, n);
  }
}

TEST(Registry, RejectsBadInput) {
  const ModelShape shape = shape_of(4, 4, 2);
  EXPECT_EQ(error_of("h2o:foo=1", 16, shape), "--policy h2o: unknown parameter 'foo' (known: heavy, recent, gqa)");
  EXPECT_EQ(error_of("nope", 16, shape).rfind("--policy nope: unknown policy (known: full, window", 0), 0u);
  EXPECT_EQ(error_of("h2o", 0, shape), "--policy h2o: budget must be positive (got 0)");
  EXPECT_NE(error_of("window", -3, shape), "");
  EXPECT_EQ(error_of("omnikv:filters=1,4", 16, shape),
            "--policy omnikv: filter layer 4 is beyond the last layer (3)");
  EXPECT_NE(error_of("h2o:gqa=median", 16, shape), "");
  EXPECT_NE(error_of("snapkv:kernel=4", 16, shape), "");
  EXPECT_NE(error_of("snapkv:pool=min", 16, shape), "");
  EXPECT_NE(error_of("h2o:heavy=x", 16, shape), "");
  EXPECT_NE(error_of("duoattention:threshold=0.5,sparsity=0.5", 16, shape), "");
  EXPECT_NE(error_of("kvzip:level=head", 16, shape), "");
  EXPECT_EQ(error_of("full", 0, shape), "");  // full needs no budget
  EXPECT_EQ(error_of("full:foo=1", 0, shape), "--policy full: unknown parameter 'foo' (known: none)");
  EXPECT_EQ(error_of("tova:k=1", 8, shape), "--policy tova: unknown parameter 'k' (known: none)");
}

TEST(Registry, ResolvedParamsJson) {
  const ModelShape shape = shape_of(4, 4, 2);
  EXPECT_EQ(make_policy(parse_policy_spec("h2o", 32), shape)->params_json(),
            "{\"heavy\":16,\"recent\":16,\"gqa\":\"mean\"}");
  EXPECT_EQ(make_policy(parse_policy_spec("streamingllm", 36), shape)->params_json(),
            "{\"sinks\":4,\"recent\":32}");
  EXPECT_EQ(make_policy(parse_policy_spec("h2o:recent=10", 32), shape)->params_json(),
            "{\"heavy\":22,\"recent\":10,\"gqa\":\"mean\"}");
}

// The defaults the app shows as hints (resolved_params_text of an empty spec), typed back as a
// spec, make the same policy: every policy,
// at two budgets and on a shape with GQA (OmniKV's filter list, DuoAttention's gate source that
// is resolved later and so left out).
TEST(Registry, ResolvedParamsTextIsASpecOfTheSamePolicy) {
  const ModelShape shape = shape_of(12, 8, 2);
  for (const std::string& name : policy_names())
    for (const int budget : {24, 64}) {
      SCOPED_TRACE(name + " budget " + std::to_string(budget));
      const std::string text = resolved_params_text(PolicySpec{name, {}, budget}, shape);
      const auto defaults = make_policy(PolicySpec{name, {}, budget}, shape);
      const auto typed = make_policy(parse_policy_spec(text.empty() ? name : name + ":" + text, budget), shape);
      EXPECT_EQ(typed->params_json(), defaults->params_json()) << text;
    }
  EXPECT_EQ(resolved_params_text(PolicySpec{"h2o", {}, 32}, shape_of(4, 4, 2)), "heavy=16,recent=16,gqa=mean");
  EXPECT_EQ(resolved_params_text(PolicySpec{"h2o", {{"recent", "10"}}, 32}, shape_of(4, 4, 2)),
            "heavy=22,recent=10,gqa=mean");
  EXPECT_EQ(resolved_params_text(PolicySpec{"omnikv", {}, 64}, shape).find("filters="), 0u);
}

// Given values the budget cuts keep their run name, so the run says what it kept instead.
TEST(PolicyCaveat, GivenValuesCutToTheBudget) {
  const ModelShape shape = shape_of(2, 4, 2);
  EXPECT_EQ(policy("h2o:heavy=40", 32, shape)->caveat(56),
            "heavy=40 does not fit the budget of 32: the run keeps heavy 32, recent 0");
  EXPECT_EQ(policy("streamingllm:sinks=40", 32, shape)->caveat(56),
            "sinks=40 does not fit the budget of 32: the run keeps sinks 32, recent 0");
  EXPECT_EQ(policy("streamingllm:recent=8", 6, shape)->caveat(56),
            "recent=8 does not fit the budget of 6: the run keeps sinks 4, recent 2");
  EXPECT_EQ(policy("strided:recent=100", 32, shape)->caveat(56),
            "recent=100 does not fit the budget of 32: the run keeps recent 32");
  EXPECT_EQ(policy("strided:recent=8", 32, shape)->caveat(56), "");
  EXPECT_EQ(policy("h2o:heavy=8,recent=8", 32, shape)->caveat(56), "");
  EXPECT_EQ(policy("streamingllm", 2, shape)->caveat(56), "") << "defaults fit themselves to the budget";
  EXPECT_EQ(policy("duoattention:sink=10", 4, shape)->caveat(56),
            "sink=10 does not fit the budget of 4: the run keeps sink 4, recent 0");
  EXPECT_EQ(policy("duoattention", 2, shape)->caveat(56), "");
}
