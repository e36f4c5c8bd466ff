// The timeline pictures (core/pipeline/timeline_svg.cpp, timeline_chrome.cpp, timeline_write.cpp)
// on timelines built here by hand: a hand-made schedule and hand-written times, no generator and
// no simulator. Expected values come from those times and the geometry timeline_svg.cpp states
// (x = 70 + t * scale, scale = max(960 / makespan, min(16 / shortest box, 8000 / makespan)),
// row r's boxes at y = 44 + 30 r + 2), read here by a tiny XML tokenizer and a tiny JSON reader
// written for this test.
//
// WEFT_TEST_INJECT=1 (ctest unit.pipeline_pictures_inject) corrupts one value of every checked
// result before it is checked (a number moved by 0.5, a string changed, a closing tag dropped):
// the run passes only when every corruption was caught.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/common/status.h"
#include "core/pipeline/timeline.h"
#include "pipeline_pictures_test_util.h"

namespace wp = weft::pipeline;
using wp::Action;
using wp::Kind;

namespace {

using namespace pictest;

::testing::Environment* const kInjectionReport = inject::register_report();

// ---------------------------------------------------------------- hand-made timelines

// Two ranks, two stages, two micro-batches with SEND/RECV, a REDUCE_GRAD per rank; times by hand
// (a backward message takes 0.5). makespan 10; busy 6.5 on each rank, so the bubble is
// 2 * 3.5 / (2 * 10) = 35%; the shortest compute action is 0.5 long, so scale = max(96, min(32,
// 800)) = 96 px per unit.
Action act(Kind k, int s, int i) { return Action{k, s, i}; }

wp::Timeline two_rank_timeline() {
  auto s = std::make_shared<wp::Schedule>();
  s->ranks = 2;
  s->stages = 2;
  s->microbatches = 2;
  s->stage_rank = {0, 1};
  s->actions = {
      {act(Kind::F, 0, 0), act(Kind::SEND_F, 0, 0), act(Kind::F, 0, 1), act(Kind::SEND_F, 0, 1),
       act(Kind::RECV_B, 0, 0), act(Kind::B, 0, 0), act(Kind::RECV_B, 0, 1), act(Kind::B, 0, 1),
       act(Kind::REDUCE_GRAD, 0, -1)},
      {act(Kind::RECV_F, 1, 0), act(Kind::F, 1, 0), act(Kind::B, 1, 0), act(Kind::SEND_B, 1, 0),
       act(Kind::RECV_F, 1, 1), act(Kind::F, 1, 1), act(Kind::B, 1, 1), act(Kind::SEND_B, 1, 1),
       act(Kind::REDUCE_GRAD, 1, -1)},
  };
  wp::Timeline t;
  t.schedule = s;
  t.start = {{0, 1, 1, 2, 2, 4.5, 6.5, 7.5, 9.5}, {0, 1, 2, 4, 4, 4, 5, 7, 7}};
  t.end = {{1, 1, 2, 2, 4.5, 6.5, 7.5, 9.5, 10}, {1, 2, 4, 4, 4, 5, 7, 7, 7.5}};
  t.stats.resize(2);
  for (auto& st : t.stats) {
    st.busy = 6.5;
    st.idle = 3.5;
  }
  return t;
}

// One rank holding stages 0 and 1 (a V's turn, handed over in memory), then a REDUCE_GRAD that
// takes no time: makespan 20, shortest box (of positive duration) 0.1, so
// scale = max(960 / 20, min(16 / 0.1, 8000 / 20)) = 160.
wp::Timeline one_rank_two_chunks() {
  auto s = std::make_shared<wp::Schedule>();
  s->ranks = 1;
  s->stages = 2;
  s->microbatches = 1;
  s->stage_rank = {0, 0};
  s->actions = {
      {act(Kind::F, 0, 0), act(Kind::F, 1, 0), act(Kind::B, 1, 0), act(Kind::B, 0, 0), act(Kind::REDUCE_GRAD, 0, -1)}};
  wp::Timeline t;
  t.schedule = s;
  t.start = {{0, 0.1, 0.2, 0.4, 20}};
  t.end = {{0.1, 0.2, 0.4, 20, 20}};
  t.stats.resize(1);
  t.stats[0].busy = 20;
  return t;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---------------------------------------------------------------- SVG

TEST(PipelinePictures, SvgIsWellFormed) {
  const std::string svg = wp::timeline_svg(two_rank_timeline());
  verify<std::string>(
      "SVG well-formed", svg, [](std::string& s) { s.erase(s.find("</g>"), 4); },
      [](const std::string& s) { return parse_xml(s, nullptr); });
  verify<std::string>(
      "V-shaped SVG well-formed", wp::timeline_svg(one_rank_two_chunks()),
      [](std::string& s) { s.replace(s.find("</text>"), 7, "</txt>"); },
      [](const std::string& s) { return parse_xml(s, nullptr); });
}

TEST(PipelinePictures, SvgBoxesMatchTheTimes) {
  const wp::Timeline t = two_rank_timeline();
  const std::vector<Element> els = elements_of(wp::timeline_svg(t));
  const double scale = 96;
  std::vector<double> want_x, want_w, want_y;
  for (int r = 0; r < 2; ++r) {
    for (size_t k = 0; k < t.schedule->actions[r].size(); ++k) {
      if (!wp::is_compute(t.schedule->actions[r][k].kind)) continue;
      want_x.push_back(70 + t.start[r][k] * scale);
      want_w.push_back((t.end[r][k] - t.start[r][k]) * scale);
      want_y.push_back(44 + 30 * r + 2);
    }
  }
  ASSERT_EQ(want_x.size(), 10u);  // 5 compute actions per rank, written above
  const auto boxes = select(els, "rect", "act");
  expect_numbers("box x", attr_numbers(boxes, "x"), want_x, 0.006);
  expect_numbers("box width", attr_numbers(boxes, "width"), want_w, 0.006);
  expect_numbers("box y", attr_numbers(boxes, "y"), want_y, 0.006);
  expect_numbers("box height", attr_numbers(boxes, "height"), std::vector<double>(10, 22), 0.006);
  const auto root = select(els, "svg", "");
  ASSERT_EQ(root.size(), 1u);
  expect_numbers("stated scale", attr_numbers(root, "data-px-per-unit"), {scale}, 1e-9);
  // Widest point: 70 + 10 * 96 + 30 on the right.
  expect_numbers("picture width", attr_numbers(root, "width"), {1060}, 0.006);

  // The SEND/RECV bars: one per communication action, posted to completed, below the boxes.
  std::vector<double> comm_x1, comm_x2;
  for (int r = 0; r < 2; ++r) {
    for (size_t k = 0; k < t.schedule->actions[r].size(); ++k) {
      if (wp::is_compute(t.schedule->actions[r][k].kind)) continue;
      comm_x1.push_back(70 + t.start[r][k] * scale);
      comm_x2.push_back(70 + t.end[r][k] * scale);
    }
  }
  auto bars = select(els, "line", "comm");
  ASSERT_EQ(bars.size(), comm_x1.size() + 1);  // + the legend's sample bar
  bars.pop_back();
  expect_numbers("SEND/RECV bar start", attr_numbers(bars, "x1"), comm_x1, 0.006);
  expect_numbers("SEND/RECV bar end", attr_numbers(bars, "x2"), comm_x2, 0.006);
}

TEST(PipelinePictures, SvgLabelsTitleAndAxis) {
  const wp::Timeline t = two_rank_timeline();
  const std::vector<Element> els = elements_of(wp::timeline_svg(t));
  std::vector<std::string> labels;
  for (const Element* e : select(els, "text", "label")) labels.push_back(e->text);
  expect_strings("box labels (micro-batch, R for REDUCE_GRAD)", labels,
                 {"0", "1", "0", "1", "R", "0", "0", "1", "1", "R"});
  // Each label sits at its box's centre.
  std::vector<double> centre;
  for (int r = 0; r < 2; ++r) {
    for (size_t k = 0; k < t.schedule->actions[r].size(); ++k) {
      if (wp::is_compute(t.schedule->actions[r][k].kind)) centre.push_back(70 + 96 * (t.start[r][k] + t.end[r][k]) / 2);
    }
  }
  expect_numbers("label x", attr_numbers(select(els, "text", "label"), "x"), centre, 0.006);

  const auto title = select(els, "text", "title");
  ASSERT_EQ(title.size(), 1u);
  expect_strings("title", {title[0]->text}, {"custom, p=2 m=2 v=1, makespan 10, bubble 35.0% (simulated)"});

  std::vector<std::string> row_labels;
  for (const Element* e : select(els, "text", "")) {
    if (e->text.rfind("rank ", 0) == 0) row_labels.push_back(e->text);
  }
  expect_strings("row labels", row_labels, {"rank 0", "rank 1"});

  // Ticks every 1 (10 intervals of 1, 2 or 5 times a power of ten) from 0 to 10, then the unit.
  std::vector<std::string> ticks;
  std::vector<const Element*> tick_els;
  for (const Element* e : select(els, "text", "tick")) {
    ticks.push_back(e->text);
    tick_els.push_back(e);
  }
  std::vector<std::string> want_ticks;
  std::vector<double> want_tick_x;
  for (int k = 0; k <= 10; ++k) {
    want_ticks.push_back(std::to_string(k));
    want_tick_x.push_back(70 + 96 * k);
  }
  want_ticks.push_back("time");
  expect_strings("axis tick labels", ticks, want_ticks);
  tick_els.pop_back();
  expect_numbers("axis tick x", attr_numbers(tick_els, "x"), want_tick_x, 0.006);

  std::vector<std::string> legend;
  bool in_legend = false;
  for (const Element& e : els) {
    if (e.name == "g") in_legend = e.attrs.count("class") && e.attrs.at("class") == "legend";
    if (in_legend && e.name == "text") legend.push_back(e.text);
  }
  // The note's "<i>" and "->" must arrive escaped: the tokenizer refuses a raw '<' in text.
  expect_strings("legend", legend,
                 {"F forward", "B backward", "I backward (input)", "W backward (weight)", "REDUCE_GRAD",
                  "grey bar: SEND/RECV, posted -&gt; completed;  label &lt;i&gt;: micro-batch i, R: REDUCE_GRAD"});
}

TEST(PipelinePictures, SvgShadesStageChunksAndWidensForShortBoxes) {
  wp::Timeline t = one_rank_two_chunks();
  const std::vector<Element> els = elements_of(wp::timeline_svg(t));
  const auto boxes = select(els, "rect", "act");
  // 0F0, 1F0, 1B0, 0B0: stage 0 is chunk 0, stage 1 chunk 1.
  std::vector<std::string> fills;
  for (const Element* b : boxes) fills.push_back(b->attrs.at("fill"));
  ASSERT_EQ(fills.size(), 5u);
  std::vector<std::string> distinct = {fills[0] != fills[1] ? "F chunks differ" : "F chunks equal",
                                       fills[3] != fills[2] ? "B chunks differ" : "B chunks equal",
                                       fills[0] != fills[3] ? "F and B differ" : "F and B equal"};
  expect_strings("stage chunk shades", distinct, {"F chunks differ", "B chunks differ", "F and B differ"});
  expect_numbers("widened box x", attr_numbers(boxes, "x"), {70, 70 + 16, 70 + 32, 70 + 64, 70 + 3200}, 0.006);
  expect_numbers("widened box width", attr_numbers(boxes, "width"), {16, 16, 32, 19.6 * 160, 0}, 0.006);
  // The REDUCE_GRAD box is 0 pixels wide: no label (it would cover its neighbours).
  std::vector<std::string> labels;
  for (const Element* e : select(els, "text", "label")) labels.push_back(e->text);
  expect_strings("labels of boxes at least 6 pixels wide", labels, {"0", "0", "0", "0"});
  // The legend notes the shades only when a rank holds more than one chunk.
  std::vector<std::string> notes;
  for (const Element* e : select(els, "text", "")) {
    if (e->text.find("lighter") != std::string::npos) notes.push_back(e->text.substr(e->text.find("lighter")));
  }
  expect_strings("chunk note", notes, {"lighter: a later stage chunk of the rank"});

  t.simulated = false;
  const std::vector<Element> measured = elements_of(wp::timeline_svg(t));
  const auto title = select(measured, "text", "title");
  ASSERT_EQ(title.size(), 1u);
  expect_strings("measured title", {title[0]->text}, {"custom, p=1 m=1 v=2, makespan 20 s, bubble 0.0% (measured)"});
}

TEST(PipelinePictures, SvgRefusesAMismatchedTimeline) {
  wp::Timeline t = two_rank_timeline();
  t.end[1].pop_back();
  std::string message;
  try {
    wp::timeline_svg(t);
  } catch (const weft::Error& e) {
    message = e.message();
  }
  expect_strings("mismatch message", {message}, {"timeline rank 1 has 9 start and 8 end times for 9 actions"});
}

// ---------------------------------------------------------------- Chrome trace JSON

TEST(PipelinePictures, ChromeTraceIsValidJsonWithOneEventPerComputeAction) {
  const wp::Timeline t = two_rank_timeline();
  const std::string text = wp::timeline_chrome_trace(t);
  verify<std::string>(
      "Chrome trace is valid JSON", text, [](std::string& s) { s.erase(s.rfind('}'), 1); },
      [](const std::string& s) { return parse_json(s, nullptr); });
  Json doc;
  ASSERT_EQ(parse_json(text, &doc), "");
  const Json* events = doc.get("traceEvents");
  ASSERT_TRUE(events && events->type == Json::array);

  std::vector<std::string> names, thread_names, phases;
  std::vector<double> tids, ts, dur, stage, mb, pids, thread_tids;
  for (const Json& e : events->items) {
    const Json* ph = e.get("ph");
    ASSERT_TRUE(ph && ph->type == Json::string);
    const Json* pid = e.get("pid");
    ASSERT_TRUE(pid && pid->type == Json::number);
    pids.push_back(pid->n);
    if (ph->s == "M") {
      if (e.get("name")->s != "thread_name") continue;
      thread_tids.push_back(e.get("tid")->n);
      thread_names.push_back(e.get("args")->get("name")->s);
      continue;
    }
    phases.push_back(ph->s);
    names.push_back(e.get("name")->s);
    tids.push_back(e.get("tid")->n);
    ts.push_back(e.get("ts")->n);
    dur.push_back(e.get("dur")->n);
    stage.push_back(e.get("args")->get("stage")->n);
    mb.push_back(e.get("args")->get("microbatch")->n);
  }
  expect_strings("thread names", thread_names, {"rank 0", "rank 1"});
  expect_numbers("thread ids", thread_tids, {0, 1}, 0);
  expect_numbers("pids", pids, std::vector<double>(pids.size(), 0), 0);
  expect_strings("event phases", phases, std::vector<std::string>(10, "X"));
  expect_strings("event names", names,
                 {"0F0", "0F1", "0B0", "0B1", "0REDUCE_GRAD", "1F0", "1B0", "1F1", "1B1", "1REDUCE_GRAD"});
  expect_numbers("event tids", tids, {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, 0);
  // Microseconds: the hand-written times times 1e6.
  expect_numbers("event ts", ts, {0, 1e6, 4.5e6, 7.5e6, 9.5e6, 1e6, 2e6, 4e6, 5e6, 7e6}, 1e-3);
  expect_numbers("event dur", dur, {1e6, 1e6, 2e6, 2e6, 0.5e6, 1e6, 2e6, 1e6, 2e6, 0.5e6}, 1e-3);
  expect_numbers("event stage", stage, {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, 0);
  expect_numbers("event microbatch", mb, {0, 1, 0, 1, -1, 0, 0, 1, 1, -1}, 0);
}

// ---------------------------------------------------------------- files

TEST(PipelinePictures, WriteTimelineWritesTheTextOrNamesThePath) {
  const wp::Timeline t = two_rank_timeline();
  const std::string dir = ::testing::TempDir();
  const std::string svg_path = dir + "/weft_pictures_test.svg", json_path = dir + "/weft_pictures_test.json";
  wp::write_timeline(t, wp::TimelineFormat::svg, svg_path);
  wp::write_timeline(t, wp::TimelineFormat::chrome_trace, json_path);
  const std::string svg = read_all(svg_path), json = read_all(json_path);
  std::remove(svg_path.c_str());
  std::remove(json_path.c_str());
  expect_strings("files equal the texts",
                 {svg == wp::timeline_svg(t) ? "svg same" : "svg differs",
                  json == wp::timeline_chrome_trace(t) ? "json same" : "json differs"},
                 {"svg same", "json same"});

  const std::string bad = dir + "/no-such-directory-for-weft/x.svg";
  std::string message;
  weft::Status status = weft::Status::ok;
  try {
    wp::write_timeline(t, wp::TimelineFormat::svg, bad);
  } catch (const weft::Error& e) {
    message = e.message();
    status = e.status();
  }
  expect_strings("unwritable path", {message, weft::status_name(status)},
                 {cat("cannot open ", bad, " for writing: No such file or directory"),
                  weft::status_name(weft::Status::invalid_argument)});
}

}  // namespace
