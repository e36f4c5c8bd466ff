# Device meshes, placements, sharded tensors, redistribution and distributed checkpoints
# (weft/mesh.h), over the raw wrappers in capi.jl. Included from Weft.jl.
#
# Julia conventions used here, and how they map onto the C ABI:
#
# * Tensor dims and mesh dims are 1-based (`Shard(1)` splits a tensor's first dim, `comm(mesh, 2)`
#   is the second mesh dim); the C side counts from 0 and the binding converts. Ranks, mesh
#   ranks and mesh coordinates stay 0-based, as ranks are everywhere in this binding.
#
# * Julia arrays are column-major. A local piece `A` of size (n1, ..., nk) is handed to the C side
#   as a tensor of the same shape (n1, ..., nk), in the same dim order, with explicit strides
#   `strides(A)` = (1, n1, n1*n2, ...) in elements, so element A[i1, ..., ik] is the C tensor's
#   element (i1-1, ..., ik-1). The global shape is likewise given in Julia dim order. The C side
#   therefore sees exactly the Julia array's element order (no transpose), and a checkpoint
#   saved from Julia holds the same logical tensor a row-major language would see: Julia's
#   A[i, j] is numpy's a[i-1, j-1] for the same global shape.

# ------------------------------------------------------------------ placements

"""
    Placement

One mesh dim's placement of a tensor: [`Shard`](@ref), [`Replicate`](@ref) or
[`Partial`](@ref). A layout is a vector (or tuple) of placements, one per mesh dim.
"""
abstract type Placement end

"""
    Shard(dim)

Tensor dim `dim` (1-based) is split into chunks along the mesh dim (torch.chunk's rule: chunks of
`cld(n, k)` elements, trailing ones smaller or empty; never padded).
"""
struct Shard <: Placement
    dim::Int
    function Shard(dim::Integer)
        dim >= 1 || _invalid("Shard($dim): tensor dims are 1-based")
        return new(Int(dim))
    end
end

"    Replicate(): every rank along the mesh dim holds the same values."
struct Replicate <: Placement end

"""
    Partial(op=Weft.SUM)

Each rank along the mesh dim holds a term; the value is their reduction by `op` (`SUM`, `AVG`,
`MIN`, `MAX`; the library refuses `PROD`).
"""
struct Partial <: Placement
    op::Op
end
Partial() = Partial(SUM)

Base.show(io::IO, p::Shard) = print(io, "Shard(", p.dim, ")")
Base.show(io::IO, ::Replicate) = print(io, "Replicate()")
Base.show(io::IO, p::Partial) = print(io, "Partial(Weft.", p.op, ")")

_placement_c(p::Shard) = PlacementC(WEFT_SHARD, Cint(p.dim - 1), Cint(SUM))
_placement_c(::Replicate) = PlacementC(WEFT_REPLICATE, Cint(0), Cint(SUM))
_placement_c(p::Partial) = PlacementC(WEFT_PARTIAL, Cint(0), Cint(p.op))

function _placement_jl(c::PlacementC)
    c.kind == WEFT_REPLICATE && return Replicate()
    c.kind == WEFT_SHARD && c.dim >= 0 && return Shard(c.dim + 1)
    c.kind == WEFT_PARTIAL && 0 <= c.op <= 4 && return Partial(Op(c.op))
    return nothing
end

function _layout(layout, nd::Integer)
    for p in layout
        p isa Placement || _invalid("layout entry $(repr(p)) is not a Shard(d), Replicate() or Partial(op)")
    end
    pl = Placement[p for p in layout]
    length(pl) == nd || _invalid("the layout $(pl) has $(length(pl)) placements; the mesh has $nd dims")
    return pl, PlacementC[_placement_c(p) for p in pl]
end

function _shape64(shape, what::AbstractString)
    s = Int64[Int64(n) for n in shape]
    length(s) <= WEFT_TENSOR_MAX_DIMS || _invalid("$what $(Tuple(s)) has $(length(s)) dims; weft takes at most $WEFT_TENSOR_MAX_DIMS")
    all(>=(0), s) || _invalid("$what $(Tuple(s)) has a negative size")
    return s
end

# ------------------------------------------------------------------ meshes

"""
    Mesh(comm, shape; names=nothing, ranks=nothing)

`weft_mesh_create`, collective over every rank of `comm`: the ranks of `comm` (or `ranks` of it,
0-based, in mesh order: row-major over `shape`, the last dim fastest) in a grid of `shape` with
dims named `names` (strings or symbols; `nothing`: "d0", "d1", ...).

    mesh = Mesh(comm, (2, 2); names=(:dp, :tp))
    tp = Weft.comm(mesh, :tp)                   # this rank's tp group (owned by the mesh)

A rank outside `ranks` gets a descriptor mesh: every query about the grid works, but it has no
coordinates and no communicators. The mesh keeps its own reference to `comm`'s connections:
`comm` may be closed first. `close(mesh)` frees it (not collective); a finalizer queues it
otherwise.
"""
mutable struct Mesh
    handle::Ptr{Cvoid}
    comm::Comm                       # the parent (kept for Requests; the C mesh has its own reference)
    shape::Vector{Int}
    names::Vector{String}
    coords::Union{Nothing,Vector{Int}}
    mesh_rank::Int
    comms::Dict{Vector{Int},Comm}
end

# Communicators that belong to a mesh (Weft.comm): close() only detaches them.
const _borrowed = WeakKeyDict{Comm,Mesh}()
_is_borrowed(c::Comm) = haskey(_borrowed, c)

function _finalize_mesh(m::Mesh)
    h = m.handle
    h == C_NULL && return nothing
    _enqueue((:mesh, h, m.comms), m, _finalize_mesh) && (m.handle = C_NULL)   # comms: see below
    return nothing
end

# Called by _drain (Weft.jl) for the mesh.h handles finalizers queued: tensors before meshes.
function _drain_mesh_family(items)
    for (kind, h, _) in items
        kind === :sharded && weft_sharded_destroy(h)
        kind === :checkpoint && weft_checkpoint_close(h)
    end
    for (kind, h, comms) in items
        kind === :mesh || continue
        foreach(_close_requests!, values(comms))   # requests dropped on its communicators first
        weft_mesh_destroy(h)
    end
    return nothing
end

function Mesh(c::Comm, shape; names=nothing, ranks=nothing)
    _drain()
    _check_open(c)
    dims = Cint[Cint(n) for n in shape]
    1 <= length(dims) <= WEFT_MESH_MAX_DIMS || _invalid("mesh shape $(Tuple(shape)): expected 1..$WEFT_MESH_MAX_DIMS dims")
    strs = names === nothing ? String[] : String[String(n isa Symbol ? string(n) : n) for n in names]
    names === nothing || length(strs) == length(dims) ||
        _invalid("mesh: $(length(strs)) names $(strs) for $(length(dims)) dims")
    any(n -> occursin('\0', n), strs) && _invalid("a mesh dim name contains a NUL character")
    rk = ranks === nothing ? Cint[] : Cint[Cint(r) for r in ranks]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve strs rk dims begin
        namep = Ptr{UInt8}[pointer(n) for n in strs]   # Julia strings are NUL-terminated in memory
        cfg = Ref(MeshConfigC(Csize_t(sizeof(MeshConfigC)), isempty(rk) ? Ptr{Cint}(C_NULL) : pointer(rk),
                              Csize_t(length(rk))))
        GC.@preserve namep begin
            _check(weft_mesh_create(c.handle, Cint(length(dims)), dims,
                                    names === nothing ? Ptr{Ptr{UInt8}}(C_NULL) : pointer(namep),
                                    ranks === nothing ? Ptr{MeshConfigC}(C_NULL) : cfg, out))
        end
    end
    m = Mesh(out[], c, Int[], String[], nothing, -1, Dict{Vector{Int},Comm}())
    finalizer(_finalize_mesh, m)
    _query!(m)
    return m
end

function _query!(m::Mesh)
    nd = Ref{Cint}(0)
    _check(weft_mesh_shape(m.handle, nd, C_NULL))
    dims = zeros(Cint, max(1, nd[]))
    _check(weft_mesh_shape(m.handle, nd, dims))
    m.shape = Int[dims[i] for i in 1:nd[]]
    m.names = String[]
    for i in 0:nd[]-1
        p = Ref{Ptr{UInt8}}(C_NULL)
        _check(weft_mesh_dim_name(m.handle, Cint(i), p))
        push!(m.names, unsafe_string(p[]))
    end
    member = Ref{Cint}(0)
    _check(weft_mesh_is_member(m.handle, member))
    if member[] != 0
        coords = zeros(Cint, max(1, nd[]))
        mr = Ref{Cint}(-1)
        _check(weft_mesh_coords(m.handle, coords, mr))
        m.coords = Int[coords[i] for i in 1:nd[]]
        m.mesh_rank = Int(mr[])
    end
    return m
end

_check_open(m::Mesh) = m.handle == C_NULL ? _invalid("the mesh is closed") : nothing
Base.isopen(m::Mesh) = m.handle != C_NULL

"    size(mesh) -> Tuple: the size of each mesh dim."
Base.size(m::Mesh) = Tuple(m.shape)
Base.ndims(m::Mesh) = length(m.shape)
"    length(mesh) -> Int: the number of member ranks."
Base.length(m::Mesh) = prod(m.shape)
"    Weft.dimnames(mesh) -> Vector{String}"
dimnames(m::Mesh) = copy(m.names)
"    Weft.is_member(mesh) -> Bool: whether this rank is one of the mesh's ranks."
is_member(m::Mesh) = m.coords !== nothing
"    Weft.coords(mesh) -> Tuple or nothing: this rank's 0-based coordinates (nothing when not a member)."
coords(m::Mesh) = m.coords === nothing ? nothing : Tuple(m.coords)
"    Weft.mesh_rank(mesh) -> Int: this rank's 0-based position in mesh order (-1 when not a member)."
mesh_rank(m::Mesh) = m.mesh_rank

"    Weft.dim_index(mesh, name) -> Int: the 1-based index of the mesh dim called `name` (`weft_mesh_dim_index`)."
function dim_index(m::Mesh, name::Union{AbstractString,Symbol})
    _check_open(m)
    d = Ref{Cint}(-1)
    _check(weft_mesh_dim_index(m.handle, string(name), d))
    return Int(d[]) + 1
end

"""
    Weft.parent_rank(mesh, mesh_rank) -> Int

`weft_mesh_parent_rank`: the rank, in the communicator the mesh was made from, of the member at
0-based mesh position `mesh_rank`. Works on every rank.
"""
function parent_rank(m::Mesh, mr::Integer)
    _check_open(m)
    r = Ref{Cint}(-1)
    _check(weft_mesh_parent_rank(m.handle, Cint(mr), r))
    return Int(r[])
end

_mesh_dim(m::Mesh, d::Integer) = (1 <= d <= length(m.shape) || _invalid("mesh dim $d: expected 1:$(length(m.shape))"); Int(d))
_mesh_dim(m::Mesh, d::Union{AbstractString,Symbol}) = dim_index(m, d)

"""
    Weft.comm(mesh, dims...) -> Comm

`weft_mesh_comm`: the communicator over mesh dims `dims` (1-based indices or names, increasing;
none: every dim, i.e. the whole mesh), members only. Its ranks share this rank's coordinates on
every other dim, ordered row-major over the chosen dims. It belongs to the mesh: use it for any
operation; `close` on it only detaches it, and it stops working when the mesh is closed.
"""
function comm(m::Mesh, dims...)
    _drain()
    _check_open(m)
    idx = isempty(dims) ? collect(1:length(m.shape)) : Int[_mesh_dim(m, d) for d in dims]
    c = get(m.comms, idx, nothing)
    c !== nothing && isopen(c) && return c
    cd = Cint[Cint(d - 1) for d in idx]
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _check(weft_mesh_comm(m.handle, isempty(cd) ? Ptr{Cint}(C_NULL) : pointer(cd), Cint(length(cd)), out))
    h = out[]
    c = Comm(h, _query(weft_comm_rank, h), _query(weft_comm_size, h), _query(weft_comm_local_rank, h),
             _query(weft_comm_local_size, h))      # no finalizer: the mesh owns the handle
    _borrowed[c] = m
    m.comms[idx] = c
    return c
end

"""
    Weft.local_shape(mesh, layout, global_shape; mesh_rank=-1) -> Tuple
    Weft.local_indices(mesh, layout, global_shape; mesh_rank=-1) -> Tuple of UnitRanges

`weft_mesh_local_shape`, without data or communication: the size of mesh member `mesh_rank`'s
local piece (-1: this rank, members only) of a tensor of `global_shape` (Julia dim order) laid
out by `layout`, and the 1-based global indices it covers.
"""
local_shape(m::Mesh, layout, global_shape; mesh_rank::Integer=-1) = _local_box(m, layout, global_shape, mesh_rank)[1]

function local_indices(m::Mesh, layout, global_shape; mesh_rank::Integer=-1)
    s, o = _local_box(m, layout, global_shape, mesh_rank)
    return Tuple(o[k]+1:o[k]+s[k] for k in 1:length(s))
end

function _local_box(m::Mesh, layout, global_shape, mr::Integer)
    _check_open(m)
    _, pl = _layout(layout, length(m.shape))
    g = _shape64(global_shape, "global shape")
    n = length(g)
    ls, off = zeros(Int64, max(1, n)), zeros(Int64, max(1, n))
    _check(weft_mesh_local_shape(m.handle, pl, Cint(n), isempty(g) ? Ptr{Int64}(C_NULL) : pointer(g), Cint(mr), ls, off))
    return ntuple(k -> Int(ls[k]), n), ntuple(k -> Int(off[k]), n)
end

"""
    close(mesh)

`weft_mesh_destroy` (not collective): frees the mesh and its communicators. Close (or drop) the
ShardedTensors on it first. Closing twice is a no-op.
"""
function Base.close(m::Mesh)
    _drain()
    h = m.handle
    h == C_NULL && return nothing
    foreach(_close_requests!, values(m.comms))   # detaches each, freeing requests dropped on it
    empty!(m.comms)
    m.handle = C_NULL
    _check(weft_mesh_destroy(h))
    return nothing
end

function Base.show(io::IO, m::Mesh)
    isopen(m) || return print(io, "Weft.Mesh(closed)")
    grid = join(("$(n)=$(s)" for (n, s) in zip(m.names, m.shape)), " x ")
    print(io, "Weft.Mesh(", grid, ", ", is_member(m) ? "coords $(Tuple(m.coords))" : "not a member", ")")
end

# ------------------------------------------------------------------ sharded tensors

"""
    ShardedTensor(mesh, global_shape, layout, local::StridedArray{T}; name=nothing)
    ShardedTensor(mesh, global_shape, layout, T::Type; name=nothing)

A tensor of `global_shape` (Julia dim order) laid out on `mesh` by `layout` (one placement per
mesh dim), with this rank's piece in `local` (`weft_sharded_create`). `local` is any strided
array (an `Array`, a strided view; not a reversed one) of this rank's local shape
(`Weft.local_shape`); its column-major strides are passed as they are (see the note at the top
of this file). The tensor keeps a reference to `local`, so the memory outlives the handle.

The second form allocates `zeros(T, local shape)` on a member rank and makes a descriptor (no
local memory) on a rank outside the mesh: a descriptor describes the other side of a
redistribution between meshes. `close(t)` frees the handle (not collective); a finalizer queues
it otherwise.
"""
mutable struct ShardedTensor{T<:WeftType}
    handle::Ptr{Cvoid}
    mesh::Mesh
    global_shape::Vector{Int}
    layout::Vector{Placement}
    localpart::Any                   # the array, or nothing on a descriptor
    name::Union{Nothing,String}
end

function _finalize_sharded(t::ShardedTensor)
    h = t.handle
    h == C_NULL && return nothing
    # The array stays rooted in the queue until the handle is destroyed.
    _enqueue((:sharded, h, t.localpart), t, _finalize_sharded) && (t.handle = C_NULL)
    return nothing
end

# Shape and strides (in elements) of A as the C side is told them: Julia's own order and
# strides. Dims of size 1 are never stepped over and an empty array reaches no element, so their
# strides are replaced by column-major ones (the library refuses a 0 stride on a longer dim).
function _view_dims(A::StridedArray)
    sz, st = size(A), strides(A)
    empty = any(==(0), sz)
    shape, str = Int64[n for n in sz], Int64[s for s in st]
    acc = 1
    for k in 1:length(sz)
        if empty || sz[k] <= 1
            str[k] = acc
        elseif st[k] < 0
            _invalid("dim $k of the local array has a negative stride ($(st[k])): pass a copy")
        end
        acc *= max(sz[k], 1)
    end
    return shape, str
end

# Calls f(ref) with a Ref{TensorC} describing A, valid during the call.
function _with_view(f, A::StridedArray{T}) where {T<:WeftType}
    shape, str = _view_dims(A)
    GC.@preserve A shape str begin
        ref = Ref(TensorC(isempty(A) ? C_NULL : Ptr{Cvoid}(pointer(A)), WEFT_DEVICE_CPU, Cint(0), Cint(length(shape)),
                          _dt(T), isempty(shape) ? Ptr{Int64}(C_NULL) : pointer(shape),
                          isempty(str) ? Ptr{Int64}(C_NULL) : pointer(str), UInt64(0)))
        return f(ref)
    end
end

function ShardedTensor(m::Mesh, global_shape, layout, localpart::StridedArray{T};
                       name::Union{Nothing,AbstractString}=nothing) where {T<:WeftType}
    return _sharded(T, m, global_shape, layout, localpart, name)
end

function ShardedTensor(m::Mesh, global_shape, layout, ::Type{T};
                       name::Union{Nothing,AbstractString}=nothing) where {T<:WeftType}
    localpart = is_member(m) ? zeros(T, local_shape(m, layout, global_shape)...) : nothing
    return _sharded(T, m, global_shape, layout, localpart, name)
end

function _sharded(::Type{T}, m::Mesh, global_shape, layout, localpart, name) where {T<:WeftType}
    _drain()
    _check_open(m)
    pls, pl = _layout(layout, length(m.shape))
    g = _shape64(global_shape, "global shape")
    nm = name === nothing ? "" : String(name)
    occursin('\0', nm) && _invalid("a ShardedTensor name contains a NUL character")
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve nm g begin
        cfg = Ref(ShardedConfigC(Csize_t(sizeof(ShardedConfigC)), name === nothing ? Ptr{UInt8}(C_NULL) : pointer(nm)))
        gp = isempty(g) ? Ptr{Int64}(C_NULL) : pointer(g)
        if localpart === nothing
            _check(weft_sharded_create(m.handle, Cint(length(g)), gp, _dt(T), pl, Ptr{TensorC}(C_NULL), cfg, out))
        else
            _with_view(localpart) do v
                _check(weft_sharded_create(m.handle, Cint(length(g)), gp, _dt(T), pl, v, cfg, out))
            end
        end
    end
    t = ShardedTensor{T}(out[], m, Int[Int(x) for x in g], pls, localpart, name === nothing ? nothing : nm)
    finalizer(_finalize_sharded, t)
    return t
end

_check_open(t::ShardedTensor) = (t.handle == C_NULL && _invalid("the sharded tensor is closed"); _check_open(t.mesh))
Base.isopen(t::ShardedTensor) = t.handle != C_NULL
Base.eltype(::ShardedTensor{T}) where {T} = T
"    Weft.localpart(t) -> the local array (nothing on a descriptor)."
localpart(t::ShardedTensor) = t.localpart
"    Weft.global_shape(t) -> Tuple"
global_shape(t::ShardedTensor) = Tuple(t.global_shape)
"    Weft.layout(t) -> Vector{Placement}"
layout(t::ShardedTensor) = copy(t.layout)
"    Weft.is_descriptor(t) -> Bool: whether `t` has no local memory."
is_descriptor(t::ShardedTensor) = t.localpart === nothing
"    Weft.local_indices(t) -> the 1-based global indices of this rank's piece."
local_indices(t::ShardedTensor) = local_indices(t.mesh, t.layout, t.global_shape)

"""
    Weft.local_view(t) -> NamedTuple

`weft_sharded_local`: the view the library holds: `(data, dtype, shape, strides, byte_offset)`,
shape and strides in the C order (the same as Julia's dims), strides in elements (`nothing`:
contiguous row-major).
"""
function local_view(t::ShardedTensor)
    _check_open(t)
    ref = Ref(TensorC(C_NULL, Cint(0), Cint(0), Cint(0), Cint(0), Ptr{Int64}(C_NULL), Ptr{Int64}(C_NULL), UInt64(0)))
    _check(weft_sharded_local(t.handle, ref))
    v = ref[]
    n = Int(v.ndim)
    shape = v.shape == C_NULL ? Int[] : Int[unsafe_load(v.shape, k) for k in 1:n]
    strs = v.strides == C_NULL ? nothing : Int[unsafe_load(v.strides, k) for k in 1:n]
    return (data=v.data, dtype=(0 <= v.dtype <= 11 ? Dtype(v.dtype) : v.dtype), shape=shape, strides=strs,
            byte_offset=v.byte_offset)
end

"""
    Weft.set_local!(t, A)

`weft_sharded_set_local`: points `t` at another array of the same local shape and element type
(e.g. next step's buffer); `A` is referenced from now on.
"""
function set_local!(t::ShardedTensor{T}, A::StridedArray{T}) where {T<:WeftType}
    _drain()
    _check_open(t)
    _with_view(A) do v
        _check(weft_sharded_set_local(t.handle, v))
    end
    t.localpart = A
    return t
end

"    close(t::ShardedTensor): `weft_sharded_destroy`; the array is untouched. Idempotent."
function Base.close(t::ShardedTensor)
    _drain()
    h = t.handle
    h == C_NULL && return nothing
    t.handle = C_NULL
    _check(weft_sharded_destroy(h))
    return nothing
end

function Base.show(io::IO, t::ShardedTensor{T}) where {T}
    print(io, "Weft.ShardedTensor{", T, "}(", t.name === nothing ? "" : repr(t.name) * ", ", Tuple(t.global_shape),
          ", ", t.layout, ", ", t.localpart === nothing ? "descriptor" : "local $(size(t.localpart))",
          isopen(t) ? "" : ", closed", ")")
end

# ------------------------------------------------------------------ redistribution

"""
    redistribute!(dst, src; async=false)

`weft_redistribute`: writes into `dst`'s local array the values of `src` laid out as `dst` says.
Collective over the members of both meshes (the same mesh, or two meshes made from one
communicator); on a rank outside one mesh that side is a descriptor. Julia arrays are host
memory (weft.h's device-memory path, with a CUDA stream, is not wrapped here: it needs device
arrays, which this binding does not depend on). Returns `localpart(dst)`, or with `async=true` a [`Request`](@ref) that keeps both
tensors (and their arrays) alive until it completes.
"""
function redistribute!(dst::ShardedTensor{T}, src::ShardedTensor{T}; async::Bool=false) where {T<:WeftType}
    _drain()
    _check_open(src)
    _check_open(dst)
    keep = (src, dst, src.localpart, dst.localpart)
    if async
        req = Ref{Ptr{Cvoid}}(C_NULL)
        GC.@preserve keep _check(weft_redistribute(src.handle, dst.handle, C_NULL, req))
        return Request(req[], src.mesh.comm, keep)
    end
    GC.@preserve keep _check(weft_redistribute(src.handle, dst.handle, C_NULL, C_NULL))
    return dst.localpart
end

"""
    Weft.Step

One step of a redistribution (`weft_redistribute_step_t`): `kind` (`:local`, `:allgather`,
`:allreduce`, `:reduce_scatter`, `:alltoall`, `:exchange`), `mesh_dim` (1-based; `nothing` for an
exchange or the final copy), placements `from` and `to` on it, `bytes_sent` by this rank and
`max_bytes_sent` by any rank.
"""
struct Step
    kind::Symbol
    mesh_dim::Union{Nothing,Int}
    from::Union{Nothing,Placement}
    to::Union{Nothing,Placement}
    bytes_sent::UInt64
    max_bytes_sent::UInt64
end

const _STEP_KINDS = (:local, :allgather, :allreduce, :reduce_scatter, :alltoall, :exchange)

function Base.show(io::IO, s::Step)
    print(io, s.kind)
    s.mesh_dim === nothing || print(io, " over mesh dim ", s.mesh_dim, ": ", s.from, " -> ", s.to)
    print(io, "; sends ", Int(s.bytes_sent), " B (at most ", Int(s.max_bytes_sent), " B by one rank)")
end

"""
    Weft.plan(src, dst) -> Vector{Step}

`weft_redistribute_plan`: the steps `redistribute!(dst, src)` would run, without communicating.
"""
function plan(src::ShardedTensor, dst::ShardedTensor)
    _check_open(src)
    _check_open(dst)
    n = Ref{Csize_t}(0)
    _check(weft_redistribute_plan(src.handle, dst.handle, Ptr{StepC}(C_NULL), Csize_t(0), n))
    cap = Int(n[])
    z = PlacementC(Cint(0), Cint(0), Cint(0))
    steps = fill(StepC(Cint(0), Cint(-1), z, z, UInt64(0), UInt64(0)), max(1, cap))
    _check(weft_redistribute_plan(src.handle, dst.handle, steps, Csize_t(cap), n))
    return Step[Step(0 <= s.kind < length(_STEP_KINDS) ? _STEP_KINDS[s.kind+1] : Symbol("kind", s.kind),
                     s.mesh_dim >= 0 ? Int(s.mesh_dim) + 1 : nothing, _placement_jl(s.from), _placement_jl(s.to),
                     s.bytes_sent, s.max_bytes_sent) for s in steps[1:min(cap, Int(n[]))]]
end

"""
    Weft.full(t) -> Array or nothing

The whole global tensor (an `Array{T}` of `global_shape(t)`) on every member of `t`'s mesh, by
redistributing into a new all-`Replicate()` array; `nothing` on other ranks. Collective over
the mesh's members.
"""
function full(t::ShardedTensor{T}) where {T<:WeftType}
    is_member(t.mesh) || return nothing
    out = zeros(T, t.global_shape...)
    rep = ShardedTensor(t.mesh, t.global_shape, Placement[Replicate() for _ in t.mesh.shape], out)
    try
        redistribute!(rep, t)
    finally
        close(rep)
    end
    return out
end

# ------------------------------------------------------------------ checkpoints

_ckpt_config(fsync::Bool) = Ref(CheckpointConfigC(Csize_t(sizeof(CheckpointConfigC)), Cint(fsync)))

# Calls f(names::Vector{Ptr{UInt8}}, handles::Vector{Ptr{Cvoid}}, n) for (name => tensor) pairs.
function _with_named(f, tensors)
    ps = [String(k) => v for (k, v) in pairs_of(tensors)]
    for (k, v) in ps
        v isa ShardedTensor || _invalid("checkpoint: $(repr(k)) is a $(typeof(v)), not a ShardedTensor")
        _check_open(v)
        occursin('\0', k) && _invalid("checkpoint: tensor name $(repr(k)) contains a NUL character")
    end
    strs = String[k for (k, _) in ps]
    objs = Any[v for (_, v) in ps]
    GC.@preserve strs objs begin
        names = Ptr{UInt8}[pointer(s) for s in strs]
        handles = Ptr{Cvoid}[v.handle for v in objs]
        GC.@preserve names handles f(isempty(names) ? Ptr{Ptr{UInt8}}(C_NULL) : pointer(names),
                                     isempty(handles) ? Ptr{Ptr{Cvoid}}(C_NULL) : pointer(handles), length(strs))
    end
end

pairs_of(d::AbstractDict) = collect(d)
pairs_of(v::AbstractVector{<:Pair}) = v
pairs_of(v::Tuple) = collect(v)

"""
    Weft.save_checkpoint(comm, dir, tensors; fsync=true)

`weft_checkpoint_save`, collective over `comm` (the communicator the tensors' meshes were made
from): writes the tensors this rank holds (`Dict(name => ShardedTensor)` or a vector of pairs;
the set may differ by rank) into directory `dir` (created when missing). Atomic: an interrupted
save leaves the previous checkpoint loadable. `fsync=false` for tests and tmpfs.
"""
function save_checkpoint(c::Comm, dir::AbstractString, tensors; fsync::Bool=true)
    _drain()
    _check_open(c)
    cfg = _ckpt_config(fsync)
    _with_named(tensors) do names, handles, n
        _check(weft_checkpoint_save(c.handle, dir, names, handles, Csize_t(n), cfg))
    end
    return nothing
end

"""
    Weft.load_checkpoint!(dir, tensors)

`weft_checkpoint_load`, not collective: fills each tensor's local array (any layout, any mesh)
with the values stored under its name, reading only what this rank needs. Errors name the file
and tensor. Returns `tensors`.
"""
function load_checkpoint!(dir::AbstractString, tensors)
    _drain()
    cfg = _ckpt_config(true)
    _with_named(tensors) do names, handles, n
        _check(weft_checkpoint_load(dir, names, handles, Csize_t(n), cfg))
    end
    return tensors
end

"    Weft.CheckpointTensor: `name`, `dtype` (a `Weft.Dtype`), `shape` (global, C order = Julia dim order), `nshards`."
struct CheckpointTensor
    name::String
    dtype::Union{Dtype,Cint}
    shape::Vector{Int}
    nshards::Int
end

"""
    Weft.Checkpoint(dir)

An opened checkpoint index (`weft_checkpoint_open`), for inspection: `length(ck)`, `ck[i]`
(1-based) and iteration give [`Weft.CheckpointTensor`](@ref)s; `Weft.verify(ck)` reads every
shard and checks its CRC-32C; `Weft.export_safetensors(ck, path)`; `close(ck)`.
"""
mutable struct Checkpoint
    handle::Ptr{Cvoid}
    dir::String
end

function _finalize_checkpoint(ck::Checkpoint)
    h = ck.handle
    h == C_NULL && return nothing
    _enqueue((:checkpoint, h, nothing), ck, _finalize_checkpoint) && (ck.handle = C_NULL)
    return nothing
end

function Checkpoint(dir::AbstractString)
    _drain()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _check(weft_checkpoint_open(dir, out))
    ck = Checkpoint(out[], String(dir))
    finalizer(_finalize_checkpoint, ck)
    return ck
end

_check_open(ck::Checkpoint) = ck.handle == C_NULL ? _invalid("the checkpoint $(ck.dir) is closed") : nothing

function Base.length(ck::Checkpoint)
    _check_open(ck)
    n = Ref{Csize_t}(0)
    _check(weft_checkpoint_count(ck.handle, n))
    return Int(n[])
end

function Base.getindex(ck::Checkpoint, i::Integer)
    _check_open(ck)
    1 <= i <= length(ck) || throw(BoundsError(ck, i))
    name = Ref{Ptr{UInt8}}(C_NULL)
    dtype, ndim = Ref{Cint}(0), Ref{Cint}(0)
    shape = zeros(Int64, WEFT_TENSOR_MAX_DIMS)
    nshards = Ref{Csize_t}(0)
    _check(weft_checkpoint_tensor(ck.handle, Csize_t(i - 1), name, dtype, ndim, shape, nshards))
    d = dtype[]
    return CheckpointTensor(unsafe_string(name[]), 0 <= d <= 11 ? Dtype(d) : d,
                            Int[shape[k] for k in 1:min(Int(ndim[]), WEFT_TENSOR_MAX_DIMS)], Int(nshards[]))
end

function Base.getindex(ck::Checkpoint, name::AbstractString)
    for t in ck
        t.name == name && return t
    end
    throw(KeyError(name))
end
Base.iterate(ck::Checkpoint, i::Int=1) = i > length(ck) ? nothing : (ck[i], i + 1)
Base.eltype(::Type{Checkpoint}) = CheckpointTensor

"    Weft.verify(ck): `weft_checkpoint_verify`; throws naming the first bad file and tensor."
function verify(ck::Checkpoint)
    _check_open(ck)
    _check(weft_checkpoint_verify(ck.handle))
    return nothing
end

"    Weft.export_safetensors(ck, path): `weft_checkpoint_export_safetensors`, the whole checkpoint as one file."
function export_safetensors(ck::Checkpoint, path::AbstractString)
    _check_open(ck)
    _check(weft_checkpoint_export_safetensors(ck.handle, path))
    return path
end

function Base.close(ck::Checkpoint)
    h = ck.handle
    h == C_NULL && return nothing
    ck.handle = C_NULL
    _check(weft_checkpoint_close(h))
    return nothing
end

Base.show(io::IO, ck::Checkpoint) = print(io, "Weft.Checkpoint(", repr(ck.dir), ck.handle == C_NULL ? ", closed" : "", ")")
