package weft

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

// Exported from plugin_callbacks.go (cgo writes their prototypes without const).
extern weft_status_t weftGoClosureCallback(weft_value_t *args, size_t nargs, weft_value_t *result, void *user_data);
extern weft_status_t weftGoReduceCallback(void *dst, void *a, void *b, size_t count, weft_dtype_t dtype,
                                          void *user_data);

static weft_closure_fn go_closure_fn_pointer(void) { return (weft_closure_fn)weftGoClosureCallback; }
static weft_reduce_fn go_reduce_fn_pointer(void) { return (weft_reduce_fn)weftGoReduceCallback; }
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// Plugins (weft/plugin.h): loading a shared library that extends weft, calling its functions by
// name with tagged Values, Go functions as C function pointers (Closure) and reduction operators
// written in Go (RegisterOp).
//
// cgo rules: C never keeps a Go pointer. Call stages every slice argument (SliceValue,
// TensorValue) and string through C memory for the call and copies slices back afterwards;
// PtrValue passes a pointer as it is (C memory, or nil). Closure and RegisterOp keep a
// cgo.Handle in C memory as the callback's user_data.
//
// A plugin runs in this process: a manifest that lies about a FUNCTION's signature makes the
// call undefined behaviour (weft/plugin.h). Never load a plugin built with Go (c-shared) into a
// Go process: two Go runtimes in one process are not supported.

// PluginIDBase is WEFT_PLUGIN_ID_BASE: the first id of every kind of extension.
const PluginIDBase = C.WEFT_PLUGIN_ID_BASE

// ValueType is a weft_value_type_t.
type ValueType int

const (
	TypeVoid   ValueType = C.WEFT_TYPE_VOID
	TypeI8     ValueType = C.WEFT_TYPE_I8
	TypeU8     ValueType = C.WEFT_TYPE_U8
	TypeI16    ValueType = C.WEFT_TYPE_I16
	TypeU16    ValueType = C.WEFT_TYPE_U16
	TypeI32    ValueType = C.WEFT_TYPE_I32
	TypeU32    ValueType = C.WEFT_TYPE_U32
	TypeI64    ValueType = C.WEFT_TYPE_I64
	TypeU64    ValueType = C.WEFT_TYPE_U64
	TypeF32    ValueType = C.WEFT_TYPE_F32
	TypeF64    ValueType = C.WEFT_TYPE_F64
	TypePtr    ValueType = C.WEFT_TYPE_PTR
	TypeSize   ValueType = C.WEFT_TYPE_SIZE
	TypeTensor ValueType = C.WEFT_TYPE_TENSOR
	TypeString ValueType = C.WEFT_TYPE_STRING
	TypeFn     ValueType = C.WEFT_TYPE_FN
)

var valueTypeNames = [...]string{"VOID", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "F32", "F64", "PTR",
	"SIZE", "TENSOR", "STRING", "FN"}

func (t ValueType) String() string {
	if t >= 0 && int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", int(t))
}

// PluginKind is a weft_plugin_kind_t.
type PluginKind int

const (
	KindFunction    PluginKind = C.WEFT_PLUGIN_FUNCTION
	KindReduceOp    PluginKind = C.WEFT_PLUGIN_REDUCE_OP
	KindCodecBytes  PluginKind = C.WEFT_PLUGIN_CODEC_BYTES
	KindCodecEncode PluginKind = C.WEFT_PLUGIN_CODEC_ENCODE
	KindCodecDecode PluginKind = C.WEFT_PLUGIN_CODEC_DECODE
	KindRouter      PluginKind = C.WEFT_PLUGIN_ROUTER
	KindSchedule    PluginKind = C.WEFT_PLUGIN_SCHEDULE
	KindCostModel   PluginKind = C.WEFT_PLUGIN_COST_MODEL
)

// Value is a weft_value_t: integers and SIZE in I (unsigned 64-bit values as their bits), F32
// and F64 in F, PTR, TENSOR, STRING and FN in P. Build arguments with the constructors below;
// results and closure arguments come back in this form (Str reads a STRING).
type Value struct {
	Type ValueType
	I    int64
	F    float64
	P    unsafe.Pointer
	// What Call stages through C memory: a slice's bytes (PTR, or a TENSOR's data), a string.
	bytes []byte
	shape []int64
	dtype Dtype
	str   *string
}

func I8Value(v int8) Value       { return Value{Type: TypeI8, I: int64(v)} }
func U8Value(v uint8) Value      { return Value{Type: TypeU8, I: int64(v)} }
func I16Value(v int16) Value     { return Value{Type: TypeI16, I: int64(v)} }
func U16Value(v uint16) Value    { return Value{Type: TypeU16, I: int64(v)} }
func I32Value(v int32) Value     { return Value{Type: TypeI32, I: int64(v)} }
func U32Value(v uint32) Value    { return Value{Type: TypeU32, I: int64(v)} }
func I64Value(v int64) Value     { return Value{Type: TypeI64, I: v} }
func U64Value(v uint64) Value    { return Value{Type: TypeU64, I: int64(v)} }
func SizeValue(v int) Value      { return Value{Type: TypeSize, I: int64(v)} }
func F32Value(v float32) Value   { return Value{Type: TypeF32, F: float64(v)} }
func F64Value(v float64) Value   { return Value{Type: TypeF64, F: v} }
func StringValue(s string) Value { return Value{Type: TypeString, str: &s} }

// PtrValue passes p as a PTR as it is: C memory or nil (cgo forbids C keeping Go pointers).
func PtrValue(p unsafe.Pointer) Value { return Value{Type: TypePtr, P: p} }

// FnValue passes a C function pointer (Closure.Function, or any C function) as FN.
func FnValue(p unsafe.Pointer) Value { return Value{Type: TypeFn, P: p} }

// SliceValue passes s as a PTR: Call copies it into C memory, passes that, and copies it back
// into s after the call (so the plugin may read and write it).
func SliceValue[T Element](s []T) Value {
	return Value{Type: TypePtr, bytes: sliceBytes(s)}
}

// TensorValue passes a contiguous host tensor of the given shape over data (staged like
// SliceValue) as a TENSOR.
func TensorValue[T Element](data []T, shape []int64) Value {
	return Value{Type: TypeTensor, bytes: sliceBytes(data), shape: append([]int64(nil), shape...), dtype: DtypeOf[T]()}
}

func sliceBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// Uint returns I as the unsigned value of a U8..U64 or SIZE.
func (v Value) Uint() uint64 { return uint64(v.I) }

// Str reads a STRING value (a result, or a closure argument) as a Go string.
func (v Value) Str() string {
	if v.str != nil {
		return *v.str
	}
	if v.Type != TypeString || v.P == nil {
		return ""
	}
	return C.GoString((*C.char)(v.P))
}

func valueOf(c *C.weft_value_t) Value {
	return Value{Type: ValueType(c._type), I: int64(c.i), F: float64(c.f), P: unsafe.Pointer(c.p)}
}

// PluginEntry is one entry of a loaded plugin (weft_plugin_entry_t), copied out.
type PluginEntry struct {
	Name, Symbol, Doc string
	Kind              PluginKind
	Ret               ValueType
	Args              []ValueType
	Dtypes            []Dtype // REDUCE_OP: the element types it takes
	ID                int     // the extension id of a registered kind (>= 64); -1 for FUNCTION
}

// Op returns a REDUCE_OP entry as the operator for collectives (ok false for other kinds).
func (e PluginEntry) Op() (Op, bool) {
	return Op(e.ID), e.Kind == KindReduceOp && e.ID >= PluginIDBase
}

func entryOf(c *C.weft_plugin_entry_t) PluginEntry {
	e := PluginEntry{Name: C.GoString(c.name), Symbol: C.GoString(c.symbol), Doc: C.GoString(c.doc),
		Kind: PluginKind(c.kind), Ret: ValueType(c.ret), ID: int(c.id)}
	if c.nargs > 0 {
		for _, t := range unsafe.Slice(c.args, int(c.nargs)) {
			e.Args = append(e.Args, ValueType(t))
		}
	}
	if c.ndtypes > 0 {
		for _, d := range unsafe.Slice(c.dtypes, int(c.ndtypes)) {
			e.Dtypes = append(e.Dtypes, Dtype(d))
		}
	}
	return e
}

// Plugin is a loaded plugin (weft_plugin_t). Close releases the handle; the library and what it
// registered stay for the life of the process (weft/plugin.h: Lifetime).
type Plugin struct {
	handle           C.weft_plugin_t
	Name, Version    string
	Path             string
	ABIMajor, ABIMin int
	Entries          []PluginEntry
}

// LoadPlugin is weft_plugin_load: loads and verifies the plugin at path, registering its
// extensions.
func LoadPlugin(path string) (*Plugin, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var h C.weft_plugin_t
	if err := call(func() C.weft_status_t { return C.weft_plugin_load(cpath, &h) }); err != nil {
		return nil, err
	}
	p := &Plugin{handle: h}
	info := (*C.weft_plugin_info_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.weft_plugin_info_t{}))))
	defer C.free(unsafe.Pointer(info))
	info.struct_size = C.size_t(unsafe.Sizeof(*info))
	if err := call(func() C.weft_status_t { return C.weft_plugin_info(h, info) }); err != nil {
		p.Close()
		return nil, err
	}
	p.Name, p.Version, p.Path = C.GoString(info.name), C.GoString(info.version), C.GoString(info.path)
	p.ABIMajor, p.ABIMin = int(info.abi_major), int(info.abi_minor)
	entry := newEntryStruct()
	defer C.free(unsafe.Pointer(entry))
	for i := 0; i < int(info.nentries); i++ {
		if err := call(func() C.weft_status_t { return C.weft_plugin_entry(h, C.size_t(i), entry) }); err != nil {
			p.Close()
			return nil, err
		}
		p.Entries = append(p.Entries, entryOf(entry))
	}
	return p, nil
}

func newEntryStruct() *C.weft_plugin_entry_t {
	e := (*C.weft_plugin_entry_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.weft_plugin_entry_t{}))))
	e.struct_size = C.size_t(unsafe.Sizeof(*e))
	e.id = -1
	return e
}

// Close is weft_plugin_destroy. Idempotent.
func (p *Plugin) Close() error {
	if p == nil || p.handle == nil {
		return nil
	}
	h := p.handle
	p.handle = nil
	return call(func() C.weft_status_t { return C.weft_plugin_destroy(h) })
}

// Entry is weft_plugin_lookup: the entry named name (the error lists the plugin's entries).
func (p *Plugin) Entry(name string) (PluginEntry, error) {
	if p.handle == nil {
		return PluginEntry{}, newError(StatusInvalidArgument, "plugin %q is closed", p.Name)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	entry := newEntryStruct()
	defer C.free(unsafe.Pointer(entry))
	if err := call(func() C.weft_status_t { return C.weft_plugin_lookup(p.handle, cname, entry) }); err != nil {
		return PluginEntry{}, err
	}
	return entryOf(entry), nil
}

// Call is weft_plugin_call: calls entry name with args (each must have the signature's type:
// weft checks and names the argument) and returns the result with its type (Type TypeVoid for
// VOID). Slices and strings are staged through C memory (see the package notes above).
func (p *Plugin) Call(name string, args ...Value) (Value, error) {
	if p.handle == nil {
		return Value{}, newError(StatusInvalidArgument, "plugin %q is closed", p.Name)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	n := len(args)
	cargs := (*C.weft_value_t)(C.calloc(C.size_t(atLeastOne(n)), C.size_t(unsafe.Sizeof(C.weft_value_t{}))))
	defer C.free(unsafe.Pointer(cargs))
	slots := unsafe.Slice(cargs, atLeastOne(n))
	var staged []unsafe.Pointer // C memory to free after the call
	defer func() {
		for _, m := range staged {
			C.free(m)
		}
	}()
	stage := func(b []byte) unsafe.Pointer {
		m := C.malloc(C.size_t(atLeastOne(len(b))))
		staged = append(staged, m)
		if len(b) > 0 {
			C.memcpy(m, unsafe.Pointer(&b[0]), C.size_t(len(b)))
		}
		return m
	}
	dataOf := make([]unsafe.Pointer, n) // staged slice data, copied back after the call
	for i, a := range args {
		s := &slots[i]
		s._type, s.i, s.f, s.p = C.weft_value_type_t(a.Type), C.int64_t(a.I), C.double(a.F), a.P
		switch {
		case a.str != nil:
			cs := C.CString(*a.str)
			staged = append(staged, unsafe.Pointer(cs))
			s.p = unsafe.Pointer(cs)
		case a.bytes != nil && a.Type == TypeTensor:
			dataOf[i] = stage(a.bytes)
			s.p = unsafe.Pointer(newCTensor(dataOf[i], a.shape, a.dtype, stage))
		case a.bytes != nil:
			dataOf[i] = stage(a.bytes)
			s.p = dataOf[i]
		}
	}
	res := (*C.weft_value_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.weft_value_t{}))))
	defer C.free(unsafe.Pointer(res))
	if err := call(func() C.weft_status_t { return C.weft_plugin_call(p.handle, cname, cargs, C.size_t(n), res) }); err != nil {
		return Value{}, err
	}
	for i, a := range args {
		if dataOf[i] != nil && len(a.bytes) > 0 {
			copy(a.bytes, unsafe.Slice((*byte)(dataOf[i]), len(a.bytes)))
		}
	}
	return valueOf(res), nil
}

// newCTensor builds a contiguous host weft_tensor_t in C memory (freed with the staged memory).
func newCTensor(data unsafe.Pointer, shape []int64, dtype Dtype, stage func([]byte) unsafe.Pointer) *C.weft_tensor_t {
	t := (*C.weft_tensor_t)(stage(make([]byte, unsafe.Sizeof(C.weft_tensor_t{}))))
	dims := make([]byte, 8*atLeastOne(len(shape)))
	for i, d := range shape {
		*(*int64)(unsafe.Pointer(&dims[8*i])) = d
	}
	t.data = data
	t.device_type = C.WEFT_DEVICE_CPU
	t.ndim = C.int(len(shape))
	t.dtype = C.weft_dtype_t(dtype)
	t.shape = (*C.int64_t)(stage(dims))
	return t
}

// Closure is a Go function as a C function pointer of a given signature (weft_closure_create),
// to pass as FnValue(c.Function()). The function gets the arguments as Values (PTR/TENSOR/FN
// as pointers, STRING readable with Str) and returns the result Value (its Type must be the
// signature's return type). An error or a panic makes the C function return 0 and is counted
// (Failures). Close destroys it: the pointer must not be called after that.
type Closure struct {
	raw    C.weft_closure_t
	fn     unsafe.Pointer
	handle cgo.Handle
	ud     unsafe.Pointer
	state  *closureState
}

type closureState struct {
	ret     ValueType
	f       func(args []Value) (Value, error)
	lastErr string
}

// NewClosure is weft_closure_create.
func NewClosure(ret ValueType, args []ValueType, f func(args []Value) (Value, error)) (*Closure, error) {
	st := &closureState{ret: ret, f: f}
	c := &Closure{state: st, handle: cgo.NewHandle(st)}
	c.ud = C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0))))
	*(*C.uintptr_t)(c.ud) = C.uintptr_t(c.handle)
	types := (*C.weft_value_type_t)(C.calloc(C.size_t(atLeastOne(len(args))), C.size_t(unsafe.Sizeof(C.weft_value_type_t(0)))))
	defer C.free(unsafe.Pointer(types))
	for i, t := range args {
		unsafe.Slice(types, len(args))[i] = C.weft_value_type_t(t)
	}
	var raw C.weft_closure_t
	fnp := (*unsafe.Pointer)(C.malloc(C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(fnp))
	err := call(func() C.weft_status_t {
		return C.weft_closure_create(C.weft_value_type_t(ret), types, C.size_t(len(args)), C.go_closure_fn_pointer(), c.ud,
			&raw, fnp)
	})
	if err != nil {
		c.handle.Delete()
		C.free(c.ud)
		return nil, err
	}
	c.raw, c.fn = raw, *fnp
	return c, nil
}

// Function is the C function's address.
func (c *Closure) Function() unsafe.Pointer { return c.fn }

// Failures is weft_closure_error: the failed calls since creation and weft's message of the
// last one.
func (c *Closure) Failures() (uint64, string, error) {
	var n C.uint64_t
	var msg *C.char
	if err := call(func() C.weft_status_t { return C.weft_closure_error(c.raw, &n, &msg) }); err != nil {
		return 0, "", err
	}
	return uint64(n), C.GoString(msg), nil
}

// LastError is the Go function's own error text (or panic) of the last failed call.
func (c *Closure) LastError() string { return c.state.lastErr }

// Close is weft_closure_destroy. Idempotent.
func (c *Closure) Close() error {
	if c == nil || c.raw == nil {
		return nil
	}
	raw := c.raw
	c.raw = nil
	err := call(func() C.weft_status_t { return C.weft_closure_destroy(raw) })
	c.handle.Delete()
	C.free(c.ud)
	return err
}

// UserOp is a reduction operator written in Go (weft_op_create); use Op() as the op of
// Allreduce, Reduce and ReduceScatter. Every rank must register its operators in the same order.
type UserOp struct {
	id     Op
	name   string
	handle cgo.Handle
	ud     unsafe.Pointer
	state  *opState
}

type opState struct {
	f       func(dst, a, b unsafe.Pointer, n int) error
	lastErr string
}

// RegisterOp is weft_op_create for element type T: f(dst, a, b) writes dst[i] = a[i] op b[i]
// (dst may be a or b exactly). weft calls it once per chunk of a collective, from whichever
// thread runs the collective; it must be associative and commutative.
func RegisterOp[T Element](name string, f func(dst, a, b []T) error) (*UserOp, error) {
	st := &opState{f: func(dst, a, b unsafe.Pointer, n int) error {
		return f(unsafe.Slice((*T)(dst), n), unsafe.Slice((*T)(a), n), unsafe.Slice((*T)(b), n))
	}}
	u := &UserOp{name: name, state: st, handle: cgo.NewHandle(st)}
	u.ud = C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0))))
	*(*C.uintptr_t)(u.ud) = C.uintptr_t(u.handle)
	cfg := (*C.weft_op_config_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.weft_op_config_t{}))))
	defer C.free(unsafe.Pointer(cfg))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	dt := (*C.weft_dtype_t)(C.malloc(C.size_t(unsafe.Sizeof(C.weft_dtype_t(0)))))
	defer C.free(unsafe.Pointer(dt))
	*dt = C.weft_dtype_t(DtypeOf[T]())
	cfg.struct_size = C.size_t(unsafe.Sizeof(*cfg))
	cfg.name, cfg.fn, cfg.user_data, cfg.dtypes, cfg.ndtypes = cname, C.go_reduce_fn_pointer(), u.ud, dt, 1
	var id C.weft_op_t
	if err := call(func() C.weft_status_t { return C.weft_op_create(cfg, &id) }); err != nil {
		u.handle.Delete()
		C.free(u.ud)
		return nil, err
	}
	u.id = Op(id)
	return u, nil
}

// Op is the operator for collectives.
func (u *UserOp) Op() Op { return u.id }

// Name is the name given to RegisterOp.
func (u *UserOp) Name() string { return u.name }

// LastError is the Go function's error text (or panic) of its last failed call.
func (u *UserOp) LastError() string { return u.state.lastErr }

// Close is weft_op_destroy: a later collective with the op fails. No collective may be using it.
// Idempotent.
func (u *UserOp) Close() error {
	if u == nil || u.ud == nil {
		return nil
	}
	err := call(func() C.weft_status_t { return C.weft_op_destroy(C.weft_op_t(u.id)) })
	u.handle.Delete()
	C.free(u.ud)
	u.ud = nil
	return err
}

// atLeastOne is n, or 1 for 0 (C allocations of zero elements still get a valid pointer).
func atLeastOne(n int) int {
	if n < 1 {
		return 1
	}
	return n
}
