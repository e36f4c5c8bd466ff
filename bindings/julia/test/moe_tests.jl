# Tests of the MoE family (weft/moe.h), included from runtests.jl: moe_single_rank_tests() in one
# process, moe_multirank_tests(comm) on 3 ranks. They mirror the Rust (bindings/rust/weft/tests/
# moe.rs, moe_multirank.rs) and Go (moe_test.go, moe_multirank_test.go) tests: the router against
# a reference written here from moe.h's words (top-k with ties to the lower index, the three
# scores, bias, groups, both dropping rules, the losses), update_bias! against its formula, the
# layout against brute-force counts, refusals; and on 3 ranks dispatch -> a per-row expert
# function -> combine, and combine_backward!, bitwise against the one-process computation (also
# with an explicit placement and rows padded to a multiple of 4).
#
# UNTESTED: no Julia toolchain was available when this was written.

using Test
using Weft

function moe_logits(tokens, experts, seed)
    s = UInt64(seed) * 0x5851f42d4c957f2d + 0x14057b7ef767814f
    out = zeros(Float32, experts, tokens)
    for i in eachindex(out)
        s = s * 0x5851f42d4c957f2d + 0x14057b7ef767814f
        out[i] = Float32(Float64(s >> 40) / 2.0^24 * 4 - 2)
    end
    return out
end

moe_softmax(x) = (e = exp.(x .- maximum(x)); e ./ sum(e))
moe_lse(x) = (m = maximum(x); m + log(sum(exp.(x .- m))))
moe_sigmoid(x) = 1 ./ (1 .+ exp.(-x))

# The k best of score among the allowed (0-based experts), best first, ties to the lower index.
moe_topk(score, allowed, k) = first(sort([e for e in 0:length(score)-1 if allowed[e+1]];
                                         by=e -> (-score[e+1], e)), k)

function moe_scores(row, score)
    score === :softmax && return moe_softmax(row), moe_softmax(row)
    score === :topk_softmax && return moe_softmax(row), row
    s = moe_sigmoid(row)
    return s ./ sum(s), s
end

function moe_weights(row, sel, cfg)
    if cfg.score === :topk_softmax
        return moe_softmax([row[e+1] for e in sel])
    elseif cfg.score === :sigmoid
        s = [moe_sigmoid(row[e+1]) for e in sel]
        return s ./ sum(s)
    end
    p = moe_softmax(row)
    w = [p[e+1] for e in sel]
    return cfg.normalize ? w ./ sum(w) : w
end

function moe_router_reference(lg, cfg)
    E, T = size(lg)
    k = cfg.topk
    idx, w = zeros(Int32, k, T), zeros(Float64, k, T)
    selected, probsum, z = zeros(Int64, E), zeros(E), 0.0
    for t in 1:T
        row = Float64.(lg[:, t])
        p, s = moe_scores(row, cfg.score)
        sel = s .+ (cfg.bias === nothing ? 0.0 : Float64.(cfg.bias))
        allowed = trues(E)
        if cfg.groups > 1
            g = E ÷ cfg.groups
            gs = [sum(first(sort(sel[i*g+1:(i+1)*g]; rev=true), min(2, g))) for i in 0:cfg.groups-1]
            best = moe_topk(gs, trues(cfg.groups), cfg.topk_groups)
            allowed = [((e - 1) ÷ g) in best for e in 1:E]
        end
        chosen = moe_topk(sel, allowed, k)
        idx[:, t] = chosen
        w[:, t] = moe_weights(row, chosen, cfg)
        for e in chosen
            selected[e+1] += 1
        end
        probsum .+= p
        z += moe_lse(row)^2
    end
    aux = cfg.aux_loss_coeff * E * sum(selected[e] / (T * k) * probsum[e] / T for e in 1:E)
    if cfg.drop !== :none
        cap = ceil(Int, T * k / E * cfg.capacity_factor)
        for e in 0:E-1
            slots = [i for i in 1:k*T if idx[i] == e]   # column-major: token order, then slot
            cfg.drop === :by_probability && (slots = sort(slots; by=i -> (-w[i], i)))
            for i in slots[min(cap, length(slots))+1:end]
                idx[i], w[i] = Weft.WEFT_MOE_DROPPED, 0.0
            end
        end
    end
    kept = [count(==(e), idx) for e in 0:E-1]
    return (indices=idx, weights=w, kept=kept, selected=selected, aux=aux, z=cfg.z_loss_coeff * z / T)
end

function moe_single_rank_tests()
    @testset "router against the reference" begin
        bias = Float32[0.05f0 * e - 0.2f0 for e in 0:7]
        configs = [
            RouterConfig(experts=8, topk=2),
            RouterConfig(experts=8, topk=2, normalize=true, aux_loss_coeff=0.01f0, z_loss_coeff=0.001f0),
            RouterConfig(experts=8, topk=3, score=:topk_softmax, aux_loss_coeff=0.1f0),
            RouterConfig(experts=8, topk=2, score=:sigmoid, bias=bias, groups=4, topk_groups=2, aux_loss_coeff=0.02f0),
            RouterConfig(experts=8, topk=2, drop=:by_position),
            RouterConfig(experts=8, topk=2, drop=:by_probability, capacity_factor=0.75),
        ]
        for (i, cfg) in enumerate(configs)
            lg = moe_logits(13, 8, i)
            got = route(lg, cfg)
            want = moe_router_reference(lg, cfg)
            @test got.indices == want.indices
            @test isapprox(got.weights, Float32.(want.weights); rtol=1e-5, atol=1e-6)
            @test got.tokens_per_expert == want.kept
            @test got.selected_per_expert == want.selected
            @test isapprox(got.aux_loss, want.aux; rtol=1e-5, atol=1e-6)
            @test isapprox(got.z_loss, want.z; rtol=1e-5, atol=1e-6)
            g = router_backward(lg, cfg, got.indices, ones(Float32, size(got.weights)))
            @test size(g) == size(lg) && all(isfinite, g)
        end
        @test_throws WeftError route(moe_logits(4, 8, 1), RouterConfig(experts=8, topk=9))
        @test_throws WeftError route(moe_logits(4, 7, 1), RouterConfig(experts=8, topk=2))
    end

    @testset "update_bias!" begin
        b = Float32[0.5, -0.25, 0, 1]
        update_bias!(b, Int64[1, 7, 3, 1], 0.125)   # mean 3: under, over, at, under
        @test b == Float32[0.625, -0.375, 0, 1.125]
    end

    @testset "layout against brute force" begin
        E, k, n, T = 7, 3, 3, 11
        idx = Int32[(7i + 3) % E for i in 0:k*T-1]
        idx[5:5:end] .= Weft.WEFT_MOE_DROPPED
        idx = reshape(idx, k, T)
        for er in (nothing, Int32[2, 0, 1, 1, 0, 2, 0])
            rank_of(e) = er === nothing ? e ÷ 3 : Int(er[e+1])   # blocks of ceil(7 / 3) = 3
            in_rank = zeros(UInt8, n, T)
            for t in 1:T, j in 1:k
                idx[j, t] >= 0 && (in_rank[rank_of(idx[j, t])+1, t] = 1)
            end
            got = moe_layout(idx, E, n; expert_rank=er)
            @test got.token_in_rank == in_rank
            @test got.tokens_per_rank == vec(sum(Int64.(in_rank); dims=2))
            @test got.tokens_per_expert == [count(==(e), idx) for e in 0:E-1]
        end
        @test_throws WeftError moe_layout(Int32[0 9; 1 2], 8, 2)
    end
end

const MOE_E, MOE_H, MOE_K = 5, 4, 2

function moe_inputs(rank, tokens)
    x = Float32[Float32(rank * 100 + i) * 0.125f0 - 3 for i in 0:MOE_H*tokens-1]
    idx, w = zeros(Int32, MOE_K, tokens), zeros(Float32, MOE_K, tokens)
    for t in 0:tokens-1
        a = (rank * 3 + t * 2) % MOE_E
        b = (a + 1 + (t + rank) % (MOE_E - 1)) % MOE_E
        drop = (t + rank) % 4 == 3   # every fourth token drops its second slot
        idx[:, t+1] = Int32[a, drop ? Weft.WEFT_MOE_DROPPED : b]
        w[:, t+1] = Float32[0.75f0 - 0.0625f0 * t, drop ? 0.0f0 : 0.25f0 + 0.03125f0 * rank]
    end
    return reshape(x, MOE_H, tokens), idx, w
end

moe_expert(e, col) = Float32[col[h+1] * (Float32(e) + 1) - 0.5f0 * h for h in 0:length(col)-1]
moe_grad_out(rank, tokens) = reshape(Float32[1 - Float32(rank * 7 + i) * 0.0625f0 for i in 0:MOE_H*tokens-1], MOE_H, tokens)

function moe_case(c, m, tokens; expert_rank=nothing, alignment=0)
    r = Weft.rank(c)
    all_in = [moe_inputs(q, tokens[q+1]) for q in 0:2]
    x, idx, w = all_in[r+1]
    h = dispatch(m, x, idx, w)
    rank_of(e) = expert_rank === nothing ? e ÷ 2 : Int(expert_rank[e+1])   # blocks of ceil(5 / 3) = 2
    local_experts = Int32[e for e in 0:MOE_E-1 if rank_of(e) == r]
    # (expert, source rank, source token, weight, data) in moe.h's order; padding rows have no
    # expert, weight 0 and zeros (their source is not specified: masked in what was received).
    want = []
    for e in local_experts
        for q in 0:2, t in 0:tokens[q+1]-1, j in 1:MOE_K
            qx, qi, qw = all_in[q+1]
            qi[j, t+1] == e && push!(want, (e, q, t, qw[j, t+1], qx[:, t+1]))
        end
        while alignment > 1 && length(want) % alignment != 0
            push!(want, (-1, -1, -1, 0.0f0, zeros(Float32, MOE_H)))
        end
    end
    data = received(h)
    got = [h.row_expert[i] < 0 ? (h.row_expert[i], -1, -1, h.row_weight[i], data[:, i]) :
           (h.row_expert[i], h.row_source_rank[i], h.row_source_token[i], h.row_weight[i], data[:, i]) for i in 1:h.rows]
    @test h.local_experts == local_experts
    @test h.offsets[end] == h.rows == length(want)
    @test got == want
    expert_out = zeros(Float32, MOE_H, h.rows)
    for (i, g) in enumerate(got)   # padding rows' outputs huge: combine must ignore them
        expert_out[:, i] = g[1] < 0 ? fill(1.0f30, MOE_H) : moe_expert(g[1], g[5])
    end
    out, plain = zeros(Float32, MOE_H, tokens[r+1]), zeros(Float32, MOE_H, tokens[r+1])
    combine!(m, h, expert_out, out)
    combine!(m, h, expert_out, plain; weighted=false)
    gout = moe_grad_out(r, tokens[r+1])
    gexp, gw = zeros(Float32, MOE_H, h.rows), zeros(Float32, MOE_K, tokens[r+1])
    combine_backward!(m, h, gout, gexp, gw)
    w_out, w_plain, w_gw = zero(out), zero(plain), zero(gw)
    for t in 1:tokens[r+1], j in 1:MOE_K
        e = idx[j, t]
        e == Weft.WEFT_MOE_DROPPED && continue
        y = moe_expert(e, x[:, t])
        dot = 0.0f0
        for k in 1:MOE_H
            w_out[k, t] += w[j, t] * y[k]
            w_plain[k, t] += y[k]
            dot += gout[k, t] * y[k]
        end
        w_gw[j, t] = dot
    end
    w_gexp = zeros(Float32, MOE_H, h.rows)
    for (i, g) in enumerate(got)
        g[1] < 0 && continue   # padding rows stay zero
        w_gexp[:, i] = g[4] .* moe_grad_out(g[2], tokens[g[2]+1])[:, g[3]+1]
    end
    @test reinterpret(UInt32, vec(out)) == reinterpret(UInt32, vec(w_out))
    @test reinterpret(UInt32, vec(plain)) == reinterpret(UInt32, vec(w_plain))
    @test reinterpret(UInt32, vec(gexp)) == reinterpret(UInt32, vec(w_gexp))
    @test reinterpret(UInt32, vec(gw)) == reinterpret(UInt32, vec(w_gw))
    close(h)
end

function moe_multirank_tests(c)
    m = Moe(c, MOE_E, MOE_H)
    @testset "dispatch and combine, T = 5, 2, 4" begin
        moe_case(c, m, [5, 2, 4])
    end
    @testset "dispatch and combine, T = 3, 0, 6" begin
        moe_case(c, m, [3, 0, 6])
    end
    @testset "a bad expert index on rank 1" begin
        x, idx, w = moe_inputs(Weft.rank(c), 3)
        Weft.rank(c) == 1 && (idx[1, 3] = MOE_E)   # token 2, slot 0
        err = try
            dispatch(m, x, idx, w)
            nothing
        catch e
            e
        end
        @test err isa WeftError
        Weft.rank(c) == 1 && @test err.status == Weft.ERR_INVALID_ARGUMENT && occursin("token 2", err.message)
    end
    close(m)
    @testset "explicit placement, rows aligned to 4" begin
        er = Int32[2, 1, 0, 1, 0]
        placed = Moe(c, MOE_E, MOE_H; expert_rank=er, expert_alignment=4)
        moe_case(c, placed, [5, 2, 4]; expert_rank=er, alignment=4)
        close(placed)
    end
end
