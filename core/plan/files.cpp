// The planner's two text formats (weft/plan.h states them): a line is a word ("layer", "train",
// "cluster") and key=value pairs. Every complaint names path:line and the key, because these
// files are written by hand and by weft-bench, and a planner that guesses past a typo gives a
// confident wrong answer.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/common/status.h"
#include "core/plan/plan.h"

namespace weft::plan {

namespace {

// Integers in the files are counts of things; beyond this they are typos, not models.
constexpr double kMaxInt = 1 << 30;

struct Line {
  int number = 0;
  std::string word;
  std::vector<std::pair<std::string, std::string>> pairs;  // in file order
};

// The lines that say something: comments cut at '#', blank lines skipped, "\r\n" accepted.
std::vector<Line> split_lines(const std::string& text, const std::string& path) {
  std::vector<Line> out;
  std::istringstream in(text);
  std::string raw;
  int number = 0;
  while (std::getline(in, raw)) {
    ++number;
    const size_t hash = raw.find('#');
    if (hash != std::string::npos) raw.resize(hash);
    std::istringstream words(raw);
    std::string token;
    Line line;
    line.number = number;
    while (words >> token) {
      if (line.word.empty()) {
        line.word = token;
        continue;
      }
      const size_t eq = token.find('=');
      if (eq == std::string::npos || eq == 0) {
        fail(Status::invalid_argument, "%s:%d: '%s' is not key=value", path.c_str(), number, token.c_str());
      }
      line.pairs.emplace_back(token.substr(0, eq), token.substr(eq + 1));
    }
    if (!line.word.empty()) out.push_back(std::move(line));
  }
  return out;
}

struct Reader {
  const std::string& path;
  int line;

  double number(const std::string& key, const std::string& value) const {
    const char* begin = value.c_str();
    char* end = nullptr;
    errno = 0;
    const double v = value.empty() ? NAN : std::strtod(begin, &end);
    // The whole value must be the number (a NUL inside the text stops strtod early).
    if (value.empty() || end != begin + value.size() || errno == ERANGE || !std::isfinite(v) || v < 0) {
      fail(Status::invalid_argument, "%s:%d: key '%s': '%s' is not a number; expected a finite decimal >= 0",
           path.c_str(), line, key.c_str(), value.c_str());
    }
    return v;
  }

  // "N:S,N:S,...": measured collectives of `kind`, group size N >= 2 (each once) : seconds S.
  void collectives(const std::string& key, const std::string& value, Collective kind,
                   std::vector<MeasuredCollective>* out) const {
    std::set<int> sizes;
    std::istringstream items(value);
    std::string item;
    bool any = false;
    while (std::getline(items, item, ',')) {
      any = true;
      const size_t colon = item.find(':');
      if (colon == std::string::npos) {
        fail(Status::invalid_argument, "%s:%d: key '%s': '%s' is not RANKS:SECONDS", path.c_str(), line, key.c_str(),
             item.c_str());
      }
      MeasuredCollective m;
      m.kind = kind;
      m.ranks = integer(key, item.substr(0, colon));
      m.seconds = number(key, item.substr(colon + 1));
      if (m.ranks < 2 || !sizes.insert(m.ranks).second) {
        fail(Status::invalid_argument, "%s:%d: key '%s': group size %d; expected sizes >= 2, each once", path.c_str(),
             line, key.c_str(), m.ranks);
      }
      out->push_back(m);
    }
    if (!any) fail(Status::invalid_argument, "%s:%d: key '%s' is empty; expected RANKS:SECONDS,...", path.c_str(), line, key.c_str());
  }

  int integer(const std::string& key, const std::string& value) const {
    const double v = number(key, value);
    if (v != std::floor(v) || v > kMaxInt) {
      fail(Status::invalid_argument, "%s:%d: key '%s': '%s' is not a whole number <= %.0f", path.c_str(), line,
           key.c_str(), value.c_str(), kMaxInt);
    }
    return static_cast<int>(v);
  }
};

// Applies each pair through set(key, value) -> false for an unknown key; a repeated key fails.
template <class Set>
void apply(const Line& l, const std::string& path, std::set<std::string>& seen, const char* known, Set set) {
  for (const auto& [key, value] : l.pairs) {
    if (!seen.insert(key).second) {
      fail(Status::invalid_argument, "%s:%d: key '%s' is given twice", path.c_str(), l.number, key.c_str());
    }
    if (!set(key, value)) {
      fail(Status::invalid_argument, "%s:%d: unknown key '%s' for '%s'; expected one of: %s", path.c_str(), l.number,
           key.c_str(), l.word.c_str(), known);
    }
  }
}

Layer parse_layer(const Line& l, const std::string& path) {
  const Reader r{path, l.number};
  Layer layer;
  std::set<std::string> seen;
  apply(l, path, seen, "name count params flops fwd bwd act out experts topk tp kv tp_rep tp_ar shared", [&](const std::string& k,
                                                                                          const std::string& v) {
    if (k == "name") layer.name = v;
    else if (k == "count") layer.count = r.integer(k, v);
    else if (k == "params") layer.params = r.number(k, v);
    else if (k == "flops") layer.forward_flops = r.number(k, v);
    else if (k == "fwd") layer.forward_seconds = r.number(k, v);
    else if (k == "bwd") layer.backward_seconds = r.number(k, v);
    else if (k == "act") layer.activation_bytes = r.number(k, v);
    else if (k == "out") layer.output_bytes = r.number(k, v);
    else if (k == "experts") layer.experts = r.integer(k, v);
    else if (k == "topk") layer.top_k = r.integer(k, v);
    else if (k == "kv") layer.context_bytes = r.number(k, v);
    else if (k == "shared") layer.shared_params = r.number(k, v);
    else if (k == "tp_rep") {
      layer.tp_replicated = r.number(k, v);
      if (layer.tp_replicated > 1) {
        fail(Status::invalid_argument, "%s:%d: key 'tp_rep': %s; expected a share 0..1", path.c_str(), l.number,
             v.c_str());
      }
    } else if (k == "tp_ar") {
      layer.tp_allreduces = r.integer(k, v);
      if (layer.tp_allreduces > 64) {
        fail(Status::invalid_argument, "%s:%d: key 'tp_ar': %d; expected 0 (= 2) .. 64", path.c_str(), l.number,
             layer.tp_allreduces);
      }
    }
    else if (k == "tp") {
      const int t = r.integer(k, v);
      if (t > 1) fail(Status::invalid_argument, "%s:%d: key 'tp': %d; expected 0 or 1", path.c_str(), l.number, t);
      layer.tensor_parallel = t == 1;
    } else {
      return false;
    }
    return true;
  });
  if (layer.name.empty()) {
    fail(Status::invalid_argument, "%s:%d: key 'name' is missing (or empty); every layer needs a name", path.c_str(),
         l.number);
  }
  if (!seen.count("flops") && !seen.count("fwd")) {
    fail(Status::invalid_argument, "%s:%d: layer '%s' has neither key 'flops' nor key 'fwd'; expected one of them",
         path.c_str(), l.number, layer.name.c_str());
  }
  if (layer.count < 1) {
    fail(Status::invalid_argument, "%s:%d: key 'count': %d; expected >= 1", path.c_str(), l.number, layer.count);
  }
  if (layer.shared_params > 0 && (layer.experts == 0 || layer.shared_params > layer.params)) {
    fail(Status::invalid_argument, "%s:%d: key 'shared': %g; expected 0..params (%g) of an MoE layer (experts > 0)",
         path.c_str(), l.number, layer.shared_params, layer.params);
  }
  if (layer.experts > 0 && (layer.top_k < 1 || layer.top_k > layer.experts)) {
    fail(Status::invalid_argument, "%s:%d: key 'topk': %d; expected 1..experts (%d)", path.c_str(), l.number,
         layer.top_k, layer.experts);
  }
  return layer;
}

}  // namespace

ModelFile parse_model(const std::string& text, const std::string& path) {
  ModelFile m;
  bool train_seen = false;
  for (const Line& l : split_lines(text, path)) {
    if (l.word == "layer") {
      m.layers.push_back(parse_layer(l, path));
    } else if (l.word == "train") {
      if (train_seen) fail(Status::invalid_argument, "%s:%d: a second 'train' line; expected at most one", path.c_str(), l.number);
      train_seen = true;
      const Reader r{path, l.number};
      std::set<std::string> seen;
      apply(l, path, seen, "global_batch weight_bytes grad_bytes optimizer_bytes grad_allreduce_bytes",
            [&](const std::string& k, const std::string& v) {
              if (k == "global_batch") m.global_batch = r.integer(k, v);
              else if (k == "weight_bytes") m.weight_bytes = r.number(k, v);
              else if (k == "grad_bytes") m.grad_bytes = r.number(k, v);
              else if (k == "optimizer_bytes") m.optimizer_bytes = r.number(k, v);
              else if (k == "grad_allreduce_bytes") m.grad_allreduce_bytes = r.number(k, v);
              else return false;
              return true;
            });
    } else {
      fail(Status::invalid_argument, "%s:%d: unknown line '%s'; expected 'layer' or 'train'", path.c_str(), l.number,
           l.word.c_str());
    }
  }
  if (m.layers.empty()) fail(Status::invalid_argument, "%s: no 'layer' line; expected at least one", path.c_str());
  return m;
}

Cluster parse_cluster(const std::string& text, const std::string& path) {
  Cluster c;
  std::set<std::string> seen;
  for (const Line& l : split_lines(text, path)) {
    if (l.word != "cluster") {
      fail(Status::invalid_argument, "%s:%d: unknown line '%s'; expected 'cluster'", path.c_str(), l.number,
           l.word.c_str());
    }
    const Reader r{path, l.number};
    apply(l, path, seen, "hosts ranks_per_host memory flops intra_bw intra_lat inter_bw inter_lat intra_allreduce intra_alltoall",
          [&](const std::string& k, const std::string& v) {
            if (k == "intra_allreduce" || k == "intra_alltoall") {
              r.collectives(k, v, k == "intra_allreduce" ? Collective::allreduce : Collective::alltoall, &c.intra_collectives);
              return true;
            }
            if (k == "hosts") c.hosts = r.integer(k, v);
            else if (k == "ranks_per_host") c.ranks_per_host = r.integer(k, v);
            else if (k == "memory") c.memory = r.number(k, v);
            else if (k == "flops") c.flops = r.number(k, v);
            else if (k == "intra_bw") c.intra_bandwidth = r.number(k, v);
            else if (k == "intra_lat") c.intra_latency = r.number(k, v);
            else if (k == "inter_bw") c.inter_bandwidth = r.number(k, v);
            else if (k == "inter_lat") c.inter_latency = r.number(k, v);
            else return false;
            return true;
          });
  }
  for (const char* key : {"ranks_per_host", "memory", "intra_bw"}) {
    if (!seen.count(key)) fail(Status::invalid_argument, "%s: key '%s' is missing; expected it on a 'cluster' line", path.c_str(), key);
  }
  if (c.hosts > 1) {
    for (const char* key : {"inter_bw", "inter_lat"}) {
      if (!seen.count(key)) {
        fail(Status::invalid_argument, "%s: key '%s' is missing; expected it when hosts = %d > 1", path.c_str(), key,
             c.hosts);
      }
    }
  }
  return c;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(Status::invalid_argument, "%s: cannot open: %s", path.c_str(), std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail(Status::invalid_argument, "%s: cannot read: %s", path.c_str(), std::strerror(errno));
  return s.str();
}

}  // namespace weft::plan
