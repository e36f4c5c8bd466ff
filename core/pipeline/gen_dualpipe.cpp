// DualPipeV (DeepSeek's dualpipev.py order, written from its description): rank r holds chunk 0 =
// stage r and chunk 1 = stage 2p-1-r; each chunk's forwards and backwards go in micro-batch
// order; backwards split into I take their W later from a first-in-first-out queue (the
// WeightGradStore of the original). Needs m >= 2p. With F = I = W = 1 per chunk its makespan is
// 6m + p - 1, ZB-V's bound (tests/unit/test_pipeline_simulator.cpp).
#include <deque>

#include "core/pipeline/gen_lists.h"

namespace weft::pipeline::gen {

namespace {

class RankBuilder {
 public:
  RankBuilder(int p, int r) : stage_{r, 2 * p - 1 - r} {}
  void forward(int chunk) { list_.push_back(Action{Kind::F, stage_[chunk], next_f_[chunk]++}); }
  // A whole backward (B), or its input half (I) with the weight half queued.
  void backward(int chunk, bool split) {
    const Action a{split ? Kind::I : Kind::B, stage_[chunk], next_b_[chunk]++};
    list_.push_back(a);
    if (split) weights_.push_back(Action{Kind::W, a.stage, a.microbatch});
  }
  void weight() {
    list_.push_back(weights_.front());
    weights_.pop_front();
  }
  std::vector<Action> take() { return std::move(list_); }

 private:
  int stage_[2];
  int next_f_[2] = {0, 0}, next_b_[2] = {0, 0};
  std::vector<Action> list_;
  std::deque<Action> weights_;
};

}  // namespace

Lists dualpipe_v(int p, int m) {
  Lists lists;
  for (int r = 0; r < p; ++r) {
    RankBuilder b(p, r);
    const int later = p - r - 1;  // ranks after r
    // 1: forwards of chunk 0 that fill the pipe down to the turn of the V.
    for (int k = 0; k < 2 * later; ++k) b.forward(0);
    // 2: chunk 0 and chunk 1 forwards in turn.
    for (int k = 0; k < r + 1; ++k) {
      b.forward(0);
      b.forward(1);
    }
    // 3: chunk 1 backward split (I, its W at once), then the next chunk 1 forward.
    for (int k = 0; k < later; ++k) {
      b.backward(1, true);
      b.weight();
      b.forward(1);
    }
    // 4, the main loop: the forward of one micro-batch next to the backward of another
    // (DualPipe overlaps each pair; here they run one after the other).
    for (int k = 0; k < m - 2 * p + r + 1; ++k) {
      b.forward(0);
      b.backward(1, false);
      b.forward(1);
      b.backward(0, false);
    }
    // 5: the last chunk 1 forwards, between backwards.
    for (int k = 0; k < later; ++k) {
      b.backward(1, false);
      b.forward(1);
      b.backward(0, false);
    }
    // 6: backward pairs; from the middle pair on they split, the W's going to the end. Odd
    // ranks split both halves of the middle pair, even ranks only its chunk 0 half.
    bool split = false;
    const int pairs = r + 1;
    for (int k = 0; k < pairs; ++k) {
      if (k == pairs / 2 && r % 2 == 1) split = true;
      b.backward(1, split);
      if (k == pairs / 2 && r % 2 == 0) split = true;
      b.backward(0, split);
    }
    // 7: a queued W, then a split chunk 0 backward.
    for (int k = 0; k < later; ++k) {
      b.weight();
      b.backward(0, true);
    }
    // 8: the W's left (r + 1 of them).
    for (int k = 0; k < r + 1; ++k) b.weight();
    lists.push_back(b.take());
  }
  return lists;
}

}  // namespace weft::pipeline::gen
