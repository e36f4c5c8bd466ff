# Tests of the pipeline family (weft/pipeline.h), included from runtests.jl:
# pipeline_single_rank_tests() in one process, pipeline_multirank_tests(comm) on 3 ranks. They
# mirror the Rust (bindings/rust/weft/tests/pipeline.rs, pipeline_multirank.rs) and Go
# (pipeline_test.go, pipeline_multirank_test.go) tests: generators against the header's placement
# and completeness rules, torch's CSV, simulation against the closed forms, tuning against a
# brute force, refusals, and the executor with Julia callbacks against a one-process model.
#
# UNTESTED: no Julia toolchain was available when this was written.

using Test
using Weft

# ------------------------------------------------------------------ the model
#
# Stage s maps a vector x of PIPE_WIDTH floats to tanh(a_s * x + c_s); the last stage's output
# meets a target in a squared-error loss. pipe_reference runs every micro-batch through all stages
# in one process; PipeState + pipe_call! is the same computation cut into stage callbacks.

const PIPE_WIDTH = 4

pipe_params(s) = (0.6f0 + 0.15f0 * Float32(s % 5), 0.05f0 * Float32(s) - 0.1f0)
pipe_data(i) = Float32[Float32((i * 3 + k * 5) % 7) / 7.0f0 - 0.4f0 for k in 0:PIPE_WIDTH-1]
pipe_target(i) = Float32[Float32((i + 2k) % 5) / 10.0f0 - 0.2f0 for k in 0:PIPE_WIDTH-1]
pipe_forward(s, x) = (p = pipe_params(s); tanh.(p[1] .* x .+ p[2]))
pipe_pregrad(y, g) = g .* (1.0f0 .- y .* y)
pipe_loss(i, y) = (d = y .- pipe_target(i); (sum(0.5 * Float64(v)^2 for v in d), d))

function pipe_reference(stages, m)
    losses, inputs = Float64[], Dict{Tuple{Int,Int},Vector{Float32}}()
    ga, gc = zeros(Float32, stages), zeros(Float32, stages)
    for i in 0:m-1
        xs = [pipe_data(i)]
        for s in 0:stages-1
            inputs[(s, i)] = xs[end]
            push!(xs, pipe_forward(s, xs[end]))
        end
        l, g = pipe_loss(i, xs[end])
        push!(losses, l)
        for s in stages-1:-1:0
            gp = pipe_pregrad(xs[s+2], g)
            ga[s+1] += sum(gp .* xs[s+1])
            gc[s+1] += sum(gp)
            g = pipe_params(s)[1] .* gp
        end
    end
    return (losses=losses, inputs=inputs, grad_a=ga, grad_c=gc)
end

mutable struct PipeState
    stages::Int
    inputs::Dict{Tuple{Int,Int},Vector{Float32}}
    outputs::Dict{Tuple{Int,Int},Vector{Float32}}
    pending::Dict{Tuple{Int,Int},Vector{Float32}}
    seen::Dict{Tuple{Int,Int},Vector{Float32}}
    losses::Dict{Int,Float64}
    grad_a::Vector{Float32}
    grad_c::Vector{Float32}
    done::Vector{Int}
    reduce_calls::Vector{Vector{Int}}
    calls::Int
end

PipeState(stages) = PipeState(stages, Dict(), Dict(), Dict(), Dict(), Dict(), zeros(Float32, stages),
                              zeros(Float32, stages), zeros(Int, stages), [Int[] for _ in 1:stages], 0)

function pipe_backward_input!(st::PipeState, c::StageCall)
    s, i = c.stage, c.microbatch
    y = pop!(st.outputs, (s, i))
    g_in = Weft.stage_array(Float32, c.input)
    g = g_in === nothing ? pipe_loss(i, y)[2] : copy(g_in)
    gp = pipe_pregrad(y, g)
    out = Weft.stage_array(Float32, c.output)
    out === nothing || (out .= pipe_params(s)[1] .* gp)
    return gp
end

function pipe_backward_weight!(st::PipeState, s, i, gp)
    x = pop!(st.inputs, (s, i))
    st.grad_a[s+1] += sum(gp .* x)
    st.grad_c[s+1] += sum(gp)
    st.done[s+1] += 1
    return nothing
end

function pipe_call!(st::PipeState, c::StageCall)
    st.calls += 1
    s, i = c.stage, c.microbatch
    if c.kind == Weft.ACTION_F
        inp = Weft.stage_array(Float32, c.input)
        x = inp === nothing ? pipe_data(i) : copy(inp)
        y = pipe_forward(s, x)
        out = Weft.stage_array(Float32, c.output)
        out === nothing ? (st.losses[i] = pipe_loss(i, y)[1]) : (out .= y)
        st.seen[(s, i)] = x
        st.inputs[(s, i)], st.outputs[(s, i)] = x, y
    elseif c.kind == Weft.ACTION_B
        pipe_backward_weight!(st, s, i, pipe_backward_input!(st, c))
    elseif c.kind == Weft.ACTION_I
        st.pending[(s, i)] = pipe_backward_input!(st, c)
    elseif c.kind == Weft.ACTION_W
        pipe_backward_weight!(st, s, i, pop!(st.pending, (s, i)))
    elseif c.kind == Weft.ACTION_REDUCE_GRAD
        push!(st.reduce_calls[s+1], st.done[s+1])
    else
        error("a callback for a $(Weft.action_name(c.kind)) action")
    end
    return nothing
end

function pipe_pipeline(comm, sched, st::PipeState; record=true)
    f = c -> pipe_call!(st, c)
    return Pipeline(comm, sched; forward=f, backward=f, backward_input=f, backward_weight=f, reduce_grad=f,
                    boundaries=[Boundary(Float32, PIPE_WIDTH) for _ in 1:st.stages-1], record=record)
end

pipe_placement(kind, p, s) = (kind in (Weft.ZB_V, Weft.DUALPIPE_V) && s >= p) ? 2p - 1 - s : s % p

function pipe_cases(p)
    all = [1, 2, p, 2p + 1]
    return [(Weft.GPIPE, 1, all), (Weft.ONE_F_ONE_B, 1, all), (Weft.INTERLEAVED_1F1B, 2, [1, p, 2p]),
            (Weft.ZB_H1, 1, all), (Weft.ZB_H2, 1, all), (Weft.ZB_V, 2, all), (Weft.DUALPIPE_V, 2, [2p, 2p + 3])]
end

# ------------------------------------------------------------------ one process

function pipeline_single_rank_tests()
    if !Weft.has_function(:weft_pipeline_create)
        @warn "the loaded libweft lacks the pipeline.h functions: pipeline tests skipped"
        return
    end
    @testset "pipeline struct layouts" begin
        @test sizeof(Weft.ActionC) == 12
        @test sizeof(Weft.ScheduleInfoC) == 32
        @test sizeof(Weft.TimelineInfoC) == 32 && fieldoffset(Weft.TimelineInfoC, 3) == 16
        @test sizeof(Weft.RankStatsC) == 40
        @test sizeof(Weft.PipelineCostsC) == 104 && fieldoffset(Weft.PipelineCostsC, 10) == 72
        @test sizeof(Weft.TuneConfigC) == 120 && fieldoffset(Weft.TuneConfigC, 14) == 96
        @test sizeof(Weft.TuneCandidateC) == 48
        @test sizeof(Weft.StageCallC) == 32
        @test sizeof(Weft.PipelineConfigC) == 88 && fieldoffset(Weft.PipelineConfigC, 11) == 80
    end
    @testset "generators follow the rules" begin
        for p in 1:4, (kind, v, ms) in pipe_cases(p), m in ms
            s = Schedule(kind; ranks=p, microbatches=m, stages_per_rank=v, reduce_grad=true)
            @test Weft.validate(s) === nothing
            i = Weft.info(s)
            S = p * v
            @test (i.kind, i.ranks, i.stages, i.microbatches, i.stages_per_rank) == (kind, p, S, m, v)
            fwd, bwd = Dict{Tuple{Int,Int},Int}(), Dict{Tuple{Int,Int},Vector{Int}}()
            misplaced, sends, reduces = 0, 0, 0
            for r in 0:p-1, a in Weft.actions(s, r)
                Weft.is_compute(a.kind) && pipe_placement(kind, p, a.stage) != r && (misplaced += 1)
                key = (a.stage, a.microbatch)
                a.kind == Weft.ACTION_F && (fwd[key] = get(fwd, key, 0) + 1)
                if a.kind in (Weft.ACTION_B, Weft.ACTION_I, Weft.ACTION_W)
                    b = get!(bwd, key, [0, 0, 0])
                    b[Int(a.kind)] += 1
                end
                a.kind == Weft.ACTION_SEND_F && (sends += 1)
                a.kind == Weft.ACTION_REDUCE_GRAD && (reduces += 1)
            end
            @test all(Weft.stage_rank(s, st) == pipe_placement(kind, p, st) for st in 0:S-1)
            @test misplaced == 0
            @test length(fwd) == S * m && all(==(1), values(fwd))
            @test length(bwd) == S * m && all(b -> b == [1, 0, 0] || b == [0, 1, 1], values(bwd))
            crossings = count(st -> pipe_placement(kind, p, st) != pipe_placement(kind, p, st + 1), 0:S-2)
            @test sends == crossings * m
            @test reduces == S
            close(s)
        end
    end
    @testset "torch's CSV and files" begin
        text = "0F0,0F1,0B0,0B1\r\n1F0,1F1,1B0,1B1\r\n"
        s = Weft.schedule_from_csv(text)
        @test Weft.validate(s) === nothing
        @test Weft.to_csv(s; format=:compute_only) == text
        @test join(string.(Weft.actions(s, 0)), " ") == "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1"
        @test join(string.(Weft.actions(s, 1)), " ") == "1RECV_F0 1F0 1RECV_F1 1F1 1B0 1SEND_B0 1B1 1SEND_B1"
        close(s)
        dir = mktempdir()
        for (kind, v, ms) in pipe_cases(3)
            g = Schedule(kind; ranks=3, microbatches=ms[end], stages_per_rank=v, reduce_grad=true)
            back = Weft.schedule_from_csv(Weft.to_csv(g))
            path = joinpath(dir, "$(kind).weftsched")
            Weft.save_schedule(path, g)
            loaded = Weft.load_schedule(path)
            for r in 0:2
                @test Weft.actions(back, r) == Weft.actions(g, r)
                @test Weft.actions(loaded, r) == Weft.actions(g, r)
            end
            foreach(close, (g, back, loaded))
        end
        rm(dir; recursive=true)
    end
    @testset "simulation equals the closed forms" begin
        f, b = 1.0, 2.0
        for p in (1, 2, 4), m in (1, 3, 8), kind in (Weft.GPIPE, Weft.ONE_F_ONE_B)
            s = Schedule(kind; ranks=p, microbatches=m)
            t = Weft.simulate(s, Weft.uniform_costs(p, f, b))
            @test Weft.nranks(t) == p
            @test Weft.makespan(t) ≈ (m + p - 1) * (f + b)
            @test Weft.bubble_fraction(t) ≈ (p - 1) / (m + p - 1)
            for r in 0:p-1
                rt = Weft.timeline_rank(t, r)
                @test length(rt.start) == length(Weft.actions(s, r))
                @test rt.busy ≈ m * (f + b)
                @test rt.peak_activations == (kind == Weft.GPIPE ? m : min(p - r, m))
            end
            close(t)
            close(s)
        end
        s = Schedule(Weft.GPIPE; ranks=2, microbatches=2)
        @test_throws WeftError Weft.simulate(s, Costs([1.0, 1.0]; backward=[1.0]))
        close(s)
    end
    @testset "tuning agrees with a brute force" begin
        lf, lb = [1.0, 2.0, 1.0, 3.0], [2.0, 4.0, 2.0, 6.0]
        cands, best = Weft.tune(; ranks=2, layer_forward=lf, layer_backward=lb, global_batch=8, microbatch_overhead=0.5,
                                activation_bytes_per_sample=100.0, memory_cap=1500.0,
                                kinds=[Weft.GPIPE, Weft.ONE_F_ONE_B], max_stages_per_rank=2)
        for c in cands
            S = 2 * c.stages_per_rank
            mbs = 8 ÷ c.microbatches
            rng(st) = (st*4÷S+1):((st+1)*4÷S)
            costs = Costs([sum(lf[rng(st)]) * mbs for st in 0:S-1]; backward=[sum(lb[rng(st)]) * mbs for st in 0:S-1],
                          activation_bytes=[length(rng(st)) * 100.0 * mbs for st in 0:S-1],
                          boundary_bytes=zeros(S), overhead=0.5)
            s = Schedule(c.kind; ranks=2, microbatches=c.microbatches, stages_per_rank=c.stages_per_rank)
            t = Weft.simulate(s, costs)
            @test c.step_time ≈ Weft.makespan(t)
            @test c.peak_bytes ≈ maximum(Weft.timeline_rank(t, r).peak_activation_bytes for r in 0:1)
            @test c.fits == (c.peak_bytes <= 1500.0)
            close(t)
            close(s)
        end
        fitting = [k for k in eachindex(cands) if cands[k].fits]
        @test best !== nothing && cands[best].step_time == minimum(cands[k].step_time for k in fitting)
    end
    @testset "refusals name the fault" begin
        err = try Schedule(Weft.DUALPIPE_V; ranks=2, microbatches=3); nothing catch e; e end
        @test err isa WeftError && err.status == Weft.ERR_INVALID_ARGUMENT && occursin("2p", err.message)
        A = Weft.Action
        skip = Schedule([[A(Weft.ACTION_F, 0, 0), A(Weft.ACTION_B, 0, 0)], [A(Weft.ACTION_F, 1, 0)]])
        err = try Weft.validate(skip); nothing catch e; e end
        @test err isa WeftError && occursin("complete", err.message)
        close(skip)
        err = try Weft.schedule_from_csv("0F0,0X1\r\n"); nothing catch e; e end
        @test err isa WeftError && occursin("0X1", err.message)
    end
    @testset "executor on one rank" begin
        comm = Comm(Weft.unique_id(), 0, 1; config=Config(timeout=20, name="pipe"))
        A = Weft.Action
        list = A[]
        for i in 0:2
            append!(list, [A(Weft.ACTION_F, 0, i), A(Weft.ACTION_F, 1, i), A(Weft.ACTION_I, 1, i),
                           A(Weft.ACTION_B, 0, i), A(Weft.ACTION_W, 1, i)])
        end
        append!(list, [A(Weft.ACTION_REDUCE_GRAD, 0), A(Weft.ACTION_REDUCE_GRAD, 1)])
        s = Schedule([list])
        st = PipeState(2)
        p = pipe_pipeline(comm, s, st)
        t = run!(p)
        @test t isa Timeline && length(Weft.timeline_rank(t, 0).start) == length(list)
        close(t)
        close(p)
        want = pipe_reference(2, 3)
        @test isapprox(st.grad_a, want.grad_a; rtol=1e-5) && isapprox(st.grad_c, want.grad_c; rtol=1e-5)
        @test all(isapprox(st.losses[i], want.losses[i+1]; rtol=1e-5) for i in 0:2)
        @test st.reduce_calls == [[3], [3]]
        @test st.calls == length(list)
        # A callback that throws: its text comes back with the action named.
        g = Schedule(Weft.GPIPE; ranks=1, microbatches=2)
        bad = Pipeline(comm, g; forward=c -> (c.microbatch == 1 && error("the model refused micro-batch 1"); nothing),
                       backward=c -> nothing)
        err = try run!(bad); nothing catch e; e end
        @test err isa WeftError && occursin("the model refused micro-batch 1", err.message) && occursin("0F1", err.message)
        close(bad)
        foreach(close, (g, s, comm))
    end
end

# ------------------------------------------------------------------ three ranks

function pipeline_multirank_tests(c::Comm)
    Weft.has_function(:weft_pipeline_create) || return
    r, m, steps = Weft.rank(c), 6, 2
    for kind in Weft.SCHEDULE_GENERATORS
        @testset "pipeline $(kind) on 3 ranks" begin
            s = Schedule(kind; ranks=3, microbatches=m, stages_per_rank=kind == Weft.INTERLEAVED_1F1B ? 2 : 0,
                         reduce_grad=true)
            S = Weft.info(s).stages
            st = PipeState(S)
            p = pipe_pipeline(c, s, st)
            for _ in 1:steps
                t = run!(p)
                @test Weft.nranks(t) == 3
                @test all(length(Weft.timeline_rank(t, q).start) == length(Weft.actions(s, q)) for q in 0:2)
                close(t)
            end
            close(p)
            want = pipe_reference(S, m)
            for stage in 0:S-1
                if Weft.stage_rank(s, stage) != r
                    @test st.grad_a[stage+1] == 0 && isempty(st.reduce_calls[stage+1])
                    continue
                end
                @test isapprox(st.grad_a[stage+1], steps * want.grad_a[stage+1]; rtol=1e-5, atol=1e-5)
                @test isapprox(st.grad_c[stage+1], steps * want.grad_c[stage+1]; rtol=1e-5, atol=1e-5)
                @test st.reduce_calls[stage+1] == [m, 2m]
                @test all(isapprox(st.seen[(stage, i)], want.inputs[(stage, i)]; rtol=1e-5) for i in 0:m-1)
                if stage == S - 1
                    @test all(isapprox(st.losses[i], want.losses[i+1]; rtol=1e-5) for i in 0:m-1)
                end
            end
            close(s)
        end
    end
end
