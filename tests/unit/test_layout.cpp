// Layout arithmetic (core/sharding/layout.h) and plan choice (plan.h) against values worked out
// by hand from weft/mesh.h's rules: torch.chunk's split (ceil(n/k), trailing chunks smaller or
// empty), nesting with the leftmost mesh dim outermost, and the collective per transition.
// Meshes here are descriptor meshes built without communication.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/common/status.h"
#include "core/sharding/layout.h"

namespace ws = weft::shard;

namespace {

ws::Placement S(int d) { return {ws::Kind::shard, d, weft::ReduceOp::sum}; }
ws::Placement R() { return {}; }
ws::Placement P(weft::ReduceOp op) { return {ws::Kind::partial, 0, op}; }

TEST(Layout, ChunkFollowsTorchChunk) {
  // torch.chunk(torch.arange(5), 4) -> sizes 2, 2, 1 (and an empty fourth in weft's rule).
  EXPECT_EQ(ws::chunk(5, 4, 0).begin, 0);
  EXPECT_EQ(ws::chunk(5, 4, 0).end, 2);
  EXPECT_EQ(ws::chunk(5, 4, 1).end, 4);
  EXPECT_EQ(ws::chunk(5, 4, 2).begin, 4);
  EXPECT_EQ(ws::chunk(5, 4, 2).end, 5);
  EXPECT_EQ(ws::chunk(5, 4, 3).begin, 5);
  EXPECT_EQ(ws::chunk(5, 4, 3).end, 5);
  // n smaller than k: 2 over 4 -> 1, 1, 0, 0.
  EXPECT_EQ(ws::chunk(2, 4, 1).end - ws::chunk(2, 4, 1).begin, 1);
  EXPECT_EQ(ws::chunk(2, 4, 2).end - ws::chunk(2, 4, 2).begin, 0);
  // 0 elements: every chunk empty.
  EXPECT_EQ(ws::chunk(0, 3, 0).end, 0);
  // 7 over 3: ceil = 3 -> 3, 3, 1.
  EXPECT_EQ(ws::chunk(7, 3, 2).begin, 6);
  EXPECT_EQ(ws::chunk(7, 3, 2).end, 7);
}

TEST(Layout, NestedShardingLeftmostOutermost) {
  // Tensor [10, 3] on a 2x3 mesh, both mesh dims sharding tensor dim 0: dim 0 splits 10 into
  // 5 | 5, then dim 1 splits each 5 into 2, 2, 1.
  const std::vector<int> mesh{2, 3};
  const ws::Layout L{S(0), S(0)};
  const ws::Box b = ws::local_box({10, 3}, mesh, L, {1, 2});
  EXPECT_EQ(b.offset, (ws::Shape{9, 0}));
  EXPECT_EQ(b.shape, (ws::Shape{1, 3}));
  const ws::Box a = ws::local_box({10, 3}, mesh, L, {0, 1});
  EXPECT_EQ(a.offset, (ws::Shape{2, 0}));
  EXPECT_EQ(a.shape, (ws::Shape{2, 3}));
  // Replicate and partial dims do not split.
  const ws::Box c = ws::local_box({10, 3}, mesh, {R(), S(1)}, {1, 2});
  EXPECT_EQ(c.offset, (ws::Shape{0, 2}));
  EXPECT_EQ(c.shape, (ws::Shape{10, 1}));
  const ws::Box p = ws::local_box({10, 3}, mesh, {P(weft::ReduceOp::max), R()}, {1, 0});
  EXPECT_EQ(p.shape, (ws::Shape{10, 3}));
}

TEST(Layout, IntersectAndValidate) {
  const ws::Box a{{0, 2}, {4, 3}}, b{{2, 0}, {5, 4}};
  const ws::Box i = ws::intersect(a, b);
  EXPECT_EQ(i.offset, (ws::Shape{2, 2}));
  EXPECT_EQ(i.shape, (ws::Shape{2, 2}));
  EXPECT_EQ(ws::intersect(a, ws::Box{{9, 9}, {1, 1}}).numel(), 0);
  EXPECT_THROW(ws::validate({S(2)}, 2), weft::Error);
  EXPECT_THROW(ws::validate({S(-1)}, 2), weft::Error);
  EXPECT_THROW(ws::validate({P(weft::ReduceOp::prod)}, 1), weft::Error);
  EXPECT_NO_THROW(ws::validate({S(1), P(weft::ReduceOp::avg)}, 2));
  EXPECT_EQ(ws::describe(ws::Layout{S(0), R(), P(weft::ReduceOp::sum)}), "[S(0), R, P(sum)]");
}

}  // namespace
