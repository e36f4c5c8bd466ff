# Tests of the plugin family (weft/plugin.h), included from runtests.jl: plugin_single_rank_tests()
# in one process, plugin_multirank_tests(comm) on 3 ranks. They mirror the Rust
# (bindings/rust/weft/tests/plugin.rs) and Go (plugin_test.go) tests with the C plugin
# plugins/c_reduce ($WEFT_TEST_C_REDUCE_PLUGIN, else build/plugins/libweft_c_reduce.so; skipped
# with a warning when it is not built): the manifest's entries, calls by name of every argument
# type against references written here (a Julia closure through apply_twice), a type mismatch
# named by weft, a bad path; and on 3 ranks a Julia operator (register_op) and the plugin's absmax
# in allreduce! against the reduction of every rank's inputs done here.
#
# UNTESTED: no Julia toolchain was available when this was written.

using Test
using Weft

function plugin_path()
    p = get(ENV, "WEFT_TEST_C_REDUCE_PLUGIN",
            normpath(joinpath(@__DIR__, "..", "..", "..", "build", "plugins", "libweft_c_reduce.so")))
    isfile(p) && return p
    @warn "the C plugin is not built at $p: plugin tests skipped (set WEFT_TEST_C_REDUCE_PLUGIN)"
    return nothing
end

plugin_inputs(rank, n, seed) = Float64[(((i * 7919 + rank * 104729 + seed * 13) % 2001) - 1000) / 97 for i in 0:n-1]

function plugin_single_rank_tests()
    path = plugin_path()
    path === nothing && return
    @testset "plugin: manifest and calls by name" begin
        p = Weft.load_plugin(path)
        @test !isempty(p.name) && !isempty(p.version) && p.abi[1] == 1
        names = Set(e.name for e in p.entries)
        @test issubset(Set(["add_i64", "dot_f64", "apply_twice", "tensor_sum", "strlen_u64", "absmax", "logsumexp",
                            "sum_f32"]), names)
        e = Weft.entry(p, "dot_f64")
        @test Weft.signature(e) == "F64(PTR, PTR, SIZE)"
        a = Weft.entry(p, "absmax")
        @test a.kind == Weft.WEFT_PLUGIN_REDUCE_OP && a.id >= Weft.WEFT_PLUGIN_ID_BASE
        @test Weft.op(a) == CustomOp(Cint(a.id))

        @test Weft.call(p, "add_i64", 1 << 40, -7) == (1 << 40) - 7
        x = [sin(0.37i) for i in 0:40]
        y = [1 + i / 8 for i in 0:40]
        @test isapprox(Weft.call(p, "dot_f64", x, y, length(x)), sum(x .* y); rtol=41 * eps(Float64))
        t = Float32[(i - 1) * 0.25f0 - 1 for i in 1:15]
        @test isapprox(Weft.call(p, "tensor_sum", reshape(t, 5, 3)), sum(Float64.(t)); rtol=15 * eps(Float32))
        @test Weft.call(p, "strlen_u64", "plugins from julia") == 18

        calls = Ref(0)
        f = Weft.Closure(Weft.WEFT_TYPE_F64, [Weft.WEFT_TYPE_F64]) do v
            calls[] += 1
            2v + 1
        end
        @test Weft.call(p, "apply_twice", f, 3.0) == 2 * (2 * 3 + 1) + 1
        @test calls[] == 2
        @test Weft.failures(f)[1] == 0
        close(f)

        ia = Int64[(i - 4) * 1000 + i for i in 0:8]
        ib = Int64[3500 - i * 777 for i in 0:8]
        dst = zeros(Int64, 9)
        @test Weft.call(p, "absmax", dst, ia, ib, 9, Cint(Weft.INT64)) == 0
        @test dst == max.(abs.(ia), abs.(ib))

        err = try
            Weft.call(p, "add_i64", 1.5, 2)
            nothing
        catch e
            e
        end
        @test err isa WeftError && occursin("argument 0 of 'add_i64'", err.message)
        err = try
            Weft.load_plugin("/no/such/plugin.so")
            nothing
        catch e
            e
        end
        @test err isa WeftError && occursin("/no/such/plugin.so", err.message)
        close(p)
    end
end

function plugin_multirank_tests(c)
    path = plugin_path()
    path === nothing && return
    # Every rank registers in the same order, so the ids agree.
    u = Weft.register_op(Float64; name="julia_absmax") do dst, a, b
        dst .= max.(abs.(a), abs.(b))
    end
    p = Weft.load_plugin(path)
    plug = Weft.op(Weft.entry(p, "absmax"))
    for n in (1, 10, 100003)
        all = [plugin_inputs(r, n, n) for r in 0:c.nranks-1]
        want = reduce((x, y) -> max.(x, y), [abs.(v) for v in all])
        for o in (Weft.op(u), plug)
            x = copy(all[c.rank+1])
            allreduce!(c, x, o)
            @test x == want
        end
    end
    @test isempty(u.last_error)
    barrier(c)
    close(u)
    close(p)
end
