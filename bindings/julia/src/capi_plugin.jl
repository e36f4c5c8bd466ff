# Raw ccall wrappers of weft/plugin.h (loading plugins, calls by name, closures, reduction
# operators), one per C function in the header's order, and its structs. Included from Weft.jl
# after capi_moe.jl; the same conventions (arguments passed as given, the C status returned). A
# library built before plugin.h lacks these functions: it still loads, and calling one of them
# throws ERR_UNSUPPORTED naming it (_plugsym).
#
# UNTESTED: no Julia toolchain was available when this was written; the layouts below were
# checked against the C compiler's sizeof/offsetof (as the Rust binding's tests do), not by Julia.

const WEFT_PLUGIN_ABI_MAJOR = 1
const WEFT_PLUGIN_ABI_MINOR = 0
const WEFT_PLUGIN_ID_BASE = 64

# weft_value_type_t
const WEFT_TYPE_VOID = Cint(0)
const WEFT_TYPE_I8 = Cint(1)
const WEFT_TYPE_U8 = Cint(2)
const WEFT_TYPE_I16 = Cint(3)
const WEFT_TYPE_U16 = Cint(4)
const WEFT_TYPE_I32 = Cint(5)
const WEFT_TYPE_U32 = Cint(6)
const WEFT_TYPE_I64 = Cint(7)
const WEFT_TYPE_U64 = Cint(8)
const WEFT_TYPE_F32 = Cint(9)
const WEFT_TYPE_F64 = Cint(10)
const WEFT_TYPE_PTR = Cint(11)
const WEFT_TYPE_SIZE = Cint(12)
const WEFT_TYPE_TENSOR = Cint(13)
const WEFT_TYPE_STRING = Cint(14)
const WEFT_TYPE_FN = Cint(15)
const VALUE_TYPE_NAMES = ("VOID", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "F32", "F64", "PTR", "SIZE",
                          "TENSOR", "STRING", "FN")

# weft_plugin_kind_t
const WEFT_PLUGIN_FUNCTION = Cint(0)
const WEFT_PLUGIN_REDUCE_OP = Cint(1)
const WEFT_PLUGIN_CODEC_BYTES = Cint(2)
const WEFT_PLUGIN_CODEC_ENCODE = Cint(3)
const WEFT_PLUGIN_CODEC_DECODE = Cint(4)
const WEFT_PLUGIN_ROUTER = Cint(5)
const WEFT_PLUGIN_SCHEDULE = Cint(6)
const WEFT_PLUGIN_COST_MODEL = Cint(7)

# weft_plugin_info_t (48 bytes; abi_major at 32, nentries at 40).
struct PluginInfoC
    struct_size::Csize_t
    name::Ptr{UInt8}
    version::Ptr{UInt8}
    path::Ptr{UInt8}
    abi_major::Cint
    abi_minor::Cint
    nentries::Csize_t
end

# weft_plugin_entry_t (88 bytes; ret at 40, args at 48, dtypes at 64, id at 80).
struct PluginEntryC
    struct_size::Csize_t
    name::Ptr{UInt8}
    kind::Cint
    symbol::Ptr{UInt8}
    doc::Ptr{UInt8}
    ret::Cint
    args::Ptr{Cint}
    nargs::Csize_t
    dtypes::Ptr{Cint}
    ndtypes::Csize_t
    id::Cint
end

# weft_value_t (32 bytes; i at 8, f at 16, p at 24).
struct ValueC
    vtype::Cint   # `type` in C
    i::Int64
    f::Cdouble
    p::Ptr{Cvoid}
end

# weft_op_config_t (48 bytes; fn at 16, dtypes at 32).
struct OpConfigC
    struct_size::Csize_t
    name::Ptr{UInt8}
    fn::Ptr{Cvoid}
    user_data::Ptr{Cvoid}
    dtypes::Ptr{Cint}
    ndtypes::Csize_t
end

_plugin_info_init() = PluginInfoC(Csize_t(sizeof(PluginInfoC)), Ptr{UInt8}(C_NULL), Ptr{UInt8}(C_NULL),
                                  Ptr{UInt8}(C_NULL), Cint(0), Cint(0), Csize_t(0))
_plugin_entry_init() = PluginEntryC(Csize_t(sizeof(PluginEntryC)), Ptr{UInt8}(C_NULL), WEFT_PLUGIN_FUNCTION,
                                    Ptr{UInt8}(C_NULL), Ptr{UInt8}(C_NULL), WEFT_TYPE_VOID, Ptr{Cint}(C_NULL),
                                    Csize_t(0), Ptr{Cint}(C_NULL), Csize_t(0), Cint(-1))

"""
    CustomOp(id)

A reduction operator that is not one of `Weft.Op`'s: a REDUCE_OP plugin entry's (`Weft.op(entry)`)
or one made with `Weft.register_op`. Pass it wherever a collective takes `op`.
"""
struct CustomOp
    id::Cint
end
Base.Cint(o::CustomOp) = o.id

# Function pointer of a plugin.h function, or ERR_UNSUPPORTED when the library lacks it.
const _plugin_syms = Dict{Symbol,Ptr{Cvoid}}()
const _plugin_syms_lock = ReentrantLock()

function _plugsym(f::Symbol)
    _loaded[] || _load()
    p = lock(_plugin_syms_lock) do
        get!(_plugin_syms, f) do
            q = Libdl.dlsym(_handle[], f; throw_error=false)
            q === nothing ? C_NULL : q
        end
    end
    p == C_NULL && throw(WeftError(ERR_UNSUPPORTED, "Weft: $f: the loaded libweft ($(library_path())) " *
                                   "does not export it; it was built before weft/plugin.h (rebuild libweft)"))
    return p
end

# ---- plugin.h: loading and inspecting
weft_plugin_load(path, plugin) =
    ccall(_plugsym(:weft_plugin_load), Cint, (Cstring, Ptr{Ptr{Cvoid}}), path, plugin)
weft_plugin_destroy(plugin) = ccall(_plugsym(:weft_plugin_destroy), Cint, (Ptr{Cvoid},), plugin)
weft_plugin_info(plugin, info) = ccall(_plugsym(:weft_plugin_info), Cint, (Ptr{Cvoid}, Ptr{PluginInfoC}), plugin, info)
weft_plugin_entry(plugin, index, entry) =
    ccall(_plugsym(:weft_plugin_entry), Cint, (Ptr{Cvoid}, Csize_t, Ptr{PluginEntryC}), plugin, index, entry)
weft_plugin_lookup(plugin, name, entry) =
    ccall(_plugsym(:weft_plugin_lookup), Cint, (Ptr{Cvoid}, Cstring, Ptr{PluginEntryC}), plugin, name, entry)

# ---- plugin.h: calling by name
weft_plugin_call(plugin, entry, args, nargs, result) =
    ccall(_plugsym(:weft_plugin_call), Cint, (Ptr{Cvoid}, Cstring, Ptr{ValueC}, Csize_t, Ptr{ValueC}),
          plugin, entry, args, nargs, result)

# ---- plugin.h: closures
weft_closure_create(ret, args, nargs, handler, user_data, closure, fn) =
    ccall(_plugsym(:weft_closure_create), Cint,
          (Cint, Ptr{Cint}, Csize_t, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}, Ptr{Ptr{Cvoid}}),
          ret, args, nargs, handler, user_data, closure, fn)
weft_closure_error(closure, failures, message) =
    ccall(_plugsym(:weft_closure_error), Cint, (Ptr{Cvoid}, Ptr{UInt64}, Ptr{Ptr{UInt8}}), closure, failures, message)
weft_closure_destroy(closure) = ccall(_plugsym(:weft_closure_destroy), Cint, (Ptr{Cvoid},), closure)

# ---- plugin.h: reduction operators
weft_op_create(config, op) = ccall(_plugsym(:weft_op_create), Cint, (Ptr{OpConfigC}, Ptr{Cint}), config, op)
weft_op_destroy(op) = ccall(_plugsym(:weft_op_destroy), Cint, (Cint,), op)
