package weft

/*
#include <stdint.h>
#include <stdlib.h>
#include <weft/weft.h>
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"strings"
	"unsafe"
)

// The C side of the stage callbacks. weft calls weftGoStageCallback (exported below) for every
// compute action, with user_data pointing at C memory that holds the cgo.Handle of the
// Pipeline's Callbacks. This file holds only the export: cgo allows no C definitions in the
// preamble of a file with //export (the function pointer is taken in pipeline_exec.go).

//export weftGoStageCallback
func weftGoStageCallback(call *C.weft_stage_call_t, userData unsafe.Pointer) (status C.weft_status_t) {
	// A panic must not unwind into C: it becomes the callback's error.
	defer func() {
		if r := recover(); r != nil {
			status = stageFailed(fmt.Sprintf("the stage callback panicked: %v", r))
		}
	}()
	cbs, ok := cgo.Handle(uintptr(*(*C.uintptr_t)(userData))).Value().(*Callbacks)
	if !ok {
		return stageFailed("weft (Go): the pipeline's user_data is not its callbacks")
	}
	sc := newStageCall(call)
	f := cbs.pick(sc.Kind)
	if f == nil {
		return stageFailed(fmt.Sprintf("weft (Go): no callback for a %v action", sc.Kind))
	}
	if err := f(sc); err != nil {
		return stageFailed(err.Error())
	}
	return C.WEFT_OK
}

// stageFailed hands text to weft_pipeline_set_error (on this thread: the one inside
// weft_pipeline_run) and returns the status weft then reports.
func stageFailed(text string) C.weft_status_t {
	cs := C.CString(strings.ReplaceAll(text, "\x00", " "))
	defer C.free(unsafe.Pointer(cs))
	C.weft_pipeline_set_error(cs)
	return C.WEFT_ERR_INVALID_ARGUMENT
}
