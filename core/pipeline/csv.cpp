// torch.distributed.pipelining's CSV form of a schedule: one row per rank, one action string per
// cell ("0F0,0SEND_F0,1RECV_B0,..."), rows ended by "\r\n" as Python's csv.writer ends them.
// Reading is lenient where torch's own files vary (either line end, cells quoted or padded with
// blanks, empty cells or "None" for idle steps) and strict about the action strings themselves.
#include <cctype>
#include <cstdint>

#include "core/common/status.h"
#include "core/pipeline/schedule.h"

namespace weft::pipeline {

std::string to_csv(const Schedule& s, bool compute_only) {
  std::string out;
  for (const auto& list : s.actions) {
    bool first = true;
    for (const Action& a : list) {
      const bool keep = a.kind == Kind::F || a.kind == Kind::B || a.kind == Kind::I || a.kind == Kind::W;
      if (compute_only && !keep) continue;
      if (!first) out.push_back(',');
      out.append(to_string(a));
      first = false;
    }
    out.append("\r\n");
  }
  return out;
}

namespace {

// A cell's action, or failure naming the row, the cell and its text.
struct CellParser {
  size_t row, cell;
  const std::string& text;

  [[noreturn]] void bad(const std::string& why) const {
    fail(Status::invalid_argument, "CSV row %zu (rank %zu), cell %zu ('%s'): %s", row, row, cell, text.c_str(),
         why.c_str());
  }

  // Decimal digits from `at`; false when there are none.
  bool number(size_t& at, int32_t& value) const {
    const size_t start = at;
    int64_t v = 0;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
      v = v * 10 + (text[at] - '0');
      if (v > INT32_MAX) bad("the number is too large");
      ++at;
    }
    value = static_cast<int32_t>(v);
    return at > start;
  }

  Action parse() const {
    Action a{Kind::F, 0, 0};
    size_t at = 0;
    if (!number(at, a.stage)) bad("an action starts with its stage number, as in 0F0 or 1SEND_F3");
    const size_t name_start = at;
    while (at < text.size() && (std::isupper(static_cast<unsigned char>(text[at])) || text[at] == '_')) ++at;
    const std::string name = text.substr(name_start, at - name_start);
    int kind = -1;
    for (int k = 0; k < kNumKinds; ++k) {
      if (name == kind_name(static_cast<Kind>(k))) kind = k;
    }
    if (kind < 0) {
      bad(std::string("'").append(name).append(
          "' is not an action kind weft runs (F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, REDUCE_GRAD)"));
    }
    a.kind = static_cast<Kind>(kind);
    if (a.kind == Kind::REDUCE_GRAD) {
      a.microbatch = -1;
      if (at != text.size()) bad("REDUCE_GRAD takes no micro-batch (torch writes it as 2REDUCE_GRAD)");
      return a;
    }
    if (!number(at, a.microbatch)) bad(name + " needs a micro-batch number after it, as in 0F0");
    if (at != text.size()) bad("unexpected text after the micro-batch");
    return a;
  }
};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

Schedule from_csv(const std::string& text) {
  std::vector<std::vector<Action>> lists;
  size_t at = 0, trailing_blank = 0;
  // The last line end closes the last row; nothing after it is another row.
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    trailing_blank = trim(line).empty() ? trailing_blank + 1 : 0;
    const size_t row = lists.size();
    std::vector<Action>& list = lists.emplace_back();
    size_t cell = 0, from = 0;
    for (bool more = true; more; ++cell) {
      size_t comma = line.find(',', from);
      more = comma != std::string::npos;
      if (!more) comma = line.size();
      std::string t = trim(line.substr(from, comma - from));
      from = comma + 1;
      if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = trim(t.substr(1, t.size() - 2));
      if (t.empty() || t == "None") continue;  // an idle step in torch's table
      list.push_back(CellParser{row, cell, t}.parse());
    }
  }
  // Blank lines at the end are an editor's or a writer's trailing newlines, not ranks (a rank
  // with no actions at all holds no stage, so nothing is lost).
  while (!lists.empty() && trailing_blank > 0) {
    lists.pop_back();
    --trailing_blank;
  }
  if (lists.empty()) fail(Status::invalid_argument, "the CSV text has no rows; expected one row per rank");
  return make_schedule(std::move(lists));
}

}  // namespace weft::pipeline
