#!/usr/bin/env bash
# The demo's ctest: a short run on 8 ranks (DP 2 x PP 2 x EP/TP 2, ZeRO-1, 1F1B, the tuner's m)
# compared with the same training in one process.
#   check.sh WEFTRUN MOE_DIGITS OUTDIR            the curves must agree (<= 1e-4 relative), loss falls
#   check.sh WEFTRUN MOE_DIGITS OUTDIR --inject   WEFT_TEST_INJECT=1 perturbs one gradient once:
#                                                 passes only if the comparison FAILED
set -uo pipefail
weftrun=$1 demo=$2 out=$3 mode=${4:-}
data=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
[ -r "$data" ] || { echo "SKIP: $data missing (apt-get install python3-sklearn)"; exit 77; }
rm -rf "$out" && mkdir -p "$out"
short=(--steps 12 --batch 64 --eval-every 4 --trace-step 1)
"$weftrun" -n 1 --timeout 60 "$demo" --ranks 1 "${short[@]}" --out "$out/ref" >"$out/ref.log" 2>&1 || {
  cat "$out/ref.log"; echo "FAILED: the --ranks 1 run"; exit 1; }
if [ "$mode" = "--inject" ]; then
  WEFT_TEST_INJECT=1 "$weftrun" -n 8 --timeout 90 "$demo" "${short[@]}" --out "$out/run" \
    --reference "$out/ref/loss.csv" >"$out/run.log" 2>&1
  rc=$?
  cat "$out/run.log"
  if [ $rc -ne 0 ] && grep -q "equivalence with --ranks 1: .*FAILED" "$out/run.log"; then
    echo "injection caught: the perturbed gradient broke the equivalence check, as it must"
    exit 0
  fi
  echo "FAILED: a perturbed gradient went unnoticed (rc $rc)"
  exit 1
fi
"$weftrun" -n 8 --timeout 90 "$demo" "${short[@]}" --out "$out/run" --reference "$out/ref/loss.csv"
