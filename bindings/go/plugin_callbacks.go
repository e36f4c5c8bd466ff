package weft

/*
#include <stdint.h>
#include <weft/weft.h>
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// The C side of closures and Go reduction operators. weft calls the functions exported here with
// user_data pointing at C memory that holds the cgo.Handle of the Go state. This file holds only
// the exports: cgo allows no C definitions in the preamble of a file with //export (the function
// pointers are taken in plugin.go).

//export weftGoClosureCallback
func weftGoClosureCallback(args *C.weft_value_t, nargs C.size_t, result *C.weft_value_t,
	userData unsafe.Pointer) (status C.weft_status_t) {
	st, ok := cgo.Handle(uintptr(*(*C.uintptr_t)(userData))).Value().(*closureState)
	if !ok {
		return C.WEFT_ERR_INTERNAL
	}
	// A panic must not unwind into C: it becomes the call's failure.
	defer func() {
		if r := recover(); r != nil {
			st.lastErr = fmt.Sprintf("the closure panicked: %v", r)
			status = C.WEFT_ERR_INVALID_ARGUMENT
		}
	}()
	in := make([]Value, int(nargs))
	if nargs > 0 {
		for i, a := range unsafe.Slice(args, int(nargs)) {
			in[i] = valueOf(&a)
		}
	}
	out, err := st.f(in)
	if err == nil && out.Type != st.ret {
		err = fmt.Errorf("the closure returned a %v; its signature returns %v", out.Type, st.ret)
	}
	if err == nil && (out.str != nil || out.bytes != nil) {
		err = fmt.Errorf("a closure cannot return Go memory (a string or slice); return a pointer to C memory")
	}
	if err != nil {
		st.lastErr = err.Error()
		return C.WEFT_ERR_INVALID_ARGUMENT
	}
	if result != nil && st.ret != TypeVoid {
		result.i, result.f, result.p = C.int64_t(out.I), C.double(out.F), out.P
	}
	return C.WEFT_OK
}

//export weftGoReduceCallback
func weftGoReduceCallback(dst, a, b unsafe.Pointer, count C.size_t, dtype C.weft_dtype_t,
	userData unsafe.Pointer) (status C.weft_status_t) {
	st, ok := cgo.Handle(uintptr(*(*C.uintptr_t)(userData))).Value().(*opState)
	if !ok {
		return C.WEFT_ERR_INTERNAL
	}
	defer func() {
		if r := recover(); r != nil {
			st.lastErr = fmt.Sprintf("the operator panicked: %v", r)
			status = C.WEFT_ERR_INVALID_ARGUMENT
		}
	}()
	if count == 0 {
		return C.WEFT_OK
	}
	if err := st.f(dst, a, b, int(count)); err != nil {
		st.lastErr = err.Error()
		return C.WEFT_ERR_INVALID_ARGUMENT
	}
	return C.WEFT_OK
}
