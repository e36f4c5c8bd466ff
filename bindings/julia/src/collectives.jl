# Collectives (allreduce!, bcast!, ..., barrier) and the helpers the operations share
# (_launch, _p, _root, _blocks, _counts). Included from Weft.jl, after request.jl.

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
function allreduce!(c::Comm, send::DenseArray{T}, recv::DenseArray{T}, op::OpLike=SUM; async::Bool=false) where {T<:WeftType}
    length(send) == length(recv) || _invalid("allreduce!: send has $(length(send)) elements, recv $(length(recv)); they must match")
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_allreduce(_p(send), _p(recv), length(send), _dt(T), Cint(op), c.handle, C_NULL, req)
    end
end

function allreduce!(c::Comm, buf::DenseArray{T}, op::OpLike=SUM; async::Bool=false) where {T<:WeftType}
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
function reduce!(c::Comm, send::DenseArray{T}, recv::Union{DenseArray{T},Nothing}, op::OpLike, root::Integer;
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

function reduce!(c::Comm, buf::DenseArray{T}, op::OpLike, root::Integer; async::Bool=false) where {T<:WeftType}
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
function reduce_scatter!(c::Comm, send::DenseArray{T}, recv::DenseArray{T}, op::OpLike=SUM; async::Bool=false) where {T<:WeftType}
    length(send) == length(recv) * c.nranks ||
        _invalid("reduce_scatter!: send has $(length(send)) elements; expected $(c.nranks) x $(length(recv))")
    return _launch(c, async, recv, (send, recv)) do req
        GC.@preserve send recv weft_reduce_scatter(_p(send), _p(recv), length(recv), _dt(T), Cint(op), c.handle, C_NULL, req)
    end
end

function reduce_scatter!(c::Comm, buf::DenseArray{T}, op::OpLike=SUM; async::Bool=false) where {T<:WeftType}
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
