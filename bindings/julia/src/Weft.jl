"""
    Weft

Julia binding of libweft, the distributed deep-learning backend. It talks only to weft's C
ABI (`weft.h`) through `ccall` (see `src/capi.jl` for the raw wrappers, one per C function).

    using Weft
    comm = Comm()                          # from the launcher: weftrun -n 4 julia prog.jl
    x = fill(Float32(Weft.rank(comm)), 4)
    allreduce!(comm, x, Weft.SUM)          # in place
    close(comm)

Collectives work on `DenseArray{T}` (`Array`, `Vector`, ...) for `T` in Float64, Float32,
Float16, Int8, UInt8, Int32, UInt32, Int64, UInt64. Blocking forms return the receive buffer;
`async=true` returns a [`Request`](@ref) (`wait(req)`, `Weft.test(req)`), which keeps the arrays
alive until it completes. Failures throw [`WeftError`](@ref).

Thread safety follows weft.h: a communicator and its requests are used by one thread at a time
(`Weft.abort` may be called from any thread). Communicators and requests have finalizers that
never call into the library: they queue the handle, and the queue is drained (the handles
destroyed/freed) at the next Weft call or `close`. Call `close(comm)` explicitly when done.
"""
module Weft

using Libdl

export Comm, Config, Request, WeftError,
       allreduce!, bcast!, reduce!, allgather!, allgatherv!, reduce_scatter!, alltoall!, alltoallv!,
       gather!, scatter!, barrier, send, recv!, P2POp, p2p_batch!, waitall,
       Mesh, Placement, Shard, Replicate, Partial, ShardedTensor, redistribute!, localpart

include("capi.jl")

"Element types the collectives accept."
const WeftType = Union{Float64,Float32,Float16,Int8,UInt8,Int32,UInt32,Int64,UInt64}

"`weft_status_t`."
@enum Status::Cint begin
    OK = 0
    ERR_INVALID_ARGUMENT = 1
    ERR_UNSUPPORTED = 2
    ERR_OUT_OF_MEMORY = 3
    ERR_TIMEOUT = 4
    ERR_REMOTE = 5
    ERR_ABORTED = 6
    ERR_MISMATCH = 7
    ERR_TRANSPORT = 8
    ERR_INTERNAL = 9
    IN_PROGRESS = 10
end

"`weft_op_t`: reduction operators (see weft.h for the rules)."
@enum Op::Cint begin
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4
end

"`weft_dtype_t`."
@enum Dtype::Cint begin
    FLOAT64 = 0
    FLOAT32 = 1
    FLOAT16 = 2
    BFLOAT16 = 3
    FP8_E4M3 = 4
    FP8_E5M2 = 5
    INT8 = 6
    UINT8 = 7
    INT32 = 8
    UINT32 = 9
    INT64 = 10
    UINT64 = 11
end

"    Weft.dtype(T) -> Dtype: the weft dtype of element type `T`."
dtype(::Type{Float64}) = FLOAT64
dtype(::Type{Float32}) = FLOAT32
dtype(::Type{Float16}) = FLOAT16
dtype(::Type{Int8}) = INT8
dtype(::Type{UInt8}) = UINT8
dtype(::Type{Int32}) = INT32
dtype(::Type{UInt32}) = UINT32
dtype(::Type{Int64}) = INT64
dtype(::Type{UInt64}) = UINT64

_dt(::Type{T}) where {T<:WeftType} = Cint(dtype(T))

# ------------------------------------------------------------------ errors

"""
    WeftError(status, message)

A failed weft call: `status` is a [`Weft.Status`](@ref) (or the raw code if this binding does not
know it) and `message` the library's detailed text (`weft_last_error`: which function, argument,
rank or peer).
"""
struct WeftError <: Exception
    status::Union{Status,Cint}
    message::String
end

_status(code::Integer) = 0 <= code <= 10 ? Status(Cint(code)) : Cint(code)

"    Weft.status_string(status) -> String  (`weft_status_string`)"
status_string(s::Union{Status,Integer}) = unsafe_string(weft_status_string(Cint(s)))

"    Weft.last_error() -> String: `weft_last_error` of this thread."
last_error() = unsafe_string(weft_last_error())

function Base.showerror(io::IO, e::WeftError)
    print(io, "WeftError: ", isempty(e.message) ? "" : e.message * " ", "(", status_string(e.status), ")")
end

# Throws for a failed status, reading weft_last_error on the same thread (no yield point lies
# between the ccall and this read).
@inline function _check(st::Cint)
    st == Cint(0) && return nothing
    throw(WeftError(_status(st), unsafe_string(weft_last_error())))
end

_invalid(msg::AbstractString) = throw(WeftError(ERR_INVALID_ARGUMENT, "Weft: " * msg))

"    Weft.version() -> (VersionNumber, abi::Int) of the loaded library (`weft_version`)."
function version()
    code, abi = Ref{Cint}(0), Ref{Cint}(0)
    _check(weft_version(code, abi))
    c = Int(code[])
    return VersionNumber(c ÷ 10000, (c ÷ 100) % 100, c % 100), Int(abi[])
end

"    Weft.dtype_size(d::Dtype) -> Int (`weft_dtype_size`)."
function dtype_size(d::Dtype)
    n = Ref{Csize_t}(0)
    _check(weft_dtype_size(Cint(d), n))
    return Int(n[])
end

# ------------------------------------------------------------------ deferred destruction
#
# Finalizers run at arbitrary allocation points, maybe on another thread, maybe while this
# thread is inside weft; they must neither call the library nor switch tasks. So they only
# push the handle (and, for a request, the arrays it still uses, which stay rooted here) onto
# _pending under a SpinLock taken with trylock; when the lock is busy they re-register
# themselves and run at a later collection. The queue is drained by the next API call.

const _pending = Any[]
const _pending_lock = Threads.SpinLock()
const _npending = Threads.Atomic{Int}(0)

function _enqueue(item, obj, fin)
    trylock(_pending_lock) || (finalizer(fin, obj); return false)
    try
        push!(_pending, item)
        Threads.atomic_add!(_npending, 1)
    finally
        unlock(_pending_lock)
    end
    return true
end

function _drain()
    _npending[] == 0 && return nothing
    lock(_pending_lock)
    items = try
        its = copy(_pending)
        empty!(_pending)
        Threads.atomic_sub!(_npending, length(its))
        its
    finally
        unlock(_pending_lock)
    end
    for (kind, h, _) in items
        kind === :request && weft_request_free(h)   # waits for it; its arrays are rooted in items
    end
    _drain_mesh_family(items)   # sharded tensors, checkpoints, then meshes (mesh.jl)
    for (kind, h, _) in items
        kind === :comm && weft_comm_destroy(h)
    end
    return nothing
end

"Number of handles waiting in the finalizer queue (for tests)."
pending_count() = _npending[]

# ------------------------------------------------------------------ configuration, ids

"""
    Config(; timeout=nothing, transport=:auto, name=nothing, check_collectives=false)

Communicator options (`weft_comm_config_t`). `timeout` in seconds (`nothing`: `WEFT_TIMEOUT` or
300 s); `transport` `:auto` or `:ucx`; `name` appears in log lines and error messages;
`check_collectives=true` compares op/dtype/count/root across ranks before each collective.
"""
struct Config
    timeout::Union{Nothing,Float64}
    transport::Symbol
    name::Union{Nothing,String}
    check_collectives::Bool
end

function Config(; timeout=nothing, transport::Symbol=:auto, name=nothing, check_collectives::Bool=false)
    return Config(timeout === nothing ? nothing : Float64(timeout), transport,
                  name === nothing ? nothing : String(name), check_collectives)
end

# Calls f with a Ptr-convertible config (C_NULL or a Ref{CommConfigC}) valid during the call.
function _with_config(f, cfg::Union{Nothing,Config})
    cfg === nothing && return f(C_NULL)
    ms = Int64(0)
    if cfg.timeout !== nothing
        t = cfg.timeout
        (isfinite(t) && t >= 0) || _invalid("Config timeout = $t; expected a finite number of seconds >= 0")
        ms = t == 0 ? Int64(0) : max(Int64(1), ceil(Int64, t * 1000))
    end
    transport = cfg.transport === :auto ? WEFT_TRANSPORT_AUTO :
                cfg.transport === :ucx ? WEFT_TRANSPORT_UCX :
                _invalid("Config transport = :$(cfg.transport); expected :auto or :ucx")
    name = cfg.name === nothing ? "" : cfg.name
    occursin('\0', name) && _invalid("Config name contains a NUL character")
    result = GC.@preserve name begin
        # Julia strings are NUL-terminated in memory.
        namep = cfg.name === nothing ? Ptr{UInt8}(C_NULL) : pointer(name)
        ref = Ref(CommConfigC(Csize_t(sizeof(CommConfigC)), ms, transport, namep,
                              Cint(cfg.check_collectives)))
        f(ref)
    end
    return result
end

"""
    UniqueId

Job identity for `Comm(id, rank, nranks)` (`weft_unique_id_t`): made on one process with
[`Weft.unique_id`](@ref), sent to the others as `Weft.bytes(id)` (128 bytes; `UniqueId(bytes)` rebuilds it) by the program's
own means. It contains the job secret; `show` does not print it.
"""
struct UniqueId
    bytes::NTuple{WEFT_UNIQUE_ID_BYTES,UInt8}
end

function UniqueId(v::AbstractVector{UInt8})
    length(v) == WEFT_UNIQUE_ID_BYTES || _invalid("a UniqueId has $WEFT_UNIQUE_ID_BYTES bytes, not $(length(v))")
    return UniqueId(NTuple{WEFT_UNIQUE_ID_BYTES,UInt8}(v))
end
"    Weft.bytes(id::UniqueId) -> Vector{UInt8}: the 128 bytes to send to the other ranks."
bytes(id::UniqueId) = collect(id.bytes)
Base.show(io::IO, ::UniqueId) = print(io, "Weft.UniqueId(..)")

"""
    Weft.unique_id() -> UniqueId

`weft_get_unique_id`: starts a rendezvous store in this process (it lives until every
communicator made from the id here is destroyed, or the process exits).
"""
function unique_id()
    _drain()
    ref = Ref(UniqueIdC(ntuple(_ -> 0x00, WEFT_UNIQUE_ID_BYTES)))
    _check(weft_get_unique_id(ref))
    return UniqueId(ref[].internal)
end

# ------------------------------------------------------------------ communicators

"""
    Comm(; config=nothing)                   # weft_comm_init_from_env
    Comm(id::UniqueId, rank, nranks; config=nothing)   # weft_comm_init

A communicator. `Comm()` reads rank, size and store from the launcher's environment (weftrun,
torchrun, Open MPI, PMI, Slurm). Free it with `close(comm)`; a finalizer queues it otherwise.
"""
mutable struct Comm
    handle::Ptr{Cvoid}
    rank::Int
    nranks::Int
    local_rank::Int
    local_size::Int
end

function _finalize_comm(c::Comm)
    h = c.handle
    h == C_NULL && return nothing
    _enqueue((:comm, h, nothing), c, _finalize_comm) && (c.handle = C_NULL)
    return nothing
end

function _query(f, h)
    v = Ref{Cint}(-1)
    _check(f(h, v))
    return Int(v[])
end

function _wrap(h::Ptr{Cvoid})
    c = Comm(h, -1, -1, -1, -1)
    finalizer(_finalize_comm, c)
    c.rank = _query(weft_comm_rank, h)
    c.nranks = _query(weft_comm_size, h)
    c.local_rank = _query(weft_comm_local_rank, h)
    c.local_size = _query(weft_comm_local_size, h)
    return c
end

function Comm(; config::Union{Nothing,Config}=nothing)
    _drain()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _with_config(cfg -> _check(weft_comm_init_from_env(out, cfg)), config)
    return _wrap(out[])
end

function Comm(id::UniqueId, rank::Integer, nranks::Integer; config::Union{Nothing,Config}=nothing)
    _drain()
    out = Ref{Ptr{Cvoid}}(C_NULL)
    idref = Ref(UniqueIdC(id.bytes))
    _with_config(cfg -> _check(weft_comm_init(out, idref, rank, nranks, cfg)), config)
    return _wrap(out[])
end

"    Weft.rank(comm) -> Int: this process's rank (0-based)."
rank(c::Comm) = c.rank
"    Weft.nranks(comm) -> Int: the number of ranks."
nranks(c::Comm) = c.nranks
"    Weft.local_rank(comm): rank among this communicator's processes on this host."
local_rank(c::Comm) = c.local_rank
"    Weft.local_size(comm): number of this communicator's processes on this host."
local_size(c::Comm) = c.local_size

Base.isopen(c::Comm) = c.handle != C_NULL
Base.show(io::IO, c::Comm) =
    print(io, isopen(c) ? "Weft.Comm(rank $(c.rank) of $(c.nranks))" : "Weft.Comm(closed)")

_check_open(c::Comm) = c.handle == C_NULL ? _invalid("the communicator is closed") : nothing

"""
    close(comm)

`weft_comm_destroy`: waits for this rank's outstanding operations, then frees the communicator.
Not collective. Closing twice is a no-op.
"""
function Base.close(c::Comm)
    _drain()
    h = c.handle
    h == C_NULL && return nothing
    c.handle = C_NULL
    _is_borrowed(c) && return nothing   # a mesh's communicator (Weft.comm): the mesh frees it
    _check(weft_comm_destroy(h))
    return nothing
end

"""
    split(comm, color, key=Weft.rank(comm); config=nothing) -> Union{Comm,Nothing}

`weft_comm_split`, collective: ranks passing the same `color >= 0` form a new communicator
ordered by (`key`, old rank); a negative color returns `nothing`. `config=nothing` inherits.
"""
function Base.split(c::Comm, color::Integer, key::Integer=c.rank; config::Union{Nothing,Config}=nothing)
    _drain()
    _check_open(c)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    col = color < 0 ? WEFT_SPLIT_NOCOLOR : color
    _with_config(cfg -> _check(weft_comm_split(c.handle, col, key, out, cfg)), config)
    return out[] == C_NULL ? nothing : _wrap(out[])
end

"    Weft.dup(comm) -> Comm: `weft_comm_dup`, collective."
function dup(c::Comm)
    _drain()
    _check_open(c)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _check(weft_comm_dup(c.handle, out))
    return _wrap(out[])
end

"""
    Weft.abort(comm)

`weft_comm_abort`: every pending and later operation on `comm` fails with `ERR_ABORTED`. May be
called from any thread while `comm` is open.
"""
function abort(c::Comm)
    _check_open(c)
    _check(weft_comm_abort(c.handle))
    return nothing
end

# ------------------------------------------------------------------ requests

"""
    Request

An asynchronous operation (`weft_request_t`). It keeps the arrays it uses alive until it
completes. `wait(req)` blocks and throws the operation's `WeftError`, if any; `Weft.test(req)`
polls. The arrays must not be touched until then. A request that is dropped unwaited is freed
(and waited for) at a later Weft call; its arrays stay alive until that happens.
"""
mutable struct Request
    handle::Ptr{Cvoid}
    comm::Comm
    buffers::Tuple
    done::Bool
    error::Union{Nothing,WeftError}
    function Request(h::Ptr{Cvoid}, c::Comm, buffers::Tuple)
        r = new(h, c, buffers, false, nothing)
        finalizer(_finalize_request, r)
        return r
    end
end

function _finalize_request(r::Request)
    h = r.handle
    h == C_NULL && return nothing
    _enqueue((:request, h, r.buffers), r, _finalize_request) && (r.handle = C_NULL)
    return nothing
end

function _complete!(r::Request, err::Union{Nothing,WeftError})
    weft_request_free(r.handle)
    r.handle = C_NULL
    r.done = true
    r.error = err
    r.buffers = ()
    return nothing
end

function Base.wait(r::Request)
    if !r.done
        st = weft_wait(r.handle)
        err = st == Cint(0) ? nothing : WeftError(_status(st), unsafe_string(weft_last_error()))
        _complete!(r, err)
    end
    r.error === nothing || throw(r.error)
    return nothing
end

"""
    Weft.test(req) -> Bool

`weft_test`: `true` once the operation has completed (then as `wait`, throwing its error if it
failed), `false` while it is pending.
"""
function test(r::Request)
    if !r.done
        done = Ref{Cint}(0)
        st = weft_test(r.handle, done)
        st == Cint(IN_PROGRESS) && return false
        err = st == Cint(0) ? nothing : WeftError(_status(st), unsafe_string(weft_last_error()))
        _complete!(r, err)
    end
    r.error === nothing || throw(r.error)
    return true
end

"    waitall(reqs): waits for every request, then throws the first error if any."
function waitall(reqs)
    firsterr = nothing
    for r in reqs
        try
            wait(r)
        catch e
            e isa WeftError || rethrow()
            firsterr === nothing && (firsterr = e)
        end
    end
    firsterr === nothing || throw(firsterr)
    return nothing
end

# ------------------------------------------------------------------ collectives

_p(::Nothing) = C_NULL
_p(A::DenseArray) = isempty(A) ? C_NULL : Ptr{Cvoid}(pointer(A))
# Address of the element at 0-based `off`, for a block of `count` elements (C_NULL if empty).
_p(A::DenseArray, off::Integer, count::Integer) = count == 0 ? C_NULL : Ptr{Cvoid}(pointer(A, off + 1))

_csize(v::AbstractVector{<:Integer}) = Csize_t[Csize_t(x) for x in v]

# Runs `call(request)` (request = C_NULL: blocking) with `keep` rooted; returns `result` when
# blocking, else a Request that keeps `keep` alive until it completes.
function _launch(call, c::Comm, async::Bool, result, keep::Tuple)
    _drain()
    _check_open(c)
    if async
        req = Ref{Ptr{Cvoid}}(C_NULL)
        st = GC.@preserve keep call(req)
        _check(st)
        return Request(req[], c, keep)
    end
    st = GC.@preserve keep call(C_NULL)
    _check(st)
    return result
end

function _root(c::Comm, root::Integer, what::AbstractString="root")
    0 <= root < c.nranks || _invalid("$what = $root; expected 0:$(c.nranks - 1)")
    return Cint(root)
end

function _blocks(c::Comm, n::Integer, what::AbstractString)
    n % c.nranks == 0 || _invalid("$what has $n elements, not a multiple of the communicator's size $(c.nranks)")
    return n ÷ c.nranks
end

function _counts(c::Comm, counts, displs, buflen::Integer, what::AbstractString)
    (length(counts) == c.nranks && length(displs) == c.nranks) ||
        _invalid("$what: counts has $(length(counts)) entries and displacements $(length(displs)); expected $(c.nranks)")
    for i in 1:c.nranks
        n, d = counts[i], displs[i]
        (n >= 0 && d >= 0 && d + n <= buflen) ||
            _invalid("$what: block $(i - 1) (displacement $d, count $n) does not fit the buffer of $buflen elements")
    end
    return _csize(counts), _csize(displs)
end

"""
    allreduce!(comm, send, recv, op=Weft.SUM; async=false)
    allreduce!(comm, buf, op=Weft.SUM; async=false)     # in place

Every rank gets the reduction of all ranks' `send` in `recv` (same length).
"""
function allreduce!(c::Comm, send::DenseArray{T}, recv::DenseArray{T}, op::Op=SUM; async::Bool=false) where {T<:WeftType}
    length(send) == length(recv) || _invalid("allreduce!: send has $(length(send)) elements, recv $(length(recv)); they must match")
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_allreduce(_p(send), _p(recv), length(send), _dt(T), Cint(op), c.handle, C_NULL, req)
    end
end

function allreduce!(c::Comm, buf::DenseArray{T}, op::Op=SUM; async::Bool=false) where {T<:WeftType}
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf weft_allreduce(_p(buf), _p(buf), length(buf), _dt(T), Cint(op), c.handle, C_NULL, req)
    end
end

"""
    bcast!(comm, buf, root; async=false)

`buf` at `root` is sent; the other ranks receive into theirs (same length everywhere).
"""
function bcast!(c::Comm, buf::DenseArray{T}, root::Integer; async::Bool=false) where {T<:WeftType}
    r = _root(c, root)
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf weft_broadcast(_p(buf), length(buf), _dt(T), r, c.handle, C_NULL, req)
    end
end

"""
    reduce!(comm, send, recv, op, root; async=false)   # recv used at root only (may be nothing)
    reduce!(comm, buf, op, root; async=false)          # in place (buf only read off the root)
"""
function reduce!(c::Comm, send::DenseArray{T}, recv::Union{DenseArray{T},Nothing}, op::Op, root::Integer;
                 async::Bool=false) where {T<:WeftType}
    r = _root(c, root)
    if c.rank == root
        recv === nothing && _invalid("reduce!: the root needs a receive buffer")
        length(recv) == length(send) || _invalid("reduce!: send has $(length(send)) elements, recv (at the root) $(length(recv))")
    else
        recv = nothing
    end
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_reduce(_p(send), _p(recv), length(send), _dt(T), Cint(op), r, c.handle, C_NULL, req)
    end
end

function reduce!(c::Comm, buf::DenseArray{T}, op::Op, root::Integer; async::Bool=false) where {T<:WeftType}
    r = _root(c, root)
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf weft_reduce(_p(buf), _p(buf), length(buf), _dt(T), Cint(op), r, c.handle, C_NULL, req)
    end
end

"""
    allgather!(comm, send, recv; async=false)   # recv: nranks x length(send), rank i's at block i
    allgather!(comm, buf; async=false)          # in place: this rank's block already in buf
"""
function allgather!(c::Comm, send::DenseArray{T}, recv::DenseArray{T}; async::Bool=false) where {T<:WeftType}
    length(recv) == length(send) * c.nranks ||
        _invalid("allgather!: recv has $(length(recv)) elements; expected $(c.nranks) x $(length(send))")
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_allgather(_p(send), _p(recv), length(send), _dt(T), c.handle, C_NULL, req)
    end
end

function allgather!(c::Comm, buf::DenseArray{T}; async::Bool=false) where {T<:WeftType}
    n = _blocks(c, length(buf), "allgather! (in place): buf")
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf weft_allgather(_p(buf, c.rank * n, n), _p(buf), n, _dt(T), c.handle, C_NULL, req)
    end
end

"""
    allgatherv!(comm, send, recv, counts, displs; async=false)
    allgatherv!(comm, buf, counts, displs; async=false)   # in place: own block at displs[rank+1]

Rank i's `send` (`counts[i+1]` elements) lands at 0-based element offset `displs[i+1]` of `recv`.
"""
function allgatherv!(c::Comm, send::DenseArray{T}, recv::DenseArray{T}, counts::AbstractVector{<:Integer},
                     displs::AbstractVector{<:Integer}; async::Bool=false) where {T<:WeftType}
    cc, cd = _counts(c, counts, displs, length(recv), "allgatherv!")
    cc[c.rank + 1] == length(send) || _invalid("allgatherv!: send has $(length(send)) elements but counts[$(c.rank + 1)] = $(cc[c.rank + 1])")
    return _launch(c, async, recv, (send, recv, cc, cd)) do req
        GC.@preserve send recv cc cd weft_allgatherv(_p(send), length(send), _p(recv), cc, cd, _dt(T), c.handle, C_NULL, req)
    end
end

function allgatherv!(c::Comm, buf::DenseArray{T}, counts::AbstractVector{<:Integer}, displs::AbstractVector{<:Integer};
                     async::Bool=false) where {T<:WeftType}
    cc, cd = _counts(c, counts, displs, length(buf), "allgatherv! (in place)")
    n, d = Int(cc[c.rank + 1]), Int(cd[c.rank + 1])
    return _launch(c, async, buf, (buf, cc, cd)) do req
        GC.@preserve buf cc cd weft_allgatherv(_p(buf, d, n), n, _p(buf), cc, cd, _dt(T), c.handle, C_NULL, req)
    end
end

"""
    reduce_scatter!(comm, send, recv, op=Weft.SUM; async=false)  # send: nranks blocks of length(recv)
    reduce_scatter!(comm, buf, op=Weft.SUM; async=false)         # in place: result in this rank's block
"""
function reduce_scatter!(c::Comm, send::DenseArray{T}, recv::DenseArray{T}, op::Op=SUM; async::Bool=false) where {T<:WeftType}
    length(send) == length(recv) * c.nranks ||
        _invalid("reduce_scatter!: send has $(length(send)) elements; expected $(c.nranks) x $(length(recv))")
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_reduce_scatter(_p(send), _p(recv), length(recv), _dt(T), Cint(op), c.handle, C_NULL, req)
    end
end

function reduce_scatter!(c::Comm, buf::DenseArray{T}, op::Op=SUM; async::Bool=false) where {T<:WeftType}
    n = _blocks(c, length(buf), "reduce_scatter! (in place): buf")
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf weft_reduce_scatter(_p(buf), _p(buf, c.rank * n, n), n, _dt(T), Cint(op), c.handle, C_NULL, req)
    end
end

"""
    alltoall!(comm, send, recv; async=false)   # block j of send to rank j; block i of recv from rank i
    alltoall!(comm, buf; async=false)          # in place
"""
function alltoall!(c::Comm, send::DenseArray{T}, recv::DenseArray{T}; async::Bool=false) where {T<:WeftType}
    length(send) == length(recv) || _invalid("alltoall!: send has $(length(send)) elements, recv $(length(recv)); they must match")
    n = _blocks(c, length(send), "alltoall!: send")
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_alltoall(_p(send), _p(recv), n, _dt(T), c.handle, C_NULL, req)
    end
end

function alltoall!(c::Comm, buf::DenseArray{T}; async::Bool=false) where {T<:WeftType}
    n = _blocks(c, length(buf), "alltoall! (in place): buf")
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf weft_alltoall(_p(buf), _p(buf), n, _dt(T), c.handle, C_NULL, req)
    end
end

"""
    alltoallv!(comm, send, sendcounts, senddispls, recv, recvcounts, recvdispls; async=false)
    alltoallv!(comm, buf, sendcounts, senddispls, recvcounts, recvdispls; async=false)  # in place

`sendcounts[j+1]` elements at 0-based offset `senddispls[j+1]` go to rank j; `recvcounts[i+1]`
elements from rank i land at `recvdispls[i+1]`.
"""
function alltoallv!(c::Comm, send::DenseArray{T}, sendcounts::AbstractVector{<:Integer}, senddispls::AbstractVector{<:Integer},
                    recv::DenseArray{T}, recvcounts::AbstractVector{<:Integer}, recvdispls::AbstractVector{<:Integer};
                    async::Bool=false) where {T<:WeftType}
    sc, sd = _counts(c, sendcounts, senddispls, length(send), "alltoallv! (send)")
    rc, rd = _counts(c, recvcounts, recvdispls, length(recv), "alltoallv! (recv)")
    return _launch(c, async, recv, (send, recv, sc, sd, rc, rd)) do req
        GC.@preserve send recv sc sd rc rd weft_alltoallv(_p(send), sc, sd, _p(recv), rc, rd, _dt(T), c.handle, C_NULL, req)
    end
end

function alltoallv!(c::Comm, buf::DenseArray{T}, sendcounts::AbstractVector{<:Integer}, senddispls::AbstractVector{<:Integer},
                    recvcounts::AbstractVector{<:Integer}, recvdispls::AbstractVector{<:Integer};
                    async::Bool=false) where {T<:WeftType}
    sc, sd = _counts(c, sendcounts, senddispls, length(buf), "alltoallv! in place (send)")
    rc, rd = _counts(c, recvcounts, recvdispls, length(buf), "alltoallv! in place (recv)")
    return _launch(c, async, buf, (buf, sc, sd, rc, rd)) do req
        GC.@preserve buf sc sd rc rd weft_alltoallv(_p(buf), sc, sd, _p(buf), rc, rd, _dt(T), c.handle, C_NULL, req)
    end
end

"""
    gather!(comm, send, recv, root; async=false)   # recv at root: nranks x length(send); else nothing
    gather!(comm, buf, root; async=false)          # in place: at root buf holds every block
                                                   # (its own already in block root); elsewhere
                                                   # buf is the contribution
"""
function gather!(c::Comm, send::DenseArray{T}, recv::Union{DenseArray{T},Nothing}, root::Integer; async::Bool=false) where {T<:WeftType}
    r = _root(c, root)
    if c.rank == root
        recv === nothing && _invalid("gather!: the root needs a receive buffer")
        length(recv) == length(send) * c.nranks ||
            _invalid("gather!: recv (at the root) has $(length(recv)) elements; expected $(c.nranks) x $(length(send))")
    else
        recv = nothing
    end
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_gather(_p(send), _p(recv), length(send), _dt(T), r, c.handle, C_NULL, req)
    end
end

function gather!(c::Comm, buf::DenseArray{T}, root::Integer; async::Bool=false) where {T<:WeftType}
    r = _root(c, root)
    atroot = c.rank == root
    n = atroot ? _blocks(c, length(buf), "gather! (in place, at the root): buf") : length(buf)
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf begin
            sendp = atroot ? _p(buf, root * n, n) : _p(buf)
            recvp = atroot ? _p(buf) : C_NULL
            weft_gather(sendp, recvp, n, _dt(T), r, c.handle, C_NULL, req)
        end
    end
end

"""
    scatter!(comm, send, recv, root; async=false)  # send at root: nranks x length(recv); else nothing
    scatter!(comm, buf, root; async=false)         # in place: at root buf holds every block and
                                                   # keeps block root; elsewhere buf receives
"""
function scatter!(c::Comm, send::Union{DenseArray{T},Nothing}, recv::DenseArray{T}, root::Integer; async::Bool=false) where {T<:WeftType}
    r = _root(c, root)
    if c.rank == root
        send === nothing && _invalid("scatter!: the root needs a send buffer")
        length(send) == length(recv) * c.nranks ||
            _invalid("scatter!: send (at the root) has $(length(send)) elements; expected $(c.nranks) x $(length(recv))")
    else
        send = nothing
    end
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_scatter(_p(send), _p(recv), length(recv), _dt(T), r, c.handle, C_NULL, req)
    end
end

function scatter!(c::Comm, buf::DenseArray{T}, root::Integer; async::Bool=false) where {T<:WeftType}
    r = _root(c, root)
    atroot = c.rank == root
    n = atroot ? _blocks(c, length(buf), "scatter! (in place, at the root): buf") : length(buf)
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf begin
            sendp = atroot ? _p(buf) : C_NULL
            recvp = atroot ? _p(buf, root * n, n) : _p(buf)
            weft_scatter(sendp, recvp, n, _dt(T), r, c.handle, C_NULL, req)
        end
    end
end

"    barrier(comm; async=false)"
function barrier(c::Comm; async::Bool=false)
    return _launch(c, async, nothing, ()) do req
        weft_barrier(c.handle, C_NULL, req)
    end
end

"""
    send(comm, buf, peer; async=false)

Point-to-point send; matches `recv!` calls at `peer` in issue order (counts must agree).
"""
function send(c::Comm, buf::DenseArray{T}, peer::Integer; async::Bool=false) where {T<:WeftType}
    p = _root(c, peer, "peer")
    return _launch(c, async, nothing, (buf,)) do req
        GC.@preserve buf weft_send(_p(buf), length(buf), _dt(T), p, c.handle, C_NULL, req)
    end
end

"    recv!(comm, buf, peer; async=false): receives length(buf) elements from `peer`."
function recv!(c::Comm, buf::DenseArray{T}, peer::Integer; async::Bool=false) where {T<:WeftType}
    p = _root(c, peer, "peer")
    return _launch(c, async, buf, (buf,)) do req
        GC.@preserve buf weft_recv(_p(buf), length(buf), _dt(T), p, c.handle, C_NULL, req)
    end
end

"""
    P2POp(:send, buf, peer)    P2POp(:recv, buf, peer)

One operation of `p2p_batch!`: send all of `buf` to `peer`, or receive `length(buf)` elements
from `peer` into `buf`.
"""
struct P2POp
    kind::Symbol
    buf::DenseArray
    peer::Int
end

"""
    p2p_batch!(comm, ops::AbstractVector{P2POp}; async=false)

Posts every operation together (weft_p2p_batch, as NCCL's grouped send/recv or torch's
batch_isend_irecv) and returns when all have completed (a `Request` with `async=true`).
Matching with the peers' sends and receives (batched or not) is in issue order per pair and
direction. Use it for any exchange in which a rank both sends and receives: on GPU memory
through NCCL, separate calls can deadlock.
"""
function p2p_batch!(c::Comm, ops::AbstractVector{P2POp}; async::Bool=false)
    for (i, o) in enumerate(ops)
        o.kind === :send || o.kind === :recv || _invalid("ops[$(i - 1)].kind = :$(o.kind); expected :send or :recv")
        eltype(o.buf) <: WeftType || _invalid("ops[$(i - 1)].buf holds $(eltype(o.buf)), which weft cannot move")
        _root(c, o.peer, "ops[$(i - 1)].peer")
    end
    kept = collect(P2POp, ops)  # the buffers stay referenced until an async batch completes
    return _launch(c, async, nothing, (kept,)) do req
        GC.@preserve kept begin
            raw = P2POpC[P2POpC(o.kind === :send ? WEFT_P2P_SEND : WEFT_P2P_RECV, Ptr{Cvoid}(_p(o.buf)),
                                length(o.buf), _dt(eltype(o.buf)), Cint(o.peer)) for o in kept]
            weft_p2p_batch(raw, length(raw), c.handle, C_NULL, req)
        end
    end
end

include("mesh.jl")   # meshes, sharded tensors, redistribution, checkpoints (weft/mesh.h)

end # module
