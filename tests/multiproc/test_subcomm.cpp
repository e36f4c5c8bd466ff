// Sub-communicators: weft_comm_split (colors, keys, WEFT_SPLIT_NOCOLOR, nesting), weft_comm_dup
// (own message space), and collectives on two communicators at once, from one thread (async)
// and from two threads (one communicator each).
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "mp_gtest.h"
#include "reference.h"

using mpt::g_world;

namespace {

int64_t sum_i64(weft_comm_t comm, int64_t v) {
  int64_t out = 0;
  weft_status_t s = weft_allreduce(&v, &out, 1, WEFT_INT64, WEFT_SUM, comm, nullptr, nullptr);
  EXPECT_EQ(s, WEFT_OK) << mpt::last_error();
  return out;
}

// Ranks of the world that pass `color`, in new-rank order for keys key_of(r).
template <typename ColorFn, typename KeyFn>
std::vector<int> members(int n, int color, ColorFn color_of, KeyFn key_of) {
  std::vector<int> m;
  for (int r = 0; r < n; ++r)
    if (color_of(r) == color) m.push_back(r);
  std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return key_of(a) < key_of(b); });
  return m;
}

// Every member contributes (world rank + 1) * (i + 1) at element i; the sum over members.
void check_sum_allreduce(weft_comm_t comm, const std::vector<int>& group, int me_world, size_t count,
                         weft_request_t* req_out, std::vector<double>* bufs) {
  (void)group;
  bufs->assign(count, 0);
  for (size_t i = 0; i < count; ++i) (*bufs)[i] = static_cast<double>((me_world + 1) * static_cast<int>(i + 1));
  ASSERT_WEFT_OK(weft_allreduce(bufs->data(), bufs->data(), count, WEFT_FLOAT64, WEFT_SUM, comm, nullptr, req_out));
}

void verify_sum(const std::vector<int>& group, const std::vector<double>& got, const char* what) {
  int64_t s = 0;
  for (int r : group) s += r + 1;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], static_cast<double>(s * static_cast<int64_t>(i + 1)))
        << what << ": first wrong index " << i << " (group sum of rank+1 = " << s << ")";
  }
}

}  // namespace

TEST(Comm, WorldRankAndSize) {
  int rank = -1, size = -1, lrank = -1, lsize = -1;
  ASSERT_WEFT_OK(weft_comm_rank(g_world.comm, &rank));
  ASSERT_WEFT_OK(weft_comm_size(g_world.comm, &size));
  EXPECT_EQ(rank, std::atoi(mpt::env_or("WEFT_RANK", "-1").c_str()));
  EXPECT_EQ(size, std::atoi(mpt::env_or("WEFT_WORLD_SIZE", "-1").c_str()));
  // weftrun starts every rank on this host.
  ASSERT_WEFT_OK(weft_comm_local_rank(g_world.comm, &lrank));
  ASSERT_WEFT_OK(weft_comm_local_size(g_world.comm, &lsize));
  EXPECT_EQ(lsize, size);
  EXPECT_EQ(lrank, rank);
  EXPECT_EQ(sum_i64(g_world.comm, rank), static_cast<int64_t>(size) * (size - 1) / 2);
}

TEST(Split, EvenOddWithReversedKeys) {
  const int n = g_world.size, me = g_world.rank;
  auto color_of = [](int r) { return r % 2; };
  auto key_of = [](int r) { return -r; };
  weft_comm_t sub = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, color_of(me), key_of(me), &sub, nullptr));
  ASSERT_NE(sub, nullptr);
  std::vector<int> group = members(n, color_of(me), color_of, key_of);
  const int want_rank = static_cast<int>(std::find(group.begin(), group.end(), me) - group.begin());
  int rank = -1, size = -1, lrank = -1, lsize = -1;
  EXPECT_WEFT_OK(weft_comm_rank(sub, &rank));
  EXPECT_WEFT_OK(weft_comm_size(sub, &size));
  EXPECT_EQ(size, static_cast<int>(group.size()));
  EXPECT_EQ(rank, want_rank) << "key = -world rank must reverse the order";
  EXPECT_WEFT_OK(weft_comm_local_rank(sub, &lrank));
  EXPECT_WEFT_OK(weft_comm_local_size(sub, &lsize));
  EXPECT_EQ(lsize, size);
  EXPECT_EQ(lrank, rank);

  std::vector<double> buf;
  check_sum_allreduce(sub, group, me, 1000, nullptr, &buf);
  verify_sum(group, buf, "allreduce on the even/odd split");

  // Broadcast from sub-rank 0 (the highest world rank of the color).
  int64_t v = me == group[0] ? 4242 + group[0] : -1;
  EXPECT_WEFT_OK(weft_broadcast(&v, 1, WEFT_INT64, 0, sub, nullptr, nullptr));
  EXPECT_EQ(v, 4242 + group[0]);

  // Allgather of world ranks shows the new order.
  std::vector<int32_t> ranks(group.size(), -1);
  int32_t mine = me;
  EXPECT_WEFT_OK(weft_allgather(&mine, ranks.data(), 1, WEFT_INT32, sub, nullptr, nullptr));
  for (size_t i = 0; i < group.size(); ++i) EXPECT_EQ(ranks[i], group[i]) << "sub-rank " << i;
  EXPECT_WEFT_OK(weft_comm_destroy(sub));
}

TEST(Split, SameColorSameKeyKeepsOrder) {
  weft_comm_t sub = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, 7, 0, &sub, nullptr));
  int rank = -1, size = -1;
  EXPECT_WEFT_OK(weft_comm_rank(sub, &rank));
  EXPECT_WEFT_OK(weft_comm_size(sub, &size));
  EXPECT_EQ(rank, g_world.rank) << "equal keys order by old rank";
  EXPECT_EQ(size, g_world.size);
  EXPECT_EQ(sum_i64(sub, 1), g_world.size);
  EXPECT_WEFT_OK(weft_comm_destroy(sub));
}

TEST(Split, NoColorGivesNull) {
  const int n = g_world.size, me = g_world.rank;
  auto color_of = [](int r) { return r % 3 == 2 ? WEFT_SPLIT_NOCOLOR : 0; };
  weft_comm_t sub = reinterpret_cast<weft_comm_t>(static_cast<uintptr_t>(0x1));  // must be overwritten
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, color_of(me), me, &sub, nullptr));
  if (color_of(me) == WEFT_SPLIT_NOCOLOR) {
    EXPECT_EQ(sub, nullptr) << "color WEFT_SPLIT_NOCOLOR must give *newcomm = NULL";
  } else {
    ASSERT_NE(sub, nullptr);
    std::vector<int> group = members(n, 0, color_of, [](int r) { return r; });
    int size = -1;
    EXPECT_WEFT_OK(weft_comm_size(sub, &size));
    EXPECT_EQ(size, static_cast<int>(group.size()));
    std::vector<double> buf;
    check_sum_allreduce(sub, group, me, 7, nullptr, &buf);
    verify_sum(group, buf, "allreduce on the split without the NOCOLOR ranks");
    EXPECT_WEFT_OK(weft_comm_destroy(sub));
  }
  // Any negative color is "no color".
  sub = reinterpret_cast<weft_comm_t>(static_cast<uintptr_t>(0x1));
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, me == 0 ? -5 : 1, 0, &sub, nullptr));
  if (me == 0) {
    EXPECT_EQ(sub, nullptr);
  } else {
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sum_i64(sub, 1), n - 1);
    EXPECT_WEFT_OK(weft_comm_destroy(sub));
  }
}

TEST(Split, NestedAndWithConfig) {
  const int me = g_world.rank;
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = 60000;
  cfg.name = "half";
  weft_comm_t half = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, me % 2, me, &half, &cfg));
  int hr = -1, hs = -1;
  ASSERT_WEFT_OK(weft_comm_rank(half, &hr));
  ASSERT_WEFT_OK(weft_comm_size(half, &hs));
  weft_comm_t quarter = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(half, hr < (hs + 1) / 2 ? 0 : 1, hr, &quarter, nullptr));
  int qs = -1;
  ASSERT_WEFT_OK(weft_comm_size(quarter, &qs));
  // Sum of world ranks in my quarter, computed from the world side.
  std::vector<int> half_members;
  for (int r = me % 2; r < g_world.size; r += 2) half_members.push_back(r);
  std::vector<int> quarter_members;
  for (size_t i = 0; i < half_members.size(); ++i)
    if ((static_cast<int>(i) < (hs + 1) / 2) == (hr < (hs + 1) / 2)) quarter_members.push_back(half_members[i]);
  EXPECT_EQ(qs, static_cast<int>(quarter_members.size()));
  int64_t want = 0;
  for (int r : quarter_members) want += r;
  EXPECT_EQ(sum_i64(quarter, me), want);
  EXPECT_WEFT_OK(weft_comm_destroy(quarter));
  EXPECT_WEFT_OK(weft_comm_destroy(half));
}

TEST(Split, TwoCommsAsyncFromOneThread) {
  const int n = g_world.size, me = g_world.rank;
  weft_comm_t eo = nullptr, lh = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, me % 2, -me, &eo, nullptr));
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, me < n / 2 ? 0 : 1, me, &lh, nullptr));
  std::vector<int> g_eo = members(n, me % 2, [](int r) { return r % 2; }, [](int r) { return -r; });
  std::vector<int> g_lh = members(n, me < n / 2 ? 0 : 1, [n](int r) { return r < n / 2 ? 0 : 1; },
                                  [](int r) { return r; });
  constexpr int kRounds = 4;
  std::vector<std::vector<double>> a(kRounds), b(kRounds);
  std::vector<weft_request_t> ra(kRounds, nullptr), rb(kRounds, nullptr);
  // Interleave: a0 b0 a1 b1 ...; odd ranks start with b. All outstanding at once.
  for (int k = 0; k < kRounds; ++k) {
    if (me % 2) {
      check_sum_allreduce(lh, g_lh, me, 100 + static_cast<size_t>(k) * 1000, &rb[static_cast<size_t>(k)], &b[static_cast<size_t>(k)]);
      check_sum_allreduce(eo, g_eo, me, 1 + static_cast<size_t>(k) * 333, &ra[static_cast<size_t>(k)], &a[static_cast<size_t>(k)]);
    } else {
      check_sum_allreduce(eo, g_eo, me, 1 + static_cast<size_t>(k) * 333, &ra[static_cast<size_t>(k)], &a[static_cast<size_t>(k)]);
      check_sum_allreduce(lh, g_lh, me, 100 + static_cast<size_t>(k) * 1000, &rb[static_cast<size_t>(k)], &b[static_cast<size_t>(k)]);
    }
  }
  // Wait b's last-to-first, then a's first-to-last.
  for (int k = kRounds - 1; k >= 0; --k) {
    EXPECT_WEFT_OK(weft_wait(rb[static_cast<size_t>(k)]));
    EXPECT_WEFT_OK(weft_request_free(rb[static_cast<size_t>(k)]));
  }
  for (int k = 0; k < kRounds; ++k) {
    EXPECT_WEFT_OK(weft_wait(ra[static_cast<size_t>(k)]));
    EXPECT_WEFT_OK(weft_request_free(ra[static_cast<size_t>(k)]));
  }
  for (int k = 0; k < kRounds; ++k) {
    verify_sum(g_eo, a[static_cast<size_t>(k)], "even/odd comm, async");
    verify_sum(g_lh, b[static_cast<size_t>(k)], "low/high comm, async");
  }
  EXPECT_WEFT_OK(weft_comm_destroy(lh));
  EXPECT_WEFT_OK(weft_comm_destroy(eo));
}

TEST(Split, TwoCommsFromTwoThreads) {
  const int n = g_world.size, me = g_world.rank;
  weft_comm_t eo = nullptr, dup = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, me % 2, me, &eo, nullptr));
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &dup));
  std::vector<int> g_eo = members(n, me % 2, [](int r) { return r % 2; }, [](int r) { return r; });
  std::vector<int> g_all;
  for (int r = 0; r < n; ++r) g_all.push_back(r);
  std::atomic<int> bad{0};
  auto worker = [&](weft_comm_t comm, const std::vector<int>& group, int salt) {
    for (int it = 0; it < 25; ++it) {
      const size_t count = static_cast<size_t>(1 + (it * 37 + salt) % 3000);
      std::vector<double> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = static_cast<double>((me + 1) * static_cast<int>(i + 1));
      weft_status_t s = weft_allreduce(buf.data(), buf.data(), count, WEFT_FLOAT64, WEFT_SUM, comm, nullptr, nullptr);
      if (s != WEFT_OK) {
        mpt::logf("FAIL thread %d iteration %d: weft_allreduce %s: %s", salt, it, mpt::status_name(s),
                  mpt::last_error().c_str());
        bad++;
        return;
      }
      int64_t sum = 0;
      for (int r : group) sum += r + 1;
      for (size_t i = 0; i < count; ++i)
        if (buf[i] != static_cast<double>(sum * static_cast<int64_t>(i + 1))) {
          mpt::logf("FAIL thread %d iteration %d: allreduce f64 sum count %zu index %zu expected %lld got %g", salt,
                    it, count, i, static_cast<long long>(sum * static_cast<int64_t>(i + 1)), buf[i]);
          bad++;
          return;
        }
      // and a broadcast from the last rank of the comm
      int64_t v = -1;
      int size = 0, rank = 0;
      weft_comm_size(comm, &size);
      weft_comm_rank(comm, &rank);
      if (rank == size - 1) v = 1000 * it + salt;
      s = weft_broadcast(&v, 1, WEFT_INT64, size - 1, comm, nullptr, nullptr);
      if (s != WEFT_OK || v != 1000 * it + salt) {
        mpt::logf("FAIL thread %d iteration %d: broadcast %s got %lld", salt, it, mpt::status_name(s),
                  static_cast<long long>(v));
        bad++;
        return;
      }
    }
  };
  std::thread t1(worker, eo, std::cref(g_eo), 1);
  std::thread t2(worker, dup, std::cref(g_all), 2);
  t1.join();
  t2.join();
  EXPECT_EQ(bad.load(), 0) << "see the FAIL lines above";
  EXPECT_WEFT_OK(weft_comm_destroy(dup));
  EXPECT_WEFT_OK(weft_comm_destroy(eo));
}

TEST(Dup, OwnMessageSpaceForPointToPoint) {
  const int n = g_world.size, me = g_world.rank;
  weft_comm_t dup = nullptr;
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &dup));
  int rank = -1, size = -1;
  EXPECT_WEFT_OK(weft_comm_rank(dup, &rank));
  EXPECT_WEFT_OK(weft_comm_size(dup, &size));
  EXPECT_EQ(rank, me);
  EXPECT_EQ(size, n);
  if (n >= 2 && me < 2) {
    // Rank 0 sends A on the world then B on the dup; rank 1 receives on the dup first.
    // Same count, so only the message space tells them apart.
    int64_t a[4] = {1, 2, 3, 4}, b[4] = {-1, -2, -3, -4};
    if (me == 0) {
      weft_request_t ra = nullptr, rb = nullptr;
      ASSERT_WEFT_OK(weft_send(a, 4, WEFT_INT64, 1, g_world.comm, nullptr, &ra));
      ASSERT_WEFT_OK(weft_send(b, 4, WEFT_INT64, 1, dup, nullptr, &rb));
      EXPECT_WEFT_OK(weft_wait(rb));
      EXPECT_WEFT_OK(weft_wait(ra));
      EXPECT_WEFT_OK(weft_request_free(ra));
      EXPECT_WEFT_OK(weft_request_free(rb));
    } else {
      int64_t got_dup[4] = {0}, got_world[4] = {0};
      weft_request_t rd = nullptr, rw = nullptr;
      ASSERT_WEFT_OK(weft_recv(got_dup, 4, WEFT_INT64, 0, dup, nullptr, &rd));
      EXPECT_WEFT_OK(weft_wait(rd));
      ASSERT_WEFT_OK(weft_recv(got_world, 4, WEFT_INT64, 0, g_world.comm, nullptr, &rw));
      EXPECT_WEFT_OK(weft_wait(rw));
      EXPECT_WEFT_OK(weft_request_free(rd));
      EXPECT_WEFT_OK(weft_request_free(rw));
      EXPECT_EQ(0, std::memcmp(got_dup, b, sizeof b)) << "dup received the world's message (got " << got_dup[0] << ")";
      EXPECT_EQ(0, std::memcmp(got_world, a, sizeof a)) << "world received the dup's message (got " << got_world[0] << ")";
    }
  }
  EXPECT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
  EXPECT_WEFT_OK(weft_comm_destroy(dup));
}

TEST(Dup, InterleavedCollectivesInOppositeOrders) {
  const int n = g_world.size, me = g_world.rank;
  weft_comm_t dup = nullptr;
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &dup));
  // Even ranks issue on the world first, odd ranks on the dup first; both async.
  std::vector<int64_t> w(513), d(513);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = me + static_cast<int64_t>(i);
    d[i] = 1000 * (me + 1) + static_cast<int64_t>(i);
  }
  weft_request_t rw = nullptr, rd = nullptr;
  if (me % 2 == 0) {
    ASSERT_WEFT_OK(weft_allreduce(w.data(), w.data(), w.size(), WEFT_INT64, WEFT_SUM, g_world.comm, nullptr, &rw));
    ASSERT_WEFT_OK(weft_allreduce(d.data(), d.data(), d.size(), WEFT_INT64, WEFT_MAX, dup, nullptr, &rd));
  } else {
    ASSERT_WEFT_OK(weft_allreduce(d.data(), d.data(), d.size(), WEFT_INT64, WEFT_MAX, dup, nullptr, &rd));
    ASSERT_WEFT_OK(weft_allreduce(w.data(), w.data(), w.size(), WEFT_INT64, WEFT_SUM, g_world.comm, nullptr, &rw));
  }
  EXPECT_WEFT_OK(weft_wait(me % 2 ? rw : rd));
  EXPECT_WEFT_OK(weft_wait(me % 2 ? rd : rw));
  EXPECT_WEFT_OK(weft_request_free(rw));
  EXPECT_WEFT_OK(weft_request_free(rd));
  const int64_t ranksum = static_cast<int64_t>(n) * (n - 1) / 2;
  for (size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(w[i], ranksum + n * static_cast<int64_t>(i)) << "world allreduce, index " << i;
    ASSERT_EQ(d[i], 1000 * n + static_cast<int64_t>(i)) << "dup allreduce, index " << i;
  }
  // Blocking, same order everywhere: world, dup, dup, world.
  EXPECT_EQ(sum_i64(g_world.comm, 1), n);
  EXPECT_EQ(sum_i64(dup, 2), 2 * n);
  int64_t v = me == n - 1 ? 77 : 0;
  EXPECT_WEFT_OK(weft_broadcast(&v, 1, WEFT_INT64, n - 1, dup, nullptr, nullptr));
  EXPECT_EQ(v, 77);
  EXPECT_EQ(sum_i64(g_world.comm, 3), 3 * n);
  // The world keeps working after the dup is gone.
  EXPECT_WEFT_OK(weft_comm_destroy(dup));
  EXPECT_EQ(sum_i64(g_world.comm, 4), 4 * n);
}

TEST(Dup, DupOfDupAndOfSplit) {
  const int me = g_world.rank;
  weft_comm_t d1 = nullptr, d2 = nullptr, s = nullptr, sd = nullptr;
  ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &d1));
  ASSERT_WEFT_OK(weft_comm_dup(d1, &d2));
  ASSERT_WEFT_OK(weft_comm_split(d2, me % 2, me, &s, nullptr));
  ASSERT_WEFT_OK(weft_comm_dup(s, &sd));
  EXPECT_WEFT_OK(weft_comm_destroy(d1));  // the others do not depend on d1 staying alive
  int size = -1;
  ASSERT_WEFT_OK(weft_comm_size(s, &size));
  EXPECT_EQ(sum_i64(sd, 1), size);
  EXPECT_EQ(sum_i64(d2, 1), g_world.size);
  EXPECT_WEFT_OK(weft_comm_destroy(sd));
  EXPECT_WEFT_OK(weft_comm_destroy(s));
  EXPECT_WEFT_OK(weft_comm_destroy(d2));
}

// A message sent on a communicator that is then destroyed (never received) must not be
// delivered to a communicator created later, even if the library reuses internal ids.
TEST(Dup, NoStaleMessageFromADestroyedCommunicator) {
  const int n = g_world.size, me = g_world.rank;
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  int32_t stale[4] = {-1, -1, -1, -1};
  weft_comm_config_t cfg = WEFT_COMM_CONFIG_INIT;
  cfg.timeout_ms = 10000;  // a wrong match shows up as a failure, not a hang
  {
    weft_comm_t a = nullptr;
    ASSERT_WEFT_OK(weft_comm_split(g_world.comm, 0, me, &a, &cfg));
    if (me == 0) {  // small: sent eagerly, so destroying the sender's side does not wait
      EXPECT_WEFT_OK(weft_send(stale, 4, WEFT_INT32, 1, a, nullptr, nullptr));
    }
    EXPECT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
    EXPECT_WEFT_OK(weft_comm_destroy(a));  // rank 1 never received it
  }
  EXPECT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
  weft_comm_t b = nullptr;
  ASSERT_WEFT_OK(weft_comm_split(g_world.comm, 0, me, &b, &cfg));
  int32_t fresh[4] = {1, 2, 3, 4}, got[4] = {0, 0, 0, 0};
  if (me == 0) {
    EXPECT_WEFT_OK(weft_send(fresh, 4, WEFT_INT32, 1, b, nullptr, nullptr));
  } else if (me == 1) {
    EXPECT_WEFT_OK(weft_recv(got, 4, WEFT_INT32, 0, b, nullptr, nullptr));
    EXPECT_EQ(0, std::memcmp(got, fresh, sizeof got))
        << "received {" << got[0] << ", " << got[1] << ", " << got[2] << ", " << got[3]
        << "}: the destroyed communicator's message leaked into the new one";
  }
  // And a collective on the new communicator is not disturbed either.
  int64_t one = 1, sum = 0;
  EXPECT_WEFT_OK(weft_allreduce(&one, &sum, 1, WEFT_INT64, WEFT_SUM, b, nullptr, nullptr));
  EXPECT_EQ(sum, n);
  EXPECT_WEFT_OK(weft_comm_destroy(b));
}

namespace {
size_t count_dir(const char* path) {
  size_t n = 0;
  if (DIR* d = opendir(path)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}
}  // namespace

// Creating and destroying communicators leaks nothing: file descriptors and /dev/shm entries
// return to where they were (a long job re-creates communicators, e.g. after a failure).
TEST(Dup, CreateAndDestroyManyTimesLeaksNothing) {
  const int n = g_world.size, me = g_world.rank;
  auto cycle = [&](int k) {
    weft_comm_t d = nullptr, s = nullptr;
    ASSERT_WEFT_OK(weft_comm_dup(g_world.comm, &d));
    ASSERT_WEFT_OK(weft_comm_split(d, (me + k) % 2, me, &s, nullptr));
    int64_t v = 1, sum = 0;
    ASSERT_WEFT_OK(weft_allreduce(&v, &sum, 1, WEFT_INT64, WEFT_SUM, d, nullptr, nullptr));
    ASSERT_EQ(sum, n);
    std::vector<float> big(100000, 1.0f);
    ASSERT_WEFT_OK(weft_allreduce(big.data(), big.data(), big.size(), WEFT_FLOAT32, WEFT_SUM, s, nullptr, nullptr));
    ASSERT_WEFT_OK(weft_comm_destroy(s));
    ASSERT_WEFT_OK(weft_comm_destroy(d));
  };
  for (int k = 0; k < 5; ++k) cycle(k);  // warm-up: lazily created resources
  EXPECT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
  const size_t fds0 = count_dir("/proc/self/fd"), shm0 = count_dir("/dev/shm");
  for (int k = 0; k < 100; ++k) {
    cycle(k);
    if (HasFatalFailure()) return;
  }
  EXPECT_WEFT_OK(weft_barrier(g_world.comm, nullptr, nullptr));
  const size_t fds1 = count_dir("/proc/self/fd"), shm1 = count_dir("/dev/shm");
  EXPECT_LE(fds1, fds0 + 4) << "open file descriptors grew from " << fds0 << " to " << fds1
                            << " over 100 dup+split+destroy cycles";
  // /dev/shm is shared by all ranks (and other jobs): allow some slack, catch a leak per cycle.
  EXPECT_LE(shm1, shm0 + 2 * static_cast<size_t>(n)) << "/dev/shm entries grew from " << shm0 << " to " << shm1
                                                      << " over 100 dup+split+destroy cycles";
}
