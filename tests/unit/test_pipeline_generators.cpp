// The generators: every output passes the validator for p 1..8, m 1..32, v 1..4 where the method
// allows; compute orders equal hand-written tables for small cases (worked out from each
// method's rule in weft/pipeline.h and the comments of gen_*.cpp, not printed by the code);
// refusals name the rule. WEFT_TEST_INJECT=1 (ctest unit.pipeline_generators_inject) corrupts
// every checked result: a schedule loses its last backward piece, an expected list its last action.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/pipeline/generators.h"
#include "pipeline_inject_checks.h"

namespace wp = weft::pipeline;
using pipecheck::check_list;
using pipecheck::compute_only;
using wp::Action;
using wp::Kind;
using wp::Method;

namespace {

wp::Schedule gen(Method method, int p, int m, int v = 0, bool reduce = false) {
  wp::GenerateOptions o;
  o.ranks = p;
  o.microbatches = m;
  o.stages_per_rank = v;
  o.reduce_grad = reduce;
  return wp::generate(method, o);
}

bool allowed(Method method, int p, int m) {
  if (method == Method::interleaved_1f1b) return m % p == 0 || m <= p;
  if (method == Method::dualpipe_v) return m >= 2 * p;
  return true;
}

// validate() accepts s; an injection first drops the last B or W of rank 0 (a skipped backward).
void check_valid(wp::Schedule s, const std::string& what) {
  const bool injected = pipecheck::inject_enabled();
  if (injected) {
    auto& l = s.actions[0];
    for (size_t k = l.size(); k-- > 0;) {
      if (l[k].kind == Kind::B || l[k].kind == Kind::W) {
        l.erase(l.begin() + static_cast<long>(k));
        break;
      }
    }
  }
  std::string error;
  try {
    wp::validate(s);
  } catch (const weft::Error& e) {
    error = e.message();
  }
  pipecheck::record(injected, error.empty(), what + " fails validation: " + error);
}

TEST(PipelineGenerators, EveryAllowedCombinationValidates) {
  const Method methods[] = {Method::gpipe, Method::one_f_one_b, Method::interleaved_1f1b, Method::zb_h1,
                            Method::zb_h2,  Method::zb_v,        Method::dualpipe_v};
  for (Method method : methods) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 32; ++m) {
        if (!allowed(method, p, m)) continue;
        const int vmax = method == Method::interleaved_1f1b ? 4 : 1;
        for (int v = 1; v <= vmax; ++v) {
          for (bool reduce : {false, true}) {
            const int vgiven = method == Method::interleaved_1f1b ? v : 0;
            const wp::Schedule s = gen(method, p, m, vgiven, reduce);
            const std::string what = std::string(wp::method_name(method)) + " p=" + std::to_string(p) +
                                     " m=" + std::to_string(m) + " v=" + std::to_string(vgiven) +
                                     (reduce ? " reduce_grad" : "");
            const int vwant = method == Method::zb_v || method == Method::dualpipe_v ? 2 : v;
            ASSERT_EQ(s.ranks, p) << what;
            ASSERT_EQ(s.stages, vwant * p) << what;
            ASSERT_EQ(s.microbatches, m) << what;
            ASSERT_EQ(s.method, method) << what;
            check_valid(s, what);
          }
        }
      }
    }
  }
}

Action F(int s, int i) { return {Kind::F, s, i}; }
Action B(int s, int i) { return {Kind::B, s, i}; }
Action I(int s, int i) { return {Kind::I, s, i}; }
Action W(int s, int i) { return {Kind::W, s, i}; }
Action R(int s) { return {Kind::REDUCE_GRAD, s, -1}; }

void check_orders(const wp::Schedule& s, const std::vector<std::vector<Action>>& want, const std::string& what) {
  ASSERT_EQ(s.actions.size(), want.size()) << what;
  for (size_t r = 0; r < want.size(); ++r) {
    check_list(compute_only(s.actions[r]), want[r], what + " rank " + std::to_string(r));
  }
}

TEST(PipelineGenerators, HandWrittenOrders) {
  check_orders(gen(Method::gpipe, 2, 3), {{F(0, 0), F(0, 1), F(0, 2), B(0, 0), B(0, 1), B(0, 2)},
                                          {F(1, 0), F(1, 1), F(1, 2), B(1, 0), B(1, 1), B(1, 2)}},
               "gpipe p=2 m=3");
  check_orders(gen(Method::one_f_one_b, 3, 4),
               {{F(0, 0), F(0, 1), F(0, 2), B(0, 0), F(0, 3), B(0, 1), B(0, 2), B(0, 3)},
                {F(1, 0), F(1, 1), B(1, 0), F(1, 2), B(1, 1), F(1, 3), B(1, 2), B(1, 3)},
                {F(2, 0), B(2, 0), F(2, 1), B(2, 1), F(2, 2), B(2, 2), F(2, 3), B(2, 3)}},
               "1f1b p=3 m=4");
  // m < p: the warm-up is all of m on the first ranks.
  check_orders(gen(Method::one_f_one_b, 4, 2),
               {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)},
                {F(1, 0), F(1, 1), B(1, 0), B(1, 1)},
                {F(2, 0), F(2, 1), B(2, 0), B(2, 1)},
                {F(3, 0), B(3, 0), F(3, 1), B(3, 1)}},
               "1f1b p=4 m=2");
  // Megatron's order, p = 2, v = 2, m = 4: warm-up 4 on rank 0 and 2 on rank 1.
  check_orders(gen(Method::interleaved_1f1b, 2, 4, 2),
               {{F(0, 0), F(0, 1), F(2, 0), F(2, 1), F(0, 2), B(2, 0), F(0, 3), B(2, 1), F(2, 2), B(0, 0), F(2, 3),
                 B(0, 1), B(2, 2), B(2, 3), B(0, 2), B(0, 3)},
                {F(1, 0), F(1, 1), F(3, 0), B(3, 0), F(3, 1), B(3, 1), F(1, 2), B(1, 0), F(1, 3), B(1, 1), F(3, 2),
                 B(3, 2), F(3, 3), B(3, 3), B(1, 2), B(1, 3)}},
               "interleaved p=2 m=4 v=2");
  // ZB-H1: rank r defers its W's by r micro-batches.
  check_orders(gen(Method::zb_h1, 2, 2),
               {{F(0, 0), F(0, 1), I(0, 0), W(0, 0), I(0, 1), W(0, 1)},
                {F(1, 0), I(1, 0), F(1, 1), I(1, 1), W(1, 0), W(1, 1)}},
               "zbh1 p=2 m=2");
  // DualPipeV, rank r of p: chunk 0 = stage r, chunk 1 = stage 2p-1-r.
  check_orders(gen(Method::dualpipe_v, 1, 2),
               {{F(0, 0), F(1, 0), F(0, 1), B(1, 0), F(1, 1), B(0, 0), B(1, 1), I(0, 1), W(0, 1)}}, "dualpipev p=1 m=2");
  check_orders(gen(Method::dualpipe_v, 2, 4),
               {{F(0, 0), F(0, 1), F(0, 2), F(3, 0), I(3, 0), W(3, 0), F(3, 1), F(0, 3), B(3, 1), F(3, 2), B(0, 0),
                 B(3, 2), F(3, 3), B(0, 1), B(3, 3), I(0, 2), W(0, 2), I(0, 3), W(0, 3)},
                {F(1, 0), F(2, 0), F(1, 1), F(2, 1), F(1, 2), B(2, 0), F(2, 2), B(1, 0), F(1, 3), B(2, 1), F(2, 3),
                 B(1, 1), B(2, 2), B(1, 2), I(2, 3), I(1, 3), W(2, 3), W(1, 3)}},
               "dualpipev p=2 m=4");
  // REDUCE_GRAD right after each stage's last backward piece.
  check_orders(gen(Method::one_f_one_b, 2, 2, 0, true),
               {{F(0, 0), F(0, 1), B(0, 0), B(0, 1), R(0)}, {F(1, 0), B(1, 0), F(1, 1), B(1, 1), R(1)}},
               "1f1b p=2 m=2 reduce_grad");
  check_orders(gen(Method::zb_h1, 2, 2, 0, true),
               {{F(0, 0), F(0, 1), I(0, 0), W(0, 0), I(0, 1), W(0, 1), R(0)},
                {F(1, 0), I(1, 0), F(1, 1), I(1, 1), W(1, 0), W(1, 1), R(1)}},
               "zbh1 p=2 m=2 reduce_grad");
  check_orders(gen(Method::dualpipe_v, 1, 2, 0, true),
               {{F(0, 0), F(1, 0), F(0, 1), B(1, 0), F(1, 1), B(0, 0), B(1, 1), R(1), I(0, 1), W(0, 1), R(0)}},
               "dualpipev p=1 m=2 reduce_grad");
}

TEST(PipelineGenerators, Placement) {
  const wp::Schedule v = gen(Method::zb_v, 4, 4);
  const wp::Schedule d = gen(Method::dualpipe_v, 3, 6);
  const wp::Schedule i = gen(Method::interleaved_1f1b, 3, 3, 3);
  const std::vector<int> want_v = {0, 1, 2, 3, 3, 2, 1, 0}, want_d = {0, 1, 2, 2, 1, 0}, want_i = {0, 1, 2, 0, 1, 2, 0, 1, 2};
  for (const auto& [got, want, what] : {std::tuple{&v, &want_v, "zbv p=4"}, std::tuple{&d, &want_d, "dualpipev p=3"},
                                        std::tuple{&i, &want_i, "interleaved p=3 v=3"}}) {
    for (size_t s = 0; s < want->size(); ++s) {
      pipecheck::check_value(got->stage_rank.at(s), (*want)[s], std::string(what) + " stage " + std::to_string(s));
    }
  }
}

TEST(PipelineGenerators, Deterministic) {
  for (Method method : {Method::zb_h2, Method::zb_v, Method::interleaved_1f1b}) {
    const wp::Schedule a = gen(method, 5, 10, method == Method::interleaved_1f1b ? 3 : 0);
    const wp::Schedule b = gen(method, 5, 10, method == Method::interleaved_1f1b ? 3 : 0);
    for (size_t r = 0; r < a.actions.size(); ++r) {
      check_list(a.actions[r], b.actions[r], std::string(wp::method_name(method)) + " twice, rank " + std::to_string(r));
    }
  }
}

void expect_refused(Method method, int p, int m, int v, const std::string& text) {
  try {
    gen(method, p, m, v);
    ADD_FAILURE() << "accepted: " << wp::method_name(method) << " p=" << p << " m=" << m << " v=" << v;
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.status(), weft::Status::invalid_argument);
    EXPECT_NE(e.message().find(text), std::string::npos) << e.message() << "\n  expected to contain: " << text;
  }
}

TEST(PipelineGenerators, RefusalsNameTheRule) {
  expect_refused(Method::interleaved_1f1b, 4, 6, 2,
                 "INTERLEAVED_1F1B needs m to be a multiple of p or m <= p (m = 6, p = 4)");
  expect_refused(Method::dualpipe_v, 4, 7, 0, "DUALPIPE_V needs m >= 2p (m = 7, p = 4)");
  expect_refused(Method::gpipe, 2, 4, 2, "GPIPE has v = 1 stages per rank: stages_per_rank must be 0 or 1 (got 2)");
  expect_refused(Method::zb_v, 2, 4, 1, "ZB_V has v = 2 stages per rank: stages_per_rank must be 0 or 2 (got 1)");
  expect_refused(Method::one_f_one_b, 0, 4, 0, "ONE_F_ONE_B needs 1 <= p");
  expect_refused(Method::zb_h1, 2, 0, 0, "ZB_H1 needs 1 <= m");
  expect_refused(Method::interleaved_1f1b, 2, 2, -1, "INTERLEAVED_1F1B needs 1 <= v");
  expect_refused(static_cast<Method>(9), 2, 2, 0, "method 9 is no generator");
  expect_refused(Method::custom, 2, 2, 0, "method -1 is no generator");
}

}  // namespace
