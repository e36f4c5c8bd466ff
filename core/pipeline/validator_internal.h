// Shared by validator.cpp (the per-action rules) and validator_deadlock.cpp (the exchange
// simulation): the error format and the message pairing both need.
#pragma once

#include <string>
#include <vector>

#include "core/pipeline/schedule.h"

namespace weft::pipeline::detail {

// Throws invalid_argument as "rank R, action K (TEXT): rule 'RULE': WHY".
[[noreturn]] void broken(const Schedule& s, int rank, size_t index, const char* rule, const std::string& why);

// Where an action sits: its rank and its index in that rank's list.
struct Place {
  int rank = -1;
  int index = -1;
};

// For every SEND/RECV action, its partner on the other rank (-1 where it has none), by the rule
// that the k-th message from rank a to rank b pairs with the k-th receive at b from a.
// partner[r][k] is meaningful for comm actions only.
using Partners = std::vector<std::vector<Place>>;
Partners pair_messages(const Schedule& s);

// The rank a SEND sends to or a RECV receives from (-1 when that stage does not exist).
int peer_of(const Schedule& s, const Action& a);

// Runs the exchange simulation (weft_schedule_validate's 'no deadlock' rule) on a schedule that
// passed every other rule; throws naming every stuck rank's waiting action.
void check_deadlock(const Schedule& s, const Partners& partners);

}  // namespace weft::pipeline::detail
