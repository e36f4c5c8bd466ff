# Tests of the Julia binding. Run with
#     julia --project -e 'using Pkg; Pkg.test()'                      # one process
#     weftrun -n 3 julia --project -e 'using Pkg; Pkg.test()'         # three ranks
# (libweft from WEFT_LIBRARY, the system's search path, or the repository's build/lib).
#
# In one process the single-rank tests run, and when weftrun is found ($WEFTRUN or the
# repository's build/bin/weftrun) this file re-runs itself under `weftrun -n 3` with
# WEFT_JULIA_CHILD=1 and checks the job's exit status. Under a launcher (WEFT_WORLD_SIZE set)
# the multi-rank tests run on every rank.
using Test
using Weft

const HERE = @__DIR__
const UNDER_LAUNCHER = haskey(ENV, "WEFT_WORLD_SIZE")

include("mesh_tests.jl")   # mesh_single_rank_tests(), mesh_multirank_tests(comm)
include("training_tests.jl")   # training_single_rank_tests(), training_multirank_tests(comm)
include("pipeline_tests.jl")   # pipeline_single_rank_tests(), pipeline_multirank_tests(comm)
include("moe_tests.jl")   # moe_single_rank_tests(), moe_multirank_tests(comm)
include("plugin_tests.jl")   # plugin_single_rank_tests(), plugin_multirank_tests(comm)
include("plan_tests.jl")   # plan_single_rank_tests() (the planner communicates nothing)

function solo()
    id = Weft.unique_id()
    return Comm(id, 0, 1; config=Config(timeout=20, name="solo"))
end

@noinline function drop_comm_and_request()
    tmp = solo()
    allreduce!(tmp, zeros(8); async=true)   # never waited for
    return nothing
end

function single_rank_tests()
    @testset "library" begin
        v, abi = Weft.version()
        @test abi == Weft.WEFT_ABI_VERSION
        @test v == VersionNumber(Weft.WEFT_VERSION_MAJOR, Weft.WEFT_VERSION_MINOR, Weft.WEFT_VERSION_PATCH)
        for (T, n) in ((Float64, 8), (Float32, 4), (Float16, 2), (Int8, 1), (UInt8, 1),
                       (Int32, 4), (UInt32, 4), (Int64, 8), (UInt64, 8))
            @test Weft.dtype_size(Weft.dtype(T)) == n == sizeof(T)
        end
        @test Weft.dtype_size(Weft.BFLOAT16) == 2
        @test startswith(Weft.status_string(Weft.ERR_TIMEOUT), "WEFT_ERR_TIMEOUT")
        @test occursin("UNKNOWN", Weft.status_string(1234))
        @test sizeof(Weft.CommConfigC) == 40
        @test sizeof(Weft.UniqueIdC) == 128
        # WEFT_LIBRARY is the only candidate when set, and a failed dlopen says why.
        withenv("WEFT_LIBRARY" => "/nonexistent/libweft.so") do
            @test Weft._library_candidates() == [("/nonexistent/libweft.so", "WEFT_LIBRARY")]
            msg = try
                Weft._open_library()
                ""
            catch e
                sprint(showerror, e)
            end
            @test occursin("/nonexistent/libweft.so (WEFT_LIBRARY)", msg)
            @test occursin("No such file", msg)
        end
        @test Weft._check_abi(Weft._handle[], Weft.library_path()) == Weft._handle[]
    end

    @testset "errors" begin
        id = Weft.unique_id()
        err = try
            Comm(id, 3, 2)
            nothing
        catch e
            e
        end
        @test err isa WeftError
        @test err.status == Weft.ERR_INVALID_ARGUMENT
        @test occursin("weft_comm_init", err.message)
        @test occursin("WEFT_ERR_INVALID_ARGUMENT", sprint(showerror, err))
        @test_throws WeftError Comm(id, 0, 1; config=Config(name="a\0b"))
        @test_throws WeftError Comm(id, 0, 1; config=Config(timeout=-1))
        @test Weft.UniqueId(Weft.bytes(id)).bytes == id.bytes
        @test sprint(show, id) == "Weft.UniqueId(..)"
    end

    @testset "one rank" begin
        c = solo()
        @test (Weft.rank(c), Weft.nranks(c), Weft.local_rank(c), Weft.local_size(c)) == (0, 1, 0, 1)
        send = [1.5, -2.0, 3.25]
        recv = zeros(3)
        @test allreduce!(c, send, recv, Weft.SUM) === recv
        @test recv == send
        h = Float16[1.5, -0.25]
        allreduce!(c, h, Weft.MAX)
        @test h == Float16[1.5, -0.25]
        ints = Int64[7, -9]
        bcast!(c, ints, 0)
        reduce!(c, ints, Weft.PROD, 0)
        @test ints == [7, -9]
        out = zeros(UInt8, 2)
        allgather!(c, UInt8[4, 5], out)
        @test out == [4, 5]
        alltoall!(c, UInt8[9, 8], out)
        @test out == [9, 8]
        m = reshape(Float32[1, 2, 3, 4], 2, 2)     # any dense array shape
        allreduce!(c, m)
        @test m == reshape(Float32[1, 2, 3, 4], 2, 2)
        barrier(c)
        allreduce!(c, UInt32[], UInt32[])
        allgather!(c, Int8[])
        close(c)
        @test !isopen(c)
        close(c)   # twice is fine
        @test_throws WeftError barrier(c)
    end

    @testset "p2p_batch! to self" begin
        c = solo()
        out, back = Float64[1.5, -2.0, 3.25], zeros(3)
        @test p2p_batch!(c, [P2POp(:recv, back, 0), P2POp(:send, out, 0)]) === nothing
        @test back == out
        @test p2p_batch!(c, P2POp[]) === nothing
        back2 = zeros(Int32, 2)
        r = p2p_batch!(c, [P2POp(:send, Int32[7, 8], 0), P2POp(:recv, back2, 0)]; async=true)
        wait(r)
        @test back2 == Int32[7, 8]
        @test_throws WeftError p2p_batch!(c, [P2POp(:send, out, 1)])
        @test_throws WeftError p2p_batch!(c, [P2POp(:sendrecv, out, 0)])
        close(c)
    end

    @testset "length checks" begin
        c = solo()
        two = zeros(Float32, 2)
        @test_throws WeftError allreduce!(c, zeros(Float32, 3), two)
        @test_throws WeftError bcast!(c, two, 1)
        @test_throws WeftError allgather!(c, zeros(Float32, 3), two)
        @test_throws WeftError reduce!(c, two, nothing, Weft.SUM, 0)
        @test_throws WeftError gather!(c, two, nothing, 0)
        @test_throws WeftError scatter!(c, nothing, two, 0)
        @test_throws WeftError send(c, UInt8[1], 1)
        @test_throws WeftError allgatherv!(c, two, two, [2, 0], [0])
        @test_throws WeftError allgatherv!(c, two, two, [2], [1])
        @test_throws WeftError allgatherv!(c, two[1:1], two, [2], [0])
        close(c)
    end

    @testset "async and the finalizer queue" begin
        c = solo()
        send = UInt32[1, 2, 3]
        recv = zeros(UInt32, 3)
        r1 = allreduce!(c, send, recv; async=true)
        @test r1 isa Request
        buf = fill(Int32(5), 4)
        r2 = allreduce!(c, buf, Weft.MIN; async=true)
        while !Weft.test(r1)
            sleep(0.0001)
        end
        wait(r1)                      # again: no-op
        wait(r2)
        @test recv == send
        @test buf == fill(Int32(5), 4)
        Weft.waitall([barrier(c; async=true)])   # not exported: Base.waitall (Julia 1.12)

        # A dropped request is queued by its finalizer (called by hand here, as the GC would)
        # on its own communicator: another communicator's call leaves it alone (it may run on
        # another thread), the owner's next call frees it once complete.
        tmp = solo()
        req = allreduce!(tmp, zeros(8); async=true)
        Weft._finalize_request(req)
        @test Weft.pending_count(tmp) == 1
        barrier(c)
        @test Weft.pending_count(tmp) == 1
        for _ in 1:100                              # the allreduce completes; a bound, not a spin
            Weft.pending_count(tmp) == 0 && break
            barrier(tmp)
            sleep(0.01)
        end
        @test Weft.pending_count(tmp) == 0
        # A dropped communicator takes its queued requests along to the global queue, which
        # the next call on any thread drains (nobody can be using an unreachable communicator):
        # complete requests are freed, a pending one waits for a later call with its
        # communicator, so no call blocks on another communicator's operation.
        function drained()                          # a bound, not a spin: each call drains again
            for _ in 1:100
                Weft.pending_count() == 0 && break
                barrier(c)
                sleep(0.01)
            end
            return Weft.pending_count()
        end
        req = allreduce!(tmp, zeros(8); async=true)
        Weft._finalize_request(req)
        Weft._finalize_comm(tmp)
        @test Weft.pending_count() == 2
        @test !isopen(tmp)
        barrier(c)                                  # drains the queue (or requeues the pending)
        @test drained() == 0
        # The same through the garbage collector.
        drop_comm_and_request()
        GC.gc(true)
        GC.gc(true)
        barrier(c)
        @test drained() == 0
        close(c)
    end

    @testset "split, dup, abort" begin
        c = solo()
        @test split(c, -1) === nothing
        sub = split(c, 3, 0)
        @test Weft.nranks(sub) == 1
        d = Weft.dup(c)
        barrier(d)
        t = Threads.@spawn Weft.abort(d)
        wait(t)
        err = try
            barrier(d)
            nothing
        catch e
            e
        end
        @test err isa WeftError && err.status == Weft.ERR_ABORTED
        close(d)
        close(sub)
        barrier(c)
        close(c)
    end
end

function multirank_tests()
    c = Comm()
    r, n = Weft.rank(c), Weft.nranks(c)
    @test n == 3
    @test Weft.local_rank(c) < Weft.local_size(c)
    nxt, prv = mod(r + 1, n), mod(r - 1, n)

    @testset "dtype sweep $T" for T in (Float64, Float32, Float16, Int8, UInt8, Int32, UInt32, Int64, UInt64)
        count = 5
        send = T[(r + 1) * i for i in 1:count]
        recv = zeros(T, count)
        allreduce!(c, send, recv, Weft.SUM)
        @test recv == T[n * (n + 1) ÷ 2 * i for i in 1:count]
        buf = copy(send)
        allreduce!(c, buf, Weft.MAX)
        @test buf == T[n * i for i in 1:count]
        b = r == 1 ? T[6 + i for i in 1:count] : zeros(T, count)
        bcast!(c, b, 1)
        @test b == T[6 + i for i in 1:count]
        gathered = zeros(T, count * n)
        allgather!(c, send, gathered)
        @test gathered == T[(j ÷ count + 1) * (j % count + 1) for j in 0:count*n-1]
    end

    @testset "ops" begin
        p = Int32[r + 2, -r - 1]
        allreduce!(c, p, Weft.PROD)
        @test p == Int32[24, -6]
        a = Int32[2r + 1]
        allreduce!(c, a, Weft.AVG)
        @test a == Int32[3]
        w = UInt8[200]
        allreduce!(c, w, Weft.SUM)
        @test w == UInt8[600 % 256]
        big = 300_007
        bs = Float32[(i % 1000) + r for i in 0:big-1]
        br = zeros(Float32, big)
        allreduce!(c, bs, br)
        @test all(br[i+1] == 3 * (i % 1000) + 3 for i in 0:big-1)
    end

    contrib = Int64[r * 10 + i for i in 0:3]
    @testset "reduce" begin
        out = r == 2 ? zeros(Int64, 4) : nothing
        reduce!(c, contrib, out, Weft.SUM, 2)
        r == 2 && @test out == Int64[30 + 3i for i in 0:3]
        c2 = copy(contrib)
        reduce!(c, c2, Weft.MAX, 0)
        r == 0 && @test c2 == Int64[20 + i for i in 0:3]
    end

    counts, displs = [1, 2, 3], [0, 2, 5]
    want_agv = UInt32[0, 99, 10, 10, 99, 20, 20, 20]
    @testset "allgather(v)" begin
        ag = fill(Int32(-1), 6)
        ag[2r+1:2r+2] = Int32[r, 100 + r]
        allgather!(c, ag)
        @test ag == Int32[0, 100, 1, 101, 2, 102]
        mine = fill(UInt32(10r), r + 1)
        agv = fill(UInt32(99), 8)
        allgatherv!(c, mine, agv, counts, displs)
        @test agv == want_agv
        agv2 = fill(UInt32(99), 8)
        agv2[displs[r+1]+1:displs[r+1]+r+1] .= UInt32(10r)
        allgatherv!(c, agv2, counts, displs)
        @test agv2 == want_agv
    end

    @testset "reduce_scatter" begin
        rs_send = Float64[(j ÷ 2 + 1) * (r + 1) for j in 0:5]
        rs = zeros(2)
        reduce_scatter!(c, rs_send, rs, Weft.SUM)
        @test rs == fill(6.0 * (r + 1), 2)
        ip = copy(rs_send)
        reduce_scatter!(c, ip)
        @test ip[2r+1:2r+2] == rs
    end

    @testset "alltoall(v)" begin
        a2a = Int8[10r + j for j in 0:2]
        out = zeros(Int8, 3)
        alltoall!(c, a2a, out)
        @test out == Int8[10i + r for i in 0:2]
        ip = copy(a2a)
        alltoall!(c, ip)
        @test ip == out
        scounts, sdispls = [1, 2, 3], [0, 1, 3]
        sendv = UInt64[10r + j for j in 0:2 for _ in 0:j]
        rcounts = fill(r + 1, 3)
        rdispls = [0, r + 1, 2(r + 1)]
        recvv = zeros(UInt64, 3(r + 1))
        alltoallv!(c, sendv, scounts, sdispls, recvv, rcounts, rdispls)
        @test recvv == UInt64[10i + r for i in 0:2 for _ in 0:r]
        ipv = UInt64[10r + j for j in 0:2]
        alltoallv!(c, ipv, [1, 1, 1], [0, 1, 2], [1, 1, 1], [0, 1, 2])
        @test ipv == UInt64[10i + r for i in 0:2]
    end

    @testset "gather, scatter" begin
        gsend = Float32[r, -r]
        gout = r == 1 ? zeros(Float32, 6) : nothing
        gather!(c, gsend, gout, 1)
        want = Float32[0, 0, 1, -1, 2, -2]
        r == 1 && @test gout == want
        gip = r == 1 ? Float32[0, 0, 1, -1, 0, 0] : copy(gsend)
        gather!(c, gip, 1)
        r == 1 && @test gip == want
        table = Int32.(0:5)
        part = zeros(Int32, 2)
        scatter!(c, r == 1 ? table : nothing, part, 1)
        @test part == Int32[2r, 2r + 1]
        sip = r == 1 ? copy(table) : zeros(Int32, 2)
        scatter!(c, sip, 1)
        @test (r == 1 ? sip[3:4] : sip) == part
    end

    @testset "point to point" begin
        msg, got = fill(Int32(r), 3), zeros(Int32, 3)
        if iseven(r)
            send(c, msg, nxt)
            recv!(c, got, prv)
        else
            recv!(c, got, prv)
            send(c, msg, nxt)
        end
        @test got == fill(Int32(prv), 3)
        barrier(c)
    end

    @testset "async" begin
        x = fill(Float32(r + 1), 1000)
        xs = zeros(Float32, 1000)
        y = fill(Float16(r), 16)
        z = r == 0 ? UInt8[1, 2, 3, 4] : zeros(UInt8, 4)
        ring = zeros(Int64, 2)
        reqs = [
            allreduce!(c, x, xs; async=true),
            allreduce!(c, y, Weft.MAX; async=true),
            bcast!(c, z, 0; async=true),
            recv!(c, ring, prv; async=true),
            send(c, Int64[7r, 7r + 1], nxt; async=true),
            barrier(c; async=true),
        ]
        GC.gc()
        while !Weft.test(reqs[3])
            sleep(0.0001)
        end
        Weft.waitall(reverse(reqs))
        @test all(xs .== 6)
        @test all(y .== Float16(2))
        @test z == UInt8[1, 2, 3, 4]
        @test ring == Int64[7prv, 7prv + 1]
    end

    @testset "split, dup, timeout" begin
        sub = split(c, r % 2, -r)
        @test Weft.nranks(sub) == (iseven(r) ? 2 : 1)
        s = Int32[r]
        allreduce!(sub, s)
        @test s[1] == (iseven(r) ? 2 : 1)
        r == 0 && @test Weft.rank(sub) == 1
        none = split(c, r == 2 ? -1 : 0)
        @test (none === nothing) == (r == 2)
        none === nothing || close(none)
        close(sub)

        short = split(c, 0, r; config=Config(timeout=0.4, name="short"))
        if r == 0
            err = try
                recv!(short, zeros(UInt8, 4), 1)
                nothing
            catch e
                e
            end
            @test err isa WeftError && err.status == Weft.ERR_TIMEOUT
        end
        close(short)
        d = Weft.dup(c)
        barrier(d)
        close(d)
    end
    @testset "meshes and sharded tensors" begin
        mesh_multirank_tests(c)
    end
    @testset "training: bucketer, ZeRO, regions" begin
        training_multirank_tests(c)
    end
    @testset "pipelines: schedules and the executor" begin
        pipeline_multirank_tests(c)
    end
    @testset "MoE: dispatch and combine" begin
        moe_multirank_tests(c)
    end
    @testset "plugins: Julia and plugin operators" begin
        plugin_multirank_tests(c)
    end
    barrier(c)
    close(c)
end

function spawn_multirank()
    weftrun = get(ENV, "WEFTRUN", normpath(joinpath(HERE, "..", "..", "..", "build", "bin", "weftrun")))
    if !isfile(weftrun)
        @warn "weftrun not found at $weftrun: multi-rank tests skipped (set WEFTRUN)"
        return
    end
    project = something(Base.active_project(), joinpath(HERE, ".."))
    cmd = `$weftrun -n 3 --timeout 300 $(Base.julia_cmd()) --project=$project $(joinpath(HERE, "runtests.jl"))`
    cmd = addenv(cmd, "WEFT_JULIA_CHILD" => "1", "WEFT_TIMEOUT" => "120")
    @testset "multi-rank (weftrun -n 3)" begin
        @test success(pipeline(cmd; stdout=stdout, stderr=stderr))
    end
end

if UNDER_LAUNCHER
    @testset "Weft multi-rank" begin
        multirank_tests()
    end
else
    @testset "Weft" begin
        single_rank_tests()
        mesh_single_rank_tests()
        training_single_rank_tests()
        pipeline_single_rank_tests()
        moe_single_rank_tests()
        plugin_single_rank_tests()
        plan_single_rank_tests()
    end
    spawn_multirank()
end
