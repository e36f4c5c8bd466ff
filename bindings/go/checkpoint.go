package weft

/*
#include <stdlib.h>
#include <weft/weft.h>
*/
import "C"

import (
	"sort"
	"strings"
	"unsafe"
)

// Distributed checkpoints (weft/mesh.h, last part). A checkpoint is a directory with one data
// file per writing rank and an index (index.weft); save on one mesh, load on another.

// CheckpointConfig holds checkpoint options (weft_checkpoint_config_t); nil or the zero value
// is WEFT_CHECKPOINT_CONFIG_INIT.
type CheckpointConfig struct {
	// NoFsync skips fsync of the files and the directory (tests, tmpfs); by default every file
	// is fsynced before the index is renamed into place.
	NoFsync bool
}

func (cfg *CheckpointConfig) c() *C.weft_checkpoint_config_t {
	var c C.weft_checkpoint_config_t
	c.struct_size = C.size_t(unsafe.Sizeof(c))
	c.fsync = 1
	if cfg != nil && cfg.NoFsync {
		c.fsync = 0
	}
	return &c
}

func cPath(p, what string) (*C.char, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return nil, newError(StatusInvalidArgument, "%s %q contains a NUL byte", what, p)
	}
	return C.CString(p), nil
}

// namedTensors turns the map into C arrays, in name order (names in C memory).
func namedTensors(s *staging, tensors map[string]Sharded) (**C.char, *C.weft_sharded_t, int, error) {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, nil, 0, nil
	}
	cnames := unsafe.Slice((**C.char)(s.alloc(uintptr(len(names))*unsafe.Sizeof((*C.char)(nil)))), len(names))
	handles := unsafe.Slice((*C.weft_sharded_t)(s.alloc(uintptr(len(names))*unsafe.Sizeof(C.weft_sharded_t(nil)))), len(names))
	for i, n := range names {
		t := tensors[n]
		if t == nil || t.shardedHandle() == nil {
			return nil, nil, 0, newError(StatusInvalidArgument, "tensor %q is nil or closed", n)
		}
		cs, err := cPath(n, "tensor name")
		if err != nil {
			return nil, nil, 0, err
		}
		s.mem = append(s.mem, unsafe.Pointer(cs))
		cnames[i], handles[i] = cs, t.shardedHandle()
	}
	return &cnames[0], &handles[0], len(names), nil
}

// SaveCheckpoint calls weft_checkpoint_save, collective over c (the communicator the tensors'
// meshes were made from): writes the tensors this rank holds, under their names, into
// directory dir (created when missing). The set may differ by rank; a tensor held by several
// ranks has the same name, global shape and dtype on each. Atomic: an interrupted save leaves
// the previous checkpoint loadable. cfg may be nil.
func SaveCheckpoint(c *Comm, dir string, tensors map[string]Sharded, cfg *CheckpointConfig) error {
	if err := c.open(); err != nil {
		return err
	}
	s := &staging{}
	defer s.free()
	cdir, err := cPath(dir, "checkpoint directory")
	if err != nil {
		return err
	}
	s.mem = append(s.mem, unsafe.Pointer(cdir))
	names, handles, n, err := namedTensors(s, tensors)
	if err != nil {
		return err
	}
	cc := cfg.c()
	return call(func() C.weft_status_t {
		return C.weft_checkpoint_save(c.h, cdir, names, handles, C.size_t(n), cc)
	})
}

// LoadCheckpoint calls weft_checkpoint_load, not collective: fills each tensor's local memory
// (any layout, any mesh) with the values stored under its name, reading only the boxes this
// rank needs. Errors name the file and tensor. cfg may be nil.
func LoadCheckpoint(dir string, tensors map[string]Sharded, cfg *CheckpointConfig) error {
	s := &staging{}
	defer s.free()
	cdir, err := cPath(dir, "checkpoint directory")
	if err != nil {
		return err
	}
	s.mem = append(s.mem, unsafe.Pointer(cdir))
	names, handles, n, err := namedTensors(s, tensors)
	if err != nil {
		return err
	}
	cc := cfg.c()
	return call(func() C.weft_status_t {
		return C.weft_checkpoint_load(cdir, names, handles, C.size_t(n), cc)
	})
}

// CheckpointTensor describes one tensor of a checkpoint.
type CheckpointTensor struct {
	Name      string
	Dtype     Dtype
	Shape     []int
	NumShards int // stored shards (replicated pieces are stored once)
}

// Checkpoint is an opened checkpoint index (weft_checkpoint_t), for inspection. Close it.
type Checkpoint struct {
	h C.weft_checkpoint_t
}

// OpenCheckpoint calls weft_checkpoint_open: reads and verifies dir's index.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	cdir, err := cPath(dir, "checkpoint directory")
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cdir))
	var h C.weft_checkpoint_t
	if err := call(func() C.weft_status_t { return C.weft_checkpoint_open(cdir, &h) }); err != nil {
		return nil, err
	}
	return &Checkpoint{h: h}, nil
}

func (ck *Checkpoint) open() error {
	if ck == nil || ck.h == nil {
		return newError(StatusInvalidArgument, "the checkpoint is closed")
	}
	return nil
}

// Len calls weft_checkpoint_count: the number of tensors.
func (ck *Checkpoint) Len() (int, error) {
	if err := ck.open(); err != nil {
		return 0, err
	}
	var n C.size_t
	err := call(func() C.weft_status_t { return C.weft_checkpoint_count(ck.h, &n) })
	return int(n), err
}

// Tensor calls weft_checkpoint_tensor: tensor i.
func (ck *Checkpoint) Tensor(i int) (CheckpointTensor, error) {
	var t CheckpointTensor
	if err := ck.open(); err != nil {
		return t, err
	}
	if i < 0 {
		return t, newError(StatusInvalidArgument, "checkpoint tensor index %d is negative", i)
	}
	var name *C.char
	var dtype C.weft_dtype_t
	var ndim C.int
	var shape [C.WEFT_TENSOR_MAX_DIMS]C.int64_t
	var nshards C.size_t
	if err := call(func() C.weft_status_t {
		return C.weft_checkpoint_tensor(ck.h, C.size_t(i), &name, &dtype, &ndim, &shape[0], &nshards)
	}); err != nil {
		return t, err
	}
	t.Name, t.Dtype, t.NumShards = C.GoString(name), Dtype(dtype), int(nshards)
	for k := 0; k < int(ndim) && k < len(shape); k++ {
		t.Shape = append(t.Shape, int(shape[k]))
	}
	return t, nil
}

// Tensors returns every tensor, in index order.
func (ck *Checkpoint) Tensors() ([]CheckpointTensor, error) {
	n, err := ck.Len()
	if err != nil {
		return nil, err
	}
	out := make([]CheckpointTensor, n)
	for i := range out {
		if out[i], err = ck.Tensor(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Verify calls weft_checkpoint_verify: reads every shard and checks its length and CRC-32C;
// the error names the first bad file and tensor.
func (ck *Checkpoint) Verify() error {
	if err := ck.open(); err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_checkpoint_verify(ck.h) })
}

// ExportSafetensors calls weft_checkpoint_export_safetensors: the whole checkpoint as one
// safetensors file at path.
func (ck *Checkpoint) ExportSafetensors(path string) error {
	if err := ck.open(); err != nil {
		return err
	}
	cp, err := cPath(path, "safetensors path")
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cp))
	return call(func() C.weft_status_t { return C.weft_checkpoint_export_safetensors(ck.h, cp) })
}

// Close calls weft_checkpoint_close. Closing twice, or a nil *Checkpoint, is a no-op.
func (ck *Checkpoint) Close() error {
	if ck == nil || ck.h == nil {
		return nil
	}
	h := ck.h
	ck.h = nil
	return call(func() C.weft_status_t { return C.weft_checkpoint_close(h) })
}
