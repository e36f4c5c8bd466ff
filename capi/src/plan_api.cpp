// weft_plan_* (weft/plan.h): argument checks and the conversions to core/plan/ (search.cpp,
// scaling.cpp, format.cpp, files.cpp), which hold the planner itself.
#include <cstring>
#include <string>

#include "capi/src/plan_convert.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"

using namespace weft;
using namespace weft::capi;

namespace {

const char* read_path(const char* path, const char* arg) {
  if (!path || !*path) fail(Status::invalid_argument, "%s is %s; expected a file path", arg, path ? "empty" : "NULL");
  return path;
}

// The scaling of h, computed on first use (the search runs once per point: seconds at scale).
const plan::Scaling& scaling_of(weft_plan* h) {
  std::lock_guard<std::mutex> lock(h->mutex);
  if (!h->scaling) h->scaling = std::make_unique<plan::Scaling>(plan::scaling(h->plan));
  return *h->scaling;
}

void hand_out(plan::Plan p, bool with_scaling, weft_plan_t* out) {
  // A plan with no layout has no scaling to compute: it is still a valid answer ("nothing fits").
  const bool scale = with_scaling && !p.layouts.empty();
  weft_plan_t h = register_plan(std::move(p));
  if (scale) {
    try {
      scaling_of(h);
    } catch (...) {
      unregister_plan(h);
      throw;
    }
  }
  *out = h;
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_plan_create(const weft_plan_config_t* config, weft_plan_t* plan) {
  return guarded(__func__, [&] {
    check_out(plan, "plan");
    *plan = nullptr;
    if (!config) fail(Status::invalid_argument, "config is NULL; expected weft_plan_config_t (WEFT_PLAN_CONFIG_INIT)");
    const weft_plan_config_t c = plan_config(config);
    plan::Options o = plan_options(c);
    o.layers = plan_layers(c.layers, c.num_layers, c.layer_size);
    o.cluster = plan_cluster(c.cluster);
    hand_out(plan::make_plan(o), c.scaling != 0, plan);
  });
}

WEFT_API weft_status_t weft_plan_load(const char* model_path, const char* cluster_path, const weft_plan_config_t* config,
                                      weft_plan_t* plan) {
  return guarded(__func__, [&] {
    check_out(plan, "plan");
    *plan = nullptr;
    const std::string mpath = read_path(model_path, "model_path"), cpath = read_path(cluster_path, "cluster_path");
    const weft_plan_config_t c = plan_config(config);
    plan::Options o = plan_options(c);
    const plan::ModelFile m = plan::parse_model(plan::read_text_file(mpath), mpath);
    o.layers = m.layers;
    o.cluster = plan::parse_cluster(plan::read_text_file(cpath), cpath);
    // The config's nonzero values win over the file's; the file's over the defaults.
    if (o.global_batch == 0) o.global_batch = m.global_batch;
    if (c.weight_bytes == 0 && m.weight_bytes != 0) o.weight_bytes = m.weight_bytes;
    if (c.grad_bytes == 0 && m.grad_bytes != 0) o.grad_bytes = m.grad_bytes;
    if (c.optimizer_bytes == 0 && m.optimizer_bytes != 0) o.optimizer_bytes = m.optimizer_bytes;
    if (c.grad_allreduce_bytes == 0) o.grad_allreduce_bytes = m.grad_allreduce_bytes;
    if (o.global_batch == 0) {
      fail(Status::invalid_argument, "%s: no global batch: give config->global_batch or a 'train global_batch=G' line",
           mpath.c_str());
    }
    hand_out(plan::make_plan(o), c.scaling != 0, plan);
  });
}

WEFT_API weft_status_t weft_plan_destroy(weft_plan_t plan) {
  return guarded(__func__, [&] {
    if (!plan) return;
    lookup_plan(plan, "plan");
    unregister_plan(plan);
  });
}

WEFT_API weft_status_t weft_plan_info(weft_plan_t plan, weft_plan_info_t* info) {
  return guarded(__func__, [&] {
    const weft_plan* h = lookup_plan(plan, "plan");
    check_out(info, "info");
    check_struct_size(info, "info", "WEFT_PLAN_INFO_INIT");
    weft_plan_info_t out = WEFT_PLAN_INFO_INIT;
    out.ranks = h->plan.options.ranks;
    out.global_batch = h->plan.options.global_batch;
    out.count = h->plan.layouts.size();
    out.searched = h->plan.searched;
    out.feasible = h->plan.feasible;
    write_struct(info, out);
  });
}

WEFT_API weft_status_t weft_plan_layout(weft_plan_t plan, size_t index, weft_plan_layout_t* layout) {
  return guarded(__func__, [&] {
    const weft_plan* h = lookup_plan(plan, "plan");
    check_out(layout, "layout");
    check_struct_size(layout, "layout", "WEFT_PLAN_LAYOUT_INIT");
    if (index >= h->plan.layouts.size()) {
      fail(Status::invalid_argument, "index = %zu; the plan keeps %zu layouts", index, h->plan.layouts.size());
    }
    write_struct(layout, plan_layout_out(h->plan.layouts[index]));
  });
}

WEFT_API weft_status_t weft_plan_scaling(weft_plan_t plan, weft_plan_scaling_t* summary,
                                         weft_plan_scaling_point_t* points, size_t capacity, size_t* count) {
  return guarded(__func__, [&] {
    weft_plan* h = lookup_plan(plan, "plan");
    check_out(count, "count");
    if (summary) check_struct_size(summary, "summary", "WEFT_PLAN_SCALING_INIT");
    const plan::Scaling& s = scaling_of(h);
    *count = s.points.size();
    if (summary) {
      weft_plan_scaling_t out = WEFT_PLAN_SCALING_INIT;
      out.ranks = s.ranks;
      out.one_rank_seconds = s.one_rank;
      out.step_seconds = s.step;
      out.speedup = s.speedup;
      out.efficiency = s.efficiency;
      out.serial_fraction = s.serial_fraction;
      out.gustafson_speedup = s.gustafson;
      write_struct(summary, out);
    }
    if (!points) return;
    for (size_t i = 0; i < s.points.size() && i < capacity; ++i) {
      const plan::Scaling::Point& p = s.points[i];
      points[i] = weft_plan_scaling_point_t{p.ranks,  p.weak_batch, p.fits ? 1 : 0,   p.strong,   p.strong_speedup,
                                            p.amdahl, p.weak,       p.weak_speedup, p.gustafson};
    }
  });
}

WEFT_API weft_status_t weft_plan_format(weft_plan_t plan, weft_plan_format_kind_t what, char* text, size_t capacity,
                                        size_t* length) {
  return guarded(__func__, [&] {
    weft_plan* h = lookup_plan(plan, "plan");
    check_out(length, "length");
    const int w = enum_bits(what);
    std::string t;
    if (w == WEFT_PLAN_FORMAT_TABLE) {
      t = plan::format_table(h->plan);
    } else if (w == WEFT_PLAN_FORMAT_REPORT) {
      t = plan::format_report(h->plan, scaling_of(h));
    } else if (w == WEFT_PLAN_FORMAT_JSON) {
      std::lock_guard<std::mutex> lock(h->mutex);
      t = plan::format_json(h->plan, h->scaling.get());
    } else {
      fail(Status::invalid_argument, "what = %d; expected WEFT_PLAN_FORMAT_TABLE, _REPORT or _JSON", w);
    }
    *length = t.size();
    if (!text) return;
    if (capacity < t.size()) {
      fail(Status::invalid_argument, "capacity = %zu bytes; the text needs %zu (+1 for the NUL)", capacity, t.size());
    }
    std::memcpy(text, t.data(), t.size());
    if (capacity > t.size()) text[t.size()] = '\0';
  });
}

}  // extern "C"
