# Requests of asynchronous operations: wait, test, waitall, and the per-communicator queue of
# requests the GC dropped. Included from Weft.jl, after comm.jl (a Request holds its Comm).
#
# weft.h allows one thread per communicator at a time, and weft_request_free waits for a
# pending request. So a dropped request is never freed by whichever thread makes the next Weft
# call (it may be using another communicator while this one is busy on its own thread, and
# the free could block it until the deadline): its finalizer queues it on its own Comm, and
# that Comm's next call (on the thread that uses it) frees the queued requests that are
# complete, testing each with weft_test, leaving pending ones for a later call; close(comm)
# frees the rest, waiting as weft_comm_destroy would. A request whose Comm is already closed,
# or unreachable, can be in use by no thread and goes to the global queue (Weft.jl: _drain).

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
        _free_done_requests!(c)   # we are on c's thread: a good time to free dropped ones
        return r
    end
end

# Runs inside the GC, on any thread: no library call, no task switch, no blocking lock.
function _finalize_request(r::Request)
    h = r.handle
    h == C_NULL && return nothing
    trylock(_pending_lock) || (finalizer(_finalize_request, r); return nothing)
    try
        c = r.comm
        if c.handle != C_NULL
            push!(c.pending, (h, r.buffers))   # c's next call frees it, on c's thread
            Threads.atomic_add!(c.npending, 1)
        else
            push!(_pending, (:request, h, r.buffers))   # c is closed: nobody uses it any more
            Threads.atomic_add!(_npending, 1)
        end
        r.handle = C_NULL
    finally
        unlock(_pending_lock)
    end
    return nothing
end

# Removes and returns c's queued (handle, arrays) pairs; the caller holds _pending_lock.
function _take_pending!(c::Comm)
    items = copy(c.pending)
    empty!(c.pending)
    Threads.atomic_sub!(c.npending, length(items))
    return items
end

# Frees c's queued requests that have completed; pending ones are queued again. Called by c's
# own calls (the thread using c), so weft_test and weft_request_free never race with them.
function _free_done_requests!(c::Comm)
    c.npending[] == 0 && return nothing
    lock(_pending_lock)
    items = try
        _take_pending!(c)
    finally
        unlock(_pending_lock)
    end
    still = Any[]
    done = Ref{Cint}(0)
    for item in items
        st = weft_test(item[1], done)   # a failed operation's error is dropped with it
        st == Cint(IN_PROGRESS) ? push!(still, item) : weft_request_free(item[1])
    end
    isempty(still) && return nothing
    lock(_pending_lock)
    try
        append!(c.pending, still)
        Threads.atomic_add!(c.npending, length(still))
    finally
        unlock(_pending_lock)
    end
    return nothing
end

# Closes c to new queued requests (c.handle = C_NULL, under the lock the finalizers take) and
# frees the queued ones, waiting for pending ones as weft_comm_destroy would. On c's thread.
function _close_requests!(c::Comm)
    lock(_pending_lock)
    items = try
        c.handle = C_NULL
        _take_pending!(c)
    finally
        unlock(_pending_lock)
    end
    for (h, _) in items
        weft_request_free(h)
    end
    return nothing
end

"""
    Weft.pending_count(comm) -> Int

How many requests the GC dropped on `comm` wait in its queue to be freed (for tests).
"""
pending_count(c::Comm) = c.npending[]

function _complete!(r::Request, err::Union{Nothing,WeftError})
    weft_request_free(r.handle)
    r.handle = C_NULL
    r.done = true
    r.error = err
    r.buffers = ()
    return nothing
end

function Base.wait(r::Request)
    isopen(r.comm) && _free_done_requests!(r.comm)
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
    isopen(r.comm) && _free_done_requests!(r.comm)
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

"""
    Weft.waitall(reqs)

Waits for every request of `reqs`, then throws the first error, if any. Not exported: Julia 1.12
has its own `Base.waitall` (for tasks), and an exported `waitall` here would clash with it.
"""
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
