#include "collectives_coverage.h"

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "collectives_cases.h"
#include "reference.h"

namespace mpt {
namespace {

std::string op_text(int op) { return op == kNoOp ? "-" : op_name(static_cast<weft_op_t>(op)); }

std::string variant_text(const Variant& v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s/ip%d/as%d/r%d", v.algo.c_str(), v.inplace, v.async, v.rootsel);
  return buf;
}

std::string variant_of(const Case& c) { return variant_text({c.algo, c.inplace, c.async, c.rootsel}); }

std::string join(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

// Collects what the case list covers and reports each expected combination it lacks.
class Claims {
 public:
  explicit Claims(int nranks) : n_(nranks) {}
  void have(const std::string& key) { seen_.insert(key); }
  // One README claim: every key in `want` must have been seen.
  void require(const char* claim, const std::vector<std::string>& want) {
    ++claims_;
    size_t missing = 0;
    std::string first;
    for (const std::string& k : want)
      if (!seen_.count(k) && missing++ == 0) first = k;
    if (missing) {
      ++unmet_;
      std::printf("coverage n=%d: UNMET \"%s\": %zu of %zu combinations missing, first: %s\n", n_, claim, missing,
                  want.size(), first.c_str());
    }
  }
  int claims() const { return claims_; }
  int unmet() const { return unmet_; }

 private:
  int n_;
  std::set<std::string> seen_;
  int claims_ = 0, unmet_ = 0;
};

bool sendrecv_runs(const CollInfo& ci, int nranks) { return ci.coll != Coll::sendrecv || nranks > 1; }

}  // namespace

int check_coverage(int nranks) {
  const std::vector<Case> cases = build_cases(nranks, Filter{});
  Claims cl(nranks);
  size_t per_part[3] = {0, 0, 0};
  for (const Case& c : cases) {
    const std::string coll = coll_info(c.coll).name, dt = dtype_name(c.dt), op = op_text(c.op),
                      var = variant_of(c), in = input_name(c.input), size = c.size_label();
    const std::string part = c.part;
    if (part == "small") {
      ++per_part[0];
      cl.have(join({"S1", coll, dt, op, size, in}));
      cl.have(join({"S2", coll, dt, var}));
      if (c.input != Input::special && c.input != Input::random) cl.have(join({"S3", coll, op, var}));
      cl.have(join({"S4", coll, dt, op, in, size}));
      cl.have(join({"S5", coll, var, in}));
    } else if (part == "variants") {
      ++per_part[1];
      cl.have(join({"V1", coll, var, dt, op, size}));
    } else if (part == "large") {
      ++per_part[2];
      cl.have(join({"L1", coll, c.algo}));
      cl.have(join({"L2", coll, c.algo, dt, op}));
      if (c.inplace) cl.have(join({"L3", coll, "inplace"}));
      if (c.async) cl.have(join({"L3", coll, "async"}));
    }
  }

  std::vector<std::string> s1, s2, s3, s4, s5, v1, l1, l2, l3;
  for (const CollInfo& ci : all_colls()) {
    if (!sendrecv_runs(ci, nranks)) continue;
    const std::string coll = ci.name;
    const std::vector<Variant> vs = variants_of(ci.coll, nranks);
    if (ci.coll == Coll::barrier) {
      for (const Variant& v : vs) v1.push_back(join({"V1", coll, variant_text(v), "f32", "-", "0"}));
      continue;
    }
    const std::string in = ci.reducing ? "exact" : "raw";
    for (weft_dtype_t d : all_dtypes()) {
      const std::string dt = dtype_name(d);
      for (int op : ops_of(ci.coll))
        for (size_t s : small_sizes()) s1.push_back(join({"S1", coll, dt, op_text(op), std::to_string(s), in}));
      for (const Variant& v : vs) s2.push_back(join({"S2", coll, dt, variant_text(v)}));
      if (ci.reducing && is_float(d))
        for (int op : ops_of(ci.coll)) {
          s4.push_back(join({"S4", coll, dt, op_text(op), "special", "7"}));
          s4.push_back(join({"S4", coll, dt, op_text(op), "random", "1000"}));
        }
    }
    for (const Variant& v : vs) {
      for (int op : ops_of(ci.coll)) s3.push_back(join({"S3", coll, op_text(op), variant_text(v)}));
      if (ci.reducing) {
        s5.push_back(join({"S5", coll, variant_text(v), "special"}));
        s5.push_back(join({"S5", coll, variant_text(v), "random"}));
      }
      const std::string f32op = ci.reducing ? "sum" : "-", i64op = ci.reducing ? "max" : "-";
      for (size_t s : small_sizes()) v1.push_back(join({"V1", coll, variant_text(v), "f32", f32op, std::to_string(s)}));
      v1.push_back(join({"V1", coll, variant_text(v), "i64", i64op, "7"}));
    }
    for (const char* a : ci.algos) l1.push_back(join({"L1", coll, a}));
    if (ci.coll == Coll::allreduce)
      for (const char* a : ci.algos) {
        l2.push_back(join({"L2", coll, a, "f32", "sum"}));
        l2.push_back(join({"L2", coll, a, "i64", "max"}));
        l2.push_back(join({"L2", coll, a, "bf16", "sum"}));
        l2.push_back(join({"L2", coll, a, "u8", "prod"}));
      }
    if (ci.has_inplace) l3.push_back(join({"L3", coll, "inplace"}));
    l3.push_back(join({"L3", coll, "async"}));
  }
  cl.require("small: every collective x dtype x op x size 0/1/7/1000 (exact or raw input)", s1);
  cl.require("small: every (collective, dtype) meets every variant", s2);
  cl.require("small: every (collective, op) meets every variant", s3);
  cl.require("small: every (reducing collective, float dtype, op) with special inputs at 7 and random at 1000", s4);
  cl.require("small: every variant of a reducing collective meets special and random inputs", s5);
  cl.require("variants: every variant at 0/1/7/1000 in f32 (sum) and at 7 in i64 (max); barrier: every variant", v1);
  cl.require("large: every algorithm of every collective", l1);
  cl.require("large: allreduce f32 sum, i64 max, bf16 sum and u8 prod on every algorithm", l2);
  cl.require("large: every collective in-place (where it has one) and async", l3);
  std::printf("coverage n=%d: small %zu, variants %zu, large %zu cases; %d of %d claims hold%s\n", nranks,
              per_part[0], per_part[1], per_part[2], cl.claims() - cl.unmet(), cl.claims(),
              nranks == 1 ? " (sendrecv skipped: no peer at 1 rank)" : "");
  return cl.unmet();
}

}  // namespace mpt
