# Tests of the training family (weft/training.h), included from runtests.jl:
# training_single_rank_tests() in one process, training_multirank_tests(comm) on 3 ranks. They
# mirror the Rust (bindings/rust/weft/tests/training_multirank.rs) and Go (training_test.go)
# tests: bucketer reductions against a plain sum, a small MLP trained data-parallel with the
# bucketer and with ZeRO stages 0-3 against the same training in one process (<= 1e-5 relative),
# bad input, region_apply! and ring_shift!.

using Test
using Weft

# ------------------------------------------------------------------ the model

# A two-layer MLP (tanh between the layers), mean-squared-error loss, forward and backward by
# hand in Float32; a batch is a matrix with one column per sample (Julia's column-major order).
const MLP_IN, MLP_HIDDEN, MLP_OUT, MLP_BATCH = 5, 7, 3, 12
const MLP_NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
const MLP_SIZES = [(MLP_HIDDEN, MLP_IN), (MLP_HIDDEN,), (MLP_OUT, MLP_HIDDEN), (MLP_OUT,)]

function mlp_uniform!(s::Ref{UInt32})
    s[] = s[] * UInt32(1664525) + UInt32(1013904223)
    return Float32(Int32(s[] >> 9) - Int32(1 << 22)) / Float32(1 << 22)
end

function mlp_init(seed)
    s = Ref{UInt32}(seed)
    return Array{Float32}[begin
        fan_in = k <= 2 ? MLP_IN : MLP_HIDDEN
        reshape(Float32[mlp_uniform!(s) / sqrt(Float32(fan_in)) for _ in 1:prod(sz)], sz)
    end for (k, sz) in enumerate(MLP_SIZES)]
end

function mlp_batch(step)
    s = Ref{UInt32}(UInt32(1000 + step * 7919))
    x = reshape(Float32[mlp_uniform!(s) for _ in 1:MLP_IN*MLP_BATCH], MLP_IN, MLP_BATCH)
    y = Float32[0.3f0 * sum(sin(Float32(j) * x[k, c]) for k in 1:MLP_IN) for j in 1:MLP_OUT, c in 1:MLP_BATCH]
    return x, y
end

mlp_forward(p, x) = (h = tanh.(p[1] * x .+ p[2]); (h, p[3] * h .+ p[4]))

# Gradients of sum over the columns of 0.5 * |out - y|^2 / divisor, handed to emit(k, g) in
# backward's order: W2, b2, W1, b1.
function mlp_backward(p, x, y, divisor, emit)
    h, out = mlp_forward(p, x)
    d = (out .- y) ./ Float32(divisor)
    emit(3, d * h')
    emit(4, vec(sum(d; dims=2)))
    dh = (p[3]' * d) .* (1 .- h .^ 2)
    emit(1, dh * x')
    emit(2, vec(sum(dh; dims=2)))
end

# torch.optim.AdamW (adamw=true) or SGD with momentum and L2 weight decay, per element, Float32.
mutable struct RefOpt
    adamw::Bool
    lr::Float32
    momentum::Float32
    t::Int
    m::Vector{Array{Float32}}
    v::Vector{Array{Float32}}
end
RefOpt(adamw, lr, momentum=0.0f0) = RefOpt(adamw, Float32(lr), Float32(momentum), 0, Array{Float32}[], Array{Float32}[])

function ref_step!(o::RefOpt, p, g)
    o.t += 1
    if isempty(o.m)
        o.m = [zero(x) for x in p]
        o.v = [zero(x) for x in p]
    end
    b1, b2, eps, wd = 0.9f0, 0.999f0, 1.0f-8, 0.01f0
    bc1, bc2 = 1 - Float64(b1)^o.t, 1 - Float64(b2)^o.t
    for k in eachindex(p), i in eachindex(p[k])
        gr = g[k][i]
        if !o.adamw
            gr += wd * p[k][i]
            o.m[k][i] = o.t == 1 ? gr : o.momentum * o.m[k][i] + gr
            p[k][i] -= o.lr * o.m[k][i]
            continue
        end
        p[k][i] *= Float32(1 - Float64(o.lr) * Float64(wd))
        o.m[k][i] += (gr - o.m[k][i]) * (1 - b1)
        o.v[k][i] = o.v[k][i] * b2 + gr * gr * (1 - b2)
        denom = sqrt(o.v[k][i]) / Float32(sqrt(bc2)) + eps
        p[k][i] -= Float32(Float64(o.lr) / bc1) * (o.m[k][i] / denom)
    end
end

function mlp_reference(steps, opt)
    p = mlp_init(7)
    for step in 0:steps-1
        x, y = mlp_batch(step)
        g = Vector{Array{Float32}}(undef, 4)
        mlp_backward(p, x, y, MLP_BATCH, (k, v) -> (g[k] = v))
        ref_step!(opt, p, g)
    end
    return p
end

rel_err(a, b) = (s = maximum(abs, b); d = maximum(abs.(a .- b)); s == 0 ? d : d / s)

function expect_parity(what, got, want, r)
    for k in 1:4
        e = rel_err(got[k], want[k])
        r == 0 && println("$what parity $(MLP_NAMES[k]): relative error $e")
        @test e <= 1e-5
    end
end

# ------------------------------------------------------------------ one rank

function training_single_rank_tests()
    if !Weft.has_function(:weft_zero_create)
        @warn "the loaded libweft lacks the training.h functions: training tests skipped"
        return
    end
    @testset "training struct layouts" begin
        @test sizeof(Weft.BucketerConfigC) == 48
        @test fieldoffset(Weft.BucketerConfigC, 7) == 40      # names
        @test sizeof(Weft.BucketerStatsC) == 40
        @test sizeof(Weft.OptimizerConfigC) == 40
        @test sizeof(Weft.ZeroConfigC) == 112
        @test fieldoffset(Weft.ZeroConfigC, 4) == 16          # optimizer
        @test fieldoffset(Weft.ZeroConfigC, 5) == 56          # groups
        @test fieldoffset(Weft.ZeroConfigC, 15) == 108        # growth_interval
        @test sizeof(Weft.ZeroStepInfoC) == 40
        @test fieldoffset(Weft.ZeroStepInfoC, 5) == 24        # comm_elements
        @test sizeof(Weft.ZeroMemoryC) == 48
    end

    @testset "one-rank bucketer, ZeRO, regions" begin
        c = solo()
        a, b = fill(1.5f0, 5), zeros(Float32, 3, 1)
        bk = Bucketer(c, [a, b]; op=Weft.SUM, reduction=:reduce_scatter)
        @test Weft.num_buckets(bk) == 1 && Weft.bucket_of(bk, 2) == (1, 5)
        Weft.mark_ready!(bk, 2)
        Weft.mark_ready!(bk, 1)
        Weft.finish!(bk)
        @test Weft.shard(bk, 1) == (0, Float32[1.5, 1.5, 1.5, 1.5, 1.5, 0, 0, 0])
        @test Weft.stats(bk).steps == 1
        @test_throws WeftError Weft.mark_ready!(bk, 3)
        close(bk)
        @test_throws WeftError Weft.finish!(bk)
        @test_throws WeftError Bucketer(c, [Int32[1, 2]])

        m = Mesh(c, (1,); names=(:dp,))
        z = Zero(m, :dp, [Float32[1 3; 2 4]]; stage=3, optimizer=OptimizerConfig(kind=:sgd, lr=0.5, weight_decay=0))
        @test length(z) == 1 && Weft.num_groups(z) == 1 && Weft.group_of(z, 1) == 1
        @test_throws WeftError Weft.param(z, 1)             # stage 3: not gathered
        wait(Weft.gather!(z, 1; async=true))
        @test Weft.param(z, 1) == Float32[1 3; 2 4]
        Weft.release!(z, 1)
        Weft.grad_ready!(z, 1, fill(2.0f0, 2, 2))
        info = Weft.step!(z)
        @test !info.skipped && info.grad_norm ≈ 4
        Weft.gather!(z, 1)
        @test Weft.param(z, 1) == Float32[0 2; 1 3]
        @test Weft.memory(z).params > 0
        close(z)

        x, y = Float64[1, 2, 3], zeros(3)
        @test region_apply!(y, m, :dp, :gather, x) === y
        @test y == x
        @test_throws WeftError region_apply!(y, m, :nope, :copy, x)
        @test_throws WeftError region_apply!(y, m, :dp, :bogus, x)
        r = zeros(UInt8, 2)
        @test ring_shift!(r, m, :dp, 1, UInt8[7, 9]) == UInt8[7, 9]
        close(m)
        close(c)
    end
end

# ------------------------------------------------------------------ three ranks

grad_value(r, g, i) = Float64((i * 7 + g * 3 + r) % 9) - 4   # 0-based g and i: exact sums

function training_multirank_tests(c::Comm)
    Weft.has_function(:weft_zero_create) || return
    r, n = Weft.rank(c), Weft.nranks(c)

    @testset "bucketer reductions" begin
        sum_of(g, i) = sum(grad_value(q, g, i) for q in 0:n-1)
        for red in (:allreduce, :reduce_scatter)
            sizes = (1, 7, 1000)
            f32 = [Float32[grad_value(r, g - 1, i) for i in 0:sizes[g]-1] for g in 1:3]
            f64 = Float64[grad_value(r, 3, i) for i in 0:12]
            bk = Bucketer(c, Any[f32..., f64]; bucket_bytes=64, op=Weft.SUM, reduction=red)
            @test Weft.num_buckets(bk) >= 3
            foreach(g -> Weft.mark_ready!(bk, g), 4:-1:1)
            Weft.finish!(bk)
            for g in 1:4
                vals = g == 4 ? f64 : f32[g]
                size_g = length(vals)
                if red === :allreduce
                    @test vals == [sum_of(g - 1, i) for i in 0:size_g-1]
                    continue
                end
                bucket, goff = Weft.bucket_of(bk, g)
                soff, sh = Weft.shard(bk, bucket)
                for e in max(goff, soff):min(goff + size_g, soff + length(sh))-1
                    @test sh[e-soff+1] == sum_of(g - 1, e - goff)
                end
            end
            @test Weft.stats(bk).steps == 1
            close(bk)
        end
    end

    @testset "bucketer data-parallel training" begin
        rows, steps = MLP_BATCH ÷ n, 10
        p = mlp_init(7)
        opt = RefOpt(true, 0.01)
        order = [3, 4, 1, 2]                     # backward's order: W2, b2, W1, b1
        grads = [zeros(Float32, MLP_SIZES[k]) for k in order]
        bk = Bucketer(c, grads; bucket_bytes=100, names=MLP_NAMES[order])
        @test Weft.num_buckets(bk) > 1
        for step in 0:steps-1
            x, y = mlp_batch(step)
            cols = r*rows+1:(r+1)*rows
            mlp_backward(p, x[:, cols], y[:, cols], rows, (k, g) -> begin
                slot = findfirst(==(k), order)
                copyto!(grads[slot], g)
                Weft.mark_ready!(bk, slot)
            end)
            Weft.finish!(bk)
            ref_step!(opt, p, [grads[findfirst(==(k), order)] for k in 1:4])
        end
        close(bk)
        expect_parity("bucketer DP", p, mlp_reference(steps, RefOpt(true, 0.01)), r)
    end

    @testset "bucketer bad input" begin
        bk = Bucketer(c, [ones(Float32, 10), ones(Float32, 5)]; names=["layer.weight", "layer.bias"])
        Weft.mark_ready!(bk, 1)
        err = try
            Weft.mark_ready!(bk, 1)
            nothing
        catch e
            e
        end
        @test err isa WeftError && err.status == Weft.ERR_INVALID_ARGUMENT && occursin("layer.weight", err.message)
        Weft.mark_ready!(bk, 2)
        Weft.finish!(bk)
        close(bk)
        @test_throws WeftError Bucketer(c, [ones(Float32, 3), ones(Float32, 3)]; bucket_of=[1])
    end

    line = Mesh(c, (n,); names=(:dp,))
    new_zero(stage, opt) = Zero(line, :dp, mlp_init(7); stage=stage, optimizer=opt, groups=[1, 1, 2, 2], names=MLP_NAMES)
    function read_params(z)
        Weft.gather!(z, 1)
        wait(Weft.gather!(z, 2; async=true))
        p = [Weft.param(z, k) for k in 1:4]
        Weft.release!(z, 1)
        Weft.release!(z, 2)
        return p
    end
    function train_zero(z, steps, rows)
        infos = []
        for step in steps
            x, y = mlp_batch(step)
            p = read_params(z)
            cols = r*rows+1:(r+1)*rows
            mlp_backward(p, x[:, cols], y[:, cols], rows, (k, g) -> Weft.grad_ready!(z, k, g))
            push!(infos, Weft.step!(z))
        end
        return infos
    end

    @testset "ZeRO stages 0-3 train like one process" begin
        steps, rows = 8, MLP_BATCH ÷ n
        want = mlp_reference(steps, RefOpt(true, 0.01))
        padded = cld(MLP_HIDDEN * MLP_IN + MLP_HIDDEN, n) * n + cld(MLP_OUT * MLP_HIDDEN + MLP_OUT, n) * n
        for stage in 0:3
            z = new_zero(stage, OptimizerConfig(lr=0.01))
            @test Weft.num_groups(z) == 2 && [Weft.group_of(z, k) for k in 1:4] == [1, 1, 2, 2]
            infos = train_zero(z, 0:steps-1, rows)
            @test all(i -> !i.skipped && i.grad_norm > 0 && i.comm_elements == 2padded, infos)
            mem = Weft.memory(z)
            @test mem.params == 4 * (stage == 3 ? padded ÷ n : padded)
            @test mem.optimizer == 8 * (stage == 0 ? padded : padded ÷ n)
            expect_parity("ZeRO stage $stage", read_params(z), want, r)
            close(z)
        end
        z = new_zero(3, OptimizerConfig(kind=:sgd, lr=0.05, momentum=0.9))
        train_zero(z, 0:steps-1, rows)
        expect_parity("ZeRO stage 3 SGD", read_params(z), mlp_reference(steps, RefOpt(false, 0.05, 0.9)), r)
        close(z)
        # Stage 1: 4 steps, saved, loaded into a fresh handle, 4 more steps = 8 steps.
        buf = zeros(UInt8, 256)
        if r == 0
            p = Vector{UInt8}(mktempdir())
            buf[1:length(p)] .= p
        end
        bcast!(c, buf, 0)
        dir = joinpath(String(buf[1:something(findfirst(==(0x00), buf), 257)-1]), "state")
        z = new_zero(1, OptimizerConfig(lr=0.01))
        train_zero(z, 0:steps÷2-1, rows)
        Weft.save_state(z, dir)
        close(z)
        z = new_zero(1, OptimizerConfig(lr=0.01))
        Weft.load_state!(z, dir)
        train_zero(z, steps÷2:steps-1, rows)
        expect_parity("ZeRO stage 1 saved and resumed", read_params(z), want, r)
        close(z)
        barrier(c)
        r == 0 && rm(dirname(dir); recursive=true)
    end

    @testset "ZeRO bad input" begin
        z = new_zero(3, OptimizerConfig(lr=0.01))
        @test_throws WeftError Weft.param(z, 1)
        g = zeros(Float32, MLP_SIZES[1])
        Weft.grad_ready!(z, 1, g)
        err = try
            Weft.grad_ready!(z, 1, g)
            nothing
        catch e
            e
        end
        @test err isa WeftError && occursin("fc1.weight", err.message)
        @test_throws WeftError Weft.grad_ready!(z, 2, g)      # the wrong size
        err = try
            Weft.step!(z)
            nothing
        catch e
            e
        end
        @test err isa WeftError && occursin("fc1.bias", err.message)
        close(z)
    end

    @testset "regions and ring shift" begin
        rows, cols = 7, 2                          # chunks of 3, 3 and 1 rows over 3 ranks
        G = Float32[(i - 1) * cols + (j - 1) - 5 for i in 1:rows, j in 1:cols]
        mine = G[Weft.local_indices(line, [Shard(1)], size(G))...]
        out = zeros(Float32, size(mine))
        region_apply!(out, line, :dp, :scatter, G)
        @test out == mine
        W = fill(-1.0f0, 2rows, cols)               # a strided destination: every other row
        region_apply!(view(W, 1:2:2rows, :), line, :dp, :gather, mine)
        @test W[1:2:end, :] == G && all(==(-1), W[2:2:end, :])
        x = G .* (r + 1)
        region_apply!(x, line, :dp, :copy, x; backward=true)
        total = n * (n + 1) ÷ 2
        @test x == G .* total
        part = G .* (r + 1)
        rs1, rs2 = zeros(Float32, size(mine)), zeros(Float32, size(mine))
        send, recv = Int64[10r, 1, 2], zeros(Int64, 3)
        reqs = [region_apply!(rs1, line, :dp, :seq_reduce_scatter, part; async=true),
                region_apply!(rs2, line, :dp, :seq_gather, part; backward=true, async=true),
                ring_shift!(recv, line, :dp, 1, send; async=true)]
        Weft.waitall(reqs)
        @test rs1 == mine .* total && rs2 == mine .* total
        @test recv == Int64[10 * mod(r - 1, n), 1, 2]
        back = zeros(Int64, 3)
        ring_shift!(back, line, 1, -1, recv)        # the mesh dim by index
        @test back == send
        @test_throws WeftError ring_shift!(zeros(Int64, 2), line, :dp, 3, send)
        @test_throws WeftError region_apply!(zeros(Float32, 1, 1), line, :dp, :scatter, G)
    end
    close(line)
end
