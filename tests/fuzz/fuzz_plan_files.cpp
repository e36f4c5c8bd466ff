// libFuzzer target: the planner's model and cluster text files (core/plan/files.cpp, what
// weft_plan_load reads). The input's bytes up to the first NUL are a model file, the rest a
// cluster file. Each gives a value or an invalid_argument weft::Error naming file:line; an
// accepted model keeps the promises below, and when both are accepted and small the planner
// runs on them (check.cpp, cost.cpp, search.cpp) and must answer with sorted, finite layouts
// that use every rank, or refuse with invalid_argument.
#include <cmath>
#include <cstdint>
#include <string>

#include "core/plan/plan.h"
#include "tests/fuzz/fuzz_common.h"

using namespace weft;
using namespace weft::plan;

namespace {

bool good(double v) { return std::isfinite(v) && v >= 0; }

void check_model(const ModelFile& m, const std::string& text) {
  if (m.layers.empty()) fuzz::broken("plan_files", "model with no layer", text);
  for (const Layer& l : m.layers) {
    const bool ok = !l.name.empty() && l.name.find_first_of(" \t\n\r#") == std::string::npos && l.count >= 1 &&
                    l.experts >= 0 && (l.experts == 0 || (l.top_k >= 1 && l.top_k <= l.experts)) &&
                    good(l.params) && good(l.forward_flops) && good(l.forward_seconds) && good(l.backward_seconds) &&
                    good(l.activation_bytes) && good(l.output_bytes) && good(l.context_bytes) &&
                    good(l.tp_replicated) && l.tp_replicated <= 1 && l.tp_allreduces >= 0 && l.tp_allreduces <= 64 &&
                    good(l.shared_params) && l.shared_params <= l.params && (l.experts > 0 || l.shared_params == 0);
    if (!ok) fuzz::broken("plan_files", "accepted layer breaks a promise", text);
  }
  if (m.global_batch < 0 || !good(m.weight_bytes) || !good(m.grad_bytes) || !good(m.optimizer_bytes) ||
      !good(m.grad_allreduce_bytes)) {
    fuzz::broken("plan_files", "accepted train line breaks a promise", text);
  }
}

void check_plan(const Plan& p, const std::string& text) {
  if (static_cast<int>(p.layouts.size()) > p.options.top) fuzz::broken("plan_files", "more layouts than top", text);
  for (size_t i = 0; i < p.layouts.size(); ++i) {
    const Layout& x = p.layouts[i];
    const bool ok = x.fits && x.dp * x.tp * x.pp * x.cp == p.options.ranks && good(x.step) && good(x.compute) &&
                    good(x.communication) && good(x.memory) && x.memory <= p.options.cluster.memory &&
                    good(x.communication_bytes) && x.bubble >= 0 && x.bubble <= 1 && x.microbatches >= 1 &&
                    (i == 0 || p.layouts[i - 1].step <= x.step);
    if (!ok) fuzz::broken("plan_files", "a kept layout breaks a promise", text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string model = all.substr(0, nul), cluster = nul == std::string::npos ? "" : all.substr(nul + 1);
  ModelFile m;
  const bool model_ok =
      fuzz::refuses_or_decodes("plan_files", {Status::invalid_argument}, [&] { m = parse_model(model, "m.model"); });
  if (model_ok) check_model(m, model);
  Cluster c;
  const bool cluster_ok = fuzz::refuses_or_decodes("plan_files", {Status::invalid_argument},
                                                   [&] { c = parse_cluster(cluster, "c.cluster"); });
  if (!model_ok || !cluster_ok) return 0;
  // Plan only what finishes in milliseconds: the search grows with ranks, layers and batch.
  long long copies = 0;
  for (const Layer& l : m.layers) copies += l.count;
  const long long ranks = static_cast<long long>(c.hosts) * c.ranks_per_host;
  if (ranks > 16 || copies > 32 || m.global_batch > 64) return 0;
  Options o;
  o.layers = m.layers;
  o.cluster = c;
  o.global_batch = m.global_batch ? m.global_batch : 4;
  Plan p;
  if (fuzz::refuses_or_decodes("plan_files", {Status::invalid_argument}, [&] { p = make_plan(o); })) check_plan(p, all);
  return 0;
}
