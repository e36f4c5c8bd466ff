# Tests of meshes, sharded tensors, redistribution and checkpoints (weft/mesh.h), included from
# runtests.jl: mesh_single_rank_tests() in one process, mesh_multirank_tests(comm) on 3 ranks.

using Test
using Weft

# The (start, stop) 1-based global indices of piece i (0-based) of n over k (torch.chunk's rule).
function chunk_range(n, k, i)
    c = cld(n, k)
    return min(i * c, n) + 1:min((i + 1) * c, n)
end

# A global array every rank can compute.
function global_array(T, dims...; salt=0)
    v = T[((i * 3 + salt) % 1000) - 300 for i in 0:prod(dims)-1]
    return reshape(v, dims...)
end

# The raw (row-major) bytes of tensor `name` in a safetensors file, and its shape.
function read_safetensors(path, name)
    bytes = read(path)
    n = Int(reinterpret(UInt64, bytes[1:8])[1])
    header = String(bytes[9:8+n])
    key = findfirst(Regex("\"" * name * "\"\\s*:\\s*\\{"), header)
    key === nothing && error("tensor $name not found in the safetensors header: $header")
    stop = findnext('}', header, last(key))
    obj = header[last(key)+1:stop-1]
    sm = match(r"\"shape\"\s*:\s*\[([0-9,\s]*)\]", obj)
    om = match(r"\"data_offsets\"\s*:\s*\[\s*(\d+)\s*,\s*(\d+)\s*\]", obj)
    shape = parse.(Int, split(sm.captures[1], ','; keepempty=false))
    lo, hi = parse(Int, om.captures[1]), parse(Int, om.captures[2])
    return bytes[9+n+lo:8+n+hi], shape
end

function mesh_single_rank_tests()
    if !Weft.has_function(:weft_redistribute)
        @warn "the loaded libweft lacks the mesh.h functions: mesh tests skipped"
        return
    end
    @testset "struct layouts" begin
        @test sizeof(Weft.TensorC) == 48
        @test fieldoffset(Weft.TensorC, 6) == 24          # shape
        @test sizeof(Weft.PlacementC) == 12
        @test sizeof(Weft.StepC) == 48
        @test fieldoffset(Weft.StepC, 5) == 32            # bytes_sent
        @test sizeof(Weft.MeshConfigC) == 24
        @test sizeof(Weft.ShardedConfigC) == 16
        @test sizeof(Weft.CheckpointConfigC) == 16
    end

    @testset "placements" begin
        @test Weft._placement_c(Shard(2)) == Weft.PlacementC(Weft.WEFT_SHARD, 1, 0)   # 1-based -> 0-based
        @test Weft._placement_jl(Weft._placement_c(Shard(3))) == Shard(3)
        @test Weft._placement_jl(Weft._placement_c(Partial(Weft.MAX))) == Partial(Weft.MAX)
        @test Weft._placement_jl(Weft._placement_c(Replicate())) == Replicate()
        @test Partial() == Partial(Weft.SUM)
        @test_throws WeftError Shard(0)
        @test sprint(show, Shard(1)) == "Shard(1)"
    end

    @testset "views: Julia's column-major strides reach the C side" begin
        A = zeros(Float32, 7, 3)
        @test Weft._view_dims(A) == (Int64[7, 3], Int64[1, 7])
        @test Weft._view_dims(view(zeros(10, 6), 2:2:10, 1:3)) == (Int64[5, 3], Int64[2, 10])
        @test Weft._view_dims(zeros(9, 0)) == (Int64[9, 0], Int64[1, 9])
        @test Weft._view_dims(zeros(1, 4))[2][2] == 1
        @test_throws WeftError Weft._view_dims(view(zeros(4, 4), 4:-1:1, :))
    end

    @testset "one-rank mesh" begin
        c = solo()
        m = Mesh(c, (1, 1); names=(:dp, :tp))
        @test size(m) == (1, 1) && ndims(m) == 2 && length(m) == 1
        @test Weft.dimnames(m) == ["dp", "tp"]
        @test Weft.is_member(m) && Weft.coords(m) == (0, 0) && Weft.mesh_rank(m) == 0
        @test Weft.dim_index(m, :tp) == 2
        @test_throws WeftError Weft.dim_index(m, "nope")
        @test Weft.parent_rank(m, 0) == 0
        tp = Weft.comm(m, :tp)
        @test Weft.nranks(tp) == 1 && Weft.comm(m, 2) === tp
        x = [2.5]
        allreduce!(tp, x)
        @test x == [2.5]
        close(tp)                        # detaches only
        whole = Weft.comm(m)
        barrier(whole)
        @test Weft.local_shape(m, [Shard(1), Shard(2)], (5, 3)) == (5, 3)
        @test Weft.local_indices(m, [Replicate(), Shard(1)], (5, 3)) == (1:5, 1:3)
        @test_throws WeftError Weft.local_shape(m, [Shard(1)], (4,))
        close(m)
        @test !isopen(m) && !isopen(whole)
        @test_throws WeftError barrier(whole)
        barrier(c)
        @test_throws WeftError Mesh(c, (2,))
        @test_throws WeftError Mesh(c, (1, 1); names=("a", "a"))
        @test_throws WeftError Mesh(c, (1,); ranks=[3])
        d = Mesh(c, 1)
        @test Weft.dimnames(d) == ["d0"]
        close(d)
        close(c)
    end

    @testset "one-rank sharded tensors" begin
        c = solo()
        m = Mesh(c, (1,); names=(:dp,))
        G = global_array(Float64, 7, 3)
        src = ShardedTensor(m, (7, 3), [Shard(2)], copy(G); name="g")
        v = Weft.local_view(src)
        @test v.shape == [7, 3] && v.strides == [1, 7] && v.dtype == Weft.FLOAT64
        dst = ShardedTensor(m, (7, 3), [Replicate()], Float64)
        @test redistribute!(dst, src) === localpart(dst)
        @test localpart(dst) == G
        @test Weft.full(src) == G
        # a strided destination: every other row of a (14, 3) array
        W = zeros(14, 3)
        tdst = ShardedTensor(m, (7, 3), [Replicate()], view(W, 1:2:13, :))
        @test Weft.local_view(tdst).strides == [2, 14]
        r = redistribute!(tdst, src; async=true)
        wait(r)
        @test W[1:2:13, :] == G && all(iszero, W[2:2:14, :])
        nxt = zeros(7, 3)
        Weft.set_local!(dst, nxt)
        redistribute!(dst, src)
        @test nxt == G
        steps = Weft.plan(src, dst)
        @test steps isa Vector{Weft.Step}
        @test_throws WeftError ShardedTensor(m, (7, 4), [Shard(1)], zeros(7, 3))   # wrong local shape
        @test_throws WeftError ShardedTensor(m, (7, 3), [Partial(Weft.PROD)], zeros(7, 3))
        close(dst)
        @test_throws WeftError redistribute!(dst, src)
        close(src)
        close(m)
        close(c)
    end

    @testset "one-rank checkpoint" begin
        c = solo()
        m = Mesh(c, (1,); names=(:dp,))
        dir = mktempdir()
        G = global_array(Float64, 7, 3; salt=5)
        b = Int64[7, -8, 9]
        Weft.save_checkpoint(c, joinpath(dir, "ck"), Dict("w" => ShardedTensor(m, (7, 3), [Shard(1)], copy(G)),
                                                        "b" => ShardedTensor(m, (3,), [Replicate()], copy(b))); fsync=false)
        @test isfile(joinpath(dir, "ck", "index.weft"))
        w2 = ShardedTensor(m, (7, 3), [Replicate()], Float64)
        b2 = ShardedTensor(m, (3,), [Shard(1)], Int64)
        Weft.load_checkpoint!(joinpath(dir, "ck"), ["w" => w2, "b" => b2])
        @test localpart(w2) == G && localpart(b2) == b
        @test_throws WeftError Weft.load_checkpoint!(joinpath(dir, "ck"), Dict("nope" => b2))
        ck = Weft.Checkpoint(joinpath(dir, "ck"))
        @test length(ck) == 2
        t = ck["w"]
        @test t.dtype == Weft.FLOAT64 && t.shape == [7, 3] && t.nshards >= 1
        @test Set(x.name for x in ck) == Set(["w", "b"])
        Weft.verify(ck)
        st = joinpath(dir, "all.safetensors")
        Weft.export_safetensors(ck, st)
        close(ck)
        # the file holds the logical tensor in row-major order: Julia's G[i, j] at C index (i-1, j-1)
        data, shape = read_safetensors(st, "w")
        @test shape == [7, 3]
        @test permutedims(reshape(reinterpret(Float64, data), 3, 7)) == G
        rm(dir; recursive=true)
        close(m)
        close(c)
    end
end

function mesh_multirank_tests(c::Comm)
    Weft.has_function(:weft_redistribute) || return
    r, n = Weft.rank(c), Weft.nranks(c)
    line = Mesh(c, (n,); names=(:dp,))
    grid = Mesh(c, (1, n); names=(:pp, :tp))

    @testset "mesh queries" begin
        @test Weft.coords(grid) == (0, r) && Weft.mesh_rank(grid) == r
        tp = Weft.comm(grid, :tp)
        x = [Float64(r)]
        allreduce!(tp, x)
        @test x == [Float64(sum(0:n-1))]
        @test Weft.nranks(Weft.comm(grid, :pp)) == 1
        for size1 in (0, 1, 5, 7), i in 0:n-1
            @test Weft.local_indices(line, [Shard(1)], (size1, 2); mesh_rank=i)[1] == chunk_range(size1, n, i) ||
                  isempty(chunk_range(size1, n, i))
        end
    end

    @testset "redistribution on one mesh" begin
        G = global_array(Float64, 7, 4)
        for (from, to) in (([Shard(1)], [Replicate()]), ([Shard(2)], [Shard(1)]), ([Replicate()], [Shard(2)]))
            src = ShardedTensor(line, size(G), from, G[Weft.local_indices(line, from, size(G))...])
            dst = ShardedTensor(line, size(G), to, Float64)
            redistribute!(dst, src)
            @test localpart(dst) == G[Weft.local_indices(line, to, size(G))...]
            @test Weft.full(src) == G
        end
        part = ShardedTensor(line, size(G), [Partial()], G .* (r + 1))
        tot = ShardedTensor(line, size(G), [Replicate()], Float64)
        wait(redistribute!(tot, part; async=true))
        @test localpart(tot) == G .* sum(1:n)
        @test any(s -> s.kind === :allreduce, Weft.plan(part, tot))
        src2 = ShardedTensor(grid, size(G), [Replicate(), Shard(2)], G[Weft.local_indices(grid, [Replicate(), Shard(2)], size(G))...])
        @test Weft.full(src2) == G
    end

    @testset "between meshes" begin
        G = global_array(Int32, 6, 5; salt=3)
        pair = Mesh(c, (2,); names=(:x,), ranks=[2, 0])
        src = ShardedTensor(line, size(G), [Shard(1)], G[Weft.local_indices(line, [Shard(1)], size(G))...])
        dst = ShardedTensor(pair, size(G), [Shard(2)], Int32)       # a descriptor on rank 1
        @test Weft.is_descriptor(dst) == (r == 1)
        redistribute!(dst, src)
        if Weft.is_member(pair)
            @test localpart(dst) == G[Weft.local_indices(pair, [Shard(2)], size(G))...]
        end
        back = ShardedTensor(line, size(G), [Replicate()], Int32)
        redistribute!(back, dst)
        @test localpart(back) == G
        close(dst)
        close(pair)
    end

    @testset "checkpoint across meshes" begin
        buf = zeros(UInt8, 256)
        if r == 0
            p = Vector{UInt8}(mktempdir())
            buf[1:length(p)] .= p
        end
        bcast!(c, buf, 0)
        dir = joinpath(String(buf[1:something(findfirst(==(0x00), buf), 257)-1]), "ck")
        G = global_array(Float64, 9, 4; salt=11)
        w = ShardedTensor(line, size(G), [Shard(1)], G[Weft.local_indices(line, [Shard(1)], size(G))...])
        p = ShardedTensor(line, size(G), [Partial()], G .* (r + 1))
        Weft.save_checkpoint(c, dir, Dict("w" => w, "p" => p); fsync=false)
        barrier(c)
        w2 = ShardedTensor(grid, size(G), [Replicate(), Shard(2)], Float64)
        p2 = ShardedTensor(grid, size(G), [Replicate(), Replicate()], Float64)
        Weft.load_checkpoint!(dir, Dict("w" => w2, "p" => p2))
        @test localpart(w2) == G[Weft.local_indices(grid, [Replicate(), Shard(2)], size(G))...]
        @test localpart(p2) == G .* sum(1:n)
        if r == 1
            ck = Weft.Checkpoint(dir)
            @test Set(t.name for t in ck) == Set(["w", "p"])
            Weft.verify(ck)
            close(ck)
        end
        barrier(c)
        r == 0 && rm(dirname(dir); recursive=true)
    end
    close(grid)
    close(line)
end
