// kernels::strided_copy against a plain element-by-element copy written from the definition
// (address = base + sum(index * stride) * elem), over views with padding, transposes, extent-1
// and extent-0 dims, every element size, and the merge of contiguous dims.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/strided_copy.h"

namespace wk = weft::kernels;

namespace {

int64_t offset_of(const wk::StridedView& v, const std::vector<int64_t>& idx) {
  int64_t o = 0;
  for (int k = 0; k < v.ndim; ++k) o += idx[static_cast<size_t>(k)] * v.strides[k];
  return o;
}

// Calls f(index) for every index of shape, row-major.
template <class F>
void each_index(const wk::StridedView& v, F f) {
  if (v.numel() == 0) return;
  std::vector<int64_t> idx(static_cast<size_t>(v.ndim), 0);
  for (;;) {
    f(idx);
    int k = v.ndim - 1;
    for (; k >= 0; --k) {
      if (++idx[static_cast<size_t>(k)] < v.shape[k]) break;
      idx[static_cast<size_t>(k)] = 0;
    }
    if (k < 0) return;
  }
}

wk::StridedView view(char* base, size_t elem, std::vector<int64_t> shape, std::vector<int64_t> strides) {
  wk::StridedView v;
  v.base = base;
  v.elem = elem;
  v.ndim = static_cast<int>(shape.size());
  for (size_t k = 0; k < shape.size(); ++k) {
    v.shape[k] = shape[k];
    v.strides[k] = strides[k];
  }
  return v;
}

struct Case {
  std::vector<int64_t> shape, dst_strides, src_strides;
};

void check_case(const Case& c, size_t elem) {
  // Buffers big enough for the largest offset of either view.
  auto extent = [&](const std::vector<int64_t>& st) {
    int64_t last = 0;
    for (size_t k = 0; k < c.shape.size(); ++k) last += (c.shape[k] > 0 ? c.shape[k] - 1 : 0) * st[k];
    return static_cast<size_t>(last + 1) * elem;
  };
  std::vector<char> src(extent(c.src_strides)), dst(extent(c.dst_strides), 0x5a), want(dst);
  std::mt19937 rng(7);
  for (char& b : src) b = static_cast<char>(rng());
  const wk::StridedView s = view(src.data(), elem, c.shape, c.src_strides);
  const wk::StridedView d = view(dst.data(), elem, c.shape, c.dst_strides);
  wk::StridedView w = d;
  w.base = want.data();
  each_index(s, [&](const std::vector<int64_t>& idx) {
    std::memcpy(want.data() + offset_of(w, idx) * static_cast<int64_t>(elem),
                src.data() + offset_of(s, idx) * static_cast<int64_t>(elem), elem);
  });
  wk::strided_copy(d, s);
  EXPECT_EQ(dst, want) << "elem " << elem << " ndim " << c.shape.size();
}

TEST(StridedCopy, MatchesElementwiseDefinition) {
  const std::vector<Case> cases = {
      {{5, 7}, {7, 1}, {7, 1}},                 // both contiguous: one memcpy
      {{5, 7}, {9, 1}, {7, 1}},                 // padded destination rows
      {{5, 7}, {7, 1}, {1, 5}},                 // transposed source
      {{3, 1, 4}, {4, 4, 1}, {1, 3, 3}},        // extent-1 dim between
      {{2, 3, 4}, {12, 4, 1}, {24, 8, 2}},      // every source dim strided
      {{0, 4}, {4, 1}, {4, 1}},                 // empty
      {{}, {}, {}},                             // a scalar
      {{2, 2, 2, 2, 2, 2, 2, 2}, {128, 64, 32, 16, 8, 4, 2, 1}, {1, 2, 4, 8, 16, 32, 64, 128}},  // 8 dims
  };
  for (size_t elem : {1u, 2u, 4u, 8u, 3u}) {
    for (const Case& c : cases) check_case(c, elem);
  }
}

TEST(StridedCopy, SubViewAndContiguity) {
  std::vector<int32_t> a(6 * 5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i);
  const int64_t shape[2] = {6, 5};
  const wk::StridedView v = wk::StridedView::contiguous(a.data(), 4, 2, shape);
  EXPECT_TRUE(wk::is_contiguous(v));
  const int64_t off[2] = {2, 1}, ext[2] = {3, 2};
  const wk::StridedView s = v.sub(off, ext);
  EXPECT_FALSE(wk::is_contiguous(s));
  std::vector<int32_t> out(6);
  wk::strided_copy(wk::StridedView::contiguous(out.data(), 4, 2, ext), s);
  EXPECT_EQ(out, (std::vector<int32_t>{11, 12, 16, 17, 21, 22}));
  const int64_t rows[2] = {3, 5};
  const int64_t off0[2] = {2, 0};
  EXPECT_TRUE(wk::is_contiguous(v.sub(off0, rows)));
}

}  // namespace

namespace {

// copy_range_out against the packed form that strided_copy makes, for every range of a view
// with a transposed, a padded and an extent-1 dim.
TEST(StridedCopy, RangeOutMatchesThePackedForm) {
  std::vector<uint16_t> src(200);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 7 + 1);
  const wk::StridedView v = view(reinterpret_cast<char*>(src.data()), 2, {3, 1, 5}, {1, 50, 13});
  std::vector<uint16_t> packed(15);
  wk::strided_copy(wk::StridedView::contiguous(packed.data(), 2, 3, v.shape), v);
  for (int64_t first = 0; first <= 15; ++first) {
    for (int64_t n = 0; first + n <= 15; ++n) {
      std::vector<uint16_t> got(16, 0xffff);
      wk::copy_range_out(v, first, n, reinterpret_cast<char*>(got.data()));
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], packed[static_cast<size_t>(first + i)]);
      ASSERT_EQ(got[static_cast<size_t>(n)], 0xffff) << "wrote past n = " << n;
    }
  }
}

}  // namespace
