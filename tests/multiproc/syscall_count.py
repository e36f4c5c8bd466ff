#!/usr/bin/python3
"""Counts the system calls between the two getppid() markers of weft_mp_syscall_loop in
`strace -f -ttt` output files (one per rank) and prints, for the worst rank, one line:

    <other per call> <waits per call> <liveness checks over their allowance> <detail>

Waiting calls (backing off while peers catch up) are reported, not budgeted. weft's liveness
check (kill(pid, 0) to each same-host peer, at most every 100 ms) is budgeted by time: a rank
may make (elapsed / 100 ms + 1) * (ranks - 1) of them, and only the excess counts as "other".
Exit status 3 when a file lacks its two markers (the run did not reach or leave the loop).
"""
import re
import sys

WAITS = {"sched_yield", "nanosleep", "clock_nanosleep", "futex", "poll", "ppoll", "epoll_wait",
         "epoll_pwait", "select", "pselect6"}
LIVENESS_PERIOD_S = 0.1
# "PID SECONDS.MICROS name(" starts a call; "<... name resumed>" lines are a call's second half.
CALL = re.compile(r"^\d+\s+(\d+\.\d+)\s+([a-z_0-9]+)\(")


def count(path, iters, ranks):
    marks, t0, t1 = 0, None, None
    calls = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = CALL.match(line)
            if not m:
                continue
            name = m.group(2)
            if name == "getppid":
                marks += 1
                if marks == 1:
                    t0 = float(m.group(1))
                elif marks == 2:
                    t1 = float(m.group(1))
                continue
            if marks == 1:
                calls[name] = calls.get(name, 0) + 1
    if marks != 2:
        print(f"{path}: {marks} getppid markers, expected 2", file=sys.stderr)
        sys.exit(3)
    waits = sum(n for k, n in calls.items() if k in WAITS)
    allowed_kill = (int((t1 - t0) / LIVENESS_PERIOD_S) + 1) * (ranks - 1)
    excess_kill = max(0, calls.get("kill", 0) - allowed_kill)
    other = {k: n for k, n in calls.items() if k not in WAITS and k != "kill"}
    if excess_kill:
        other["kill(over allowance)"] = excess_kill
    return sum(other.values()) / iters, waits / iters, other


def main():
    iters, ranks, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    if len(files) != ranks:
        print(f"{len(files)} trace files for {ranks} ranks: {files}", file=sys.stderr)
        sys.exit(3)
    worst = (0.0, 0.0, {})
    worst_wait = 0.0
    for path in files:
        other, waits, detail = count(path, iters, ranks)
        worst_wait = max(worst_wait, waits)
        if other >= worst[0]:
            worst = (other, waits, detail)
    detail = ",".join(f"{k}={n}" for k, n in sorted(worst[2].items())) or "-"
    print(f"{worst[0]:.4f} {worst_wait:.2f} {detail}")


if __name__ == "__main__":
    main()
