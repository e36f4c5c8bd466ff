// A pipeline schedule as core/ sees it (weft/pipeline.h explains the words): per rank an ordered
// list of actions, the placement of stages on ranks, and where the schedule came from. Plain data:
// the generators make it, the validator judges it, the simulator and the executor run it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::pipeline {

// Values equal weft_action_kind_t's (capi/ static_asserts this).
enum class Kind : int32_t {
  F = 0,
  B = 1,
  I = 2,
  W = 3,
  SEND_F = 4,
  RECV_F = 5,
  SEND_B = 6,
  RECV_B = 7,
  REDUCE_GRAD = 8,
};
constexpr int kNumKinds = 9;

// Values equal weft_schedule_kind_t's; from WEFT_PLUGIN_ID_BASE (64) up, a SCHEDULE plugin's
// generator (any such value is a valid Method: the underlying type is fixed).
enum class Method : int {
  custom = -1,
  gpipe = 0,
  one_f_one_b = 1,
  interleaved_1f1b = 2,
  zb_h1 = 3,
  zb_h2 = 4,
  zb_v = 5,
  dualpipe_v = 6,
};
constexpr int kNumMethods = 7;

struct Action {
  Kind kind;
  int32_t stage;
  int32_t microbatch;  // -1 for REDUCE_GRAD
  bool operator==(const Action&) const = default;
};

inline bool is_compute(Kind k) { return k == Kind::F || k == Kind::B || k == Kind::I || k == Kind::W || k == Kind::REDUCE_GRAD; }
inline bool is_comm(Kind k) { return !is_compute(k); }
inline bool is_send(Kind k) { return k == Kind::SEND_F || k == Kind::SEND_B; }
inline bool is_recv(Kind k) { return k == Kind::RECV_F || k == Kind::RECV_B; }

// torch's action string: "0F0", "1SEND_F3", "2REDUCE_GRAD".
std::string to_string(const Action& a);
// Kind names as torch writes them ("F", "SEND_F", ...); method names as weft-schedule takes them
// ("gpipe", "1f1b", "interleaved", "zbh1", "zbh2", "zbv", "dualpipev"); a plugin's entry name
// for a plugin id (gen_plugin.cpp; "unregistered-plugin" when this process has no such id).
const char* kind_name(Kind k);
const char* method_name(Method m);
bool is_plugin_method(Method m);
const char* plugin_method_name(Method m);
// false when `name` is no method's name.
bool method_from_name(const std::string& name, Method* out);

struct Schedule {
  Method method = Method::custom;
  int ranks = 0;         // p
  int stages = 0;        // S
  int microbatches = 0;  // m
  std::vector<int> stage_rank;                // S entries; -1 for a stage whose F no rank runs
  std::vector<std::vector<Action>> actions;   // p lists

  // The most stages any rank holds.
  int stages_per_rank() const;
  bool has_comm() const;  // any SEND/RECV action
};

// From caller lists (weft_schedule_create's rules): copies them, derives stages, micro-batches
// and placement, and inserts SEND/RECV actions when there are none. Throws invalid_argument for
// a bad kind, a negative stage or micro-batch (but REDUCE_GRAD's -1) or no F at all. method:
// custom, a built-in, or a plugin id (a loaded file keeps the kind it was saved with).
Schedule make_schedule(std::vector<std::vector<Action>> lists, Method method = Method::custom);

// Inserts SEND/RECV actions into compute-only lists (lowering.cpp): a RECV right before the
// compute that needs the data, a SEND right after the compute that made it, none between stages
// on one rank. With one stage per rank the result's exchanges are deadlock-free when the compute
// order is; with several, messages flow both ways between two ranks and the generators place
// them by a global order instead (gen_comm.cpp), as make_schedule does for compute-only lists.
void add_communication(Schedule& s);

// Throws invalid_argument naming rank, action index, action and rule (validator.cpp).
void validate(const Schedule& s);

// torch's CSV (csv.cpp); compute_only keeps F, B, I and W only.
std::string to_csv(const Schedule& s, bool compute_only);
Schedule from_csv(const std::string& text);

// FlatBuffers file (schedule_file.cpp, core/schema/schedule.fbs).
std::vector<uint8_t> serialize(const Schedule& s);
Schedule deserialize(const uint8_t* data, size_t size);  // verifies first
void save(const Schedule& s, const std::string& path);
Schedule load(const std::string& path);

}  // namespace weft::pipeline
