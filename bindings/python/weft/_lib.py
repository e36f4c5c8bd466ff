"""Finding and loading libweft.so, and the ctypes prototypes of every function in weft.h.

Search order (the first that exists wins; see README.md):

1. ``WEFT_LIBRARY``: a path to the library file, or to a folder holding ``libweft.so``.
   When set it is the only place tried: a bad value is an error, never a silent fallback.
2. Next to the package: ``<package>/libweft.so`` (a wheel that bundles the library) and the
   folder that holds the package.
3. The build tree: ``$WEFT_BUILD_DIR/lib``, then ``<repo>/build/lib`` where ``<repo>`` is
   ``../..`` from ``bindings/python`` (running from a checkout).
4. The system's library path: ``ctypes.util.find_library("weft")``, then ``libweft.so.0``
   and ``libweft.so`` through the dynamic loader (``LD_LIBRARY_PATH``, ``ld.so.cache``).
"""

import ctypes
import ctypes.util
import os
import pathlib
import threading

from ._plan_c import PLAN_PROTOTYPES

# The ABI version this binding was written against (WEFT_ABI_VERSION in weft.h).
ABI_VERSION = 1
UNIQUE_ID_BYTES = 128

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
_LIB_NAMES = ("libweft.so", "libweft.so.0")


class LibraryNotFoundError(OSError):
    """libweft.so could not be found or loaded; the message lists every place tried."""


class weft_comm_config_t(ctypes.Structure):  # noqa: N801 (the C name)
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("timeout_ms", ctypes.c_int64),
        ("transport", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("check_collectives", ctypes.c_int),
    ]


class weft_p2p_op_t(ctypes.Structure):  # noqa: N801
    # kind (WEFT_P2P_SEND = 0, WEFT_P2P_RECV = 1), buf, count, dtype, peer: natural alignment, as C.
    _fields_ = [
        ("kind", ctypes.c_int),
        ("buf", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
        ("peer", ctypes.c_int),
    ]


class weft_unique_id_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


# ------------------------------------------------------------------ common.h: tensor views

TENSOR_MAX_DIMS = 8
DEVICE_CPU, DEVICE_CUDA, DEVICE_CUDA_HOST = 1, 2, 3  # weft_device_type_t (DLPack's codes)


class weft_tensor_t(ctypes.Structure):  # noqa: N801
    # Field for field DLPack's DLTensor (data, device, ndim, dtype, shape, strides, byte_offset);
    # strides in elements.
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int),
        ("device_id", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# ------------------------------------------------------------------ mesh.h

MESH_MAX_DIMS = 4
MESH_MAX_NAME = 31


class weft_mesh_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("ranks", ctypes.POINTER(ctypes.c_int)),
        ("nranks", ctypes.c_size_t),
    ]


class weft_placement_t(ctypes.Structure):  # noqa: N801
    # kind: WEFT_REPLICATE = 0, WEFT_SHARD = 1, WEFT_PARTIAL = 2; dim (SHARD); op (PARTIAL).
    _fields_ = [("kind", ctypes.c_int), ("dim", ctypes.c_int), ("op", ctypes.c_int)]


class weft_sharded_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("name", ctypes.c_char_p)]


class weft_redistribute_step_t(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("kind", ctypes.c_int),
        ("mesh_dim", ctypes.c_int),
        ("from_", weft_placement_t),  # C: from
        ("to", weft_placement_t),
        ("bytes_sent", ctypes.c_uint64),
        ("max_bytes_sent", ctypes.c_uint64),
    ]


class weft_checkpoint_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("fsync", ctypes.c_int)]


# ------------------------------------------------------------------ training.h

class weft_bucketer_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("bucket_bytes", ctypes.c_size_t),
        ("bucket_of", ctypes.POINTER(ctypes.c_size_t)),
        ("op", ctypes.c_int),
        ("wire", ctypes.c_int),
        ("reduction", ctypes.c_int),
        ("names", ctypes.POINTER(ctypes.c_char_p)),
        ("error_feedback", ctypes.c_int),
    ]


class weft_bucketer_stats_t(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("steps", ctypes.c_uint64),
        ("wire_bytes", ctypes.c_uint64),
        ("exposed_ns", ctypes.c_uint64),
        ("launched_late", ctypes.c_uint64),
    ]


class weft_optimizer_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("lr", ctypes.c_float),
        ("momentum", ctypes.c_float),
        ("beta1", ctypes.c_float),
        ("beta2", ctypes.c_float),
        ("eps", ctypes.c_float),
        ("weight_decay", ctypes.c_float),
    ]


class weft_zero_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("stage", ctypes.c_int),
        ("param_dtype", ctypes.c_int),
        ("optimizer", weft_optimizer_config_t),
        ("groups", ctypes.POINTER(ctypes.c_int)),
        ("group_bytes", ctypes.c_size_t),
        ("names", ctypes.POINTER(ctypes.c_char_p)),
        ("grad_op", ctypes.c_int),
        ("wire", ctypes.c_int),
        ("max_grad_norm", ctypes.c_float),
        ("loss_scale", ctypes.c_float),
        ("dynamic_loss_scale", ctypes.c_int),
        ("growth", ctypes.c_float),
        ("backoff", ctypes.c_float),
        ("growth_interval", ctypes.c_int),
        ("error_feedback", ctypes.c_int),
    ]


class weft_zero_step_info_t(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("skipped", ctypes.c_int),
        ("grad_norm", ctypes.c_float),
        ("loss_scale", ctypes.c_float),
        ("comm_elements", ctypes.c_uint64),
        ("comm_bytes", ctypes.c_uint64),
    ]


class weft_zero_memory_t(ctypes.Structure):  # noqa: N801
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("params", ctypes.c_uint64),
        ("grads", ctypes.c_uint64),
        ("optimizer", ctypes.c_uint64),
        ("buffers", ctypes.c_uint64),
        ("buffers_peak", ctypes.c_uint64),
    ]


# ------------------------------------------------------------------ pipeline.h

class weft_action_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("kind", ctypes.c_int), ("stage", ctypes.c_int32), ("microbatch", ctypes.c_int32)]


class weft_schedule_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("ranks", ctypes.c_int), ("microbatches", ctypes.c_int),
                ("stages_per_rank", ctypes.c_int), ("reduce_grad", ctypes.c_int)]


class weft_schedule_info_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("kind", ctypes.c_int), ("ranks", ctypes.c_int),
                ("stages", ctypes.c_int), ("microbatches", ctypes.c_int), ("stages_per_rank", ctypes.c_int)]


class weft_timeline_info_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("ranks", ctypes.c_int), ("makespan", ctypes.c_double),
                ("bubble_fraction", ctypes.c_double)]


class weft_rank_stats_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("busy", ctypes.c_double), ("idle", ctypes.c_double),
                ("peak_activations", ctypes.c_int), ("peak_activation_bytes", ctypes.c_double)]


_dbl_p = ctypes.POINTER(ctypes.c_double)


class weft_pipeline_costs_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("nstages", ctypes.c_int), ("forward", _dbl_p),
                ("backward", _dbl_p), ("backward_input", _dbl_p), ("backward_weight", _dbl_p),
                ("activation_bytes", _dbl_p), ("weight_grad_bytes", _dbl_p), ("boundary_bytes", _dbl_p),
                ("latency", ctypes.c_double), ("bandwidth", ctypes.c_double), ("overhead", ctypes.c_double),
                ("reduce_grad", _dbl_p), ("cost_model", ctypes.c_int), ("microbatch_size", ctypes.c_int)]


class weft_tune_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("ranks", ctypes.c_int), ("layers", ctypes.c_int),
                ("layer_forward", _dbl_p), ("layer_backward", _dbl_p), ("global_batch", ctypes.c_int),
                ("microbatch_overhead", ctypes.c_double), ("activation_bytes_per_sample", ctypes.c_double),
                ("boundary_bytes_per_sample", ctypes.c_double), ("latency", ctypes.c_double),
                ("bandwidth", ctypes.c_double), ("memory_cap", ctypes.c_double), ("static_bytes", ctypes.c_double),
                ("kinds", ctypes.POINTER(ctypes.c_int)), ("nkinds", ctypes.c_size_t),
                ("max_stages_per_rank", ctypes.c_int), ("max_microbatches", ctypes.c_int),
                ("cost_model", ctypes.c_int)]


class weft_tune_candidate_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("kind", ctypes.c_int), ("microbatches", ctypes.c_int), ("stages_per_rank", ctypes.c_int),
                ("microbatch_size", ctypes.c_int), ("step_time", ctypes.c_double),
                ("bubble_fraction", ctypes.c_double), ("peak_bytes", ctypes.c_double), ("fits", ctypes.c_int)]


class weft_stage_call_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("kind", ctypes.c_int), ("stage", ctypes.c_int), ("microbatch", ctypes.c_int),
                ("input", ctypes.POINTER(weft_tensor_t)), ("output", ctypes.POINTER(weft_tensor_t))]


# STAGE_FN is weft_stage_fn: weft_status_t (*)(const weft_stage_call_t *call, void *user_data)
STAGE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(weft_stage_call_t), ctypes.c_void_p)


class weft_pipeline_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("forward", STAGE_FN), ("backward", STAGE_FN),
                ("backward_input", STAGE_FN), ("backward_weight", STAGE_FN),
                ("reduce_grad", STAGE_FN), ("user_data", ctypes.c_void_p),
                ("boundaries", ctypes.POINTER(weft_tensor_t)), ("nboundaries", ctypes.c_size_t),
                ("stream", ctypes.c_void_p), ("record", ctypes.c_int)]


# ------------------------------------------------------------------ moe.h

class weft_router_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("experts", ctypes.c_int), ("topk", ctypes.c_int),
                ("score", ctypes.c_int), ("normalize", ctypes.c_int), ("groups", ctypes.c_int),
                ("topk_groups", ctypes.c_int), ("bias", ctypes.c_void_p), ("drop", ctypes.c_int),
                ("capacity_factor", ctypes.c_double), ("aux_loss_coeff", ctypes.c_float),
                ("z_loss_coeff", ctypes.c_float), ("selector", ctypes.c_int)]


class weft_router_result_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("indices", ctypes.c_void_p), ("weights", ctypes.c_void_p),
                ("tokens_per_expert", ctypes.c_void_p), ("selected_per_expert", ctypes.c_void_p),
                ("aux_loss", ctypes.c_float), ("z_loss", ctypes.c_float)]


class weft_moe_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("experts", ctypes.c_int), ("hidden", ctypes.c_size_t),
                ("dtype", ctypes.c_int), ("expert_rank", ctypes.c_void_p), ("expert_alignment", ctypes.c_size_t),
                ("fp8_dispatch", ctypes.c_int), ("device", ctypes.c_int)]


class weft_moe_received_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("tokens", weft_tensor_t), ("rows", ctypes.c_size_t),
                ("local_experts", ctypes.c_int), ("experts", ctypes.POINTER(ctypes.c_int32)),
                ("counts", ctypes.POINTER(ctypes.c_int64)), ("offsets", ctypes.POINTER(ctypes.c_int64)),
                ("row_expert", ctypes.POINTER(ctypes.c_int32)), ("row_weight", ctypes.POINTER(ctypes.c_float)),
                ("row_source_rank", ctypes.POINTER(ctypes.c_int32)),
                ("row_source_token", ctypes.POINTER(ctypes.c_int64))]



# ------------------------------------------------------------------ plugin.h

PLUGIN_ID_BASE = 64  # WEFT_PLUGIN_ID_BASE: the first id of every kind of extension


class weft_plugin_info_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("version", ctypes.c_char_p),
                ("path", ctypes.c_char_p), ("abi_major", ctypes.c_int), ("abi_minor", ctypes.c_int),
                ("nentries", ctypes.c_size_t)]


class weft_plugin_entry_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("kind", ctypes.c_int),
                ("symbol", ctypes.c_char_p), ("doc", ctypes.c_char_p), ("ret", ctypes.c_int),
                ("args", ctypes.POINTER(ctypes.c_int)), ("nargs", ctypes.c_size_t),
                ("dtypes", ctypes.POINTER(ctypes.c_int)), ("ndtypes", ctypes.c_size_t), ("id", ctypes.c_int)]


class weft_value_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("type", ctypes.c_int), ("i", ctypes.c_int64), ("f", ctypes.c_double), ("p", ctypes.c_void_p)]


# CLOSURE_FN is weft_closure_fn: weft_status_t (*)(const weft_value_t *args, size_t nargs,
# weft_value_t *result, void *user_data)
CLOSURE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(weft_value_t), ctypes.c_size_t,
                              ctypes.POINTER(weft_value_t), ctypes.c_void_p)
# REDUCE_FN is weft_reduce_fn: weft_status_t (*)(void *dst, const void *a, const void *b, size_t count,
# weft_dtype_t dtype, void *user_data)
REDUCE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_int, ctypes.c_void_p)


class weft_op_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("fn", REDUCE_FN),
                ("user_data", ctypes.c_void_p), ("dtypes", ctypes.POINTER(ctypes.c_int)),
                ("ndtypes", ctypes.c_size_t)]



_status = ctypes.c_int
_dtype = ctypes.c_int
_op = ctypes.c_int
_handle = ctypes.c_void_p
_handle_p = ctypes.POINTER(ctypes.c_void_p)
_size_p = ctypes.POINTER(ctypes.c_size_t)
_int_p = ctypes.POINTER(ctypes.c_int)
_cfg_p = ctypes.POINTER(weft_comm_config_t)
_uid_p = ctypes.POINTER(weft_unique_id_t)
_vp = ctypes.c_void_p
_sz = ctypes.c_size_t
_int = ctypes.c_int
_str = ctypes.c_char_p
_i64_p = ctypes.POINTER(ctypes.c_int64)
_pl_p = ctypes.POINTER(weft_placement_t)
_tensor_p = ctypes.POINTER(weft_tensor_t)

# name: (restype, argtypes), in weft.h's order. Every function of weft.h is here.
PROTOTYPES = {
    "weft_status_string": (ctypes.c_char_p, [_status]),
    "weft_last_error": (ctypes.c_char_p, []),
    "weft_version": (_status, [_int_p, _int_p]),
    "weft_get_unique_id": (_status, [_uid_p]),
    "weft_comm_init": (_status, [_handle_p, _uid_p, _int, _int, _cfg_p]),
    "weft_comm_init_from_env": (_status, [_handle_p, _cfg_p]),
    "weft_comm_split": (_status, [_handle, _int, _int, _handle_p, _cfg_p]),
    "weft_comm_dup": (_status, [_handle, _handle_p]),
    "weft_comm_shrink": (_status, [_handle, _handle_p]),
    "weft_comm_rank": (_status, [_handle, _int_p]),
    "weft_comm_size": (_status, [_handle, _int_p]),
    "weft_comm_local_rank": (_status, [_handle, _int_p]),
    "weft_comm_local_size": (_status, [_handle, _int_p]),
    "weft_comm_abort": (_status, [_handle]),
    "weft_comm_destroy": (_status, [_handle]),
    "weft_wait": (_status, [_handle]),
    "weft_test": (_status, [_handle, _int_p]),
    "weft_request_free": (_status, [_handle]),
    # sendbuf, recvbuf, count, dtype, op, comm, stream, request
    "weft_allreduce": (_status, [_vp, _vp, _sz, _dtype, _op, _handle, _vp, _handle_p]),
    # buf, count, dtype, root, comm, stream, request
    "weft_broadcast": (_status, [_vp, _sz, _dtype, _int, _handle, _vp, _handle_p]),
    # sendbuf, recvbuf, count, dtype, op, root, comm, stream, request
    "weft_reduce": (_status, [_vp, _vp, _sz, _dtype, _op, _int, _handle, _vp, _handle_p]),
    # sendbuf, recvbuf, sendcount, dtype, comm, stream, request
    "weft_allgather": (_status, [_vp, _vp, _sz, _dtype, _handle, _vp, _handle_p]),
    # sendbuf, sendcount, recvbuf, recvcounts, displs, dtype, comm, stream, request
    "weft_allgatherv": (_status, [_vp, _sz, _vp, _size_p, _size_p, _dtype, _handle, _vp, _handle_p]),
    # sendbuf, recvbuf, recvcount, dtype, op, comm, stream, request
    "weft_reduce_scatter": (_status, [_vp, _vp, _sz, _dtype, _op, _handle, _vp, _handle_p]),
    # sendbuf, recvbuf, count, dtype, comm, stream, request
    "weft_alltoall": (_status, [_vp, _vp, _sz, _dtype, _handle, _vp, _handle_p]),
    # sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype, comm, stream, request
    "weft_alltoallv": (_status, [_vp, _size_p, _size_p, _vp, _size_p, _size_p, _dtype, _handle, _vp, _handle_p]),
    # sendbuf, recvbuf, count, dtype, root, comm, stream, request
    "weft_gather": (_status, [_vp, _vp, _sz, _dtype, _int, _handle, _vp, _handle_p]),
    "weft_scatter": (_status, [_vp, _vp, _sz, _dtype, _int, _handle, _vp, _handle_p]),
    # comm, stream, request
    "weft_barrier": (_status, [_handle, _vp, _handle_p]),
    # buf, count, dtype, peer, comm, stream, request
    "weft_send": (_status, [_vp, _sz, _dtype, _int, _handle, _vp, _handle_p]),
    "weft_recv": (_status, [_vp, _sz, _dtype, _int, _handle, _vp, _handle_p]),
    # ops, nops, comm, stream, request
    "weft_p2p_batch": (_status, [ctypes.POINTER(weft_p2p_op_t), _sz, _handle, _vp, _handle_p]),
    "weft_dtype_size": (_status, [_dtype, _size_p]),
    # ---- mesh.h (see MESH_FUNCTIONS)
    # comm, ndims, shape, dim_names, config, mesh
    "weft_mesh_create": (_status, [_handle, _int, _int_p, ctypes.POINTER(_str), ctypes.POINTER(weft_mesh_config_t),
                                   _handle_p]),
    "weft_mesh_destroy": (_status, [_handle]),
    # mesh, ndims, shape
    "weft_mesh_shape": (_status, [_handle, _int_p, _int_p]),
    # mesh, dim, name
    "weft_mesh_dim_name": (_status, [_handle, _int, ctypes.POINTER(_str)]),
    # mesh, name, dim
    "weft_mesh_dim_index": (_status, [_handle, _str, _int_p]),
    "weft_mesh_is_member": (_status, [_handle, _int_p]),
    # mesh, coords, mesh_rank
    "weft_mesh_coords": (_status, [_handle, _int_p, _int_p]),
    # mesh, mesh_rank, parent_rank
    "weft_mesh_parent_rank": (_status, [_handle, _int, _int_p]),
    # mesh, dims, ndims, comm
    "weft_mesh_comm": (_status, [_handle, _int_p, _int, _handle_p]),
    # mesh, placements, ndim, global_shape, mesh_rank, local_shape, global_offset
    "weft_mesh_local_shape": (_status, [_handle, _pl_p, _int, _i64_p, _int, _i64_p, _i64_p]),
    # mesh, ndim, global_shape, dtype, placements, local, config, tensor
    "weft_sharded_create": (_status, [_handle, _int, _i64_p, _dtype, _pl_p, _tensor_p,
                                      ctypes.POINTER(weft_sharded_config_t), _handle_p]),
    "weft_sharded_destroy": (_status, [_handle]),
    "weft_sharded_local": (_status, [_handle, _tensor_p]),
    "weft_sharded_set_local": (_status, [_handle, _tensor_p]),
    # src, dst, stream, request
    "weft_redistribute": (_status, [_handle, _handle, _vp, _handle_p]),
    # src, dst, steps, capacity, nsteps
    "weft_redistribute_plan": (_status, [_handle, _handle, ctypes.POINTER(weft_redistribute_step_t), _sz, _size_p]),
    # comm, dir, names, tensors, count, config
    "weft_checkpoint_save": (_status, [_handle, _str, ctypes.POINTER(_str), _handle_p, _sz,
                                       ctypes.POINTER(weft_checkpoint_config_t)]),
    # dir, names, tensors, count, config
    "weft_checkpoint_load": (_status, [_str, ctypes.POINTER(_str), _handle_p, _sz,
                                       ctypes.POINTER(weft_checkpoint_config_t)]),
    "weft_checkpoint_open": (_status, [_str, _handle_p]),
    "weft_checkpoint_close": (_status, [_handle]),
    "weft_checkpoint_count": (_status, [_handle, _size_p]),
    # checkpoint, i, name, dtype, ndim, global_shape, nshards
    "weft_checkpoint_tensor": (_status, [_handle, _sz, ctypes.POINTER(_str), _int_p, _int_p, _i64_p, _size_p]),
    "weft_checkpoint_verify": (_status, [_handle]),
    "weft_checkpoint_export_safetensors": (_status, [_handle, _str]),
    # ---- training.h (see TRAINING_FUNCTIONS)
    # comm, grads, ngrads, config, bucketer
    "weft_bucketer_create": (_status, [_handle, _tensor_p, _sz, ctypes.POINTER(weft_bucketer_config_t), _handle_p]),
    "weft_bucketer_destroy": (_status, [_handle]),
    "weft_bucketer_num_buckets": (_status, [_handle, _size_p]),
    # bucketer, grad, bucket, offset
    "weft_bucketer_bucket_of": (_status, [_handle, _sz, _size_p, _size_p]),
    # bucketer, grad, data, stream
    "weft_bucketer_mark_ready": (_status, [_handle, _sz, _vp, _vp]),
    # bucketer, stream
    "weft_bucketer_finish": (_status, [_handle, _vp]),
    # bucketer, bucket, shard, offset
    "weft_bucketer_shard": (_status, [_handle, _sz, _tensor_p, _size_p]),
    "weft_bucketer_stats": (_status, [_handle, ctypes.POINTER(weft_bucketer_stats_t)]),
    # mesh, dp_dim, params, nparams, config, zero
    "weft_zero_create": (_status, [_handle, _str, _tensor_p, _sz, ctypes.POINTER(weft_zero_config_t), _handle_p]),
    "weft_zero_destroy": (_status, [_handle]),
    "weft_zero_num_groups": (_status, [_handle, _size_p]),
    # zero, param, group
    "weft_zero_group_of": (_status, [_handle, _sz, _size_p]),
    # zero, param, view
    "weft_zero_param": (_status, [_handle, _sz, _tensor_p]),
    # zero, group, request
    "weft_zero_gather": (_status, [_handle, _sz, _handle_p]),
    "weft_zero_release": (_status, [_handle, _sz]),
    # zero, param, grad
    "weft_zero_grad_ready": (_status, [_handle, _sz, _tensor_p]),
    "weft_zero_step": (_status, [_handle, ctypes.POINTER(weft_zero_step_info_t)]),
    "weft_zero_memory": (_status, [_handle, ctypes.POINTER(weft_zero_memory_t)]),
    "weft_zero_save": (_status, [_handle, _str]),
    "weft_zero_load": (_status, [_handle, _str]),
    # mesh, dim, region, backward, split_dim, in, out, stream, request
    "weft_region_apply": (_status, [_handle, _str, _int, _int, _int, _tensor_p, _tensor_p, _vp, _handle_p]),
    # mesh, dim, shift, send, recv, stream, request
    "weft_ring_shift": (_status, [_handle, _str, _int, _tensor_p, _tensor_p, _vp, _handle_p]),
    # ---- pipeline.h (see PIPELINE_FUNCTIONS)
    # kind, config, schedule
    "weft_schedule_generate": (_status, [_int, ctypes.POINTER(weft_schedule_config_t), _handle_p]),
    # nranks, actions, counts, schedule
    "weft_schedule_create": (_status, [_int, ctypes.POINTER(ctypes.POINTER(weft_action_t)), _size_p, _handle_p]),
    "weft_schedule_destroy": (_status, [_handle]),
    "weft_schedule_info": (_status, [_handle, ctypes.POINTER(weft_schedule_info_t)]),
    # schedule, rank, actions, count
    "weft_schedule_actions": (_status, [_handle, _int, ctypes.POINTER(ctypes.POINTER(weft_action_t)), _size_p]),
    # schedule, stage, rank
    "weft_schedule_stage_rank": (_status, [_handle, _int, _int_p]),
    "weft_schedule_validate": (_status, [_handle]),
    # schedule, format, text, capacity, length
    "weft_schedule_to_csv": (_status, [_handle, _int, _vp, _sz, _size_p]),
    # text, length, schedule
    "weft_schedule_from_csv": (_status, [_vp, _sz, _handle_p]),
    "weft_schedule_save": (_status, [_handle, _str]),
    "weft_schedule_load": (_status, [_str, _handle_p]),
    "weft_timeline_info": (_status, [_handle, ctypes.POINTER(weft_timeline_info_t)]),
    # timeline, rank, start, end, count, stats
    "weft_timeline_rank": (_status, [_handle, _int, ctypes.POINTER(_dbl_p), ctypes.POINTER(_dbl_p), _size_p,
                                     ctypes.POINTER(weft_rank_stats_t)]),
    # timeline, format, path
    "weft_timeline_write": (_status, [_handle, _int, _str]),
    "weft_timeline_destroy": (_status, [_handle]),
    # schedule, costs, timeline
    "weft_schedule_simulate": (_status, [_handle, ctypes.POINTER(weft_pipeline_costs_t), _handle_p]),
    # config, candidates, capacity, count, best
    "weft_schedule_tune": (_status, [ctypes.POINTER(weft_tune_config_t), ctypes.POINTER(weft_tune_candidate_t), _sz,
                                     _size_p, _int_p]),
    # comm, schedule, config, pipeline
    "weft_pipeline_create": (_status, [_handle, _handle, ctypes.POINTER(weft_pipeline_config_t), _handle_p]),
    # pipeline, record
    "weft_pipeline_run": (_status, [_handle, _handle_p]),
    "weft_pipeline_destroy": (_status, [_handle]),
    "weft_pipeline_set_error": (_status, [_str]),
    # ---- moe.h (see MOE_FUNCTIONS); array arguments are raw pointers (numpy .ctypes.data)
    # logits, config, result, stream
    "weft_router_forward": (_status, [_tensor_p, ctypes.POINTER(weft_router_config_t),
                                      ctypes.POINTER(weft_router_result_t), _vp]),
    # logits, config, indices, grad_weights, grad_aux, grad_z, grad_logits, stream
    "weft_router_backward": (_status, [_tensor_p, ctypes.POINTER(weft_router_config_t), _vp, _vp, ctypes.c_float,
                                       ctypes.c_float, _tensor_p, _vp]),
    # bias, tokens_per_expert, experts, rate
    "weft_router_update_bias": (_status, [_vp, _vp, _int, ctypes.c_float]),
    # indices, tokens, topk, experts, nranks, expert_rank, tokens_per_rank, tokens_per_expert, token_in_rank
    "weft_moe_layout": (_status, [_vp, _sz, _int, _int, _int, _vp, _vp, _vp, _vp]),
    # comm, config, moe
    "weft_moe_create": (_status, [_handle, ctypes.POINTER(weft_moe_config_t), _handle_p]),
    "weft_moe_destroy": (_status, [_handle]),
    # moe, x, indices, weights, tokens, topk, stream, handle
    "weft_moe_dispatch": (_status, [_handle, _tensor_p, _vp, _vp, _sz, _int, _vp, _handle_p]),
    "weft_moe_handle_destroy": (_status, [_handle]),
    "weft_moe_handle_received": (_status, [_handle, ctypes.POINTER(weft_moe_received_t)]),
    # moe, handle, expert_out, weighted, out, stream
    "weft_moe_combine": (_status, [_handle, _handle, _tensor_p, _int, _tensor_p, _vp]),
    # moe, handle, grad_out, grad_expert_out, grad_weights, stream
    "weft_moe_combine_backward": (_status, [_handle, _handle, _tensor_p, _tensor_p, _vp, _vp]),
    # ---- plugin.h (see PLUGIN_FUNCTIONS)
    # path, plugin
    "weft_plugin_load": (_status, [_str, _handle_p]),
    "weft_plugin_destroy": (_status, [_handle]),
    "weft_plugin_info": (_status, [_handle, ctypes.POINTER(weft_plugin_info_t)]),
    # plugin, index, entry
    "weft_plugin_entry": (_status, [_handle, _sz, ctypes.POINTER(weft_plugin_entry_t)]),
    # plugin, name, entry
    "weft_plugin_lookup": (_status, [_handle, _str, ctypes.POINTER(weft_plugin_entry_t)]),
    # plugin, entry, args, nargs, result
    "weft_plugin_call": (_status, [_handle, _str, ctypes.POINTER(weft_value_t), _sz, ctypes.POINTER(weft_value_t)]),
    # ret, args, nargs, handler, user_data, closure, function
    "weft_closure_create": (_status, [_int, _int_p, _sz, CLOSURE_FN, _vp, _handle_p, _handle_p]),
    # closure, failures, message
    "weft_closure_error": (_status, [_handle, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(_str)]),
    "weft_closure_destroy": (_status, [_handle]),
    # config, op
    "weft_op_create": (_status, [ctypes.POINTER(weft_op_config_t), _int_p]),
    "weft_op_destroy": (_status, [_op]),
}
PROTOTYPES.update(PLAN_PROTOTYPES)  # plan.h's, declared in _plan_c.py

# The mesh.h family (meshes, sharded tensors, redistribution, checkpoints). A library that lacks
# them (one built before mesh.h) still loads for communicators; calling one of these then raises
# weft.Unsupported naming the function (see fn()).
MESH_FUNCTIONS = frozenset(n for n in PROTOTYPES if n.startswith(("weft_mesh_", "weft_sharded_", "weft_redistribute",
                                                                   "weft_checkpoint_")))

# The training.h family (bucketer, ZeRO, regions, ring shift): optional in the same way.
TRAINING_FUNCTIONS = frozenset(n for n in PROTOTYPES if n.startswith(("weft_bucketer_", "weft_zero_", "weft_region_",
                                                                       "weft_ring_")))
# The pipeline.h family (schedules, timelines, tuning, the executor): optional in the same way.
PIPELINE_FUNCTIONS = frozenset(n for n in PROTOTYPES if n.startswith(("weft_schedule_", "weft_timeline_",
                                                                       "weft_pipeline_")))
# The moe.h family (router, layout, dispatch and combine): optional in the same way.
MOE_FUNCTIONS = frozenset(n for n in PROTOTYPES if n.startswith(("weft_router_", "weft_moe_")))
# The plugin.h family (plugins, closures, reduction operators): optional in the same way.
PLUGIN_FUNCTIONS = frozenset(n for n in PROTOTYPES if n.startswith(("weft_plugin_", "weft_closure_", "weft_op_")))
# The plan.h family (the planner): optional in the same way.
PLAN_FUNCTIONS = frozenset(PLAN_PROTOTYPES)
# Functions a library may lack and still load (calling one then raises weft.Unsupported).
OPTIONAL_FUNCTIONS = (MESH_FUNCTIONS | TRAINING_FUNCTIONS | PIPELINE_FUNCTIONS | MOE_FUNCTIONS | PLUGIN_FUNCTIONS
                      | PLAN_FUNCTIONS)


def _candidates():
    """(description, path-or-name) pairs to try, in order, and whether the list is exclusive."""
    env = os.environ.get("WEFT_LIBRARY")
    if env:
        p = pathlib.Path(env)
        if p.is_dir():
            return [("WEFT_LIBRARY=%s" % env, str(p / n)) for n in _LIB_NAMES], True
        return [("WEFT_LIBRARY", env)], True
    out = []
    for folder, what in ((_PACKAGE_DIR, "next to the package"), (_PACKAGE_DIR.parent, "next to the package")):
        out += [(what, str(folder / n)) for n in _LIB_NAMES]
    build_env = os.environ.get("WEFT_BUILD_DIR")
    if build_env:
        out += [("build tree ($WEFT_BUILD_DIR)", str(pathlib.Path(build_env) / "lib" / n)) for n in _LIB_NAMES]
    repo = _PACKAGE_DIR.parent.parent.parent  # bindings/python/weft -> repository root
    out += [("build tree", str(repo / "build" / "lib" / n)) for n in _LIB_NAMES]
    found = ctypes.util.find_library("weft")
    if found:
        out.append(("system library path (ctypes.util.find_library)", found))
    out += [("system library path (dynamic loader)", n) for n in ("libweft.so.0", "libweft.so")]
    return out, False


def _declare(lib):
    for name, (restype, argtypes) in PROTOTYPES.items():
        if name in OPTIONAL_FUNCTIONS and not hasattr(lib, name):
            continue
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def _load():
    tried = []
    candidates, exclusive = _candidates()
    for what, path in candidates:
        is_file_path = os.sep in path
        if is_file_path and not os.path.exists(path):
            tried.append("%s: %s (no such file)" % (what, path))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s: %s (%s)" % (what, path, e))
            continue
        missing = [n for n in PROTOTYPES if n not in OPTIONAL_FUNCTIONS and not hasattr(lib, n)]
        if missing:
            tried.append("%s: %s (not libweft: lacks %s)" % (what, path, ", ".join(missing[:3])))
            continue
        _declare(lib)
        code, abi = ctypes.c_int(), ctypes.c_int()
        lib.weft_version(ctypes.byref(code), ctypes.byref(abi))
        if abi.value != ABI_VERSION:
            tried.append("%s: %s (ABI version %d; this binding needs %d)" % (what, path, abi.value, ABI_VERSION))
            continue
        return lib, path
    note = ("WEFT_LIBRARY is set, so no other place was tried" if exclusive
            else "set WEFT_LIBRARY to the library's path, or build it with scripts/build")
    raise LibraryNotFoundError("libweft.so could not be loaded (%s). Places tried, in order:\n  %s"
                               % (note, "\n  ".join(tried)))


_lock = threading.Lock()
_lib = None
_path = None


def lib():
    """The loaded library (loaded on first use)."""
    global _lib, _path
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib, _path = _load()
    return _lib


def path() -> str:
    """Where the loaded library came from."""
    lib()
    return _path


def fn(name):
    """The library's function `name`, or weft.Unsupported when this libweft lacks it (a library
    built before that family of weft.h existed)."""
    f = getattr(lib(), name, None)
    if f is None:
        from ._errors import Unsupported
        raise Unsupported("%s: the loaded library (%s) does not export it; it was built before this part of weft.h "
                          "(rebuild libweft)" % (name, _path))
    return f


def has(name):
    """Whether the loaded library exports `name`."""
    return hasattr(lib(), name)
