#include "core/plugin/registry.h"

#include <mutex>
#include <vector>

#include "core/common/status.h"

namespace weft::plugin {

std::string Origin::describe(const char* what) const {
  std::string s = std::string(what) + " '" + name + "'";
  if (!plugin.empty()) s += " (plugin " + plugin + ", " + path + ")";
  return s;
}

void CustomOp::apply(void* dst, const void* a, const void* b, size_t count, DType dtype) const {
  const int32_t rc = fn_with_data ? fn_with_data(dst, a, b, count, static_cast<int32_t>(dtype), user_data)
                                  : fn(dst, a, b, count, static_cast<int32_t>(dtype));
  if (rc == 0) return;
  const Status status = rc >= 1 && rc <= 9 ? static_cast<Status>(rc) : Status::invalid_argument;
  throw Error(status, format("%s failed (returned %d) on %zu %s elements", origin.describe("reduction operator").c_str(),
                             static_cast<int>(rc), count, dtype_name(dtype)));
}

namespace {

// One kind's table: slot i holds id kIdBase + i (nullptr once removed).
template <typename T>
class Table {
 public:
  explicit Table(const char* what) : what_(what) {}

  int add(T item) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::make_shared<const T>(std::move(item)));
    return kIdBase + static_cast<int>(items_.size()) - 1;
  }
  bool remove(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    const long i = static_cast<long>(id) - kIdBase;
    if (i < 0 || i >= static_cast<long>(items_.size()) || !items_[i]) return false;
    items_[i].reset();
    return true;
  }
  std::shared_ptr<const T> find(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    const long i = static_cast<long>(id) - kIdBase;
    if (i < 0 || i >= static_cast<long>(items_.size())) return nullptr;
    return items_[i];
  }
  std::shared_ptr<const T> get(int id) {
    std::shared_ptr<const T> item = find(id);
    if (item) return item;
    size_t n;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = items_.size();
    }
    const bool destroyed = id >= kIdBase && id < kIdBase + static_cast<long>(n);
    if (destroyed) fail(Status::invalid_argument, "%s %d was destroyed", what_, id);
    // Each kind counts its own ids from kIdBase: an operator's id is no codec's id.
    if (n == 0) {
      fail(Status::invalid_argument, "no %s with id %d: none is registered in this process (load a plugin that "
           "provides one; each kind of extension numbers its own ids from %d)", what_, id, kIdBase);
    }
    fail(Status::invalid_argument, "no %s with id %d: the registered ones are %d..%ld (each kind of extension "
         "numbers its own ids from %d)", what_, id, kIdBase, kIdBase + static_cast<long>(n) - 1, kIdBase);
  }

 private:
  const char* what_;
  std::mutex mu_;
  std::vector<std::shared_ptr<const T>> items_;
};

Table<CustomOp>& ops() { static Table<CustomOp> t("reduction operator"); return t; }
Table<Codec>& codecs() { static Table<Codec> t("gradient codec (wire format)"); return t; }
Table<Router>& routers() { static Table<Router> t("router selector"); return t; }
Table<ScheduleGenerator>& schedules() { static Table<ScheduleGenerator> t("schedule generator"); return t; }
Table<CostModel>& cost_models() { static Table<CostModel> t("cost model"); return t; }

}  // namespace

int add_op(CustomOp op) { return ops().add(std::move(op)); }
int add_codec(Codec codec) { return codecs().add(std::move(codec)); }
int add_router(Router router) { return routers().add(std::move(router)); }
int add_schedule(ScheduleGenerator generator) { return schedules().add(std::move(generator)); }
int add_cost_model(CostModel model) { return cost_models().add(std::move(model)); }

bool remove_op(int id) { return ops().remove(id); }

std::shared_ptr<const CustomOp> find_op(int id) { return ops().find(id); }
std::shared_ptr<const Codec> find_codec(int id) { return codecs().find(id); }
std::shared_ptr<const Router> find_router(int id) { return routers().find(id); }
std::shared_ptr<const ScheduleGenerator> find_schedule(int id) { return schedules().find(id); }
std::shared_ptr<const CostModel> find_cost_model(int id) { return cost_models().find(id); }

std::shared_ptr<const CustomOp> get_op(int id) { return ops().get(id); }
std::shared_ptr<const Codec> get_codec(int id) { return codecs().get(id); }
std::shared_ptr<const Router> get_router(int id) { return routers().get(id); }
std::shared_ptr<const ScheduleGenerator> get_schedule(int id) { return schedules().get(id); }
std::shared_ptr<const CostModel> get_cost_model(int id) { return cost_models().get(id); }

}  // namespace weft::plugin
