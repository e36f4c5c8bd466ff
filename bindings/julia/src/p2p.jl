# Point-to-point operations: send, recv!, and batches of P2POp (p2p_batch!). Included from
# Weft.jl, after collectives.jl (it uses the helpers there).

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
