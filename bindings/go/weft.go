// Package weft is the Go binding of libweft, the distributed deep-learning backend.
//
// It talks only to weft's C ABI (capi/include/weft/weft.h) through cgo:
//
//   - Comm: a communicator from the launcher's environment (InitFromEnv) or a UniqueID
//     (Init); Close frees it.
//   - Collectives over slices of any Element type (float32, float64, int8, uint8, int32,
//     uint32, int64, uint64, Float16, BFloat16) as generic functions: Allreduce(c, send, recv,
//     OpSum), AllreduceInPlace(c, buf, OpSum), ...; asynchronous forms (AllreduceAsync, ...)
//     return a *Request.
//   - Errors are values: *Error with Status and Message; errors.Is(err, weft.ErrTimeout).
//
// Thread safety follows weft.h: a communicator and its requests are used by one goroutine at
// a time; Abort may be called from any goroutine while the Comm is open.
//
// cgo rules: C never keeps a Go pointer after a call returns. Blocking calls pass the slices
// directly (the call returns when the operation is complete). Asynchronous calls copy their
// inputs into C-allocated staging memory, run the operation there, and copy the results into
// the Go slices in Request.Wait (or the Test that sees completion), then free the staging
// memory; the Go slices may be used freely in the meantime, but results appear only after
// Wait. Every request must be waited for: an abandoned Request leaks its staging memory.
//
// Building: import it as weft "github.com/weft-dev/weft/bindings/go". cgo takes weft's flags
// from pkg-config (weft.pc, from weft's Debian package or `cmake --install`); inside a weft
// checkout, -tags weft_buildtree uses its capi/include and build/lib instead.
package weft

/*
#include <stdlib.h>
#include <weft/weft.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// Version codes this binding was written for (weft.h).
const (
	VersionMajor = C.WEFT_VERSION_MAJOR
	VersionMinor = C.WEFT_VERSION_MINOR
	VersionPatch = C.WEFT_VERSION_PATCH
	ABIVersion   = C.WEFT_ABI_VERSION
)

// call runs one weft function with the goroutine locked to its OS thread, so that
// weft_last_error (thread-local) is read on the thread that failed.
func call(f func() C.weft_status_t) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := f()
	if st == C.WEFT_OK {
		return nil
	}
	return &Error{Status: Status(st), Message: C.GoString(C.weft_last_error())}
}

// LastError returns weft_last_error(): the message of the last failed weft call on the
// calling OS thread. Errors returned by this package already carry their message; this is
// only meaningful right after a C call made with the goroutine locked to its thread.
func LastError() string {
	return C.GoString(C.weft_last_error())
}

// Version returns the loaded library's version code (major*10000 + minor*100 + patch) and
// ABI version (weft_version).
func Version() (code, abi int, err error) {
	var c, a C.int
	err = call(func() C.weft_status_t { return C.weft_version(&c, &a) })
	return int(c), int(a), err
}

// Transport is a transport preference for host memory (weft_transport_t).
type Transport int

const (
	TransportAuto Transport = C.WEFT_TRANSPORT_AUTO
	TransportUCX  Transport = C.WEFT_TRANSPORT_UCX
)

// Config holds communicator options (weft_comm_config_t); the zero value is
// WEFT_COMM_CONFIG_INIT.
type Config struct {
	// Deadline for every blocking wait, rounded up to milliseconds. 0: WEFT_TIMEOUT (seconds)
	// or 300 s.
	Timeout   time.Duration
	Transport Transport
	// Name used in log lines and error messages ("" = "weft").
	Name string
	// Compare op/dtype/count/root across ranks before each collective (as WEFT_DEBUG=check);
	// false takes WEFT_DEBUG from the environment.
	CheckCollectives bool
}

// cConfig builds the C struct; free releases its name.
func (cfg *Config) cConfig() (p *C.weft_comm_config_t, free func(), err error) {
	if cfg == nil {
		return nil, func() {}, nil
	}
	if cfg.Timeout < 0 {
		return nil, nil, newError(StatusInvalidArgument, "Config.Timeout = %v; expected >= 0", cfg.Timeout)
	}
	var c C.weft_comm_config_t
	c.struct_size = C.size_t(unsafe.Sizeof(c))
	c.timeout_ms = C.int64_t((cfg.Timeout + time.Millisecond - 1) / time.Millisecond)
	c.transport = C.weft_transport_t(cfg.Transport)
	if cfg.CheckCollectives {
		c.check_collectives = 1
	}
	free = func() {}
	if cfg.Name != "" {
		for i := 0; i < len(cfg.Name); i++ {
			if cfg.Name[i] == 0 {
				return nil, nil, newError(StatusInvalidArgument, "Config.Name contains a NUL byte")
			}
		}
		name := C.CString(cfg.Name)
		c.name = name
		free = func() { C.free(unsafe.Pointer(name)) }
	}
	return &c, free, nil
}

// UniqueIDBytes is the size of a UniqueID.
const UniqueIDBytes = C.WEFT_UNIQUE_ID_BYTES

// UniqueID identifies a job for Init (weft_unique_id_t): made on one process with
// NewUniqueID, sent to every rank by the program's own means. It contains the job secret.
type UniqueID [UniqueIDBytes]byte

// NewUniqueID calls weft_get_unique_id, which starts a rendezvous store in this process (it
// lives until every communicator made from the id here is closed, or the process exits).
func NewUniqueID() (UniqueID, error) {
	var id C.weft_unique_id_t
	var out UniqueID
	if err := call(func() C.weft_status_t { return C.weft_get_unique_id(&id) }); err != nil {
		return out, err
	}
	for i := range out {
		out[i] = byte(id.internal[i])
	}
	return out, nil
}

// Comm is a communicator (weft_comm_t). Close it when done; it is not closed by the garbage
// collector.
type Comm struct {
	h                                C.weft_comm_t
	rank, size, localRank, localSize int
	mesh                             *Mesh // non-nil: the mesh this communicator belongs to (Mesh.Comm)
}

func wrapComm(h C.weft_comm_t) (*Comm, error) {
	c := &Comm{h: h}
	queries := []struct {
		dst *int
		f   func(C.weft_comm_t, *C.int) C.weft_status_t
	}{
		{&c.rank, func(h C.weft_comm_t, v *C.int) C.weft_status_t { return C.weft_comm_rank(h, v) }},
		{&c.size, func(h C.weft_comm_t, v *C.int) C.weft_status_t { return C.weft_comm_size(h, v) }},
		{&c.localRank, func(h C.weft_comm_t, v *C.int) C.weft_status_t { return C.weft_comm_local_rank(h, v) }},
		{&c.localSize, func(h C.weft_comm_t, v *C.int) C.weft_status_t { return C.weft_comm_local_size(h, v) }},
	}
	for _, q := range queries {
		var v C.int
		if err := call(func() C.weft_status_t { return q.f(h, &v) }); err != nil {
			C.weft_comm_destroy(h)
			return nil, err
		}
		*q.dst = int(v)
	}
	return c, nil
}

// InitFromEnv calls weft_comm_init_from_env: rank, size and store from the launcher's
// environment (weftrun, torchrun, Open MPI, PMI, Slurm). cfg may be nil (defaults).
func InitFromEnv(cfg *Config) (*Comm, error) {
	cc, free, err := cfg.cConfig()
	if err != nil {
		return nil, err
	}
	defer free()
	var h C.weft_comm_t
	if err := call(func() C.weft_status_t { return C.weft_comm_init_from_env(&h, cc) }); err != nil {
		return nil, err
	}
	return wrapComm(h)
}

// Init calls weft_comm_init, collective over nranks processes holding the same id.
func Init(id UniqueID, rank, nranks int, cfg *Config) (*Comm, error) {
	cc, free, err := cfg.cConfig()
	if err != nil {
		return nil, err
	}
	defer free()
	if err := checkInt(rank, "rank"); err != nil {
		return nil, err
	}
	if err := checkInt(nranks, "nranks"); err != nil {
		return nil, err
	}
	var cid C.weft_unique_id_t
	for i := range id {
		cid.internal[i] = C.char(id[i])
	}
	var h C.weft_comm_t
	if err := call(func() C.weft_status_t { return C.weft_comm_init(&h, &cid, C.int(rank), C.int(nranks), cc) }); err != nil {
		return nil, err
	}
	return wrapComm(h)
}

// SplitNoColor as a Split color yields no communicator.
const SplitNoColor = C.WEFT_SPLIT_NOCOLOR

// Split calls weft_comm_split, collective: ranks passing the same color >= 0 form a new
// communicator ordered by (key, old rank); a negative color (SplitNoColor) returns nil, nil.
// cfg nil inherits this communicator's options.
func (c *Comm) Split(color, key int, cfg *Config) (*Comm, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if color < 0 {
		color = SplitNoColor
	}
	if err := checkInt(color, "color"); err != nil {
		return nil, err
	}
	if err := checkInt(key, "key"); err != nil {
		return nil, err
	}
	cc, free, err := cfg.cConfig()
	if err != nil {
		return nil, err
	}
	defer free()
	var h C.weft_comm_t
	if err := call(func() C.weft_status_t { return C.weft_comm_split(c.h, C.int(color), C.int(key), &h, cc) }); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, nil
	}
	return wrapComm(h)
}

// Dup calls weft_comm_dup, collective: same ranks, own message space.
func (c *Comm) Dup() (*Comm, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	var h C.weft_comm_t
	if err := call(func() C.weft_status_t { return C.weft_comm_dup(c.h, &h) }); err != nil {
		return nil, err
	}
	return wrapComm(h)
}

// Shrink calls weft_comm_shrink, collective over the survivors: after ranks of c died (an
// operation returned ErrRemote, say), the survivors agree on who is gone and get a new
// communicator without them, every survivor the same membership, in the survivors' order. c
// may be broken and must still be closed; on a healthy c it equals Dup. A rank the survivors
// took for dead gets an error (ErrRemote). If a rank dies during the shrink, the new
// communicator may still hold it: its first operation fails, and the survivors shrink again.
func (c *Comm) Shrink() (*Comm, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	var h C.weft_comm_t
	if err := call(func() C.weft_status_t { return C.weft_comm_shrink(c.h, &h) }); err != nil {
		return nil, err
	}
	return wrapComm(h)
}

// Rank is this process's rank (weft_comm_rank, read at creation).
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks (weft_comm_size).
func (c *Comm) Size() int { return c.size }

// LocalRank is the rank among this communicator's processes on this host.
func (c *Comm) LocalRank() int { return c.localRank }

// LocalSize is the number of this communicator's processes on this host.
func (c *Comm) LocalSize() int { return c.localSize }

// Abort calls weft_comm_abort: every pending and later operation fails with ErrAborted. It may
// be called from any goroutine while the Comm is open (not concurrently with Close).
func (c *Comm) Abort() error {
	if err := c.open(); err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_comm_abort(c.h) })
}

// Close calls weft_comm_destroy: waits for this rank's outstanding operations, then frees the
// communicator. Closing twice, or a nil *Comm, is a no-op. On a communicator that belongs to a
// mesh (Mesh.Comm) it only detaches this *Comm: the mesh frees the handle.
func (c *Comm) Close() error {
	if c == nil || c.h == nil {
		return nil
	}
	h := c.h
	c.h = nil
	if c.mesh != nil {
		return nil
	}
	return call(func() C.weft_status_t { return C.weft_comm_destroy(h) })
}

// Borrowed reports whether the communicator belongs to a mesh (Mesh.Comm).
func (c *Comm) Borrowed() bool { return c != nil && c.mesh != nil }

func (c *Comm) open() error {
	if c == nil || c.h == nil {
		return newError(StatusInvalidArgument, "the communicator is closed")
	}
	return nil
}

func checkInt(v int, what string) error {
	if v != int(C.int(v)) {
		return newError(StatusInvalidArgument, "%s = %d does not fit a C int", what, v)
	}
	return nil
}

// DtypeSize returns the size in bytes of one element of d (weft_dtype_size).
func DtypeSize(d Dtype) (int, error) {
	var n C.size_t
	err := call(func() C.weft_status_t { return C.weft_dtype_size(C.weft_dtype_t(d), &n) })
	return int(n), err
}

func (c *Comm) String() string {
	if c == nil || c.h == nil {
		return "weft.Comm(closed)"
	}
	return fmt.Sprintf("weft.Comm(rank %d of %d)", c.rank, c.size)
}
