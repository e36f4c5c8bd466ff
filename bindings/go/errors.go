package weft

// #include <weft/weft.h>
import "C"

import "fmt"

// Status is a weft_status_t.
type Status int

const (
	StatusOK              Status = C.WEFT_OK
	StatusInvalidArgument Status = C.WEFT_ERR_INVALID_ARGUMENT // NULL, out of range, bad enum, overlap, length
	StatusUnsupported     Status = C.WEFT_ERR_UNSUPPORTED      // valid request this build or transport cannot do
	StatusOutOfMemory     Status = C.WEFT_ERR_OUT_OF_MEMORY
	StatusTimeout         Status = C.WEFT_ERR_TIMEOUT   // a deadline (Config.Timeout / WEFT_TIMEOUT) expired
	StatusRemote          Status = C.WEFT_ERR_REMOTE    // a peer failed or disappeared; the message names it
	StatusAborted         Status = C.WEFT_ERR_ABORTED   // Comm.Abort was called
	StatusMismatch        Status = C.WEFT_ERR_MISMATCH  // ranks disagree (version, or op/count/dtype/root in check mode)
	StatusTransport       Status = C.WEFT_ERR_TRANSPORT // the network/transport layer failed
	StatusInternal        Status = C.WEFT_ERR_INTERNAL  // a bug in weft
	StatusInProgress      Status = C.WEFT_IN_PROGRESS   // not complete yet (not an error)
)

// String is weft_status_string: the status's name and a short explanation.
func (s Status) String() string {
	return C.GoString(C.weft_status_string(C.weft_status_t(s)))
}

// Error is a failed weft call: its status and the library's detailed message
// (weft_last_error: which function, argument, rank or peer, and what was expected).
// errors.Is(err, weft.ErrTimeout) and the like compare statuses.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.String()
	}
	return e.Message + " (" + e.Status.String() + ")"
}

// Is reports whether target is the sentinel (an *Error without message) of e's status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrOutOfMemory     = &Error{Status: StatusOutOfMemory}
	ErrTimeout         = &Error{Status: StatusTimeout}
	ErrRemote          = &Error{Status: StatusRemote}
	ErrAborted         = &Error{Status: StatusAborted}
	ErrMismatch        = &Error{Status: StatusMismatch}
	ErrTransport       = &Error{Status: StatusTransport}
	ErrInternal        = &Error{Status: StatusInternal}
)

// StatusString is weft_status_string for any code.
func StatusString(s Status) string { return s.String() }

func newError(s Status, format string, args ...any) error {
	return &Error{Status: s, Message: "weft (Go): " + fmt.Sprintf(format, args...)}
}
