# Communicator options, job ids (UniqueId) and communicators: creation, queries, split, dup,
# abort and close. Included from Weft.jl.

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
    # Requests on this communicator that the GC dropped unwaited: (handle, arrays) pairs their
    # finalizers queued here (under _pending_lock), freed by this communicator's next call on
    # the thread using it (request.jl: _free_done_requests!), never from another thread.
    pending::Vector{Any}
    npending::Threads.Atomic{Int}
end

Comm(h::Ptr{Cvoid}, rank::Int, nranks::Int, local_rank::Int, local_size::Int) =
    Comm(h, rank, nranks, local_rank, local_size, Any[], Threads.Atomic{Int}(0))

# An unreachable communicator: no thread can be using it, so the next Weft call on any thread
# may free it. Its queued requests go with it (freed first, then the communicator destroyed).
function _finalize_comm(c::Comm)
    c.handle == C_NULL && return nothing
    trylock(_pending_lock) || (finalizer(_finalize_comm, c); return nothing)
    try
        reqs = _take_pending!(c)
        push!(_pending, (:comm, c.handle, reqs))
        Threads.atomic_add!(_npending, 1 + length(reqs))
        c.handle = C_NULL
    finally
        unlock(_pending_lock)
    end
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

# Every call on a communicator checks it first; that is also where the requests the GC
# dropped on it are freed (the ones complete by now), on the thread using it.
function _check_open(c::Comm)
    c.handle == C_NULL && _invalid("the communicator is closed")
    _free_done_requests!(c)
    return nothing
end

"""
    close(comm)

`weft_comm_destroy`: waits for this rank's outstanding operations, then frees the communicator.
Not collective. Closing twice is a no-op.
"""
function Base.close(c::Comm)
    _drain()
    h = c.handle
    h == C_NULL && return nothing
    _close_requests!(c)   # sets c.handle to C_NULL, frees the requests dropped on it
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
    Weft.shrink(comm) -> Comm

`weft_comm_shrink`, collective over the survivors: after ranks of `comm` died, the survivors
agree on who is gone and get a new communicator without them (same membership everywhere, the
survivors' order). `comm` may be broken and must still be closed; on a healthy `comm` it equals
`dup`. A rank the survivors took for dead gets `ERR_REMOTE`. If a rank dies during the shrink,
the new communicator may still hold it: its first operation fails, and the survivors shrink
again.
"""
function shrink(c::Comm)
    _drain()
    _check_open(c)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    _check(weft_comm_shrink(c.handle, out))
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
