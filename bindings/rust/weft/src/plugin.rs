//! Plugins (`weft/plugin.h`): loading a shared library that extends weft, calling its functions
//! by name with tagged [`Value`]s, and Rust closures as C function pointers ([`Closure`]).
//!
//! ```no_run
//! use weft::{Plugin, Value, ValueType, Closure};
//! let p = Plugin::load("build/plugins/libweft_c_reduce.so")?;
//! let sum = p.call("add_i64", &[Value::I64(2), Value::I64(40)])?; // Value::I64(42)
//! let f = Closure::new(ValueType::F64, &[ValueType::F64], |a| match a {
//!     [Value::F64(x)] => Ok(Value::F64(3.0 * x)),
//!     _ => Err("expected one F64".into()),
//! })?;
//! let y = p.call("apply_twice", &[Value::Fn(f.function()), Value::F64(2.0)])?; // 18.0
//! # Ok::<(), weft::Error>(())
//! ```
//!
//! A plugin runs in this process: a manifest that lies about a FUNCTION's signature makes the
//! call undefined behaviour (weft/plugin.h), which is why [`Plugin::call`] is safe only in the
//! sense that every argument is checked against the manifest's declared signature.
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::types::{Dtype, Op};

/// `weft_value_type_t`: the argument and return types a plugin signature may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// `void` (return type only).
    Void,
    /// `int8_t`.
    I8,
    /// `uint8_t`.
    U8,
    /// `int16_t`.
    I16,
    /// `uint16_t`.
    U16,
    /// `int32_t`.
    I32,
    /// `uint32_t`.
    U32,
    /// `int64_t`.
    I64,
    /// `uint64_t`.
    U64,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// `void *`.
    Ptr,
    /// `size_t`.
    Size,
    /// `const weft_tensor_t *`.
    Tensor,
    /// `const char *` (NUL-terminated).
    String,
    /// A C function pointer.
    Fn,
}

const VALUE_TYPES: [ValueType; 16] = [
    ValueType::Void,
    ValueType::I8,
    ValueType::U8,
    ValueType::I16,
    ValueType::U16,
    ValueType::I32,
    ValueType::U32,
    ValueType::I64,
    ValueType::U64,
    ValueType::F32,
    ValueType::F64,
    ValueType::Ptr,
    ValueType::Size,
    ValueType::Tensor,
    ValueType::String,
    ValueType::Fn,
];

impl ValueType {
    /// The C value (the enum's order is the header's).
    pub fn raw(self) -> sys::weft_value_type_t {
        VALUE_TYPES.iter().position(|t| *t == self).unwrap_or(0) as sys::weft_value_type_t
    }

    /// From the C value; `None` for a type this binding does not know.
    pub fn from_raw(raw: sys::weft_value_type_t) -> Option<ValueType> {
        usize::try_from(raw).ok().and_then(|i| VALUE_TYPES.get(i).copied())
    }
}

/// `weft_plugin_kind_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    /// A plain function called by name.
    Function,
    /// A reduction operator usable in collectives.
    ReduceOp,
    /// A wire codec's size function (encoded bytes for a count).
    CodecBytes,
    /// A wire codec's encoder.
    CodecEncode,
    /// A wire codec's decoder.
    CodecDecode,
    /// A MoE router (top-k selection).
    Router,
    /// A pipeline schedule generator.
    Schedule,
    /// A pipeline cost model.
    CostModel,
    /// A kind this binding does not know (a newer library).
    Unknown(i32),
}

impl PluginKind {
    fn from_raw(raw: sys::weft_plugin_kind_t) -> PluginKind {
        match raw {
            sys::WEFT_PLUGIN_FUNCTION => PluginKind::Function,
            sys::WEFT_PLUGIN_REDUCE_OP => PluginKind::ReduceOp,
            sys::WEFT_PLUGIN_CODEC_BYTES => PluginKind::CodecBytes,
            sys::WEFT_PLUGIN_CODEC_ENCODE => PluginKind::CodecEncode,
            sys::WEFT_PLUGIN_CODEC_DECODE => PluginKind::CodecDecode,
            sys::WEFT_PLUGIN_ROUTER => PluginKind::Router,
            sys::WEFT_PLUGIN_SCHEDULE => PluginKind::Schedule,
            sys::WEFT_PLUGIN_COST_MODEL => PluginKind::CostModel,
            other => PluginKind::Unknown(other),
        }
    }
}

/// A tagged value (`weft_value_t`) for [`Plugin::call`] and [`Closure`]s. `Str` and `Tensor`
/// borrow what they point at for the call. Equality compares a tensor by address.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// No value (a `void` return).
    Void,
    /// An `int8_t`.
    I8(i8),
    /// A `uint8_t`.
    U8(u8),
    /// An `int16_t`.
    I16(i16),
    /// A `uint16_t`.
    U16(u16),
    /// An `int32_t`.
    I32(i32),
    /// A `uint32_t`.
    U32(u32),
    /// An `int64_t`.
    I64(i64),
    /// A `uint64_t`.
    U64(u64),
    /// A `float`.
    F32(f32),
    /// A `double`.
    F64(f64),
    /// A `void *`.
    Ptr(*mut c_void),
    /// A `size_t`.
    Size(usize),
    /// A tensor view, borrowed for the call.
    Tensor(&'a sys::weft_tensor_t),
    /// A C string, borrowed for the call.
    Str(&'a CStr),
    /// A C function pointer.
    Fn(*const c_void),
}

impl PartialEq for Value<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Value::Tensor(a), Value::Tensor(b)) => std::ptr::eq(*a, *b),
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::F32(a), Value::F32(b)) => a == b,
            (Value::F64(a), Value::F64(b)) => a == b,
            _ => {
                self.value_type() == other.value_type()
                    && self.raw().i == other.raw().i
                    && self.raw().p == other.raw().p
            }
        }
    }
}

impl Value<'_> {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Void => ValueType::Void,
            Value::I8(_) => ValueType::I8,
            Value::U8(_) => ValueType::U8,
            Value::I16(_) => ValueType::I16,
            Value::U16(_) => ValueType::U16,
            Value::I32(_) => ValueType::I32,
            Value::U32(_) => ValueType::U32,
            Value::I64(_) => ValueType::I64,
            Value::U64(_) => ValueType::U64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Ptr(_) => ValueType::Ptr,
            Value::Size(_) => ValueType::Size,
            Value::Tensor(_) => ValueType::Tensor,
            Value::Str(_) => ValueType::String,
            Value::Fn(_) => ValueType::Fn,
        }
    }

    /// The C tagged value (integers in `i`, unsigned 64-bit as their bits; floats in `f`).
    pub fn raw(&self) -> sys::weft_value_t {
        let mut v = sys::WEFT_VALUE_INIT;
        v.type_ = self.value_type().raw();
        match *self {
            Value::Void => {}
            Value::I8(x) => v.i = x.into(),
            Value::U8(x) => v.i = x.into(),
            Value::I16(x) => v.i = x.into(),
            Value::U16(x) => v.i = x.into(),
            Value::I32(x) => v.i = x.into(),
            Value::U32(x) => v.i = x.into(),
            Value::I64(x) => v.i = x,
            Value::U64(x) => v.i = x as i64, // the bits, as weft.h says
            Value::Size(x) => v.i = x as i64,
            Value::F32(x) => v.f = x.into(),
            Value::F64(x) => v.f = x,
            Value::Ptr(p) => v.p = p,
            Value::Tensor(t) => v.p = (t as *const sys::weft_tensor_t).cast(),
            Value::Str(s) => v.p = s.as_ptr().cast(),
            Value::Fn(f) => v.p = f,
        }
        v
    }

    /// The value of a C tagged value, by its own type.
    ///
    /// # Safety
    /// A STRING's pointer must be a NUL-terminated string and a TENSOR's a `weft_tensor_t`,
    /// both valid for `'a`.
    pub unsafe fn from_raw<'a>(v: &sys::weft_value_t) -> Result<Value<'a>> {
        let t = ValueType::from_raw(v.type_)
            .ok_or_else(|| Error::invalid(format!("a weft_value_t of unknown type {}", v.type_)))?;
        Ok(match t {
            ValueType::Void => Value::Void,
            ValueType::I8 => Value::I8(v.i as i8),
            ValueType::U8 => Value::U8(v.i as u8),
            ValueType::I16 => Value::I16(v.i as i16),
            ValueType::U16 => Value::U16(v.i as u16),
            ValueType::I32 => Value::I32(v.i as i32),
            ValueType::U32 => Value::U32(v.i as u32),
            ValueType::I64 => Value::I64(v.i),
            ValueType::U64 => Value::U64(v.i as u64),
            ValueType::Size => Value::Size(v.i as usize),
            ValueType::F32 => Value::F32(v.f as f32),
            ValueType::F64 => Value::F64(v.f),
            ValueType::Ptr => Value::Ptr(v.p as *mut c_void),
            ValueType::Fn => Value::Fn(v.p),
            ValueType::Tensor if v.p.is_null() => return Err(Error::invalid("a NULL TENSOR value")),
            ValueType::String if v.p.is_null() => return Err(Error::invalid("a NULL STRING value")),
            // SAFETY: non-NULL, and valid for 'a by this function's contract.
            ValueType::Tensor => Value::Tensor(unsafe { &*(v.p as *const sys::weft_tensor_t) }),
            ValueType::String => Value::Str(unsafe { CStr::from_ptr(v.p as *const c_char) }),
        })
    }
}

/// One entry of a loaded plugin (`weft_plugin_entry_t`), copied out.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginEntry {
    /// The entry's name (what [`Plugin::call`] takes).
    pub name: String,
    /// What kind of extension the entry is.
    pub kind: PluginKind,
    /// The C symbol the entry resolves to.
    pub symbol: String,
    /// The entry's documentation from the manifest.
    pub doc: String,
    /// The return type.
    pub ret: ValueType,
    /// The argument types, in order.
    pub args: Vec<ValueType>,
    /// REDUCE_OP: the element types it takes.
    pub dtypes: Vec<Dtype>,
    /// The extension id of a registered kind (>= 64); -1 for FUNCTION.
    pub id: i32,
}

impl PluginEntry {
    /// A REDUCE_OP entry as the operator for collectives (`Op::Custom(id)`); `None` otherwise.
    pub fn op(&self) -> Option<Op> {
        (self.kind == PluginKind::ReduceOp && self.id >= sys::WEFT_PLUGIN_ID_BASE).then_some(Op::Custom(self.id))
    }

    /// SAFETY: `c`'s pointers are what weft_plugin_entry/lookup wrote (valid while the handle is).
    unsafe fn from_raw(c: &sys::weft_plugin_entry_t) -> Result<PluginEntry> {
        let text = |p: *const c_char| {
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        let ty = |t| ValueType::from_raw(t).ok_or_else(|| Error::invalid(format!("unknown value type {t}")));
        let args = if c.nargs == 0 { &[][..] } else { std::slice::from_raw_parts(c.args, c.nargs) };
        let dtypes = if c.ndtypes == 0 { &[][..] } else { std::slice::from_raw_parts(c.dtypes, c.ndtypes) };
        Ok(PluginEntry {
            name: text(c.name),
            kind: PluginKind::from_raw(c.kind),
            symbol: text(c.symbol),
            doc: text(c.doc),
            ret: ty(c.ret)?,
            args: args.iter().map(|&t| ty(t)).collect::<Result<_>>()?,
            dtypes: dtypes
                .iter()
                .map(|&d| {
                    Dtype::ALL
                        .iter()
                        .copied()
                        .find(|x| x.raw() == d)
                        .ok_or_else(|| Error::invalid(format!("dtype {d}")))
                })
                .collect::<Result<_>>()?,
            id: c.id,
        })
    }
}

fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{what} {s:?} contains a NUL byte")))
}

/// A loaded plugin (`weft_plugin_t`); dropping it releases the handle, while the library and
/// what it registered stay for the life of the process (weft/plugin.h: Lifetime).
#[derive(Debug)]
pub struct Plugin {
    raw: sys::weft_plugin_t,
    name: String,
    version: String,
    path: String,
    abi: (i32, i32),
    entries: Vec<PluginEntry>,
}

// SAFETY: every plugin.h function may be called from any thread.
unsafe impl Send for Plugin {}
unsafe impl Sync for Plugin {}

impl Plugin {
    /// `weft_plugin_load`: loads and verifies the plugin at `path`, registering its extensions.
    pub fn load(path: impl AsRef<str>) -> Result<Plugin> {
        let cpath = cstring(path.as_ref(), "plugin path")?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid string and out-pointer.
        check(unsafe { sys::weft_plugin_load(cpath.as_ptr(), &mut raw) })?;
        let mut p = Plugin {
            raw,
            name: String::new(),
            version: String::new(),
            path: String::new(),
            abi: (0, 0),
            entries: vec![],
        };
        let mut info = sys::WEFT_PLUGIN_INFO_INIT;
        // SAFETY: a live handle and a valid out-struct; strings are copied at once.
        check(unsafe { sys::weft_plugin_info(raw, &mut info) })?;
        let text = |s: *const c_char| {
            if s.is_null() {
                String::new()
            } else {
                unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
            }
        };
        p.name = text(info.name);
        p.version = text(info.version);
        p.path = text(info.path);
        p.abi = (info.abi_major, info.abi_minor);
        for i in 0..info.nentries {
            let mut e = sys::WEFT_PLUGIN_ENTRY_INIT;
            // SAFETY: as above; the entry's arrays are read at once.
            check(unsafe { sys::weft_plugin_entry(raw, i, &mut e) })?;
            p.entries.push(unsafe { PluginEntry::from_raw(&e) }?);
        }
        Ok(p)
    }

    /// The plugin's name from its manifest.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plugin's version from its manifest.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The path as given to [`Plugin::load`].
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The plugin ABI (major, minor) the plugin was built for.
    pub fn abi(&self) -> (i32, i32) {
        self.abi
    }

    /// Every entry, in manifest order.
    pub fn entries(&self) -> &[PluginEntry] {
        &self.entries
    }

    /// `weft_plugin_lookup`: the entry named `name` (the error lists the plugin's entries).
    pub fn entry(&self, name: &str) -> Result<PluginEntry> {
        let cname = cstring(name, "entry name")?;
        let mut e = sys::WEFT_PLUGIN_ENTRY_INIT;
        // SAFETY: a live handle, a valid string and out-struct.
        check(unsafe { sys::weft_plugin_lookup(self.raw, cname.as_ptr(), &mut e) })?;
        unsafe { PluginEntry::from_raw(&e) }
    }

    /// `weft_plugin_call`: calls entry `name` with `args` (each must have the signature's type:
    /// weft checks and names the argument). Returns the result with its type (`Value::Void`
    /// for VOID); a STRING result borrows the plugin's memory.
    pub fn call<'p>(&'p self, name: &str, args: &[Value<'_>]) -> Result<Value<'p>> {
        let cname = cstring(name, "entry name")?;
        let raw: Vec<sys::weft_value_t> = args.iter().map(Value::raw).collect();
        let mut result = sys::WEFT_VALUE_INIT;
        // SAFETY: args' borrows keep their strings and tensors alive for the call; weft checks
        // every argument against the manifest's signature.
        check(unsafe { sys::weft_plugin_call(self.raw, cname.as_ptr(), raw.as_ptr(), raw.len(), &mut result) })?;
        // SAFETY: a STRING result points into the loaded library, which is never unloaded.
        unsafe { Value::from_raw(&result) }
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        // SAFETY: the handle is live and dropped once.
        unsafe { sys::weft_plugin_destroy(self.raw) };
    }
}

// ------------------------------------------------------------------ closures

type Handler = dyn FnMut(&[Value<'_>]) -> std::result::Result<Value<'static>, String> + Send;

struct ClosureState {
    ret: ValueType,
    handler: Mutex<Box<Handler>>,
    last_error: Mutex<Option<String>>,
}

unsafe extern "C" fn closure_trampoline(
    args: *const sys::weft_value_t,
    nargs: usize,
    result: *mut sys::weft_value_t,
    user_data: *mut c_void,
) -> sys::weft_status_t {
    // SAFETY: user_data is the Box<ClosureState> the Closure owns (destroyed after the C closure).
    let state = unsafe { &*(user_data as *const ClosureState) };
    let outcome = catch_unwind(AssertUnwindSafe(|| -> std::result::Result<sys::weft_value_t, String> {
        let raw = if nargs == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(args, nargs) } };
        // SAFETY: weft passes the values of the declared signature, valid during the call.
        let values = raw.iter().map(|v| unsafe { Value::from_raw(v) }).collect::<Result<Vec<_>>>();
        let values = values.map_err(|e| e.to_string())?;
        let mut handler = state.handler.lock().unwrap_or_else(|p| p.into_inner());
        let out = handler(&values)?;
        if out.value_type() != state.ret {
            return Err(format!("the closure returned {:?}; its signature returns {:?}", out.value_type(), state.ret));
        }
        Ok(out.raw())
    }));
    let message = match outcome {
        Ok(Ok(v)) => {
            if !result.is_null() && state.ret != ValueType::Void {
                // SAFETY: weft passes a valid result slot.
                unsafe { *result = v };
            }
            return sys::WEFT_OK;
        }
        Ok(Err(m)) => m,
        Err(panic) => format!("the closure panicked: {}", crate::pipeline::panic_text(&*panic)),
    };
    *state.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    sys::WEFT_ERR_INVALID_ARGUMENT
}

/// A Rust closure as a C function pointer of a given signature (`weft_closure_create`), to pass
/// as [`Value::Fn`]. An `Err` or a panic makes the C function return 0 and is counted
/// ([`Closure::failures`]; its text in [`Closure::last_error`]). Dropping it destroys the
/// function: it must not be called after that.
pub struct Closure {
    raw: sys::weft_closure_t,
    function: *mut c_void,
    state: Box<ClosureState>,
}

// SAFETY: the handler is Send and behind a Mutex; weft's closure functions are thread-safe.
unsafe impl Send for Closure {}
unsafe impl Sync for Closure {}

impl Closure {
    /// A C function of signature `ret(args...)` that calls `handler` with the arguments as [`Value`]s.
    pub fn new<F>(ret: ValueType, args: &[ValueType], handler: F) -> Result<Closure>
    where
        F: FnMut(&[Value<'_>]) -> std::result::Result<Value<'static>, String> + Send + 'static,
    {
        let state =
            Box::new(ClosureState { ret, handler: Mutex::new(Box::new(handler)), last_error: Mutex::new(None) });
        let types: Vec<sys::weft_value_type_t> = args.iter().map(|t| t.raw()).collect();
        let (mut raw, mut function) = (std::ptr::null_mut(), std::ptr::null_mut());
        let user_data = &*state as *const ClosureState as *mut c_void;
        // SAFETY: valid arrays and out-pointers; state outlives the C closure (dropped after it).
        check(unsafe {
            sys::weft_closure_create(
                ret.raw(),
                types.as_ptr(),
                types.len(),
                Some(closure_trampoline),
                user_data,
                &mut raw,
                &mut function,
            )
        })?;
        Ok(Closure { raw, function, state })
    }

    /// The C function's address.
    pub fn function(&self) -> *const c_void {
        self.function
    }

    /// `weft_closure_error`: failed calls since creation and weft's message of the last one.
    pub fn failures(&self) -> Result<(u64, String)> {
        let (mut n, mut msg) = (0u64, std::ptr::null());
        // SAFETY: a live closure and valid out-pointers; the message is copied at once.
        check(unsafe { sys::weft_closure_error(self.raw, &mut n, &mut msg) })?;
        let text =
            if msg.is_null() { String::new() } else { unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned() };
        Ok((n, text))
    }

    /// The handler's own message (its `Err` or panic) of the last failed call.
    pub fn last_error(&self) -> Option<String> {
        self.state.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for Closure {
    fn drop(&mut self) {
        // SAFETY: live, destroyed once, before `state` (a field) is freed.
        unsafe { sys::weft_closure_destroy(self.raw) };
    }
}

impl std::fmt::Debug for Closure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Closure({:?} at {:p})", self.state.ret, self.function)
    }
}
