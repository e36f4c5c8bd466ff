# Tests of the planner (weft/plan.h), included from runtests.jl: plan_single_rank_tests() in one
# process (nothing in plan.h communicates). They mirror the Rust (bindings/rust/weft/tests/plan.rs)
# and Go (plan_test.go) tests: a one-layer model on 2 ranks against closed forms written here from
# plan.h's cost model, measured collectives replacing the latency term, the search's order, the
# text files, and bad input refused with weft's message.
#
# The reference (plan.h): a dense layer of P parameters, forward f and backward b seconds per
# sample, on n samples in one micro-batch (GPipe, m = 1, pp = 1: no bubble) computes n (f + b).
# Data parallelism over dp ranks then all-reduces the P x 2 gradient bytes in a ring:
# 2 (dp - 1) / dp x bytes / bandwidth + 2 (dp - 1) x latency, sending 2 (dp - 1) / dp x bytes.
# Tensor parallelism over tp divides the compute by tp and adds 4 ring all-reduces of
# output_bytes x samples. Memory: P x (2 + 2 + 12) bytes plus one micro-batch's activations.
# Tolerance 1e-9 relative (rtol): the library adds the same few doubles in another order.
# To see a check fail: drop the `2 *` of the latency term in plan_ring_allreduce.
#
# UNTESTED: no Julia toolchain was available when this was written.

using Test
using Weft

const PLAN_P, PLAN_F, PLAN_B, PLAN_ACT, PLAN_OUT = 1000.0, 1e-3, 3e-3, 100.0, 64.0
const PLAN_BW, PLAN_LAT, PLAN_G = 1e6, 1e-5, 8
const PLAN_RTOL = 1e-9

plan_model() = [PlanLayer(name="fc", params=PLAN_P, forward_seconds=PLAN_F, backward_seconds=PLAN_B,
                          activation_bytes=PLAN_ACT, output_bytes=PLAN_OUT)]
plan_cluster(memory=1e9) = PlanCluster(ranks_per_host=2, memory_per_rank=memory, intra_bandwidth=PLAN_BW,
                                       intra_latency=PLAN_LAT)

# (seconds, bytes a rank sends) of a ring all-reduce of `bytes` over n ranks (plan.h).
plan_ring_allreduce(n, bytes) = (2 * (n - 1) / n * bytes / PLAN_BW + 2 * (n - 1) * PLAN_LAT, 2 * (n - 1) / n * bytes)

plan_gpipe_m1(dp, tp) = PlanLayout(dp=dp, tp=tp, schedule=Weft.GPIPE, microbatches=1)
plan_predict(l) = plan_layouts(plan_model(), plan_cluster(); global_batch=PLAN_G, layout=l)

function plan_error(f)
    try
        f()
    catch e
        return e
    end
    return nothing
end

function plan_single_rank_tests()
    @testset "plan: pure data parallelism against the closed form" begin
        n = PLAN_G ÷ 2                       # samples per replica, one micro-batch
        compute = n * (PLAN_F + PLAN_B)
        comm, sent = plan_ring_allreduce(2, PLAN_P * 2)
        step = compute + comm
        p = plan_predict(plan_gpipe_m1(2, 1))
        @test Weft.info(p).count == 1
        @test Weft.info(p).ranks == 2
        b = Weft.best(p)
        @test (b.dp, b.tp, b.pp, b.ep, b.cp) == (2, 1, 1, 1, 1)
        @test b.schedule == Weft.GPIPE
        @test b.fits
        @test isapprox(b.step_seconds, step; rtol=PLAN_RTOL)
        @test isapprox(b.compute_seconds, compute; rtol=PLAN_RTOL)
        @test isapprox(b.communication_seconds, comm; rtol=PLAN_RTOL)
        @test isapprox(b.communication_bytes, sent; rtol=PLAN_RTOL)
        @test isapprox(b.static_bytes, PLAN_P * 16; rtol=PLAN_RTOL)
        @test isapprox(b.memory_per_rank, PLAN_P * 16 + n * PLAN_ACT; rtol=PLAN_RTOL)
        one_rank = PLAN_G * (PLAN_F + PLAN_B)
        speedup = one_rank / step
        s = (1 / speedup - 1 / 2) / (1 - 1 / 2)
        summary, points = Weft.scaling(p)
        @test isapprox(summary.one_rank_seconds, one_rank; rtol=PLAN_RTOL)
        @test isapprox(summary.speedup, speedup; rtol=PLAN_RTOL)
        @test isapprox(summary.efficiency, speedup / 2; rtol=PLAN_RTOL)
        @test isapprox(summary.serial_fraction, s; rtol=PLAN_RTOL)
        @test isapprox(summary.gustafson_speedup, 2 - s; rtol=PLAN_RTOL)
        @test [q.ranks for q in points] == [1, 2]
        @test [q.weak_batch for q in points] == [PLAN_G ÷ 2, PLAN_G]
        @test isapprox(points[2].amdahl_speedup, 1 / (s + (1 - s) / 2); rtol=PLAN_RTOL)
        @test isapprox(points[2].weak_speedup, 2 * n * (PLAN_F + PLAN_B) / step; rtol=PLAN_RTOL)
        close(p)
        close(p)
        @test plan_error(() -> Weft.info(p)) isa WeftError
    end

    @testset "plan: pure tensor parallelism against the closed form" begin
        compute = PLAN_G * (PLAN_F + PLAN_B) / 2
        per, sent = plan_ring_allreduce(2, PLAN_OUT * PLAN_G)
        p = plan_predict(plan_gpipe_m1(1, 2))
        b = Weft.layout(p, 1)
        @test b.tp == 2
        @test isapprox(b.compute_seconds, compute; rtol=PLAN_RTOL)
        @test isapprox(b.communication_seconds, 4 * per; rtol=PLAN_RTOL)
        @test isapprox(b.step_seconds, compute + 4 * per; rtol=PLAN_RTOL)
        @test isapprox(b.communication_bytes, 4 * sent; rtol=PLAN_RTOL)
        close(p)
    end

    # plan.h: a layer split over tp keeps its tp_replicated share r whole on every tp rank, so a
    # rank computes G (f + b) (r + (1 - r) / tp); tp_allreduces = 1 (an MLP alone) runs one ring
    # all-reduce of out x G per direction instead of Megatron's 2 (GPipe, one micro-batch of G).
    # The model file's tp_rep= and tp_ar= keys give the same; a share over 1 is refused.
    @testset "plan: tp_replicated share and tp_allreduces" begin
        tp, r = 2, 0.25
        compute = PLAN_G * (PLAN_F + PLAN_B) * (r + (1 - r) / tp)   # 0.625 G (f + b)
        per, sent = plan_ring_allreduce(tp, PLAN_OUT * PLAN_G)       # 2 (n-1)/n x bytes / bw + 2 (n-1) x latency
        mlp(share) = [PlanLayer(name="mlp", params=PLAN_P, forward_seconds=PLAN_F, backward_seconds=PLAN_B,
                                activation_bytes=PLAN_ACT, output_bytes=PLAN_OUT, tp_replicated=share,
                                tp_allreduces=1)]
        p = plan_layouts(mlp(r), plan_cluster(); global_batch=PLAN_G, layout=plan_gpipe_m1(1, tp))
        b = Weft.layout(p, 1)
        @test b.tp == 2
        @test isapprox(b.compute_seconds, compute; rtol=PLAN_RTOL)
        @test isapprox(b.communication_seconds, 2 * per; rtol=PLAN_RTOL)
        @test isapprox(b.step_seconds, compute + 2 * per; rtol=PLAN_RTOL)
        @test isapprox(b.communication_bytes, 2 * sent; rtol=PLAN_RTOL)
        close(p)
        dir = mktempdir()
        mf, cf = joinpath(dir, "model.txt"), joinpath(dir, "cluster.txt")
        write(mf, "layer name=mlp params=1000 fwd=1e-3 bwd=3e-3 act=100 out=64 tp_rep=0.25 tp_ar=1\n" *
                  "train global_batch=8\n")
        write(cf, "cluster ranks_per_host=2 memory=1e9 intra_bw=1e6 intra_lat=1e-5\n")
        loaded = LayoutPlan(mf, cf; layout=plan_gpipe_m1(1, tp))
        @test isapprox(Weft.best(loaded).step_seconds, compute + 2 * per; rtol=PLAN_RTOL)
        close(loaded)
        rm(dir; recursive=true)
        e = plan_error(() -> plan_layouts(mlp(1.5), plan_cluster(); global_batch=PLAN_G, layout=plan_gpipe_m1(1, tp)))
        @test e isa WeftError && e.status == Weft.ERR_INVALID_ARGUMENT
        @test e isa WeftError && occursin("tp_replicated", e.message)
    end

    # plan.h: grad_allreduce_bytes adds a ring all-reduce of that many bytes per parameter over the
    # replicas before the DP reduction; an MoE layer's shared_params are summed over tp once a
    # step, then reduced as dense ones, while its experts (params - shared, ep 1) are reduced over
    # their dp x tp / ep = 2 replicas. Shared parameters above params are refused.
    @testset "plan: grad_allreduce_bytes and shared_params" begin
        n = PLAN_G / 2
        wide, _ = plan_ring_allreduce(2, PLAN_P * 8)
        plain, _ = plan_ring_allreduce(2, PLAN_P * 2)
        p = plan_layouts(plan_model(), plan_cluster(); global_batch=PLAN_G, layout=plan_gpipe_m1(2, 1),
                         grad_allreduce_bytes=8)
        b = Weft.layout(p, 1)
        @test isapprox(b.step_seconds, n * (PLAN_F + PLAN_B) + wide + plain; rtol=PLAN_RTOL)
        @test isapprox(b.communication_seconds, wide + plain; rtol=PLAN_RTOL)
        close(p)
        s, tp = 200.0, 2
        moe(shared) = [PlanLayer(name="moe", experts=2, top_k=1, params=PLAN_P, forward_seconds=PLAN_F,
                                 backward_seconds=PLAN_B, activation_bytes=PLAN_ACT, output_bytes=PLAN_OUT,
                                 shared_params=shared)]
        gather = (tp - 1) / tp * PLAN_OUT * PLAN_G / PLAN_BW + (tp - 1) * PLAN_LAT
        shared_ar, _ = plan_ring_allreduce(tp, s * 2)
        experts_ar, _ = plan_ring_allreduce(tp, (PLAN_P - s) * 2)
        compute = PLAN_G * (PLAN_F + PLAN_B) / tp
        lay = PlanLayout(tp=tp, ep=1, schedule=Weft.GPIPE, microbatches=1)
        p = plan_layouts(moe(s), plan_cluster(); global_batch=PLAN_G, layout=lay)
        b = Weft.layout(p, 1)
        @test isapprox(b.step_seconds, compute + 2 * gather + shared_ar + experts_ar; rtol=PLAN_RTOL)
        @test isapprox(b.static_bytes, PLAN_P * 16; rtol=PLAN_RTOL)
        close(p)
        e = plan_error(() -> plan_layouts(moe(2 * PLAN_P), plan_cluster(); global_batch=PLAN_G, layout=lay))
        @test e isa WeftError && e.status == Weft.ERR_INVALID_ARGUMENT
        @test e isa WeftError && occursin("shared_params", e.message)
    end

    # Closed forms that only hold when each description field arrives where plan.h puts it (the
    # binding's field mapping).
    @testset "plan: every field reaches the library" begin
        n = PLAN_G ÷ 2
        gm1(; dp=1, tp=1, ep=1, cp=1) = PlanLayout(dp=dp, tp=tp, ep=ep, cp=cp, schedule=Weft.GPIPE, microbatches=1)
        function best_of(layers, cluster; kw...)
            p = plan_layouts(layers, cluster; global_batch=PLAN_G, kw...)
            b = Weft.best(p)
            close(p)
            return b
        end
        # (a) 2 hosts of 1 rank: dp = 2 crosses hosts. Compute from flops; backward = 2 x forward;
        # 4 + 4 + 4 bytes per parameter; the 2 compute actions (F, B) of one micro-batch get the overhead.
        flops, ibw, ilat, over = 1e9, 2e6, 3e-5, 1e-4
        hosts = PlanCluster(hosts=2, ranks_per_host=1, memory_per_rank=1e9, flops_per_rank=flops,
                            intra_bandwidth=PLAN_BW, intra_latency=PLAN_LAT, inter_bandwidth=ibw, inter_latency=ilat)
        by_flops = [PlanLayer(name="fc", params=PLAN_P, forward_flops=PLAN_F * flops, activation_bytes=PLAN_ACT,
                              output_bytes=PLAN_OUT)]
        b = best_of(by_flops, hosts; layout=gm1(dp=2), weight_bytes=4, grad_bytes=4, optimizer_bytes=4,
                    microbatch_overhead=over)
        @test isapprox(b.compute_seconds, n * 3 * PLAN_F; rtol=PLAN_RTOL)
        @test isapprox(b.step_seconds, n * 3 * PLAN_F + 2 * over + PLAN_P * 4 / ibw + 2 * ilat; rtol=PLAN_RTOL)
        @test isapprox(b.static_bytes, PLAN_P * 12; rtol=PLAN_RTOL)
        # (b) experts 2, top_k 1 over ep = 2 (dp = 2): 4 all-to-alls of top_k x out x n x 1/2 bytes;
        # a rank's expert has no other replica (no data-parallel reduction).
        moe = [PlanLayer(name="moe", experts=2, top_k=1, params=PLAN_P, forward_seconds=PLAN_F,
                         backward_seconds=PLAN_B, activation_bytes=PLAN_ACT, output_bytes=PLAN_OUT)]
        a2a = PLAN_OUT * n * 0.5 / PLAN_BW + PLAN_LAT
        b = best_of(moe, plan_cluster(); layout=gm1(dp=2, ep=2))
        @test isapprox(b.communication_seconds, 4 * a2a; rtol=PLAN_RTOL)
        @test isapprox(b.step_seconds, n * (PLAN_F + PLAN_B) + 4 * a2a; rtol=PLAN_RTOL)
        @test isapprox(b.static_bytes, PLAN_P / 2 * 16; rtol=PLAN_RTOL)
        # (c) tensor_parallel = false: every tp rank runs the whole layer, nothing to reduce over tp.
        whole = [PlanLayer(name="fc", tensor_parallel=false, params=PLAN_P, forward_seconds=PLAN_F,
                           backward_seconds=PLAN_B, activation_bytes=PLAN_ACT, output_bytes=PLAN_OUT)]
        b = best_of(whole, plan_cluster(); layout=gm1(tp=2))
        @test isapprox(b.step_seconds, PLAN_G * (PLAN_F + PLAN_B); rtol=PLAN_RTOL)
        # (d) cp = 2: the work halves, 3 ring exchanges (1 forward, 2 backward) of kv x G x 1/2 bytes,
        # and the gradients are reduced over dp x cp = 2.
        kv = 32.0
        ctx = [PlanLayer(name="fc", context_bytes=kv, params=PLAN_P, forward_seconds=PLAN_F, backward_seconds=PLAN_B,
                         activation_bytes=PLAN_ACT, output_bytes=PLAN_OUT)]
        b = best_of(ctx, plan_cluster(); layout=gm1(cp=2))
        comm = 3 * (kv * PLAN_G * 0.5 / PLAN_BW + PLAN_LAT) + plan_ring_allreduce(2, PLAN_P * 2)[1]
        @test isapprox(b.communication_seconds, comm; rtol=PLAN_RTOL)
        @test isapprox(b.step_seconds, PLAN_G * (PLAN_F + PLAN_B) / 2 + comm; rtol=PLAN_RTOL)
    end

    # plan.h's measured collectives (the numbers of tests/unit/test_plan.cpp's
    # MeasuredCollectivesSetTheirLatencyTerm): within a host a measured entry replaces a
    # collective's latency term: the entry for the group's size, else the per-step cost of the
    # nearest smaller size, else of the nearest larger (per step: seconds / 2 (n - 1) for an
    # all-reduce, / (n - 1) for an all-to-all).
    @testset "plan: measured collectives set their latency term" begin
        host(ranks, measured) = PlanCluster(ranks_per_host=ranks, memory_per_rank=1e12, flops_per_rank=1e12,
                                            intra_bandwidth=1e9, intra_latency=1e-5, intra_collectives=measured)
        function step_of(layers, cluster; kw...)
            p = plan_layouts(layers, cluster; kw...)
            s = Weft.best(p).step_seconds
            close(p)
            return s
        end
        # tp 2 of a 2-rank host, fixed layout, m micro-batches of G / m samples: 3fG/2 compute and
        # 4 all-reduces of out x mbs per micro-batch, each (n-1)/n x 2 x bytes / bw = bytes / bw
        # plus the latency term T: the measured all-reduce of 2 ranks, else 2 x intra_latency.
        g, m, f, out, bw, a = 4, 2, 0.004, 1e6, 1e9, 1e-5
        mbs = g / m
        bytes = out * mbs / bw
        dense = [PlanLayer(name="dense", params=1e3, forward_seconds=f, output_bytes=out)]
        tp = PlanLayout(tp=2, schedule=Weft.ONE_F_ONE_B, microbatches=m)
        compute = 3 * f * g / 2
        measured = [(:alltoall, 2, 5e-4), PlanCollective(:allreduce, 2, 7e-5)]
        @test isapprox(step_of(dense, host(2, measured); global_batch=g, layout=tp),
                       compute + m * 4 * (bytes + 7e-5); rtol=PLAN_RTOL)
        @test isapprox(step_of(dense, host(2, [(:alltoall, 2, 5e-4)]); global_batch=g, layout=tp),
                       compute + m * 4 * (bytes + 2 * a); rtol=PLAN_RTOL)
        @test isapprox(step_of(dense, host(2, PlanCollective[]); global_batch=g, layout=tp),
                       compute + m * 4 * (bytes + 2 * a); rtol=PLAN_RTOL)
        # ep 4 on 4 of 8 ranks, 8 samples: 2 per rank, one micro-batch; 4 all-to-alls (dispatch and
        # combine in F and B) of (n-1)/n x top_k x out x B bytes, each with n - 1 = 3 steps of latency.
        n, b = 4, 2
        moe = [PlanLayer(name="moe", experts=8, top_k=2, params=4e6, forward_seconds=0.001, output_bytes=4e5)]
        moved = (n - 1) / n * 2 * 4e5 * b / bw
        ep = PlanLayout(dp=n, ep=n, schedule=Weft.ONE_F_ONE_B, microbatches=1)
        for (table, latency) in [([(:alltoall, 2, 3e-5), (:alltoall, 8, 7e-4), (:allreduce, 4, 1.0)], 3 * 3e-5),
                                 ([(:alltoall, 8, 7e-4)], 3 * 1e-4),
                                 ([(:alltoall, 4, 2e-4), (:alltoall, 2, 1.0)], 2e-4)]
            @test isapprox(step_of(moe, host(8, table); global_batch=8, ranks=n, layout=ep),
                           3 * 0.001 * b + 4 * (latency + moved); rtol=PLAN_RTOL)
        end
        # The cluster file's intra_allreduce key gives the same closed form.
        dir = mktempdir()
        mf, cf = joinpath(dir, "model.txt"), joinpath(dir, "cluster.txt")
        write(mf, "layer name=dense params=1e3 fwd=0.004 out=1e6\ntrain global_batch=4\n")
        write(cf, "cluster ranks_per_host=2 memory=1e12 flops=1e12 intra_bw=1e9 intra_lat=1e-5\n" *
                  "cluster intra_allreduce=2:7e-5 intra_alltoall=2:5e-4\n")
        loaded = LayoutPlan(mf, cf; layout=tp)
        @test isapprox(Weft.best(loaded).step_seconds, compute + m * 4 * (bytes + 7e-5); rtol=PLAN_RTOL)
        close(loaded)
        rm(dir; recursive=true)
        # Refused, naming the entry: a group larger than a host (by the library), an unknown kind.
        e = plan_error(() -> plan_layouts(dense, host(2, [(:allreduce, 8, 1e-6)]); global_batch=g, layout=tp))
        @test e isa WeftError && e.status == Weft.ERR_INVALID_ARGUMENT
        @test e isa WeftError && occursin("intra_collectives[0].ranks", e.message)
        e = plan_error(() -> plan_layouts(dense, host(2, [(:broadcast, 2, 1e-6)]); global_batch=g, layout=tp))
        @test e isa WeftError && occursin("intra_collectives[1].kind", e.message)
    end

    @testset "plan: search, formats, nothing fits" begin
        p = plan_layouts(plan_model(), plan_cluster(); global_batch=PLAN_G, top=50)
        ls = Weft.layouts(p)
        @test length(ls) == Weft.info(p).count
        @test all(l -> l.dp * l.tp * l.pp * l.cp == 2, ls)
        @test issorted([l.step_seconds for l in ls])
        dp_step = (PLAN_G ÷ 2) * (PLAN_F + PLAN_B) + plan_ring_allreduce(2, PLAN_P * 2)[1]
        @test ls[1].dp == 2
        @test isapprox(ls[1].step_seconds, dp_step; rtol=PLAN_RTOL)
        close(p)
        one = plan_predict(plan_gpipe_m1(2, 1))   # the search may leave GPipe out where schedules tie
        @test occursin("gpipe", Weft.plan_text(one, :table))
        @test occursin("serial fraction", Weft.plan_text(one, :report))
        @test occursin("\"layouts\"", Weft.plan_text(one, :json))
        close(one)
        only = plan_layouts(plan_model(), plan_cluster(); global_batch=PLAN_G, kinds=[Weft.ONE_F_ONE_B], max_pp=1)
        @test all(l -> l.schedule == Weft.ONE_F_ONE_B && l.pp == 1, Weft.layouts(only))
        close(only)
        none = plan_layouts(plan_model(), plan_cluster(10.0); global_batch=PLAN_G)   # 10 bytes: nothing fits
        @test Weft.info(none).count == 0
        @test Weft.best(none) === nothing
        e = plan_error(() -> Weft.scaling(none))
        @test e isa WeftError && occursin("no layout", e.message)
        close(none)
    end

    @testset "plan: files and bad input" begin
        dir = mktempdir()
        m, c, bad = joinpath(dir, "model.txt"), joinpath(dir, "cluster.txt"), joinpath(dir, "bad.txt")
        write(m, "layer name=fc params=1000 fwd=1e-3 bwd=3e-3 act=100 out=64\ntrain global_batch=8\n")
        write(c, "# two ranks\ncluster ranks_per_host=2 memory=1e9 intra_bw=1e6 intra_lat=1e-5\n")
        write(bad, "# model\nlayer name=fc params=1 fwd=1 wat=3\n")
        loaded = LayoutPlan(m, c; layout=plan_gpipe_m1(2, 1))
        made = plan_predict(plan_gpipe_m1(2, 1))
        @test Weft.info(loaded).global_batch == PLAN_G
        @test isapprox(Weft.best(loaded).step_seconds, Weft.best(made).step_seconds; rtol=PLAN_RTOL)
        close(loaded)
        e = plan_error(() -> LayoutPlan(bad, c))
        @test e isa WeftError && e.status == Weft.ERR_INVALID_ARGUMENT
        @test occursin("bad.txt:2", e.message) && occursin("wat", e.message)
        e = plan_error(() -> plan_layouts(plan_model(), plan_cluster(0.0); global_batch=PLAN_G))
        @test e isa WeftError && occursin("memory_per_rank", e.message)
        e = plan_error(() -> plan_predict(PlanLayout(dp=3)))
        @test e isa WeftError && occursin("dp 3", e.message)
        e = plan_error(() -> Weft.layout(made, 6))
        @test e isa WeftError && e.status == Weft.ERR_INVALID_ARGUMENT
        close(made)
        rm(dir; recursive=true)
    end
end
