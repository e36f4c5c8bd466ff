// Checks, collectively, that every rank of a communicator described the same object (the same
// gradients, the same parameters): an all-gather of a small header and of one key per item, and
// an error that names the first rank and item that differ (weft/training.h's MISMATCH).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/comm/comm.h"

namespace weft::training {

// header: a few words every rank must share (header[0] must be the item count, so items can be
// gathered with one size). keys: one per item. what: "bucketer", "ZeRO". item_name(i) names item
// i in the message. Run where comm's operations run.
void check_agreement(Comm& comm, const char* what, const std::vector<uint64_t>& header,
                     const std::vector<uint64_t>& keys, const std::function<std::string(size_t)>& item_name);

// FNV-1a over a few words: a key for check_agreement.
uint64_t key_of(std::initializer_list<uint64_t> words);

}  // namespace weft::training
