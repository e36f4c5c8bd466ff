"""The planner through the binding, one process (weft/plan.h): predicted step time, compute,
communication, memory and the Amdahl/Gustafson numbers of a one-layer model on 2 ranks against
closed forms written here from plan.h's cost model, measured collectives replacing the latency
term, the search's order and rules, the text file path, the three text formats, and bad input
refused with weft's message.

The reference (plan.h): a dense layer of P parameters, forward f and backward b seconds per
sample, on a replica of n samples in one micro-batch (GPipe, m = 1, pp = 1: no bubble) computes
n (f + b). Pure data parallelism over dp ranks then all-reduces the gradients (P x 2 bytes) in
a ring: 2 (dp - 1) / dp x bytes / bandwidth + 2 (dp - 1) x latency, sending 2 (dp - 1) / dp x
bytes per rank. Tensor parallelism over tp ranks divides the compute by tp and runs 4 ring
all-reduces (2 forward, 2 backward) of output_bytes x samples. Memory: P x (2 + 2 + 12) bytes
(bf16 weights and gradients, Adam) plus the activations of one micro-batch. The library adds the
same few doubles in its own order: a relative tolerance of 1e-9 bounds that rounding (about
1e-15) with a wide margin while a wrong term (>= 1e-3 relative here) fails.

WEFT_TEST_INJECT=1: every check corrupts its value and must then fail; each test passes only
if every corruption was caught (it prints "injection: N cases, N caught"). Run it with
  WEFT_TEST_INJECT=1 WEFT_LIBRARY=build/lib/libweft.so python3 -m pytest -s bindings/python/tests/local/test_plan.py
"""

import dataclasses

import pytest

import weft
from weft import _lib

from _helpers import inject_enabled

pytestmark = pytest.mark.skipif(not _lib.has("weft_plan_create"), reason="the loaded libweft lacks plan.h")

P, F, B, ACT, OUT = 1000.0, 1e-3, 3e-3, 100.0, 64.0   # the layer
BW, LAT, MEM = 1e6, 1e-5, 1e9                          # the link and the memory of a rank
G = 8                                                   # global batch
REL = 1e-9


class Checks:
    """Checks with their injection proof (see the module's docstring)."""

    def __init__(self, what):
        self.what, self.inject, self.injected, self.caught = what, inject_enabled(), 0, 0

    def _outcome(self, ok, describe):
        if self.inject:
            self.injected += 1
            self.caught += 0 if ok else 1
        else:
            assert ok, "%s: %s" % (self.what, describe())

    def close(self, what, got, want, rel=REL):
        got = got + 1.0 + abs(got) if self.inject else got
        ok = abs(got - want) <= rel * abs(want) if want else abs(got) <= 1e-15
        self._outcome(ok, lambda: "%s: got %r, expected %r (relative tolerance %g)" % (what, got, want, rel))

    def equal(self, what, got, want):
        if self.inject:
            got = (not got) if isinstance(got, bool) else (got + 1 if isinstance(got, int) else [got, "corrupted"])
        self._outcome(got == want, lambda: "%s: got %r, expected %r" % (what, got, want))

    def contains(self, what, text, part):
        text = text.replace(part, "") if self.inject else text
        self._outcome(part in text, lambda: "%s: %r does not contain %r" % (what, text, part))

    def finish(self):
        if self.inject:
            print("%s: injection: %d cases, %d caught" % (self.what, self.injected, self.caught))
            assert self.injected > 0 and self.caught == self.injected, \
                "%s: WEFT_TEST_INJECT: %d of %d corruptions passed" % (self.what, self.injected - self.caught,
                                                                       self.injected)


def model():
    return [weft.PlanLayer("fc", params=P, forward_seconds=F, backward_seconds=B, activation_bytes=ACT,
                           output_bytes=OUT)]


def cluster(memory=MEM):
    return weft.PlanCluster(hosts=1, ranks_per_host=2, memory_per_rank=memory, intra_bandwidth=BW, intra_latency=LAT)


def ring_allreduce(n, nbytes):
    """(seconds, bytes a rank sends) of a ring all-reduce of nbytes over n ranks (plan.h)."""
    return 2 * (n - 1) / n * nbytes / BW + 2 * (n - 1) * LAT, 2 * (n - 1) / n * nbytes


def one(layout):
    return weft.plan_layouts(model(), cluster(), G, layout=layout)


def test_pure_data_parallel_matches_the_closed_form():
    k = Checks("dp=2")
    dp = 2
    n = G // dp                                       # samples per replica, one micro-batch
    compute = n * (F + B)
    comm, sent = ring_allreduce(dp, P * 2)
    step = compute + comm
    with one(weft.PlanLayout(dp=dp, schedule="gpipe", microbatches=1)) as p:
        k.equal("kept", p.info.count, 1)
        k.equal("ranks", p.info.ranks, 2)
        b = p.best
        k.equal("layout", (b.dp, b.tp, b.pp, b.ep, b.cp, b.zero_stage), (2, 1, 1, 1, 1, 0))
        k.equal("schedule", b.schedule, weft.ScheduleKind.GPIPE)
        k.equal("fits", b.fits, True)
        k.close("step_seconds", b.step_seconds, step)
        k.close("compute_seconds", b.compute_seconds, compute)
        k.close("communication_seconds", b.communication_seconds, comm)
        k.close("communication_bytes", b.communication_bytes, sent)
        k.close("bubble_fraction", b.bubble_fraction, 0.0)
        k.close("static_bytes", b.static_bytes, P * (2 + 2 + 12))
        k.close("activation_bytes", b.activation_bytes, n * ACT)
        k.close("memory_per_rank", b.memory_per_rank, P * 16 + n * ACT)

        # Amdahl and Gustafson from the one-rank step G (f + b).
        one_rank = G * (F + B)
        speedup = one_rank / step
        s = (1 / speedup - 1 / 2) / (1 - 1 / 2)
        summary, points = p.scaling()
        k.equal("summary ranks", summary.ranks, 2)
        k.close("one_rank_seconds", summary.one_rank_seconds, one_rank)
        k.close("speedup", summary.speedup, speedup)
        k.close("efficiency", summary.efficiency, speedup / 2)
        k.close("serial_fraction", summary.serial_fraction, s)
        k.close("gustafson_speedup", summary.gustafson_speedup, 2 - s)
        k.equal("curve ranks", [q.ranks for q in points], [1, 2])
        k.equal("weak batches", [q.weak_batch for q in points], [G // 2, G])
        k.close("strong step at 1", points[0].strong_seconds, one_rank)
        k.close("weak step at 1", points[0].weak_seconds, (G // 2) * (F + B))
        k.close("amdahl at 2", points[1].amdahl_speedup, 1 / (s + (1 - s) / 2))
        k.close("weak speedup at 2", points[1].weak_speedup, 2 * (G // 2) * (F + B) / step)
        k.close("gustafson at 2", points[1].gustafson_speedup, 2 - s)
    k.finish()


def test_pure_tensor_parallel_matches_the_closed_form():
    k = Checks("tp=2")
    tp = 2
    compute = G * (F + B) / tp
    per, sent = ring_allreduce(tp, OUT * G)           # one all-reduce of the layer's output
    with one(weft.PlanLayout(tp=tp, schedule="gpipe", microbatches=1)) as p:
        b = p.best
        k.equal("layout", (b.dp, b.tp, b.pp), (1, 2, 1))
        k.close("compute_seconds", b.compute_seconds, compute)
        k.close("communication_seconds", b.communication_seconds, 4 * per)
        k.close("step_seconds", b.step_seconds, compute + 4 * per)
        k.close("communication_bytes", b.communication_bytes, 4 * sent)
        k.close("static_bytes", b.static_bytes, P / tp * 16)
    k.finish()


def test_tp_replicated_share_and_allreduces(tmp_path):
    """plan.h: a layer split over tp keeps its tp_replicated share r whole on every tp rank, so a
    rank computes G (f + b) (r + (1 - r) / tp); tp_allreduces = 1 (an MLP alone) runs one ring
    all-reduce of out x G per direction instead of Megatron's 2 (GPipe, one micro-batch of G)."""
    k = Checks("tp_replicated")
    tp, r = 2, 0.25
    compute = G * (F + B) * (r + (1 - r) / tp)       # 0.625 G (f + b)
    per, sent = ring_allreduce(tp, OUT * G)           # 2 (n-1)/n x bytes / bw + 2 (n-1) x latency
    layer = weft.PlanLayer("mlp", params=P, forward_seconds=F, backward_seconds=B, activation_bytes=ACT,
                           output_bytes=OUT, tp_replicated=r, tp_allreduces=1)
    lay = weft.PlanLayout(tp=tp, schedule="gpipe", microbatches=1)
    with weft.plan_layouts([layer], cluster(), G, layout=lay) as p:
        b = p.best
        k.equal("layout", (b.dp, b.tp, b.pp), (1, 2, 1))
        k.close("compute_seconds", b.compute_seconds, compute)
        k.close("communication_seconds", b.communication_seconds, 2 * per)
        k.close("step_seconds", b.step_seconds, compute + 2 * per)
        k.close("communication_bytes", b.communication_bytes, 2 * sent)
    # The model file's tp_rep= and tp_ar= keys give the same prediction.
    mf = tmp_path / "model.txt"
    mf.write_text("layer name=mlp params=%r fwd=%r bwd=%r act=%r out=%r tp_rep=%r tp_ar=1\ntrain global_batch=%d\n"
                  % (P, F, B, ACT, OUT, r, G))
    cf = tmp_path / "cluster.txt"
    cf.write_text("cluster hosts=1 ranks_per_host=2 memory=%r intra_bw=%r intra_lat=%r\n" % (MEM, BW, LAT))
    with weft.LayoutPlan.load(mf, cf, layout=lay) as p:
        k.close("file: tp_rep=0.25 tp_ar=1", p.best.step_seconds, compute + 2 * per)
    # Refused by the library: a share over 1.
    with pytest.raises(weft.InvalidArgument) as e:
        weft.plan_layouts([dataclasses.replace(layer, tp_replicated=1.5)], cluster(), G, layout=lay)
    k.contains("tp_replicated 1.5", str(e.value), "tp_replicated")
    k.finish()


def test_grad_allreduce_bytes_and_shared_params(tmp_path):
    """plan.h: grad_allreduce_bytes adds a ring all-reduce of that many bytes per parameter over
    the replicas before the DP reduction; an MoE layer's shared_params are summed over tp once a
    step (the layer's tokens are split over tp), then reduced as dense ones, while its experts
    (params - shared_params, ep = 1 here) are reduced over their dp x tp / ep = 2 replicas."""
    k = Checks("grad_allreduce_bytes/shared_params")
    dp, n = 2, G // 2
    wide, _ = ring_allreduce(dp, P * 8)
    plain, _ = ring_allreduce(dp, P * 2)
    lay = weft.PlanLayout(dp=dp, schedule="gpipe", microbatches=1)
    with weft.plan_layouts(model(), cluster(), G, layout=lay, grad_allreduce_bytes=8) as p:
        k.close("dp 2, grad_allreduce_bytes 8: step", p.best.step_seconds, n * (F + B) + wide + plain)
        k.close("dp 2, grad_allreduce_bytes 8: communication", p.best.communication_seconds, wide + plain)
    mf = tmp_path / "model.txt"
    mf.write_text("layer name=fc params=%r fwd=%r bwd=%r act=%r out=%r\ntrain global_batch=%d grad_allreduce_bytes=8\n"
                  % (P, F, B, ACT, OUT, G))
    cf = tmp_path / "cluster.txt"
    cf.write_text("cluster hosts=1 ranks_per_host=2 memory=%r intra_bw=%r intra_lat=%r\n" % (MEM, BW, LAT))
    with weft.LayoutPlan.load(mf, cf, layout=lay) as p:
        k.close("file: train grad_allreduce_bytes=8", p.best.step_seconds, n * (F + B) + wide + plain)

    S, tp = 200.0, 2
    moe = weft.PlanLayer("moe", experts=2, top_k=1, params=P, forward_seconds=F, backward_seconds=B,
                         activation_bytes=ACT, output_bytes=OUT, shared_params=S)
    gather = (tp - 1) / tp * OUT * G / BW + (tp - 1) * LAT   # the tp ranks' tokens gathered (and scattered back)
    shared, _ = ring_allreduce(tp, S * 2)
    experts, _ = ring_allreduce(tp, (P - S) * 2)
    compute = G * (F + B) / tp
    lay = weft.PlanLayout(tp=tp, ep=1, schedule="gpipe", microbatches=1)
    with weft.plan_layouts([moe], cluster(), G, layout=lay) as p:
        k.close("tp 2, shared 200: step", p.best.step_seconds, compute + 2 * gather + shared + experts)
        k.close("tp 2, shared 200: static bytes", p.best.static_bytes, P * 16)
    with pytest.raises(weft.InvalidArgument) as e:
        weft.plan_layouts([dataclasses.replace(moe, shared_params=2 * P)], cluster(), G, layout=lay)
    k.contains("shared_params above params", str(e.value), "shared_params")
    k.finish()


def test_every_field_reaches_the_library():
    """Closed forms that only hold when each description field arrives where plan.h puts it: the
    inter-host link, flops, bytes per parameter and the per-action overhead; an MoE layer's experts
    and top_k under expert parallelism; a layer kept whole over tp; context parallelism."""
    k = Checks("fields")
    n = G // 2
    # (a) 2 hosts of 1 rank: dp = 2 crosses hosts. Compute from flops; backward = 2 x forward;
    # 4 + 4 + 4 bytes per parameter; 2 compute actions (F, B) of one micro-batch get the overhead.
    flops, ibw, ilat, over = 1e9, 2e6, 3e-5, 1e-4
    hosts = weft.PlanCluster(hosts=2, ranks_per_host=1, memory_per_rank=MEM, flops_per_rank=flops, intra_bandwidth=BW,
                             intra_latency=LAT, inter_bandwidth=ibw, inter_latency=ilat)
    layer = weft.PlanLayer("fc", params=P, forward_flops=F * flops, activation_bytes=ACT, output_bytes=OUT)
    with weft.plan_layouts([layer], hosts, G, layout=weft.PlanLayout(dp=2, schedule="gpipe", microbatches=1),
                           weight_bytes=4, grad_bytes=4, optimizer_bytes=4, microbatch_overhead=over) as p:
        b = p.best
        k.close("inter-host dp: compute", b.compute_seconds, n * 3 * F)
        k.close("inter-host dp: step", b.step_seconds, n * 3 * F + 2 * over + P * 4 / ibw + 2 * ilat)
        k.close("inter-host dp: static", b.static_bytes, P * 12)
    # (b) experts = 2, top_k = 1 over ep = 2 (dp = 2): 4 all-to-alls of top_k x out x n x 1/2 bytes;
    # each rank holds one expert, whose only replica it is (no data-parallel reduction).
    moe = weft.PlanLayer("moe", experts=2, top_k=1, params=P, forward_seconds=F, backward_seconds=B,
                         activation_bytes=ACT, output_bytes=OUT)
    a2a = 1 * OUT * n * 0.5 / BW + LAT
    with weft.plan_layouts([moe], cluster(), G, layout=weft.PlanLayout(dp=2, ep=2, schedule="gpipe",
                                                                        microbatches=1)) as p:
        b = p.best
        k.close("ep: communication", b.communication_seconds, 4 * a2a)
        k.close("ep: step", b.step_seconds, n * (F + B) + 4 * a2a)
        k.close("ep: static", b.static_bytes, P / 2 * 16)
    # (c) tensor_parallel = False: every tp rank runs the whole layer, nothing to reduce over tp.
    whole = weft.PlanLayer("fc", tensor_parallel=False, params=P, forward_seconds=F, backward_seconds=B,
                           activation_bytes=ACT, output_bytes=OUT)
    with weft.plan_layouts([whole], cluster(), G, layout=weft.PlanLayout(tp=2, schedule="gpipe", microbatches=1)) as p:
        k.close("unsplittable over tp: step", p.best.step_seconds, G * (F + B))
    # (d) cp = 2: the work halves, 3 ring exchanges (1 forward, 2 backward) of kv x G x 1/2 bytes,
    # and the gradients are reduced over dp x cp = 2.
    kv = 32.0
    ctx = weft.PlanLayer("fc", params=P, forward_seconds=F, backward_seconds=B, activation_bytes=ACT, output_bytes=OUT,
                         context_bytes=kv)
    with weft.plan_layouts([ctx], cluster(), G, layout=weft.PlanLayout(cp=2, schedule="gpipe", microbatches=1)) as p:
        comm = 3 * (kv * G * 0.5 / BW + LAT) + ring_allreduce(2, P * 2)[0]
        k.close("cp: communication", p.best.communication_seconds, comm)
        k.close("cp: step", p.best.step_seconds, G * (F + B) / 2 + comm)
    k.finish()


def test_measured_collectives_set_their_latency_term(tmp_path):
    """plan.h's measured collectives (tests/unit/test_plan.cpp's MeasuredCollectivesSetTheirLatencyTerm,
    its numbers): within a host a measured entry replaces a collective's latency term: the entry for
    the group's size, else the per-step cost of the nearest smaller size, else of the nearest larger
    (per step: seconds / 2 (n - 1) for an all-reduce, / (n - 1) for an all-to-all)."""
    k = Checks("measured")
    # tp 2 of a 2-rank host, fixed layout, m micro-batches of G / m samples: 3fG/2 compute and
    # 4 all-reduces of out x mbs per micro-batch, each (n-1)/n x 2 x bytes / bw = bytes / bw
    # plus the latency term T: the measured all-reduce of 2 ranks, else 2 x intra_latency.
    g, m, f, out, bw, a = 4, 2, 0.004, 1e6, 1e9, 1e-5
    mbs = g / m
    nbytes = out * mbs / bw
    layer = [weft.PlanLayer("dense", params=1e3, forward_seconds=f, output_bytes=out)]

    def host(ranks, measured):
        return weft.PlanCluster(hosts=1, ranks_per_host=ranks, memory_per_rank=1e12, flops_per_rank=1e12,
                                intra_bandwidth=bw, intra_latency=a, intra_collectives=measured)

    tp = weft.PlanLayout(tp=2, schedule="1f1b", microbatches=m)
    measured = [("alltoall", 2, 5e-4), weft.PlanCollective(weft.PlanCollectiveKind.ALLREDUCE, 2, 7e-5)]
    with weft.plan_layouts(layer, host(2, measured), g, layout=tp) as p:
        k.close("tp 2, all-reduce of 2 measured at 70 us", p.best.step_seconds, 3 * f * g / 2 + m * 4 * (nbytes + 7e-5))
    with weft.plan_layouts(layer, host(2, [("alltoall", 2, 5e-4)]), g, layout=tp) as p:
        k.close("tp 2, only all-to-alls measured: 2 latencies", p.best.step_seconds,
                3 * f * g / 2 + m * 4 * (nbytes + 2 * a))
    with weft.plan_layouts(layer, host(2, ()), g, layout=tp) as p:
        k.close("tp 2, nothing measured: 2 latencies", p.best.step_seconds, 3 * f * g / 2 + m * 4 * (nbytes + 2 * a))

    # ep 4 on 4 of 8 ranks, 8 samples: 2 per rank, one micro-batch; 4 all-to-alls (dispatch and
    # combine in F and B) of (n-1)/n x top_k x out x B bytes, each with 3 ring steps of latency.
    n, b, params = 4, 2, 4e6
    moe = [weft.PlanLayer("moe", experts=8, top_k=2, params=params, forward_seconds=0.001, output_bytes=4e5)]
    moved = (n - 1.0) / n * 2 * 4e5 * b / bw
    ep = weft.PlanLayout(dp=n, ep=n, schedule="1f1b", microbatches=1)
    cases = [("ep 4: per step of the 2-rank entry", [("alltoall", 2, 3e-5), ("alltoall", 8, 7e-4), ("allreduce", 4, 1.0)],
              3 * 3e-5),
             ("ep 4: per step of the 8-rank entry", [("alltoall", 8, 7e-4)], 3 * 1e-4),
             ("ep 4: the 4-rank entry itself", [("alltoall", 4, 2e-4), ("alltoall", 2, 1.0)], 2e-4)]
    for what, table, latency in cases:
        with weft.plan_layouts(moe, host(8, table), 8, layout=ep, ranks=n) as p:
            k.close(what, p.best.step_seconds, 3 * 0.001 * b + 4 * (latency + moved))

    # The cluster file's intra_allreduce key gives the same prediction as the description.
    mf = tmp_path / "model.txt"
    mf.write_text("layer name=dense params=1e3 fwd=%r out=%r\ntrain global_batch=%d\n" % (f, out, g))
    cf = tmp_path / "cluster.txt"
    cf.write_text("cluster ranks_per_host=2 memory=1e12 flops=1e12 intra_bw=%r intra_lat=%r\n"
                  "cluster intra_allreduce=2:7e-5 intra_alltoall=2:5e-4\n" % (bw, a))
    with weft.LayoutPlan.load(mf, cf, layout=tp) as p:
        k.close("file: intra_allreduce=2:7e-5", p.best.step_seconds, 3 * f * g / 2 + m * 4 * (nbytes + 7e-5))

    # Refused: a group larger than a host (by the library), an unknown kind (by the binding).
    with pytest.raises(weft.InvalidArgument) as e:
        weft.plan_layouts(layer, host(2, [("allreduce", 8, 1e-6)]), g, layout=tp)
    k.contains("a group larger than a host", str(e.value), "intra_collectives[0].ranks")
    with pytest.raises(weft.InvalidArgument) as e:
        weft.plan_layouts(layer, host(2, [("broadcast", 2, 1e-6)]), g, layout=tp)
    k.contains("an unknown kind", str(e.value), "intra_collectives[0].kind")
    k.finish()


def test_search_ranks_by_step_time_under_the_rules():
    k = Checks("search")
    dp_step = G // 2 * (F + B) + ring_allreduce(2, P * 2)[0]
    tp_step = G * (F + B) / 2 + 4 * ring_allreduce(2, OUT * G)[0]
    with weft.plan_layouts(model(), cluster(), G, top=50) as p:
        lays = p.layouts
        k.equal("count", len(lays), p.info.count)
        k.equal("every layout uses the 2 ranks", all(q.dp * q.tp * q.pp * q.cp == 2 for q in lays), True)
        k.equal("sorted by step", [q.step_seconds for q in lays] == sorted(q.step_seconds for q in lays), True)
        k.equal("all fit", all(q.fits for q in lays), True)
        k.equal("best is data parallel", (p.best.dp, p.best.tp), (2, 1))
        k.close("best step", p.best.step_seconds, min(dp_step, tp_step))
        k.equal("feasible <= searched", p.info.feasible <= p.info.searched, True)
        k.equal("micro-batches divide the replica's batch", all((G // q.dp) % q.microbatches == 0 for q in lays), True)
    with weft.plan_layouts(model(), cluster(), G, kinds=["1f1b"], max_pp=1) as p:
        k.equal("kinds filter", {q.schedule for q in p.layouts}, {weft.ScheduleKind.ONE_F_ONE_B})
        k.equal("max_pp", {q.pp for q in p.layouts}, {1})
    k.finish()


def test_nothing_fits_and_formats():
    k = Checks("formats")
    with weft.plan_layouts(model(), cluster(memory=10.0), G) as p:   # 10 bytes: nothing fits
        k.equal("nothing kept", (p.info.count, p.best), (0, None))
        k.equal("nothing feasible", p.info.feasible, 0)
        with pytest.raises(weft.InvalidArgument) as e:
            p.scaling()
        k.contains("scaling of an empty plan", str(e.value), "no layout")
    with weft.plan_layouts(model(), cluster(memory=10.0), G, include_infeasible=True, top=3) as p:
        k.equal("infeasible kept", (p.info.count, p.best.fits), (3, False))
    with one(weft.PlanLayout(dp=2, schedule="gpipe", microbatches=1)) as p:
        k.contains("table", p.table(), "gpipe")
        k.contains("report", p.report(), "serial fraction")
        j = p.json()
        k.equal("json layout", (j["ranks"], j["global_batch"], j["layouts"][0]["dp"]), (2, G, 2))
        k.close("json step", j["layouts"][0]["step_seconds"], p.best.step_seconds, rel=1e-6)
    k.finish()


def test_files_give_the_same_prediction(tmp_path):
    k = Checks("files")
    m = tmp_path / "model.txt"
    m.write_text("# one dense layer\nlayer name=fc params=%g fwd=%g bwd=%g act=%g out=%g\ntrain global_batch=%d\n"
                 % (P, F, B, ACT, OUT, G))
    c = tmp_path / "cluster.txt"
    c.write_text("cluster hosts=1 ranks_per_host=2 memory=%g intra_bw=%g intra_lat=%g\n" % (MEM, BW, LAT))
    lay = weft.PlanLayout(dp=2, schedule="gpipe", microbatches=1)
    with weft.LayoutPlan.load(m, c, layout=lay) as p, one(lay) as q:
        k.equal("batch from the train line", p.info.global_batch, G)
        k.close("same step", p.best.step_seconds, q.best.step_seconds)
    bad = tmp_path / "bad.txt"
    bad.write_text("# model\nlayer name=fc params=1 fwd=1 wat=3\n")
    with pytest.raises(weft.InvalidArgument) as e:
        weft.LayoutPlan.load(bad, c)
    k.contains("file:line", str(e.value), "bad.txt:2")
    k.contains("the key", str(e.value), "wat")
    k.finish()


def test_bad_input_is_refused_with_weft_message():
    k = Checks("errors")
    with pytest.raises(weft.InvalidArgument) as e:
        weft.plan_layouts(model(), cluster(memory=0.0), G)
    k.contains("memory 0", str(e.value), "memory_per_rank")
    with pytest.raises(weft.InvalidArgument) as e:
        one(weft.PlanLayout(dp=3))
    k.contains("3 ranks of 2", str(e.value), "dp 3")
    with pytest.raises(weft.InvalidArgument) as e:
        weft.plan_layouts(["fc"], cluster(), G)
    k.contains("not a layer", str(e.value), "layers[0]")
    with pytest.raises(weft.InvalidArgument) as e:
        weft.plan_layouts(model(), cluster(), -1)
    k.contains("negative batch", str(e.value), "global_batch")
    p = one(weft.PlanLayout(dp=2))
    p.close()
    p.close()
    with pytest.raises(weft.InvalidArgument) as e:
        p.table()
    k.contains("closed", str(e.value), "closed")
    k.finish()
