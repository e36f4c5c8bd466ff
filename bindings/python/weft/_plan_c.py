"""ctypes declarations of weft/plan.h (the planner): its structs, in the header's field order, and
the prototypes of its functions, which _lib.PROTOTYPES takes in (kept here so that _lib.py stays
one file per purpose; this module imports nothing of weft, so _lib can import it)."""

import ctypes

_int = ctypes.c_int
_dbl = ctypes.c_double
_sz = ctypes.c_size_t
_status = ctypes.c_int
_handle = ctypes.c_void_p


class weft_plan_layer_t(ctypes.Structure):  # noqa: N801 (the C name)
    """An array element (no struct_size): the config's layer_size gives its stride (104 bytes with
    tp_replicated, tp_allreduces and shared_params; the first release's 80 ended at context_bytes)."""
    _fields_ = [("name", ctypes.c_char_p), ("count", _int), ("experts", _int), ("top_k", _int),
                ("tensor_parallel", _int), ("params", _dbl), ("forward_flops", _dbl), ("forward_seconds", _dbl),
                ("backward_seconds", _dbl), ("activation_bytes", _dbl), ("output_bytes", _dbl),
                ("context_bytes", _dbl), ("tp_replicated", _dbl), ("tp_allreduces", _int),
                ("shared_params", _dbl)]


class weft_plan_collective_t(ctypes.Structure):  # noqa: N801
    """An array element, layout frozen (no struct_size): kind is a weft_plan_collective_kind_t."""
    _fields_ = [("kind", _int), ("ranks", _int), ("seconds", _dbl)]


class weft_plan_cluster_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", _sz), ("hosts", _int), ("ranks_per_host", _int), ("memory_per_rank", _dbl),
                ("flops_per_rank", _dbl), ("intra_bandwidth", _dbl), ("intra_latency", _dbl),
                ("inter_bandwidth", _dbl), ("inter_latency", _dbl),
                ("intra_collectives", ctypes.POINTER(weft_plan_collective_t)), ("num_intra_collectives", _sz)]


class weft_plan_layout_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", _sz), ("dp", _int), ("tp", _int), ("pp", _int), ("ep", _int), ("cp", _int),
                ("zero_stage", _int), ("schedule", _int), ("microbatches", _int), ("stages_per_rank", _int),
                ("fits", _int), ("step_seconds", _dbl), ("compute_seconds", _dbl),
                ("communication_seconds", _dbl), ("bubble_fraction", _dbl), ("memory_per_rank", _dbl),
                ("static_bytes", _dbl), ("activation_bytes", _dbl), ("communication_bytes", _dbl)]


class weft_plan_config_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", _sz), ("layers", ctypes.POINTER(weft_plan_layer_t)), ("num_layers", _sz),
                ("cluster", ctypes.POINTER(weft_plan_cluster_t)), ("global_batch", _int), ("ranks", _int),
                ("weight_bytes", _dbl), ("grad_bytes", _dbl), ("optimizer_bytes", _dbl),
                ("microbatch_overhead", _dbl), ("top", _int), ("include_infeasible", _int), ("max_pp", _int),
                ("max_tp", _int), ("max_cp", _int), ("tp_across_hosts", _int), ("kinds", ctypes.POINTER(_int)),
                ("nkinds", _sz), ("max_microbatches", _int), ("layout", ctypes.POINTER(weft_plan_layout_t)),
                ("scaling", _int), ("layer_size", _sz), ("grad_allreduce_bytes", _dbl)]


class weft_plan_info_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", _sz), ("ranks", _int), ("global_batch", _int), ("count", _sz), ("searched", _sz),
                ("feasible", _sz)]


class weft_plan_scaling_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("struct_size", _sz), ("ranks", _int), ("one_rank_seconds", _dbl), ("step_seconds", _dbl),
                ("speedup", _dbl), ("efficiency", _dbl), ("serial_fraction", _dbl), ("gustafson_speedup", _dbl)]


class weft_plan_scaling_point_t(ctypes.Structure):  # noqa: N801
    """An array element, layout frozen (no struct_size)."""
    _fields_ = [("ranks", _int), ("weak_batch", _int), ("fits", _int), ("strong_seconds", _dbl),
                ("strong_speedup", _dbl), ("amdahl_speedup", _dbl), ("weak_seconds", _dbl), ("weak_speedup", _dbl),
                ("gustafson_speedup", _dbl)]


# weft_plan_collective_kind_t
PLAN_ALLREDUCE, PLAN_ALLTOALL = 0, 1

# weft_plan_format_kind_t
FORMAT_TABLE, FORMAT_REPORT, FORMAT_JSON = 0, 1, 2

# name: (restype, argtypes), in plan.h's order.
PLAN_PROTOTYPES = {
    "weft_plan_create": (_status, [ctypes.POINTER(weft_plan_config_t), ctypes.POINTER(_handle)]),
    "weft_plan_load": (_status, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(weft_plan_config_t),
                                 ctypes.POINTER(_handle)]),
    "weft_plan_destroy": (_status, [_handle]),
    "weft_plan_info": (_status, [_handle, ctypes.POINTER(weft_plan_info_t)]),
    "weft_plan_layout": (_status, [_handle, _sz, ctypes.POINTER(weft_plan_layout_t)]),
    "weft_plan_scaling": (_status, [_handle, ctypes.POINTER(weft_plan_scaling_t),
                                    ctypes.POINTER(weft_plan_scaling_point_t), _sz, ctypes.POINTER(_sz)]),
    "weft_plan_format": (_status, [_handle, _int, ctypes.c_char_p, _sz, ctypes.POINTER(_sz)]),
}
