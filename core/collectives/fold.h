// Recursive doubling and halving need a power-of-two group. With n = pof2 + rem ranks, the
// first 2*rem ranks pair up before the main phase (even ranks hand their data to the odd
// neighbour and sit out) and the odd ones hand the result back afterwards (MPICH's scheme).
#pragma once

namespace weft::coll {

struct Fold {
  int pof2 = 1;
  int rem = 0;
  int newrank = -1;  // rank within the power-of-two group, -1 while sitting out

  Fold(int rank, int n) {
    while (pof2 * 2 <= n) pof2 *= 2;
    rem = n - pof2;
    if (rank < 2 * rem) {
      newrank = (rank % 2) ? rank / 2 : -1;
    } else {
      newrank = rank - rem;
    }
  }
  // Real rank of a member of the power-of-two group.
  int real(int r) const { return r < rem ? 2 * r + 1 : r + rem; }
  bool sits_out(int rank) const { return rank < 2 * rem && rank % 2 == 0; }
  bool has_partner(int rank) const { return rank < 2 * rem; }
};

}  // namespace weft::coll
