"""Pipeline schedules through the binding, one process (weft/pipeline.h): every generator, the
action lists against rules and hand-written tables, validation errors, torch's CSV both ways,
save/load, the simulator against closed forms, the tuner and argument errors.

Expected values come from pipeline.h's rules and hand-written tables, never from the library.
WEFT_TEST_INJECT=1 corrupts one value before each exact comparison (expect()), which must then
fail: the test passes only if every corruption was caught.
"""

import json

import pytest

import weft
from weft import _lib
from weft import Action, ActionKind as K, ScheduleKind

from _helpers import inject_enabled

# A library built before pipeline.h (test_local.py's test_every_function_declared fails for it).
pytestmark = pytest.mark.skipif(not _lib.has("weft_pipeline_run"), reason="the loaded libweft lacks pipeline.h")

P, M = 4, 8
COMPUTE = (K.F, K.B, K.I, K.W)


def expect(what, got, want):
    """got == want; under WEFT_TEST_INJECT=1 a corrupted copy of got must compare unequal."""
    if inject_enabled():
        bad = _corrupt(got)
        assert bad != want, "%s: the injected corruption was not caught" % what
        print("INJECT %s: corruption caught" % what)
        return
    assert got == want, "%s: got %r, expected %r" % (what, got, want)


def _corrupt(v):
    if isinstance(v, (set, frozenset)):
        return set(v) | {"corrupted"}
    if isinstance(v, (list, tuple)) and v:
        out = list(v)
        out[len(out) // 2] = _corrupt(out[len(out) // 2])
        return type(v)(out) if not hasattr(v, "_fields") else type(v)(*out)
    if isinstance(v, Action):
        return Action(v.kind, v.stage, v.microbatch + 1)
    if isinstance(v, str):
        return v[:-1] + ("X" if not v.endswith("X") else "Y") if v else "X"
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v + 1
    if v is None:
        return 0
    raise TypeError("cannot corrupt %r" % (v,))


def compute_only(actions):
    return [a for a in actions if a.kind in COMPUTE]


def gen(kind, p=P, m=M, v=0, reduce_grad=False):
    return weft.Schedule.generate(kind, p, m, stages_per_rank=v, reduce_grad=reduce_grad)


V_OF = {ScheduleKind.ZB_V: 2, ScheduleKind.DUALPIPE_V: 2}


def expected_stage_rank(kind, p, v):
    """Placement from pipeline.h: a loop (stage s on rank s mod p) or a V (r holds r and 2p-1-r)."""
    if kind in (ScheduleKind.ZB_V, ScheduleKind.DUALPIPE_V):
        return [s if s < p else 2 * p - 1 - s for s in range(2 * p)]
    return [s % p for s in range(p * v)]


# ------------------------------------------------------------------ generators


@pytest.mark.parametrize("kind", weft.GENERATORS, ids=lambda k: k.name.lower())
def test_generate_every_kind(kind):
    v = V_OF.get(kind, 2 if kind == ScheduleKind.INTERLEAVED_1F1B else 1)
    with gen(kind, v=v if kind == ScheduleKind.INTERLEAVED_1F1B else 0) as s:
        expect("%s info" % kind.name, tuple(s.info), (kind, P, P * v, M, v))
        s.validate()
        placement = [s.stage_rank(st) for st in range(s.stages)]
        expect("%s placement" % kind.name, placement, expected_stage_rank(kind, P, v))
        # Completeness and placement, checked here independently of the validator.
        seen = {}
        for r in range(P):
            for a in s.actions(r):
                if a.kind in COMPUTE:
                    assert placement[a.stage] == r, (kind, r, str(a))
                    seen.setdefault((a.stage, a.microbatch), []).append(a.kind)
        split = kind in (ScheduleKind.ZB_H1, ScheduleKind.ZB_H2, ScheduleKind.ZB_V, ScheduleKind.DUALPIPE_V)
        for st in range(s.stages):
            for i in range(M):
                kinds = sorted(seen.get((st, i), []))
                if split and kind == ScheduleKind.DUALPIPE_V:  # B or I+W: both are allowed
                    assert kinds in ([K.F, K.B], [K.F, K.I, K.W]), (kind, st, i, kinds)
                else:
                    expect("%s (%d, %d)" % (kind.name, st, i), kinds, [K.F, K.I, K.W] if split else [K.F, K.B])


def test_one_f_one_b_order_by_hand():
    # pipeline.h: rank r runs min(p-1-r, m) forwards, then F and B in turn, then the rest.
    def by_rule(r, p, m):
        warm = min(p - 1 - r, m)
        out = ["%dF%d" % (r, i) for i in range(warm)]
        f, b = warm, 0
        while f < m:
            out += ["%dF%d" % (r, f), "%dB%d" % (r, b)]
            f, b = f + 1, b + 1
        out += ["%dB%d" % (r, i) for i in range(b, m)]
        return out
    with gen("1f1b", 4, 6) as s:
        for r in range(4):
            expect("1f1b rank %d" % r, [str(a) for a in compute_only(s.actions(r))], by_rule(r, 4, 6))
    with gen("1f1b", 4, 2) as s:  # m < p
        expect("1f1b m<p rank 0", [str(a) for a in compute_only(s.actions(0))], ["0F0", "0F1", "0B0", "0B1"])


def test_gpipe_forwards_then_backwards():
    with gen("gpipe") as s:
        for r in range(P):
            kinds = [a.kind for a in compute_only(s.actions(r))]
            expect("gpipe rank %d" % r, kinds, [K.F] * M + [K.B] * M)


def test_transfers_pair_up():
    # Every SEND_F(s, i) on s's rank has a RECV_F(s+1, i) on s+1's rank (and SEND_B likewise).
    for kind in weft.GENERATORS:
        with gen(kind, v=2 if kind == ScheduleKind.INTERLEAVED_1F1B else 0) as s:
            place = [s.stage_rank(st) for st in range(s.stages)]
            sends, recvs = set(), set()
            for r in range(P):
                for a in s.actions(r):
                    if a.kind == K.SEND_F:
                        sends.add((place[a.stage + 1], a.stage + 1, a.microbatch, "F"))
                    elif a.kind == K.SEND_B:
                        sends.add((place[a.stage - 1], a.stage - 1, a.microbatch, "B"))
                    elif a.kind == K.RECV_F:
                        recvs.add((r, a.stage, a.microbatch, "F"))
                    elif a.kind == K.RECV_B:
                        recvs.add((r, a.stage, a.microbatch, "B"))
            expect("%s transfers" % kind.name, sorted(sends), sorted(recvs))
            assert all(place[st] != place[st - 1] for (_, st, _, d) in recvs if d == "F")


def test_reduce_grad_after_last_backward_piece():
    with gen("zbh1", reduce_grad=True) as s:
        for r in range(P):
            acts = s.actions(r)
            red = [i for i, a in enumerate(acts) if a.kind == K.REDUCE_GRAD]
            expect("rank %d REDUCE_GRAD count" % r, len(red), 1)
            last_bwd = max(i for i, a in enumerate(acts) if a.kind in (K.B, K.I, K.W))
            expect("rank %d REDUCE_GRAD place" % r, red[0], last_bwd + 1)
            assert str(acts[red[0]]) == "%dREDUCE_GRAD" % r


def test_generator_rules_refused():
    with pytest.raises(weft.InvalidArgument):
        gen("gpipe", p=0)
    with pytest.raises(weft.InvalidArgument):
        gen("1f1b", m=0)
    with pytest.raises(weft.InvalidArgument, match="(?i)multiple|interleav|round"):
        gen("interleaved", p=4, m=6, v=2)  # m neither a multiple of p nor <= p
    with pytest.raises(weft.InvalidArgument):
        gen("dualpipev", p=4, m=7)  # m >= 2p
    with pytest.raises(weft.InvalidArgument):
        gen("gpipe", v=2)  # only interleaved takes another v
    with pytest.raises(weft.InvalidArgument, match="nosuch"):
        weft.Schedule.generate("nosuch", 2, 2)


# ------------------------------------------------------------------ actions and custom schedules


def test_action_strings():
    for text, want in (("0F0", (K.F, 0, 0)), ("12SEND_F3", (K.SEND_F, 12, 3)), ("2I31", (K.I, 2, 31)),
                       ("1RECV_B0", (K.RECV_B, 1, 0)), ("3REDUCE_GRAD", (K.REDUCE_GRAD, 3, -1))):
        a = Action.parse(text)
        expect("parse %s" % text, tuple(a), want)
        expect("str %s" % text, str(a), text)
    for bad in ("F0", "0F", "0X1", "0REDUCE_GRAD1", "", "a0F0"):
        with pytest.raises(weft.InvalidArgument):
            Action.parse(bad)


def _lists_1f1b_p2_m2():
    return [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]]


def test_from_actions_inserts_transfers():
    # pipeline.h: a RECV right before the compute that needs it, a SEND right after the compute.
    with weft.Schedule.from_actions(_lists_1f1b_p2_m2()) as s:
        expect("custom info", tuple(s.info), (ScheduleKind.CUSTOM, 2, 2, 2, 1))
        s.validate()
        expect("rank 0", [str(a) for a in s.actions(0)],
               ["0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"])
        expect("rank 1", [str(a) for a in s.actions(1)],
               ["1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"])


def test_from_actions_takes_tuples_and_actions():
    lists = [[Action(K.F, 0, 0), (K.B, 0, 0)], [(int(K.F), 1, 0), ("B", 1, 0)]]
    with weft.Schedule.from_actions(lists) as s:
        s.validate()
        expect("stage ranks", [s.stage_rank(0), s.stage_rank(1)], [0, 1])


def test_validate_names_the_rule():
    # Micro-batch 1's backward is missing on rank 1.
    with weft.Schedule.from_actions([["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1"]]) as s:
        with pytest.raises(weft.InvalidArgument) as e:
            s.validate()
        assert "rank 1" in str(e.value), str(e.value)
        assert not s.is_valid()


def test_validate_finds_a_deadlock():
    # Rank 0 waits for 0RECV_B0 before sending 0SEND_F0, which rank 1's 1RECV_F0 waits for.
    lists = [["0F0", "0F1", "0RECV_B0", "0B0", "0SEND_F0", "0SEND_F1", "0RECV_B1", "0B1"],
             ["1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"]]
    with weft.Schedule.from_actions(lists) as s:
        with pytest.raises(weft.InvalidArgument) as e:
            s.validate()
        msg = str(e.value)
        assert "0RECV_B0" in msg and "1RECV_F0" in msg, msg


def test_from_actions_refused():
    with pytest.raises(weft.InvalidArgument):
        weft.Schedule.from_actions([])
    with pytest.raises(weft.InvalidArgument):
        weft.Schedule.from_actions([[(K.F, -1, 0)]])  # a negative stage
    with pytest.raises(weft.InvalidArgument):
        weft.Schedule.from_actions([["0B0"], ["1B0"]])  # no F at all
    with pytest.raises(weft.InvalidArgument):
        weft.Schedule.from_actions([["0F0", "nonsense"]])


# ------------------------------------------------------------------ CSV and files


def test_csv_hand_written_text():
    with weft.Schedule.from_actions(_lists_1f1b_p2_m2()) as s:
        expect("compute-only CSV", s.to_csv(compute_only=True), "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n")
        expect("full CSV row 1", s.to_csv().split("\r\n")[1],
               "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1")


def test_csv_torch_file():
    # As torch writes and reads them: "\n" rows, empty cells and "None" for idle steps.
    text = "0F0,0F1,,0B0,None,0B1\n1F0,1B0,1F1,1B1,,\n"
    with weft.Schedule.from_csv(text) as s:
        s.validate()
        expect("torch CSV rank 0", [str(a) for a in compute_only(s.actions(0))], ["0F0", "0F1", "0B0", "0B1"])
        expect("torch CSV rank 1", [str(a) for a in compute_only(s.actions(1))], ["1F0", "1B0", "1F1", "1B1"])
    comms = "0F0,0SEND_F0,0RECV_B0,0B0\r\n1RECV_F0,1F0,1B0,1SEND_B0\r\n"
    with weft.Schedule.from_csv(comms.encode()) as s:
        s.validate()
        expect("compute_comms kept as written", s.to_csv(), comms)


def test_csv_errors_name_the_cell():
    with pytest.raises(weft.InvalidArgument, match="0X1"):
        weft.Schedule.from_csv("0F0,0X1\n")


@pytest.mark.parametrize("kind", weft.GENERATORS, ids=lambda k: k.name.lower())
def test_csv_round_trip(kind):
    with gen(kind, v=2 if kind == ScheduleKind.INTERLEAVED_1F1B else 0) as s:
        want = s.all_actions()
        with weft.Schedule.from_csv(s.to_csv()) as back:
            expect("%s CSV round trip" % kind.name, back.all_actions(), want)
        with weft.Schedule.from_csv(s.to_csv(compute_only=True)) as back:
            back.validate()
            # pipeline.h: compute-only lists get their transfers "as weft_schedule_generate does".
            expect("%s compute-only round trip" % kind.name, back.all_actions(), want)


def test_save_load(tmp_path):
    with gen("zbv", reduce_grad=True) as s:
        path = tmp_path / "zbv.weft"
        s.save(path)
        with weft.Schedule.load(str(path)) as back:
            expect("loaded info", tuple(back.info), tuple(s.info))
            expect("loaded actions", back.all_actions(), s.all_actions())
    (tmp_path / "junk.weft").write_bytes(b"not a schedule at all")
    with pytest.raises(weft.WeftError):
        weft.Schedule.load(tmp_path / "junk.weft")
    with pytest.raises(weft.WeftError):
        weft.Schedule.load(tmp_path / "missing.weft")


# ------------------------------------------------------------------ simulation


@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
def test_simulate_closed_form(kind):
    # Uniform f and b, free messages: both take (m + p - 1)(f + b); each rank is busy m(f + b).
    f, b = 1.0, 2.0
    with gen(kind) as s, s.simulate(forward=f, backward=b) as t:
        expect("%s makespan" % kind, t.makespan, (M + P - 1) * (f + b))
        expect("%s bubble" % kind, round(t.bubble_fraction, 12), round((P - 1) / (M + P - 1), 12))
        for r in range(P):
            starts, ends, stats = t.rank(r)
            assert len(starts) == len(ends) == len(s.actions(r))
            assert (ends >= starts).all()
            expect("rank %d busy" % r, stats.busy, M * (f + b))
            expect("rank %d idle" % r, stats.idle, (P - 1) * (f + b))
    # Per-stage lists work as numbers do; a wrong length is refused before the call.
    with gen(kind) as s, s.simulate(forward=[f] * P, backward_input=[b / 2] * P, backward_weight=[b / 2] * P) as t:
        expect("%s makespan from I+W" % kind, t.makespan, (M + P - 1) * (f + b))
        with pytest.raises(weft.InvalidArgument):
            s.simulate(forward=[f] * (P + 1), backward=b)
        with pytest.raises(weft.InvalidArgument):
            s.simulate(forward=None, backward=b)


def test_simulate_peak_activations():
    # GPipe holds all m micro-batches at its peak; 1F1B holds p - r on rank r (min with m).
    with gen("gpipe") as s, s.simulate(forward=1.0, backward=2.0, activation_bytes=10.0) as t:
        expect("gpipe peaks", [t.rank(r)[2].peak_activations for r in range(P)], [M] * P)
        expect("gpipe peak bytes", t.rank(0)[2].peak_activation_bytes, 10.0 * M)
    with gen("1f1b") as s, s.simulate(forward=1.0, backward=2.0) as t:
        expect("1f1b peaks", [t.rank(r)[2].peak_activations for r in range(P)], [P - r for r in range(P)])


def test_simulate_invalid_schedule_refused():
    with weft.Schedule.from_actions([["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1"]]) as s:
        with pytest.raises(weft.InvalidArgument):
            s.simulate(forward=1.0, backward=1.0)


def test_timeline_files(tmp_path):
    with gen("zbh1") as s, s.simulate(forward=1.0, backward=2.0) as t:
        t.write_svg(tmp_path / "t.svg")
        t.write_chrome_trace(tmp_path / "t.json")
    svg = (tmp_path / "t.svg").read_text()
    assert "<svg" in svg and "</svg>" in svg
    trace = json.loads((tmp_path / "t.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert len(events) >= P * M * 3  # at least one event per F, I and W of every (stage, microbatch)


# ------------------------------------------------------------------ tuning


def test_tune():
    layers, batch = 8, 16
    fwd, bwd = [1.0] * layers, [2.0] * layers
    res = weft.tune(P, fwd, bwd, batch)
    assert res.candidates and res.best is not None
    expect("best is first", res.best, res.candidates[0])
    times = [c.step_time for c in res.candidates]
    assert times == sorted(times)
    kinds = {c.kind for c in res.candidates}
    assert {ScheduleKind.GPIPE, ScheduleKind.ONE_F_ONE_B, ScheduleKind.ZB_H1} <= kinds
    for c in res.candidates:
        assert batch % c.microbatches == 0 and c.microbatch_size * c.microbatches == batch
        if c.kind == ScheduleKind.GPIPE:
            # (m + p - 1)(f + b) with a stage's f = (L / p) layers * microbatch size.
            per = (layers // P) * c.microbatch_size
            expect("gpipe m=%d step" % c.microbatches, c.step_time, (c.microbatches + P - 1) * per * 3.0)
    only = weft.tune(P, fwd, bwd, batch, kinds=["gpipe"])
    expect("kinds filter", {c.kind for c in only.candidates}, {ScheduleKind.GPIPE})
    capped = weft.tune(P, fwd, bwd, batch, activation_bytes_per_sample=1.0, memory_cap=1e-3)
    expect("nothing fits", capped.best, None)
    assert not any(c.fits for c in capped.candidates)
    with pytest.raises(weft.InvalidArgument):
        weft.tune(P, fwd, bwd[:-1], batch)


# ------------------------------------------------------------------ handles


def test_closed_handles_and_bad_ranks():
    s = gen("gpipe")
    with pytest.raises(weft.InvalidArgument):
        s.actions(P)
    with pytest.raises(weft.InvalidArgument):
        s.actions(-1)
    s.close()
    s.close()
    with pytest.raises(weft.InvalidArgument, match="closed"):
        s.actions(0)
    assert "closed" in repr(s)


# ------------------------------------------------------------------ the executor on one rank


def solo():
    return weft.Comm(weft.get_unique_id(), 0, 1, timeout=30, name="solo")


def test_one_rank_pipeline_hands_over_in_memory():
    # p = 1, S = 3: every boundary stays on the rank; stage s adds s + 1 to its input, and the
    # backward passes the gradient on times (s + 2). Boundaries given as template arrays.
    import numpy as np
    seen = []

    def forward(kind, s, i, inp, out):
        assert kind == K.F and (inp is None) == (s == 0) and (out is None) == (s == 2)
        x = np.full((2, 3), 10.0 * i) if inp is None else np.array(inp)
        seen.append(("F", s, i, float(x[0, 0])))
        if out is not None:
            out[...] = x + s + 1

    def backward(kind, s, i, inp, out):
        assert kind == K.B and (inp is None) == (s == 2) and (out is None) == (s == 0)
        g = np.ones((2, 3)) if inp is None else np.array(inp)
        seen.append(("B", s, i, float(g[0, 0])))
        if out is not None:
            out[...] = g * (s + 2)

    lists = [["0F0", "1F0", "2F0", "0F1", "1F1", "2F1", "2B0", "1B0", "0B0", "2B1", "1B1", "0B1"]]
    with solo() as comm, weft.Schedule.from_actions(lists) as sched:
        bounds = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
        with weft.Pipeline(comm, sched, forward=forward, backward=backward, boundaries=bounds, record=True) as pipe:
            expect("boundaries", [(tuple(sh), dt) for sh, dt in pipe.boundaries], [((2, 3), weft.FLOAT32)] * 2)
            with pipe.run() as t:
                expect("timeline ranks", t.ranks, 1)
                expect("timeline entries", len(t.rank(0)[0]), len(lists[0]))
    want = []
    for i in range(2):
        want += [("F", 0, i, 10.0 * i), ("F", 1, i, 10.0 * i + 1), ("F", 2, i, 10.0 * i + 3)]
    for i in range(2):
        want += [("B", 2, i, 1.0), ("B", 1, i, 4.0), ("B", 0, i, 12.0)]
    seen_f = [x for x in seen if x[0] == "F"]
    seen_b = [x for x in seen if x[0] == "B"]
    expect("forward values", seen_f, want[:6])
    expect("backward values", seen_b, want[6:])


def test_one_rank_pipeline_callback_errors():
    lists = [["0F0", "1F0", "1B0", "0B0"]]

    def forward(kind, s, i, inp, out):
        if s == 1:
            raise RuntimeError("stage one broke")
        out[...] = 1

    def interrupt(kind, s, i, inp, out):
        raise KeyboardInterrupt()

    # A failed run leaves its communicator unusable (peers may be mid-transfer): one per case.
    kw = dict(backward=lambda *a: None, boundaries=[((4,), "bfloat16")])
    with solo() as comm, weft.Schedule.from_actions(lists) as sched:
        with weft.Pipeline(comm, sched, forward=forward, **kw) as pipe:
            with pytest.raises(weft.WeftError) as e:
                pipe.run()
            assert "RuntimeError: stage one broke" in str(e.value) and "1F0" in str(e.value), str(e.value)
            assert isinstance(e.value.__cause__, RuntimeError)
    with solo() as comm, weft.Schedule.from_actions(lists) as sched:
        with weft.Pipeline(comm, sched, forward=interrupt, **kw) as pipe:
            with pytest.raises(KeyboardInterrupt):
                pipe.run()
    with solo() as comm, weft.Schedule.from_actions(lists) as sched:
        # bfloat16 boundaries arrive as uint16 storage.
        got = []
        with weft.Pipeline(comm, sched, forward=lambda k, s, i, inp, out: got.append((inp if s else out).dtype),
                           **kw) as pipe:
            pipe.run()
        expect("bfloat16 storage", [str(d) for d in got], ["uint16", "uint16"])
        with pytest.raises(weft.WeftError):  # a schedule for 2 ranks on a 1-rank communicator
            with weft.Schedule.generate("1f1b", 2, 2) as two:
                weft.Pipeline(comm, two, forward=forward, backward=lambda *a: None, boundaries=[((4,), "float32")])
