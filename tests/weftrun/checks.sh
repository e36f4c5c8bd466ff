#!/usr/bin/env bash
# weftrun's behaviour, one case per ctest test:  checks.sh WEFTRUN CASE [STORE_PROBE]
# Each case runs the built launcher on small /bin/sh programs and fails (exit 1, with the
# captured output) on the first expectation that does not hold.
set -u

WEFTRUN=$1
CASE=$2
PROBE=${3:-}
T=$(mktemp -d "${TMPDIR:-/tmp}/weftrun-test.XXXXXX")
trap 'rm -rf "$T"' EXIT

fail() {
  echo "FAIL [$CASE]: $*"
  echo "--- stdout"; cat "$T/out" 2>/dev/null
  echo "--- stderr"; cat "$T/err" 2>/dev/null
  exit 1
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# start ARGS...: starts weftrun in the background (PID), output in $T/out and $T/err, with a
# watchdog: a weftrun that hangs (say, never kills its ranks) fails the case in 12 s rather
# than at ctest's timeout.  finish: waits for it; sets RC and MS (elapsed milliseconds).
start() {
  T0=$(now_ms)
  rm -f "$T/hung"
  "$WEFTRUN" "$@" >"$T/out" 2>"$T/err" &
  PID=$!
  (
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    sleep 12 & s=$!
    wait "$s"
    kill -KILL "$PID" 2>/dev/null && : >"$T/hung"
  ) </dev/null >/dev/null 2>&1 &
  DOG=$!
}
finish() {
  wait "$PID"
  RC=$?
  MS=$(( $(now_ms) - T0 ))
  kill "$DOG" 2>/dev/null
  wait "$DOG" 2>/dev/null
  [ ! -e "$T/hung" ] || fail "weftrun was still running after 12 s"
}
run() { start "$@"; finish; }

expect_rc() { [ "$RC" -eq "$1" ] || fail "exit status $RC, expected $1"; }
expect_within() { [ "$MS" -le "$1" ] || fail "took $MS ms, expected at most $1 ms"; }
expect_at_least() { [ "$MS" -ge "$1" ] || fail "took $MS ms, expected at least $1 ms"; }
# has FILE REGEX: some whole line of FILE (out/err) matches the extended regex.
has() { grep -qxE -- "$2" "$T/$1" || fail "no line matching '$2' in std$1"; }
lacks() { ! grep -qE -- "$2" "$T/$1" || fail "unexpected line matching '$2' in std$1"; }
count() { grep -cxE -- "$2" "$T/$1"; }

# A process is gone when it does not exist or is a zombie (its parent, maybe an init that
# never reaps, has not collected it yet): either way it no longer runs.
gone() { [ ! -e "/proc/$1" ] || grep -q '^[^)]*) Z' "/proc/$1/stat" 2>/dev/null; }

case_env() {
  # Variables left in the user's shell must not leak into the job's definition.
  RANK=99 WEFT_RANK=98 MASTER_PORT=1 WEFT_JOB_SECRET=stale run -n 3 -- /bin/sh -c '
    echo "W $WEFT_RANK $WEFT_WORLD_SIZE $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE"
    echo "P $WEFT_MASTER_ADDR $WEFT_MASTER_PORT $MASTER_ADDR $MASTER_PORT $WEFT_STORE_HOSTED $WEFT_JOB_SECRET"'
  expect_rc 0
  [ "$(wc -l <"$T/out")" -eq 6 ] || fail "expected 6 lines of output"
  for r in 0 1 2; do has out "\[$r\] W $r 3 $r 3 $r 3 $r 3"; done
  # The store address and secret are the same for every rank.
  [ "$(grep '^\[[0-9]\] P ' "$T/out" | cut -d' ' -f2- | sort -u | wc -l)" -eq 1 ] ||
    fail "ranks disagree on the store address or secret"
  local p
  p=$(grep -m1 '^\[0\] P ' "$T/out")
  read -r _ _ addr wport maddr mport hosted secret <<<"$p"
  [ "$addr" = 127.0.0.1 ] && [ "$maddr" = 127.0.0.1 ] || fail "master address is not 127.0.0.1"
  for port in "$wport" "$mport"; do
    [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || fail "bad port '$port'"
  done
  [ "$mport" != 1 ] || fail "MASTER_PORT leaked from the user's environment"
  [ "$hosted" = 1 ] || fail "WEFT_STORE_HOSTED is '$hosted'"
  [ "${#secret}" -ge 16 ] && [ "$secret" != stale ] || fail "weak or inherited secret '$secret'"
}

case_prefix() {
  run -n 2 -- /bin/sh -c '
    echo "out $WEFT_RANK a"; echo "err $WEFT_RANK" >&2; echo "out $WEFT_RANK b"; printf "tail $WEFT_RANK"'
  expect_rc 0
  for r in 0 1; do
    has out "\[$r\] out $r a"; has out "\[$r\] out $r b"; has out "\[$r\] tail $r"
    has err "\[$r\] err $r"
    # A rank's own lines keep their order.
    [ "$(grep "^\[$r\] out $r" "$T/out" | cut -d' ' -f4 | tr -d '\n')" = ab ] ||
      fail "rank $r's lines out of order"
  done
  [ "$(wc -l <"$T/out")" -eq 6 ] || fail "expected 6 stdout lines"
  [ "$(wc -l <"$T/err")" -eq 2 ] || fail "expected 2 stderr lines"
  lacks out 'err'
  lacks err 'out'
  # Options after the program are the program's, even ones named like weftrun's.
  run -n 1 /bin/sh -c 'echo "args: $*"' sh -n 5 --timeout 1
  expect_rc 0
  has out '\[0\] args: -n 5 --timeout 1'
}

case_no_prefix() {
  run -n 2 --no-prefix -- /bin/sh -c 'echo "plain $WEFT_RANK"; echo "oops $WEFT_RANK" >&2'
  expect_rc 0
  has out 'plain 0'; has out 'plain 1'; has err 'oops 0'; has err 'oops 1'
  lacks out '\['; lacks err '\['
}

case_big_output() {
  # 4 ranks x 30000 lines on both streams at once: nothing lost, nothing torn.
  run -n 4 -- /bin/sh -c 'seq 30000; seq 30000 >&2'
  expect_rc 0
  for r in 0 1 2 3; do
    [ "$(count out "\[$r\] [0-9]+")" -eq 30000 ] || fail "rank $r: wrong stdout line count"
    [ "$(count err "\[$r\] [0-9]+")" -eq 30000 ] || fail "rank $r: wrong stderr line count"
  done
  [ "$(wc -l <"$T/out")" -eq 120000 ] || fail "stray stdout lines"
}

case_dying_output() {
  # Rank 1 writes a lot, then a partial line, then dies by SIGKILL: all of it must appear.
  run -n 2 -- /bin/sh -c '
    if [ "$WEFT_RANK" = 1 ]; then seq 5000; printf "last words"; kill -9 $$; fi
    exec sleep 60'
  expect_rc 137
  [ "$(count out '\[1\] [0-9]+')" -eq 5000 ] || fail "lost lines of the dead rank"
  has out '\[1\] last words'
  has err 'weftrun: rank 1 \(pid [0-9]+\) killed by signal 9.*'
  # Its last words come before the report of its death (stdout and stderr into one file).
  "$WEFTRUN" -n 1 -- /bin/sh -c 'printf "last words"; kill -9 $$' >"$T/both" 2>&1
  [ "$(grep -nE '^\[0\] last words$|^weftrun: rank 0 ' "$T/both" | cut -d: -f2- | head -c 14)" = \
    "[0] last words" ] || { cat "$T/both"; fail "death reported before the rank's output"; }
}

case_first_failure() {
  run -n 4 -- /bin/sh -c '[ "$WEFT_RANK" = 2 ] && exit 3; exec sleep 60'
  expect_rc 3
  expect_within 5000
  has err 'weftrun: rank 2 \(pid [0-9]+\) exited with status 3'
  # Rank 0 fails later (with 5, on the SIGTERM that rank 1's failure caused): the first
  # failure, rank 1's 4, is the answer.
  run -n 2 -- /bin/sh -c '
    if [ "$WEFT_RANK" = 1 ]; then while [ ! -e "$0.ready" ]; do sleep 0.02; done; exit 4; fi
    trap "exit 5" TERM; sleep 60 & : >"$0.ready"; wait' "$T/r"
  expect_rc 4
  expect_within 5000
  has err 'weftrun: rank 1 \(pid [0-9]+\) exited with status 4'
  lacks err 'status 5'
}

case_sigkill() {
  # Rank 1 dies by SIGKILL; the others (and every rank's child sleep) must be killed.
  # Each pid file appears whole or not at all (written aside, then renamed): weftrun may stop a
  # rank between the shell creating a file and writing its pid, which left an empty file.
  run -n 3 -- /bin/sh -c '
    echo $$ >"$0.tmp.pid.$WEFT_RANK"; mv "$0.tmp.pid.$WEFT_RANK" "$0.pid.$WEFT_RANK"
    sleep 60 & echo $! >"$0.tmp.child.$WEFT_RANK"; mv "$0.tmp.child.$WEFT_RANK" "$0.child.$WEFT_RANK"
    [ "$WEFT_RANK" = 1 ] && kill -9 $$
    wait' "$T/p"
  expect_rc 137
  expect_within 5000
  has err 'weftrun: rank 1 \(pid [0-9]+\) killed by signal 9.*'
  [ -e "$T/p.child.1" ] || fail "rank 1 did not record its child"
  sleep 0.2  # let init reap what weftrun's SIGKILL left behind
  local f
  for f in "$T"/p.pid.* "$T"/p.child.*; do
    gone "$(cat "$f")" || fail "process $(cat "$f") (${f##*/}) outlived weftrun"
  done
}

case_escalation() {
  # Rank 1 ignores SIGTERM: weftrun must SIGKILL it after the grace period (3 s).
  run -n 2 -- /bin/sh -c '
    if [ "$WEFT_RANK" = 0 ]; then while [ ! -e "$0.ready" ]; do sleep 0.02; done; exit 1; fi
    trap "" TERM; : >"$0.ready"; exec sleep 60' "$T/r"
  expect_rc 1
  expect_at_least 2500
  expect_within 7000
  has err 'weftrun: rank 1 \(pid [0-9]+\) still running; sending SIGKILL'
}

case_timeout() {
  run --timeout 1 -n 3 -- /bin/sh -c '[ "$WEFT_RANK" = 1 ] && exit 0; exec sleep 60'
  expect_rc 124
  expect_at_least 900
  expect_within 4000
  has err 'weftrun: timed out after 1 s; ranks still running: 0 \(pid [0-9]+\), 2 \(pid [0-9]+\)'
}

case_not_found() {
  run -n 2 -- /nonexistent/weft-no-such-program
  expect_rc 127
  has err "weftrun: cannot run '/nonexistent/weft-no-such-program' .*No such file or directory"
  run -n 2 weft-no-such-program-in-path
  expect_rc 127
  printf 'echo hi\n' >"$T/noexec"; chmod 644 "$T/noexec"
  run -n 1 "$T/noexec"
  expect_rc 126
}

case_usage() {
  local args
  while IFS= read -r args; do
    # shellcheck disable=SC2086  # word splitting of the argument list is the point
    run $args
    [ "$RC" -eq 2 ] || fail "'weftrun $args' exited $RC, expected 2"
    has err 'usage: weftrun -n N .*'
    [ ! -s "$T/out" ] || fail "'weftrun $args' wrote to stdout"
  done <<'EOF2'

true
-n
-n 2
-n 2 --
-n 0 true
-n -1 true
-n 1025 true
-n abc true
-n 2x true
--bogus -n 2 true
-n 2 --timeout 0 true
-n 2 --timeout abc true
EOF2
  run --help
  expect_rc 0
  has out 'usage: weftrun -n N .*'
  run -n1 --timeout=5 -- true
  expect_rc 0
  run --nproc=1024 --timeout 10 true
  expect_rc 0
}

case_forward_signals() {
  local sig r
  for sig in TERM INT; do
    rm -f "$T"/ready.*
    start -n 2 -- /bin/sh -c '
      trap "echo got-$1; exit 0" "$1"
      sleep 60 >/dev/null 2>&1 & : >"$0.$WEFT_RANK"; wait' "$T/ready" "$sig"
    for _ in $(seq 200); do [ -e "$T/ready.0" ] && [ -e "$T/ready.1" ] && break; sleep 0.02; done
    kill -s "$sig" "$PID"
    finish
    expect_rc $(( 128 + $(kill -l "$sig") ))
    expect_within 5000
    for r in 0 1; do has out "\[$r\] got-$sig"; done
  done
}

case_store() {
  [ -x "$PROBE" ] || fail "store probe '$PROBE' not built"
  run -n 4 -- "$PROBE"
  expect_rc 0
  expect_within 15000
  for r in 0 1 2 3; do has out "\[$r\] store_probe: rank $r saw all 4 keys"; done
}

declare -F "case_$CASE" >/dev/null || { echo "unknown case '$CASE'"; exit 2; }
"case_$CASE"
echo "ok [$CASE] (${MS:-?} ms last run)"
