// The schedule IR around the validator: torch's action strings, make_schedule's derivation and
// refusals, the lowering of compute-only lists to lists with SEND/RECV, torch's CSV both ways and
// the FlatBuffers file. Every expected list, string and text is written out here by hand
// (test_pipeline_validator.cpp judges the same hand-written 1F1B and V schedules valid).
//
// WEFT_TEST_INJECT=1 (ctest unit.pipeline_schedule_inject) corrupts every checked result once
// (one character of a text, a refusal that did not happen, a flipped truth value): the run
// passes only when every corruption was caught.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/pipeline/schedule.h"
#include "core/schema/schedule_generated.h"
#include "schedule_test_util.h"

namespace wp = weft::pipeline;
using schedtest::acts;
using schedtest::show;
using wp::Action;
using wp::Kind;
using wp::Method;
using wp::Schedule;

namespace {

::testing::Environment* const kInjectionReport = inject::register_report();

// ---------------------------------------------------------------- checks (injection-aware)

void check_text(std::string got, const std::string& want, const std::string& what) {
  if (schedtest::inject_enabled()) {
    if (got.empty()) got = "#"; else got[got.size() / 2] ^= 1;
    schedtest::record_injection(got != want);
    return;
  }
  EXPECT_EQ(got, want) << what;
}

void check_contains(std::string got, const std::string& needle, const std::string& what) {
  if (schedtest::inject_enabled()) {
    for (size_t at = got.find(needle); at != std::string::npos; at = got.find(needle, at)) got[at] ^= 1;
    schedtest::record_injection(got.find(needle) == std::string::npos);
    return;
  }
  EXPECT_NE(got.find(needle), std::string::npos) << what << ": expected '" << needle << "' in\n  " << got;
}

void check_true(bool ok, const std::string& what) {
  if (schedtest::inject_enabled()) {
    // The corrupted result is !ok: the check catches it exactly when the real result was true.
    schedtest::record_injection(ok);
    return;
  }
  EXPECT_TRUE(ok) << what;
}

// The message of the weft::Error that f throws, or a text saying that none was thrown.
template <class F>
std::string refusal(F&& f, weft::Status* status = nullptr) {
  try {
    f();
  } catch (const weft::Error& e) {
    if (status) *status = e.status();
    return e.message();
  }
  return "(no error was raised)";
}

std::vector<std::vector<Action>> lists(const std::vector<std::string>& ranks) {
  std::vector<std::vector<Action>> out;
  for (const auto& r : ranks) out.push_back(acts(r));
  return out;
}

std::string placement(const Schedule& s) {
  std::string out;
  for (int r : s.stage_rank) out.append(out.empty() ? "" : ",").append(std::to_string(r));
  return out;
}

// ---------------------------------------------------------------- action strings, names

TEST(PipelineSchedule, ActionStrings) {
  const std::pair<Action, const char*> table[] = {
      {{Kind::F, 0, 0}, "0F0"},           {{Kind::B, 1, 2}, "1B2"},          {{Kind::I, 3, 7}, "3I7"},
      {{Kind::W, 3, 7}, "3W7"},           {{Kind::SEND_F, 1, 3}, "1SEND_F3"}, {{Kind::RECV_F, 2, 0}, "2RECV_F0"},
      {{Kind::SEND_B, 4, 11}, "4SEND_B11"}, {{Kind::RECV_B, 12, 105}, "12RECV_B105"},
      {{Kind::REDUCE_GRAD, 2, -1}, "2REDUCE_GRAD"}};
  for (const auto& [a, want] : table) {
    check_text(wp::to_string(a), want, "to_string");
    check_text(wp::to_string(schedtest::act(want)), want, std::string("round trip of ") + want);
  }
  const char* kinds[] = {"F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD"};
  for (int k = 0; k < wp::kNumKinds; ++k) check_text(wp::kind_name(static_cast<Kind>(k)), kinds[k], "kind_name");
}

TEST(PipelineSchedule, MethodNames) {
  const char* names[] = {"gpipe", "1f1b", "interleaved", "zbh1", "zbh2", "zbv", "dualpipev"};
  for (int m = 0; m < wp::kNumMethods; ++m) {
    check_text(wp::method_name(static_cast<Method>(m)), names[m], "method_name");
    Method got = Method::custom;
    check_true(wp::method_from_name(names[m], &got) && got == static_cast<Method>(m), names[m]);
  }
  check_text(wp::method_name(Method::custom), "custom", "method_name(custom)");
  Method got = Method::gpipe;
  for (const char* bad : {"GPipe", "", "1F1B", "zb-h1", "custom"}) {
    check_true(!wp::method_from_name(bad, &got) && got == Method::gpipe, std::string("'") + bad + "' is no method");
  }
}

// ---------------------------------------------------------------- make_schedule

TEST(PipelineSchedule, MakeScheduleDerivesCountsAndPlacement) {
  // A V over two ranks, compute only: rank 0 runs stages 0 and 3, rank 1 stages 1 and 2.
  Schedule s = wp::make_schedule(lists({"0F0 0F1 3F0 3B0 3F1 3B1 0B0 0B1", "1F0 2F0 1F1 2F1 2B0 1B0 2B1 1B1"}),
                                 Method::zb_v);
  check_text(std::to_string(s.ranks) + " " + std::to_string(s.stages) + " " + std::to_string(s.microbatches), "2 4 2",
             "p S m");
  check_text(placement(s), "0,1,1,0", "placement");
  check_text(std::to_string(s.stages_per_rank()), "2", "stages per rank");
  check_true(s.method == Method::zb_v && s.has_comm(), "method kept, messages added");

  // A stage whose F two ranks run sits on the lower rank; a stage with no F on none.
  s = wp::make_schedule(lists({"0F0 3B0", "0F1 1F0"}));
  check_text(placement(s), "0,1,-1,-1", "placement with a doubly run stage and stages without F");
  check_text(std::to_string(s.stages_per_rank()), "1", "stages per rank");

  // Lists that already hold messages are kept exactly as given.
  const std::vector<std::string> with_comm = {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"};
  s = wp::make_schedule(lists(with_comm));
  check_text(show(s.actions), with_comm[0] + "\n" + with_comm[1] + "\n", "lists with messages untouched");
}

TEST(PipelineSchedule, MakeScheduleRefusals) {
  struct Case {
    std::vector<std::vector<Action>> lists;
    const char* needle;
  };
  const Case cases[] = {
      {{{{Kind::F, -1, 0}}}, "rank 0, action 0 (-1F0): stage -1 is negative"},
      {{{{Kind::F, 0, 0}}, {{Kind::F, 1, 0}, {Kind::B, 1, -2}}}, "rank 1, action 1 (1B-2): micro-batch -2 is negative"},
      {{{{Kind::F, 0, 0}, {Kind::REDUCE_GRAD, 0, 0}}}, "REDUCE_GRAD takes micro-batch -1, not 0"},
      {{{{Kind::F, 0, 0}, {Kind::F, 0, -1}}}, "micro-batch -1 is negative"},
      {{{{static_cast<Kind>(9), 0, 0}}}, "rank 0, action 0: kind 9 is not an action kind"},
      {{{{Kind::B, 0, 0}, {Kind::W, 0, 0}}}, "no F action"},
      {{}, "at least one rank"},
      {{{{Kind::F, 1000000, 0}}}, "cannot exist in a schedule of 1 actions"},
  };
  for (const Case& c : cases) check_contains(refusal([&] { wp::make_schedule(c.lists); }), c.needle, c.needle);
  check_contains(refusal([] { wp::make_schedule(lists({"0F0"}), static_cast<Method>(7)); }), "method 7", "method");
}

// ---------------------------------------------------------------- lowering

TEST(PipelineSchedule, LoweringOneFOneB) {
  // p = 2, m = 3 and p = 3, m = 4: the SEND after a compute and the RECV before the next one
  // end up adjacent (one exchange).
  Schedule s = wp::make_schedule(lists({"0F0 0F1 0B0 0F2 0B1 0B2", "1F0 1B0 1F1 1B1 1F2 1B2"}));
  check_text(show(s.actions),
             "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0F2 0SEND_F2 0RECV_B1 0B1 0RECV_B2 0B2\n"
             "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2\n",
             "1F1B p=2 m=3");
  s = wp::make_schedule(lists({"0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3", "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3",
                               "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3"}));
  check_text(show(s.actions),
             "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0RECV_B0 0B0 0F3 0SEND_F3 0RECV_B1 0B1 0RECV_B2 0B2 0RECV_B3 0B3\n"
             "1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 1RECV_B0 1B0 1SEND_B0 1RECV_F2 1F2 1SEND_F2 1RECV_B1 1B1 "
             "1SEND_B1 1RECV_F3 1F3 1SEND_F3 1RECV_B2 1B2 1SEND_B2 1RECV_B3 1B3 1SEND_B3\n"
             "2RECV_F0 2F0 2B0 2SEND_B0 2RECV_F1 2F1 2B1 2SEND_B1 2RECV_F2 2F2 2B2 2SEND_B2 2RECV_F3 2F3 2B3 2SEND_B3\n",
             "1F1B p=3 m=4");
  wp::validate(s);
}

TEST(PipelineSchedule, LoweringLocalTurnAndSplitBackward) {
  // V: nothing between stages 1 and 2 (both on rank 1); I sends and receives, W does not.
  Schedule s = wp::make_schedule(lists({"0F0 3F0 3I0 0I0 3W0 0W0 0REDUCE_GRAD 3REDUCE_GRAD",
                                        "1F0 2F0 2I0 1I0 2W0 1W0"}));
  check_text(show(s.actions),
             "0F0 0SEND_F0 3RECV_F0 3F0 3I0 3SEND_B0 0RECV_B0 0I0 3W0 0W0 0REDUCE_GRAD 3REDUCE_GRAD\n"
             "1RECV_F0 1F0 2F0 2SEND_F0 2RECV_B0 2I0 1I0 1SEND_B0 2W0 1W0\n",
             "V with I/W");
  // Lowering again gives the same lists (the messages are a function of the compute order).
  Schedule again = s;
  wp::add_communication(again);
  check_text(show(again.actions), show(s.actions), "lowering twice");
  // One rank: no messages at all.
  s = wp::make_schedule(lists({"0F0 1F0 1B0 0B0"}));
  check_text(show(s.actions), "0F0 1F0 1B0 0B0\n", "p = 1");
}

// ---------------------------------------------------------------- CSV

const std::vector<std::string> kGpipe2 = {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                                          "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"};

TEST(PipelineSchedule, CsvWrite) {
  const Schedule s = wp::make_schedule(lists(kGpipe2));
  check_text(wp::to_csv(s, false),
             "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\r\n"
             "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1\r\n",
             "compute_comms");
  check_text(wp::to_csv(s, true), "0F0,0F1,0B0,0B1\r\n1F0,1F1,1B0,1B1\r\n", "compute_only");
  const Schedule rg = wp::make_schedule(lists({"0F0 0I0 0W0 0REDUCE_GRAD"}));
  check_text(wp::to_csv(rg, false), "0F0,0I0,0W0,0REDUCE_GRAD\r\n", "REDUCE_GRAD kept in compute_comms");
  check_text(wp::to_csv(rg, true), "0F0,0I0,0W0\r\n", "compute_only keeps F, B, I, W only");
}

TEST(PipelineSchedule, CsvReadTorchForms) {
  // compute_only as torch may write it: "\n" rows, idle cells (empty, None), blanks, quotes.
  Schedule s = wp::from_csv("0F0, 0F1,,None,0B0,\"0B1\"\n1F0,1B0 , 1F1,None,1B1\n");
  check_text(show(s.actions),
             "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
             "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n",
             "compute_only lowered");
  // compute_comms: kept as given; a last row without a line end is still a row.
  s = wp::from_csv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\r\n"
                   "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1");
  check_text(show(s.actions), kGpipe2[0] + "\n" + kGpipe2[1] + "\n", "compute_comms");
  // Blank lines at the end are no ranks.
  s = wp::from_csv("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\r\n"
                   "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1\r\n\r\n \n");
  check_text(show(s.actions), kGpipe2[0] + "\n" + kGpipe2[1] + "\n", "compute_comms");
  // Round trips of both forms.
  const Schedule iw = wp::make_schedule(lists({"0F0 0F1 0I0 0I1 0W0 0W1 0REDUCE_GRAD", "1F0 1I0 1F1 1I1 1W0 1W1 1REDUCE_GRAD"}));
  check_text(show(wp::from_csv(wp::to_csv(iw, false)).actions), show(iw.actions), "compute_comms round trip");
  check_text(show(wp::from_csv(wp::to_csv(iw, true)).actions),
             "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0RECV_B1 0I1 0W0 0W1\n"
             "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W0 1W1\n",
             "compute_only round trip (lowered again, REDUCE_GRAD dropped)");
}

TEST(PipelineSchedule, CsvErrorsNameRowCellAndText) {
  const std::pair<const char*, const char*> cases[] = {
      {"0F0,0X0\r\n", "CSV row 0 (rank 0), cell 1 ('0X0'): 'X' is not an action kind"},
      {"0F0\r\n1F0,1B0,F1\r\n", "CSV row 1 (rank 1), cell 2 ('F1'): an action starts with its stage number"},
      {"0F\n", "cell 0 ('0F'): F needs a micro-batch number"},
      {"0F0,0REDUCE_GRAD3\n", "cell 1 ('0REDUCE_GRAD3'): REDUCE_GRAD takes no micro-batch"},
      {"0F0x\n", "('0F0x'): unexpected text after the micro-batch"},
      {"0UNSHARD0\n", "'UNSHARD' is not an action kind weft runs"},
      {"0F99999999999\n", "the number is too large"},
      {"", "no rows"},
      {"0B0,None\n", "no F action"},
  };
  for (const auto& [text, needle] : cases) check_contains(refusal([&] { wp::from_csv(text); }), needle, text);
}

// ---------------------------------------------------------------- FlatBuffers file

// A buffer written field by field, for the cases serialize() never writes.
std::vector<uint8_t> handmade(uint16_t major, const std::vector<int>& stage_rank, const std::vector<std::vector<Action>>& ls,
                              int stages, int mbs) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<weft::schema::ScheduleRankList>> rl;
  for (const auto& l : ls) {
    std::vector<weft::schema::ScheduleAction> v;
    for (const Action& a : l) v.emplace_back(static_cast<int32_t>(a.kind), a.stage, a.microbatch);
    rl.push_back(weft::schema::CreateScheduleRankListDirect(fbb, &v));
  }
  auto root = weft::schema::CreateScheduleFileDirect(fbb, major, 0, -1, static_cast<int>(ls.size()), stages, mbs,
                                                     &stage_rank, &rl);
  weft::schema::FinishSizePrefixedScheduleFileBuffer(fbb, root);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

std::string describe(const Schedule& s) {
  return std::string(wp::method_name(s.method)) + " p=" + std::to_string(s.ranks) + " S=" + std::to_string(s.stages) +
         " m=" + std::to_string(s.microbatches) + " placement " + placement(s) + "\n" + show(s.actions);
}

TEST(PipelineSchedule, FileRoundTrip) {
  const Schedule v = wp::make_schedule(lists({"0F0 0F1 3F0 3I0 3F1 3I1 0I0 0I1 3W0 3W1 0W0 0W1 3REDUCE_GRAD 0REDUCE_GRAD",
                                              "1F0 2F0 1F1 2F1 2I0 1I0 2I1 1I1 2W0 2W1 1W0 1W1"}),
                                       Method::zb_v);
  const std::vector<uint8_t> bytes = wp::serialize(v);
  check_text(describe(wp::deserialize(bytes.data(), bytes.size())), describe(v), "serialize/deserialize");
  // mkdtemp's template: the name ends in six placeholder characters it replaces.
  std::string tmpl = std::string("/tmp/weft_schedule_test_").append(6, 'X');
  char* dir = tmpl.data();
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/v.weft";
  wp::save(v, path);
  check_text(describe(wp::load(path)), describe(v), "save/load");
  // The buffer is not 8-byte aligned in the caller's memory: still read correctly.
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  check_text(describe(wp::deserialize(shifted.data() + 1, bytes.size())), describe(v), "unaligned buffer");
  std::remove(path.c_str());
  rmdir(dir);
}

TEST(PipelineSchedule, FileRefusals) {
  const Schedule s = wp::make_schedule(lists(kGpipe2), Method::gpipe);
  const std::vector<uint8_t> good = wp::serialize(s);
  auto read = [](std::vector<uint8_t> b, weft::Status* st = nullptr) {
    return refusal([&] { wp::deserialize(b.data(), b.size()); }, st);
  };
  std::vector<uint8_t> b = good;
  b.pop_back();
  check_contains(read(b), "failed FlatBuffers verification", "truncated by one byte");
  check_contains(read(std::vector<uint8_t>(good.begin(), good.begin() + 5)), "too short", "5 bytes");
  b = good;
  b[4] = 0xff, b[5] = 0xff, b[6] = 0xff;  // the root offset points far outside the buffer
  check_contains(read(b), "failed FlatBuffers verification", "root offset corrupted");
  b = good;
  b[8] = 'A', b[9] = 'B', b[10] = 'C', b[11] = 'D';
  check_contains(read(b), "file identifier is 'ABCD', expected 'WFPS'", "wrong identifier");
  weft::Status st = weft::Status::ok;
  const std::vector<Action> one = {{Kind::F, 0, 0}};
  check_contains(read(handmade(2, {0}, {one}, 1, 1), &st), "format version 2.0; this weft reads version 1.x",
                 "another major version");
  check_true(st == weft::Status::unsupported, "another major version is 'unsupported'");
  check_contains(read(handmade(1, {0, 0}, lists(kGpipe2), 2, 2)),
                 "places stage 1 on rank 0, but its lists run the stage's first F on rank 1", "wrong placement");
  check_contains(read(handmade(1, {0, 1}, lists(kGpipe2), 2, 3)), "says 2 stages and 3 micro-batches",
                 "wrong micro-batch count");
  check_contains(read(handmade(1, {0}, {{{static_cast<Kind>(42), 0, 0}, {Kind::F, 0, 0}}}, 1, 1)),
                 "kind 42 is not an action kind", "bad kind inside a verified buffer");
  check_contains(refusal([] { wp::load("/nonexistent-dir/s.weft"); }),
                 "cannot open the schedule file '/nonexistent-dir/s.weft': No such file or directory", "load");
  check_contains(refusal([&] { wp::save(s, "/nonexistent-dir/s.weft"); }),
                 "cannot create the schedule file '/nonexistent-dir/s.weft': No such file or directory", "save");
}

TEST(PipelineSchedule, EveryFlippedByteIsRefusedOrReadSafely) {
  // Each single-byte corruption of a small file must end in a weft::Error or in a schedule that
  // the validator can judge; never in a crash (run under ASan to see a wild read).
  const std::vector<uint8_t> good = wp::serialize(wp::make_schedule(lists(kGpipe2)));
  size_t refused = 0, read = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> b = good;
    b[i] ^= 0x5a;
    try {
      const Schedule s = wp::deserialize(b.data(), b.size());
      ++read;
      refusal([&] { wp::validate(s); });
    } catch (const weft::Error&) {
      ++refused;
    }
  }
  std::printf("%zu bytes flipped one at a time: %zu refused, %zu read\n", good.size(), refused, read);
  check_true(refused + read == good.size() && refused > good.size() / 4, "every flip handled, most refused");
}

}  // namespace
