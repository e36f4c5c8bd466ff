# Requests of asynchronous operations: wait, test, waitall. Included from Weft.jl, after
# comm.jl (a Request holds its Comm).

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
