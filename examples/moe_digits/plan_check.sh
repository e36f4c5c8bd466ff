#!/usr/bin/env bash
# The ctests example.moe_digits_plan_files and example.moe_digits_plan_files_inject: the planner's
# inputs for the demo, end to end. On 2 ranks, `moe_digits --profile-layers` and `weft-bench
# --cluster-file` write the model and cluster files; weft-plan must read both and predict a
# layout; the model file's sizes must equal closed forms derived here by hand from model.h's
# shapes (IN 64, H 32, F 64, E 8 experts of Fe 32, top-2, 10 classes), not from profile.c.
#   plan_check.sh WEFTRUN MOE_DIGITS WEFT_BENCH WEFT_PLAN OUTDIR [--inject]
# --inject (WEFT_TEST_INJECT=1 style): every expected value is altered in turn and each
# alteration must be reported as a mismatch; passes only if all of them were caught.
set -uo pipefail
weftrun=$1 demo=$2 bench=$3 plan=$4 out=$5 mode=${6:-}
data=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
[ -r "$data" ] || { echo "SKIP: $data missing (apt-get install python3-sklearn)"; exit 77; }
rm -rf "$out" && mkdir -p "$out"
"$weftrun" -n 2 --timeout 60 "$demo" --profile-layers "$out/model.txt" || { echo "FAILED: the profile"; exit 1; }
"$weftrun" -n 2 --timeout 60 "$bench" --cluster-file "$out/cluster.txt" --seconds 0.005 --collectives on >/dev/null ||
  { echo "FAILED: weft-bench --cluster-file"; exit 1; }
"$plan" --model "$out/model.txt" --cluster "$out/cluster.txt" --layout dp=2,zero=1 --json >"$out/plan.json" ||
  { echo "FAILED: weft-plan refused the files"; cat "$out/model.txt" "$out/cluster.txt"; exit 1; }
python3 - "$out" "$mode" <<'EOF'
import json, sys
out, mode = sys.argv[1], sys.argv[2]
def pairs(path, word):
    rows = []
    for line in open(path):
        line = line.split("#")[0].split()
        if line and line[0] == word:
            rows.append(dict(kv.split("=", 1) for kv in line[1:]))
    return rows
layers = pairs(f"{out}/model.txt", "layer")
cluster = pairs(f"{out}/cluster.txt", "cluster")[0]
IN, H, F, E, FE, K, C = 64, 32, 64, 8, 32, 2, 10
expected = [  # (row, key, value): the closed forms
    (0, "params", IN * H + H + H * F + F + F * H + H),                                  # 6272
    (1, "params", H * E + E * H * FE + E * FE + E * FE * H + E * H + H * C + C),        # 17482
    (0, "flops", 2 * (IN * H + H * F + F * H)),                                         # 12288
    (1, "flops", 2 * (H * E + K * (H * FE + FE * H) + H * C)),                          # 9344
    (0, "act", 4 * (IN + 2 * H + 2 * F + H)),             # x, pre0, h0, pre1, a1, h1: 1152
    (1, "act", 4 * (2 * H + E + 2 * K + C + K * (H + 2 * FE))),  # 1112
    (0, "out", 4 * H), (1, "out", 4 * H), (1, "experts", E), (1, "topk", K), (0, "tp", 1), (1, "tp", 0),
    (0, "tp_ar", 1),  # block A's MLP: one all-reduce over tp each way
    (1, "shared", H * E + H * C + C),  # the router and the head, whole on every tp/ep rank: 586
]
train = pairs(f"{out}/model.txt", "train")[0]
def mismatches(table):
    bad = [f"layer {r} {k}={layers[r].get(k)}, expected {v}" for r, k, v in table if float(layers[r].get(k, "nan")) != v]
    for r in range(2):
        for k in ("fwd", "bwd"):
            if not float(layers[r][k]) > 0:
                bad.append(f"layer {r} {k}={layers[r][k]}, expected > 0")
    # Block A's input projection (a third of its flops) runs whole on every tp rank: a share
    # strictly between 0 and 1 of its time; block B has none.
    if not 0 < float(layers[0].get("tp_rep", "nan")) < 1 or "tp_rep" in layers[1]:
        bad.append(f"tp_rep {layers[0].get('tp_rep')} / {layers[1].get('tp_rep')}: expected 0 < block A's < 1, none on B")
    # train.c sums the gradients over dp in float64, then gives ZeRO float32 ones.
    if train.get("grad_allreduce_bytes") != "8" or train.get("grad_bytes") != "4":
        bad.append(f"train line {train}: expected grad_allreduce_bytes=8 and grad_bytes=4")
    if cluster.get("ranks_per_host") != "2" or not float(cluster["intra_lat"]) > 0 or not float(cluster["intra_bw"]) > 0:
        bad.append(f"cluster line {cluster}: expected ranks_per_host=2 and a positive intra_lat and intra_bw")
    for key in ("intra_allreduce", "intra_alltoall"):  # 2 ranks per host: one group size, 2
        sizes = cluster.get(key, "").split(":")
        if len(sizes) != 2 or sizes[0] != "2" or not float(sizes[1]) >= 0:
            bad.append(f"cluster {key}={cluster.get(key)}: expected 2:SECONDS (the busy probe's group of 2)")
    lay = json.load(open(f"{out}/plan.json"))["layouts"][0]
    if not (lay["dp"] == 2 and lay["fits"] and lay["step_seconds"] > 0):
        bad.append(f"weft-plan's layout {lay}: expected dp 2, fits, a positive step")
    return bad
bad = mismatches(expected)
if mode == "--inject":
    caught = 0
    for i, (r, k, v) in enumerate(expected):
        wrong = expected[:i] + [(r, k, v + 1)] + expected[i + 1:]
        caught += len(mismatches(wrong)) > len(bad)
    print(f"injection: {caught} of {len(expected)} altered expectations caught")
    sys.exit(0 if caught == len(expected) and not bad else 1)
for b in bad:
    print("FAILED:", b)
print("plan files: OK" if not bad else f"plan files: {len(bad)} mismatch(es)")
sys.exit(1 if bad else 0)
EOF
