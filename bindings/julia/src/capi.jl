# Raw ccall wrappers, one per function of capi/include/weft/weft.h, named as in C and in the
# header's order. Arguments are passed as given (Ref/C_NULL for out-pointers); each returns the
# C result (a Cint status, or a Ptr{UInt8} for the two string functions). The high-level API in
# Weft.jl checks the status and throws WeftError.
#
# The library is opened lazily on the first call: $WEFT_LIBRARY if set (and only it: a wrong
# explicit choice is an error, not a reason to load another copy), else this checkout's
# build/lib/libweft.so when it exists (the one the user built beats an installed one), else
# "libweft" / "libweft.so.0" through the system's search path (LD_LIBRARY_PATH, ldconfig).
# A failed dlopen reports dlerror's reason (a missing dependency such as UCX, say). The loaded
# library's weft_version must report WEFT_ABI_VERSION. Function pointers are cached.

const WEFT_VERSION_MAJOR = 0
const WEFT_VERSION_MINOR = 1
const WEFT_VERSION_PATCH = 0
const WEFT_VERSION_CODE = WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH
const WEFT_ABI_VERSION = 1
const WEFT_UNIQUE_ID_BYTES = 128
const WEFT_SPLIT_NOCOLOR = Cint(-1)
const WEFT_TRANSPORT_AUTO = Cint(0)
const WEFT_TRANSPORT_UCX = Cint(1)

# weft_comm_config_t (C layout: size_t, int64_t, int + padding, pointer, int + padding).
struct CommConfigC
    struct_size::Csize_t
    timeout_ms::Int64
    transport::Cint
    name::Ptr{UInt8}
    check_collectives::Cint
end

# weft_unique_id_t.
# weft_p2p_op_t (C layout: int + padding, pointer, size_t, int, int): one op of weft_p2p_batch.
struct P2POpC
    kind::Cint
    buf::Ptr{Cvoid}
    count::Csize_t
    dtype::Cint
    peer::Cint
end
const WEFT_P2P_SEND = Cint(0)
const WEFT_P2P_RECV = Cint(1)

struct UniqueIdC
    internal::NTuple{WEFT_UNIQUE_ID_BYTES,UInt8}
end

# ---- common.h: tensor views; mesh.h: meshes, layouts, sharded tensors, checkpoints.
# Julia lays these structs out as C does (natural alignment); sizes in test/runtests.jl.
const WEFT_TENSOR_MAX_DIMS = 8
const WEFT_DEVICE_CPU = Cint(1)
const WEFT_DEVICE_CUDA = Cint(2)
const WEFT_DEVICE_CUDA_HOST = Cint(3)
const WEFT_MESH_MAX_DIMS = 4
const WEFT_MESH_MAX_NAME = 31
const WEFT_REPLICATE = Cint(0)
const WEFT_SHARD = Cint(1)
const WEFT_PARTIAL = Cint(2)

# weft_tensor_t (48 bytes): DLPack's DLTensor field for field; strides in elements.
struct TensorC
    data::Ptr{Cvoid}
    device_type::Cint
    device_id::Cint
    ndim::Cint
    dtype::Cint
    shape::Ptr{Int64}
    strides::Ptr{Int64}
    byte_offset::UInt64
end

# weft_mesh_config_t (24 bytes).
struct MeshConfigC
    struct_size::Csize_t
    ranks::Ptr{Cint}
    nranks::Csize_t
end

# weft_placement_t (12 bytes): kind, dim (SHARD, 0-based C dim), op (PARTIAL).
struct PlacementC
    kind::Cint
    dim::Cint
    op::Cint
end

# weft_sharded_config_t (16 bytes).
struct ShardedConfigC
    struct_size::Csize_t
    name::Ptr{UInt8}
end

# weft_redistribute_step_t (48 bytes).
struct StepC
    kind::Cint
    mesh_dim::Cint
    from::PlacementC
    to::PlacementC
    bytes_sent::UInt64
    max_bytes_sent::UInt64
end

# weft_checkpoint_config_t (16 bytes).
struct CheckpointConfigC
    struct_size::Csize_t
    fsync::Cint
end

const _FUNCTIONS = (
    :weft_status_string, :weft_last_error, :weft_version, :weft_get_unique_id, :weft_comm_init,
    :weft_comm_init_from_env, :weft_comm_split, :weft_comm_dup, :weft_comm_shrink, :weft_comm_rank, :weft_comm_size,
    :weft_comm_local_rank, :weft_comm_local_size, :weft_comm_abort, :weft_comm_destroy, :weft_wait,
    :weft_test, :weft_request_free, :weft_allreduce, :weft_broadcast, :weft_reduce, :weft_allgather,
    :weft_allgatherv, :weft_reduce_scatter, :weft_alltoall, :weft_alltoallv, :weft_gather,
    :weft_scatter, :weft_barrier, :weft_send, :weft_recv, :weft_p2p_batch, :weft_dtype_size,
)

# The mesh.h family. A library built before mesh.h lacks them: it still loads, and calling one
# of these throws ERR_UNSUPPORTED naming the function (_msym).
const _MESH_FUNCTIONS = (
    :weft_mesh_create, :weft_mesh_destroy, :weft_mesh_shape, :weft_mesh_dim_name, :weft_mesh_dim_index,
    :weft_mesh_is_member, :weft_mesh_coords, :weft_mesh_parent_rank, :weft_mesh_comm, :weft_mesh_local_shape,
    :weft_sharded_create, :weft_sharded_destroy, :weft_sharded_local, :weft_sharded_set_local,
    :weft_redistribute, :weft_redistribute_plan, :weft_checkpoint_save, :weft_checkpoint_load,
    :weft_checkpoint_open, :weft_checkpoint_close, :weft_checkpoint_count, :weft_checkpoint_tensor,
    :weft_checkpoint_verify, :weft_checkpoint_export_safetensors,
)

const _handle = Ref{Ptr{Cvoid}}(C_NULL)
const _syms = Dict{Symbol,Ptr{Cvoid}}()
const _load_lock = ReentrantLock()
const _loaded = Threads.Atomic{Bool}(false)

"""
    Weft.library_path()

The path of the loaded libweft (opening it if needed).
"""
library_path() = (_load(); Libdl.dlpath(_handle[]))

# The libraries to try, in order, and where each choice came from.
function _library_candidates()
    env = get(ENV, "WEFT_LIBRARY", "")
    isempty(env) || return [(env, "WEFT_LIBRARY")]
    tree = normpath(joinpath(@__DIR__, "..", "..", "..", "build", "lib", "libweft.so"))
    candidates = isfile(tree) ? [(tree, "this checkout's build")] : Tuple{String,String}[]
    push!(candidates, ("libweft", "the system's search path"), ("libweft.so.0", "the system's search path"))
    return candidates
end

function _open_library()
    tried = String[]
    for (path, origin) in _library_candidates()
        # throw_error=true: the exception carries dlerror's text, the reason worth showing.
        h = try
            Libdl.dlopen(path, Libdl.RTLD_LAZY | Libdl.RTLD_GLOBAL)
        catch e
            push!(tried, "  $path ($origin): " * sprint(showerror, e))
            nothing
        end
        h === nothing || return _check_abi(h, path)
    end
    error("Weft: cannot open libweft. Tried:\n" * join(tried, "\n") * "\nSet WEFT_LIBRARY to the path " *
          "of libweft.so, or install weft (its .deb) / add its folder to LD_LIBRARY_PATH. A library " *
          "that exists but fails to load names its missing dependency above.")
end

# A library of another ABI version would be called with the wrong struct layouts: refuse it.
function _check_abi(h::Ptr{Cvoid}, path::AbstractString)
    f = Libdl.dlsym(h, :weft_version; throw_error=false)
    if f === nothing || f == C_NULL
        Libdl.dlclose(h)
        error("Weft: $path has no weft_version: it is not libweft")
    end
    code, abi = Ref{Cint}(0), Ref{Cint}(0)
    ccall(f, Cint, (Ptr{Cint}, Ptr{Cint}), code, abi)
    if abi[] != WEFT_ABI_VERSION
        Libdl.dlclose(h)
        error("Weft: $path has ABI version $(abi[]) (library version code $(code[])), but this Weft " *
              "package was written for ABI version $WEFT_ABI_VERSION. Use a matching libweft " *
              "(WEFT_LIBRARY=/path/to/libweft.so) or the Weft package that comes with it.")
    end
    return h
end

function _load()
    _loaded[] && return nothing
    lock(_load_lock) do
        if !_loaded[]
            h = _open_library()
            for f in _FUNCTIONS
                _syms[f] = Libdl.dlsym(h, f)
            end
            for f in (_MESH_FUNCTIONS..., _TRAINING_FUNCTIONS..., _PIPELINE_FUNCTIONS...)   # optional families
                p = Libdl.dlsym(h, f; throw_error=false)
                _syms[f] = p === nothing ? C_NULL : p
            end
            _handle[] = h
            _loaded[] = true
        end
    end
    return nothing
end

# Function pointer of a weft function (the Dict is only written once, under the lock, before
# _loaded is set; afterwards it is only read).
@inline _sym(f::Symbol) = (_loaded[] || _load(); _syms[f])

# Function pointer of a mesh.h function, or ERR_UNSUPPORTED when the library lacks it.
function _msym(f::Symbol)
    p = _sym(f)
    p == C_NULL && throw(WeftError(ERR_UNSUPPORTED, "Weft: $f: the loaded libweft ($(library_path())) " *
                                   "does not export it; it was built before weft/mesh.h (rebuild libweft)"))
    return p
end

"    Weft.has_function(f::Symbol) -> Bool: whether the loaded libweft exports `f`."
has_function(f::Symbol) = _sym(f) != C_NULL

weft_status_string(status) = ccall(_sym(:weft_status_string), Ptr{UInt8}, (Cint,), status)
weft_last_error() = ccall(_sym(:weft_last_error), Ptr{UInt8}, ())
weft_version(version_code, abi_version) =
    ccall(_sym(:weft_version), Cint, (Ptr{Cint}, Ptr{Cint}), version_code, abi_version)

weft_get_unique_id(id) = ccall(_sym(:weft_get_unique_id), Cint, (Ptr{UniqueIdC},), id)
weft_comm_init(comm, id, rank, nranks, config) =
    ccall(_sym(:weft_comm_init), Cint, (Ptr{Ptr{Cvoid}}, Ptr{UniqueIdC}, Cint, Cint, Ptr{CommConfigC}),
          comm, id, rank, nranks, config)
weft_comm_init_from_env(comm, config) =
    ccall(_sym(:weft_comm_init_from_env), Cint, (Ptr{Ptr{Cvoid}}, Ptr{CommConfigC}), comm, config)
weft_comm_split(comm, color, key, newcomm, config) =
    ccall(_sym(:weft_comm_split), Cint, (Ptr{Cvoid}, Cint, Cint, Ptr{Ptr{Cvoid}}, Ptr{CommConfigC}),
          comm, color, key, newcomm, config)
weft_comm_dup(comm, newcomm) =
    ccall(_sym(:weft_comm_dup), Cint, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), comm, newcomm)
weft_comm_shrink(comm, newcomm) =
    ccall(_sym(:weft_comm_shrink), Cint, (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), comm, newcomm)
weft_comm_rank(comm, rank) = ccall(_sym(:weft_comm_rank), Cint, (Ptr{Cvoid}, Ptr{Cint}), comm, rank)
weft_comm_size(comm, size) = ccall(_sym(:weft_comm_size), Cint, (Ptr{Cvoid}, Ptr{Cint}), comm, size)
weft_comm_local_rank(comm, local_rank) =
    ccall(_sym(:weft_comm_local_rank), Cint, (Ptr{Cvoid}, Ptr{Cint}), comm, local_rank)
weft_comm_local_size(comm, local_size) =
    ccall(_sym(:weft_comm_local_size), Cint, (Ptr{Cvoid}, Ptr{Cint}), comm, local_size)
weft_comm_abort(comm) = ccall(_sym(:weft_comm_abort), Cint, (Ptr{Cvoid},), comm)
weft_comm_destroy(comm) = ccall(_sym(:weft_comm_destroy), Cint, (Ptr{Cvoid},), comm)

weft_wait(request) = ccall(_sym(:weft_wait), Cint, (Ptr{Cvoid},), request)
weft_test(request, done) = ccall(_sym(:weft_test), Cint, (Ptr{Cvoid}, Ptr{Cint}), request, done)
weft_request_free(request) = ccall(_sym(:weft_request_free), Cint, (Ptr{Cvoid},), request)

weft_allreduce(sendbuf, recvbuf, count, dtype, op, comm, stream, request) =
    ccall(_sym(:weft_allreduce), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, recvbuf, count, dtype, op, comm, stream, request)
weft_broadcast(buf, count, dtype, root, comm, stream, request) =
    ccall(_sym(:weft_broadcast), Cint,
          (Ptr{Cvoid}, Csize_t, Cint, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          buf, count, dtype, root, comm, stream, request)
weft_reduce(sendbuf, recvbuf, count, dtype, op, root, comm, stream, request) =
    ccall(_sym(:weft_reduce), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Cint, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, recvbuf, count, dtype, op, root, comm, stream, request)
weft_allgather(sendbuf, recvbuf, sendcount, dtype, comm, stream, request) =
    ccall(_sym(:weft_allgather), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, recvbuf, sendcount, dtype, comm, stream, request)
weft_allgatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, comm, stream, request) =
    ccall(_sym(:weft_allgatherv), Cint,
          (Ptr{Cvoid}, Csize_t, Ptr{Cvoid}, Ptr{Csize_t}, Ptr{Csize_t}, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, comm, stream, request)
weft_reduce_scatter(sendbuf, recvbuf, recvcount, dtype, op, comm, stream, request) =
    ccall(_sym(:weft_reduce_scatter), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, recvbuf, recvcount, dtype, op, comm, stream, request)
weft_alltoall(sendbuf, recvbuf, count, dtype, comm, stream, request) =
    ccall(_sym(:weft_alltoall), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, recvbuf, count, dtype, comm, stream, request)
weft_alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm, stream, request) =
    ccall(_sym(:weft_alltoallv), Cint,
          (Ptr{Cvoid}, Ptr{Csize_t}, Ptr{Csize_t}, Ptr{Cvoid}, Ptr{Csize_t}, Ptr{Csize_t}, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm, stream, request)
weft_gather(sendbuf, recvbuf, count, dtype, root, comm, stream, request) =
    ccall(_sym(:weft_gather), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, recvbuf, count, dtype, root, comm, stream, request)
weft_scatter(sendbuf, recvbuf, count, dtype, root, comm, stream, request) =
    ccall(_sym(:weft_scatter), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          sendbuf, recvbuf, count, dtype, root, comm, stream, request)
weft_barrier(comm, stream, request) =
    ccall(_sym(:weft_barrier), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}), comm, stream, request)
weft_send(buf, count, dtype, peer, comm, stream, request) =
    ccall(_sym(:weft_send), Cint,
          (Ptr{Cvoid}, Csize_t, Cint, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          buf, count, dtype, peer, comm, stream, request)
weft_recv(buf, count, dtype, peer, comm, stream, request) =
    ccall(_sym(:weft_recv), Cint,
          (Ptr{Cvoid}, Csize_t, Cint, Cint, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          buf, count, dtype, peer, comm, stream, request)
weft_p2p_batch(ops, nops, comm, stream, request) =
    ccall(_sym(:weft_p2p_batch), Cint,
          (Ptr{P2POpC}, Csize_t, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          ops, nops, comm, stream, request)

weft_dtype_size(dtype, size) = ccall(_sym(:weft_dtype_size), Cint, (Cint, Ptr{Csize_t}), dtype, size)

# ---- mesh.h: meshes
weft_mesh_create(comm, ndims, shape, dim_names, config, mesh) =
    ccall(_msym(:weft_mesh_create), Cint,
          (Ptr{Cvoid}, Cint, Ptr{Cint}, Ptr{Ptr{UInt8}}, Ptr{MeshConfigC}, Ptr{Ptr{Cvoid}}),
          comm, ndims, shape, dim_names, config, mesh)
weft_mesh_destroy(mesh) = ccall(_msym(:weft_mesh_destroy), Cint, (Ptr{Cvoid},), mesh)
weft_mesh_shape(mesh, ndims, shape) =
    ccall(_msym(:weft_mesh_shape), Cint, (Ptr{Cvoid}, Ptr{Cint}, Ptr{Cint}), mesh, ndims, shape)
weft_mesh_dim_name(mesh, dim, name) =
    ccall(_msym(:weft_mesh_dim_name), Cint, (Ptr{Cvoid}, Cint, Ptr{Ptr{UInt8}}), mesh, dim, name)
weft_mesh_dim_index(mesh, name, dim) =
    ccall(_msym(:weft_mesh_dim_index), Cint, (Ptr{Cvoid}, Cstring, Ptr{Cint}), mesh, name, dim)
weft_mesh_is_member(mesh, member) =
    ccall(_msym(:weft_mesh_is_member), Cint, (Ptr{Cvoid}, Ptr{Cint}), mesh, member)
weft_mesh_coords(mesh, coords, mesh_rank) =
    ccall(_msym(:weft_mesh_coords), Cint, (Ptr{Cvoid}, Ptr{Cint}, Ptr{Cint}), mesh, coords, mesh_rank)
weft_mesh_parent_rank(mesh, mesh_rank, parent_rank) =
    ccall(_msym(:weft_mesh_parent_rank), Cint, (Ptr{Cvoid}, Cint, Ptr{Cint}), mesh, mesh_rank, parent_rank)
weft_mesh_comm(mesh, dims, ndims, comm) =
    ccall(_msym(:weft_mesh_comm), Cint, (Ptr{Cvoid}, Ptr{Cint}, Cint, Ptr{Ptr{Cvoid}}), mesh, dims, ndims, comm)

# ---- mesh.h: layouts
weft_mesh_local_shape(mesh, placements, ndim, global_shape, mesh_rank, local_shape, global_offset) =
    ccall(_msym(:weft_mesh_local_shape), Cint,
          (Ptr{Cvoid}, Ptr{PlacementC}, Cint, Ptr{Int64}, Cint, Ptr{Int64}, Ptr{Int64}),
          mesh, placements, ndim, global_shape, mesh_rank, local_shape, global_offset)

# ---- mesh.h: sharded tensors
weft_sharded_create(mesh, ndim, global_shape, dtype, placements, local_view, config, tensor) =
    ccall(_msym(:weft_sharded_create), Cint,
          (Ptr{Cvoid}, Cint, Ptr{Int64}, Cint, Ptr{PlacementC}, Ptr{TensorC}, Ptr{ShardedConfigC}, Ptr{Ptr{Cvoid}}),
          mesh, ndim, global_shape, dtype, placements, local_view, config, tensor)
weft_sharded_destroy(tensor) = ccall(_msym(:weft_sharded_destroy), Cint, (Ptr{Cvoid},), tensor)
weft_sharded_local(tensor, local_view) =
    ccall(_msym(:weft_sharded_local), Cint, (Ptr{Cvoid}, Ptr{TensorC}), tensor, local_view)
weft_sharded_set_local(tensor, local_view) =
    ccall(_msym(:weft_sharded_set_local), Cint, (Ptr{Cvoid}, Ptr{TensorC}), tensor, local_view)

# ---- mesh.h: redistribution
weft_redistribute(src, dst, stream, request) =
    ccall(_msym(:weft_redistribute), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          src, dst, stream, request)
weft_redistribute_plan(src, dst, steps, capacity, nsteps) =
    ccall(_msym(:weft_redistribute_plan), Cint, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{StepC}, Csize_t, Ptr{Csize_t}),
          src, dst, steps, capacity, nsteps)

# ---- mesh.h: distributed checkpoints
weft_checkpoint_save(comm, dir, names, tensors, count, config) =
    ccall(_msym(:weft_checkpoint_save), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{Ptr{UInt8}}, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{CheckpointConfigC}),
          comm, dir, names, tensors, count, config)
weft_checkpoint_load(dir, names, tensors, count, config) =
    ccall(_msym(:weft_checkpoint_load), Cint,
          (Cstring, Ptr{Ptr{UInt8}}, Ptr{Ptr{Cvoid}}, Csize_t, Ptr{CheckpointConfigC}),
          dir, names, tensors, count, config)
weft_checkpoint_open(dir, checkpoint) =
    ccall(_msym(:weft_checkpoint_open), Cint, (Cstring, Ptr{Ptr{Cvoid}}), dir, checkpoint)
weft_checkpoint_close(checkpoint) = ccall(_msym(:weft_checkpoint_close), Cint, (Ptr{Cvoid},), checkpoint)
weft_checkpoint_count(checkpoint, count) =
    ccall(_msym(:weft_checkpoint_count), Cint, (Ptr{Cvoid}, Ptr{Csize_t}), checkpoint, count)
weft_checkpoint_tensor(checkpoint, i, name, dtype, ndim, global_shape, nshards) =
    ccall(_msym(:weft_checkpoint_tensor), Cint,
          (Ptr{Cvoid}, Csize_t, Ptr{Ptr{UInt8}}, Ptr{Cint}, Ptr{Cint}, Ptr{Int64}, Ptr{Csize_t}),
          checkpoint, i, name, dtype, ndim, global_shape, nshards)
weft_checkpoint_verify(checkpoint) = ccall(_msym(:weft_checkpoint_verify), Cint, (Ptr{Cvoid},), checkpoint)
weft_checkpoint_export_safetensors(checkpoint, path) =
    ccall(_msym(:weft_checkpoint_export_safetensors), Cint, (Ptr{Cvoid}, Cstring), checkpoint, path)
