# Plugins (weft/plugin.h): loading a shared library that extends weft, calling its functions by
# name with arguments converted by the entry's signature, Julia functions as C function pointers
# (Closure) and reduction operators written in Julia (register_op). Included from Weft.jl last.
#
# UNTESTED: no Julia toolchain was available when this was written (the Python, Rust and Go
# bindings' plugin tests run against the same library and the same C plugin).
#
# Closures and operators reach C through closure-free @cfunction trampolines whose user_data is
# pointer_from_objref of the Julia object (kept alive by the Closure / UserOp, which Julia's GC
# does not move). A Julia exception in the function is caught there, never unwinds into C: a
# closure's call then returns 0 and is counted (`failures`), an operator's collective fails with
# the operator's name. weft calls an operator from the thread that runs the collective; Julia
# must support calls from that thread (Julia >= 1.9 adopts foreign threads).
#
# Plugins, closures and operators have no finalizers (a finalizer must not call into weft here:
# the symbol lookup takes a lock): close them when done; one never closed lasts until exit.
#
# A plugin runs in this process: a manifest that lies about a FUNCTION's signature makes the call
# undefined behaviour (weft/plugin.h).

"One entry of a loaded plugin (`weft_plugin_entry_t`), copied out; `id` is -1 for FUNCTION."
struct PluginEntry
    name::String
    kind::Cint
    symbol::String
    doc::String
    ret::Cint
    args::Vector{Cint}
    dtypes::Vector{Cint}
    id::Int
end

_cstr(p::Ptr{UInt8}) = p == C_NULL ? "" : unsafe_string(p)

_entry(c::PluginEntryC) =
    PluginEntry(_cstr(c.name), c.kind, _cstr(c.symbol), _cstr(c.doc), c.ret,
                Cint[unsafe_load(c.args, k) for k in 1:Int(c.nargs)],
                Cint[unsafe_load(c.dtypes, k) for k in 1:Int(c.ndtypes)], Int(c.id))

_type_name(t::Integer) = 0 <= t < length(VALUE_TYPE_NAMES) ? VALUE_TYPE_NAMES[t+1] : "type $t"

"    Weft.signature(e::PluginEntry) -> String, e.g. \"F64(PTR, PTR, SIZE)\"."
signature(e::PluginEntry) = _type_name(e.ret) * "(" * join(_type_name.(e.args), ", ") * ")"

"""
    Weft.extension_id(x) -> Int

The id to put where weft takes a built-in value or an extension (op, wire, router selector,
schedule kind, cost model): 0 (built in), an id >= 64, or a plugin entry of a registered kind.
"""
extension_id(x::Integer) = (x == 0 || x >= WEFT_PLUGIN_ID_BASE) ? Int(x) :
                           _invalid("$x is neither 0 (built in) nor an extension id (>= $WEFT_PLUGIN_ID_BASE)")
extension_id(e::PluginEntry) = e.id >= WEFT_PLUGIN_ID_BASE ? e.id :
                               _invalid("plugin entry '$(e.name)' registered nothing (a FUNCTION has no id)")

# A SCHEDULE entry as the kind for `Schedule` (pipeline.jl takes the id).
Schedule(e::PluginEntry; kwargs...) = Schedule(extension_id(e); kwargs...)

"    Weft.op(e::PluginEntry) -> CustomOp: a REDUCE_OP entry as the operator of collectives."
op(e::PluginEntry) = e.kind == WEFT_PLUGIN_REDUCE_OP ? CustomOp(Cint(extension_id(e))) :
                     _invalid("plugin entry '$(e.name)' is not a REDUCE_OP")

"""
    Weft.load_plugin(path) -> Plugin

`weft_plugin_load`: loads and verifies the plugin, registering its extensions. `p.name`,
`p.version`, `p.path`, `p.abi`, `p.entries`; `close(p)` releases the handle (the library and its
extensions stay for the life of the process).
"""
mutable struct Plugin
    handle::Ptr{Cvoid}
    name::String
    version::String
    path::String
    abi::Tuple{Int,Int}
    entries::Vector{PluginEntry}
end

"""
    Weft.load_plugin(path) -> Plugin

`weft_plugin_load`: opens the plugin at `path`, verifies its manifest and registers its
extensions; see [`Plugin`](@ref) for what the result holds. Throws `WeftError` naming the check
that failed (a bad manifest, a missing symbol, another ABI).
"""
function load_plugin(path::AbstractString)
    occursin('\0', path) && _invalid("the plugin path contains a NUL character")
    h = Ref{Ptr{Cvoid}}(C_NULL)
    _check(weft_plugin_load(path, h))
    info = Ref(_plugin_info_init())
    p = Plugin(h[], "", "", "", (0, 0), PluginEntry[])
    _check(weft_plugin_info(p.handle, info))
    i = info[]
    p.name, p.version, p.path = _cstr(i.name), _cstr(i.version), _cstr(i.path)
    p.abi = (Int(i.abi_major), Int(i.abi_minor))
    for k in 0:Int(i.nentries)-1
        e = Ref(_plugin_entry_init())
        _check(weft_plugin_entry(p.handle, Csize_t(k), e))
        push!(p.entries, _entry(e[]))
    end
    return p
end

function Base.close(p::Plugin)
    h, p.handle = p.handle, C_NULL
    h == C_NULL || _check(weft_plugin_destroy(h))
    return nothing
end

"    Weft.entry(p::Plugin, name) -> PluginEntry (`weft_plugin_lookup`; the error lists the entries)."
function entry(p::Plugin, name::AbstractString)
    p.handle == C_NULL && _invalid("plugin '$(p.name)' is closed")
    e = Ref(_plugin_entry_init())
    _check(weft_plugin_lookup(p.handle, name, e))
    return _entry(e[])
end

const _INT_RANGES = Dict(WEFT_TYPE_I8 => (typemin(Int8), typemax(Int8)), WEFT_TYPE_U8 => (0, typemax(UInt8)),
                         WEFT_TYPE_I16 => (typemin(Int16), typemax(Int16)), WEFT_TYPE_U16 => (0, typemax(UInt16)),
                         WEFT_TYPE_I32 => (typemin(Int32), typemax(Int32)), WEFT_TYPE_U32 => (0, typemax(UInt32)),
                         WEFT_TYPE_I64 => (typemin(Int64), typemax(Int64)), WEFT_TYPE_U64 => (0, typemax(UInt64)),
                         WEFT_TYPE_SIZE => (0, typemax(UInt64)))

# The ValueC of x for type t; `keep` collects what must stay alive (and GC.@preserve'd) for the call.
function _value(x, t::Cint, what::AbstractString, keep::Vector{Any})
    if haskey(_INT_RANGES, t)
        (x isa Integer && !(x isa Bool)) || _invalid("$what: expected $(_type_name(t)) (an integer), got $(typeof(x))")
        lo, hi = _INT_RANGES[t]
        lo <= x <= hi || _invalid("$what: $x does not fit $(_type_name(t)) [$lo, $hi]")
        return ValueC(t, x > typemax(Int64) ? reinterpret(Int64, UInt64(x)) : Int64(x), 0.0, C_NULL)
    elseif t == WEFT_TYPE_F32 || t == WEFT_TYPE_F64
        (x isa Real && !(x isa Bool)) || _invalid("$what: expected $(_type_name(t)) (a number), got $(typeof(x))")
        return ValueC(t, 0, Float64(x), C_NULL)
    elseif t == WEFT_TYPE_PTR
        x === nothing && return ValueC(t, 0, 0.0, C_NULL)
        x isa Ptr && return ValueC(t, 0, 0.0, Ptr{Cvoid}(x))
        x isa DenseArray || _invalid("$what: expected PTR (nothing, a Ptr or a DenseArray), got $(typeof(x))")
        push!(keep, x)
        return ValueC(t, 0, 0.0, isempty(x) ? C_NULL : Ptr{Cvoid}(pointer(x)))
    elseif t == WEFT_TYPE_TENSOR
        x isa DenseArray || _invalid("$what: expected TENSOR (a DenseArray), got $(typeof(x))")
        shape = _reversed_shape(x)
        ref = Ref(_flat_view(x, _tensor_dt(eltype(x), false), shape))
        push!(keep, x, shape, ref)
        return ValueC(t, 0, 0.0, Ptr{Cvoid}(Base.unsafe_convert(Ptr{TensorC}, ref)))
    elseif t == WEFT_TYPE_STRING
        x isa AbstractString || _invalid("$what: expected STRING, got $(typeof(x))")
        s = String(x)
        occursin('\0', s) && _invalid("$what: the string contains a NUL character")
        push!(keep, s)
        return ValueC(t, 0, 0.0, Ptr{Cvoid}(pointer(s)))
    elseif t == WEFT_TYPE_FN
        x isa Closure && (push!(keep, x); return ValueC(t, 0, 0.0, x.fn))
        x isa Ptr && x != C_NULL && return ValueC(t, 0, 0.0, Ptr{Cvoid}(x))
        _invalid("$what: expected FN (a Weft.Closure or a non-NULL function pointer), got $(typeof(x))")
    end
    _invalid("$what: type $(_type_name(t)) is not an argument type")
end

# The Julia value of a ValueC, by its own type.
function _julia_value(v::ValueC)
    t = v.vtype
    t == WEFT_TYPE_VOID && return nothing
    t in (WEFT_TYPE_U64, WEFT_TYPE_SIZE) && return reinterpret(UInt64, v.i)
    haskey(_INT_RANGES, t) && return v.i
    (t == WEFT_TYPE_F32 || t == WEFT_TYPE_F64) && return v.f
    t == WEFT_TYPE_STRING && return v.p == C_NULL ? "" : unsafe_string(Ptr{UInt8}(v.p))
    return v.p   # PTR, TENSOR, FN: the address
end

"""
    Weft.call(p::Plugin, name, args...)

`weft_plugin_call`: calls entry `name`, converting `args` by its signature (integers, numbers,
`nothing`/Ptr/DenseArray for PTR, a DenseArray for TENSOR, a String, a `Weft.Closure` for FN);
returns the result (`nothing` for VOID).
"""
function call(p::Plugin, name::AbstractString, args...)
    p.handle == C_NULL && _invalid("plugin '$(p.name)' is closed")
    e = something(findfirst(x -> x.name == name, p.entries), 0)
    en = e == 0 ? entry(p, name) : p.entries[e]
    length(args) == length(en.args) ||
        _invalid("'$name' takes $(length(en.args)) arguments ($(signature(en))); got $(length(args))")
    keep = Any[]
    vals = ValueC[_value(a, en.args[k], "argument $(k - 1) of '$name'", keep) for (k, a) in enumerate(args)]
    result = Ref(ValueC(en.ret, 0, 0.0, C_NULL))
    GC.@preserve keep vals begin
        _check(weft_plugin_call(p.handle, name, isempty(vals) ? Ptr{ValueC}(C_NULL) : pointer(vals),
                                Csize_t(length(vals)), result))
    end
    return _julia_value(result[])
end

# ------------------------------------------------------------------ closures

"""
    Weft.Closure(f, ret, args) -> Closure

A Julia function as a C function pointer (`weft_closure_create`) of return type `ret` and
argument types `args` (`Weft.WEFT_TYPE_*` codes). `f` gets Julia values (integers, Float64,
String for STRING, Ptr for PTR/TENSOR/FN) and returns the result. An exception makes the C
function return 0 and is counted (`Weft.failures`). `close(c)` destroys it.
"""
mutable struct Closure
    handle::Ptr{Cvoid}
    fn::Ptr{Cvoid}
    f::Any
    ret::Cint
    last_error::String
end

function _closure_trampoline(args::Ptr{ValueC}, nargs::Csize_t, result::Ptr{ValueC}, ud::Ptr{Cvoid})::Cint
    c = unsafe_pointer_to_objref(ud)::Closure
    try
        vals = Any[_julia_value(unsafe_load(args, k)) for k in 1:Int(nargs)]
        out = c.f(vals...)
        if c.ret != WEFT_TYPE_VOID
            unsafe_store!(result, _value(out, c.ret, "the closure's result", Any[]))
        end
        return Cint(0)
    catch e
        c.last_error = sprint(showerror, e)
        return Cint(ERR_INVALID_ARGUMENT)
    end
end

const _CLOSURE_FN = Ref{Ptr{Cvoid}}(C_NULL)

function _closure_fn()
    if _CLOSURE_FN[] == C_NULL
        _CLOSURE_FN[] = @cfunction(_closure_trampoline, Cint, (Ptr{ValueC}, Csize_t, Ptr{ValueC}, Ptr{Cvoid}))
    end
    return _CLOSURE_FN[]
end

function Closure(f, ret::Integer, args::AbstractVector)
    types = Cint[Cint(a) for a in args]
    c = Closure(C_NULL, C_NULL, f, Cint(ret), "")
    h, fn = Ref{Ptr{Cvoid}}(C_NULL), Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve types _check(weft_closure_create(Cint(ret), isempty(types) ? Ptr{Cint}(C_NULL) : pointer(types),
                                                  Csize_t(length(types)), _closure_fn(), pointer_from_objref(c), h, fn))
    c.handle, c.fn = h[], fn[]
    return c
end

"    Weft.failures(c::Closure) -> (count, message) (`weft_closure_error`)."
function failures(c::Closure)
    n, msg = Ref{UInt64}(0), Ref{Ptr{UInt8}}(C_NULL)
    _check(weft_closure_error(c.handle, n, msg))
    return Int(n[]), _cstr(msg[])
end

function Base.close(c::Closure)
    h, c.handle = c.handle, C_NULL
    h == C_NULL || _check(weft_closure_destroy(h))
    return nothing
end

# ------------------------------------------------------------------ reduction operators

"""
    Weft.register_op(f, T; name="julia_op") -> UserOp

`weft_op_create` for element type `T`: `f(dst, a, b)` gets three `Vector{T}` views (dst may be
a or b exactly) and writes `dst .= a op b`. Use `Weft.op(u)` as the collectives' `op`; every
rank must register its operators in the same order. `close(u)` unregisters it (`weft_op_destroy`;
no collective may be using it).
"""
mutable struct UserOp
    id::Cint
    f::Any
    T::DataType
    name::String
    last_error::String
end

function _reduce_trampoline(dst::Ptr{Cvoid}, a::Ptr{Cvoid}, b::Ptr{Cvoid}, count::Csize_t, ::Cint,
                            ud::Ptr{Cvoid})::Cint
    u = unsafe_pointer_to_objref(ud)::UserOp
    try
        n = Int(count)
        n == 0 && return Cint(0)
        T = u.T
        u.f(unsafe_wrap(Array, Ptr{T}(dst), n), unsafe_wrap(Array, Ptr{T}(a), n), unsafe_wrap(Array, Ptr{T}(b), n))
        return Cint(0)
    catch e
        u.last_error = sprint(showerror, e)
        return Cint(ERR_INVALID_ARGUMENT)
    end
end

const _REDUCE_FN = Ref{Ptr{Cvoid}}(C_NULL)

function _reduce_fn()
    if _REDUCE_FN[] == C_NULL
        _REDUCE_FN[] = @cfunction(_reduce_trampoline, Cint,
                                  (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Csize_t, Cint, Ptr{Cvoid}))
    end
    return _REDUCE_FN[]
end

const _live_ops = Dict{Cint,UserOp}()   # registered operators stay reachable while weft may call them

"""
    Weft.register_op(f, T; name="julia_op") -> UserOp

Registers the Julia function `f(dst, a, b)` as a reduction operator for element type `T`
(`weft_op_create`); see [`UserOp`](@ref). Pass `Weft.op(u)` as a collective's `op`.
"""
function register_op(f, ::Type{T}; name::AbstractString="julia_op") where {T<:WeftType}
    occursin('\0', name) && _invalid("the operator name contains a NUL character")
    u = UserOp(Cint(-1), f, T, String(name), "")
    dts = Cint[_dt(T)]
    id = Ref{Cint}(-1)
    GC.@preserve u dts begin
        cfg = Ref(OpConfigC(Csize_t(sizeof(OpConfigC)), pointer(u.name), _reduce_fn(), pointer_from_objref(u),
                            pointer(dts), Csize_t(1)))
        _check(weft_op_create(cfg, id))
    end
    u.id = id[]
    _live_ops[u.id] = u
    return u
end

op(u::UserOp) = CustomOp(u.id)

function Base.close(u::UserOp)
    haskey(_live_ops, u.id) || return nothing
    _check(weft_op_destroy(u.id))
    delete!(_live_ops, u.id)
    return nothing
end
