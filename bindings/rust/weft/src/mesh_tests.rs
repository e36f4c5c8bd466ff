//! Single-process tests of the mesh.h family: placements, views, a one-rank mesh, sharded
//! tensors, redistribution, plans and checkpoints. The multi-rank ones are in
//! tests/mesh_multirank.rs.
use std::path::PathBuf;

use crate::Placement::{Partial, Replicate, Shard};
use crate::*;

fn solo() -> Comm {
    let id = UniqueId::new().expect("weft_get_unique_id");
    let cfg =
        Config { timeout: Some(std::time::Duration::from_secs(20)), name: Some("solo".into()), ..Config::default() };
    Comm::init(&id, 0, 1, Some(&cfg)).expect("one-rank weft_comm_init")
}

/// A fresh directory under the system's temp folder, removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "weft-rs-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn placements_round_trip_and_print() {
    for p in [Replicate, Shard(0), Shard(3), Partial(Op::Sum), Partial(Op::Avg), Partial(Op::Max)] {
        assert_eq!(Placement::from_raw(&p.raw().unwrap()), Some(p));
    }
    assert_eq!(Shard(2).raw().unwrap().kind, sys::WEFT_SHARD);
    assert_eq!(Shard(2).raw().unwrap().dim, 2);
    assert_eq!(Partial(Op::Min).raw().unwrap().op, sys::WEFT_MIN);
    assert_eq!(Shard(usize::MAX).raw().unwrap_err().status(), Status::InvalidArgument);
    let bad = sys::weft_placement_t { kind: 9, dim: 0, op: 0 };
    assert_eq!(Placement::from_raw(&bad), None);
    assert_eq!(format!("{} {} {}", Shard(1), Replicate, Partial(Op::Sum)), "Shard(1) Replicate Partial(Sum)");
    for d in Dtype::ALL {
        assert_eq!(Dtype::from_raw(d.raw()), Some(d));
    }
    assert_eq!(Dtype::from_raw(99), None);
}

#[test]
fn views_check_their_bounds() {
    let mut buf = [0f32; 12];
    assert!(TensorView::contiguous(&mut buf, &[3, 4]).is_ok());
    assert_eq!(TensorView::contiguous(&mut buf, &[3, 5]).unwrap_err().status(), Status::InvalidArgument);
    // column-major 3 x 4: strides (1, 3)
    assert!(TensorView::strided(&mut buf, &[3, 4], &[1, 3]).is_ok());
    // every other row of a 6 x 2 matrix: 3 x 2 with strides (4, 1) reaches element 9
    assert!(TensorView::strided(&mut buf, &[3, 2], &[4, 1]).is_ok());
    let e = TensorView::strided(&mut buf, &[4, 4], &[4, 1]).unwrap_err();
    assert!(e.message().contains("reaches element 15"), "{e}");
    assert!(TensorView::strided(&mut buf, &[0, 4], &[100, 100]).is_ok()); // empty: reaches nothing
    assert_eq!(TensorView::strided(&mut buf, &[2], &[1, 1]).unwrap_err().status(), Status::InvalidArgument);
    let v = TensorView::read_only(&buf, &[12], None).unwrap();
    assert_eq!(v.dtype(), Dtype::F32);
}

#[test]
fn one_rank_mesh_queries() {
    let comm = solo();
    let mesh = Mesh::new(&comm, &[1, 1], &["dp", "tp"]).unwrap();
    assert_eq!((mesh.ndim(), mesh.size(), mesh.shape()), (2, 1, &[1usize, 1][..]));
    assert_eq!(mesh.names(), ["dp", "tp"]);
    assert!(mesh.is_member());
    assert_eq!((mesh.coords(), mesh.mesh_rank()), (Some(&[0usize, 0][..]), Some(0)));
    assert_eq!(mesh.dim_index("tp").unwrap(), 1);
    let e = mesh.dim_index("nope").unwrap_err();
    assert!(e.message().contains("nope"), "{e}");
    assert_eq!(mesh.parent_rank(0).unwrap(), 0);
    {
        let tp = mesh.comm_by_names(&["tp"]).unwrap();
        assert_eq!(tp.size(), 1);
        let mut x = [2.5f64];
        tp.allreduce_in_place(&mut x, Op::Sum).unwrap();
        assert_eq!(x, [2.5]);
        let whole = mesh.comm(&[0, 1]).unwrap();
        whole.barrier().unwrap();
    } // MeshComms dropped: nothing destroyed
    let b = mesh.local_box(&[Shard(0), Shard(1)], &[5, 3], None).unwrap();
    assert_eq!((b.shape.as_slice(), b.offset.as_slice(), b.len()), (&[5usize, 3][..], &[0usize, 0][..], 15));
    let e = mesh.local_shape(&[Shard(0)], &[4]).unwrap_err();
    assert!(e.message().contains("2 dims"), "{e}");
    mesh.comm(&[0]).unwrap().barrier().unwrap();
    mesh.destroy().unwrap();
    comm.barrier().unwrap(); // the parent is unaffected

    let d = Mesh::new(&comm, &[1], &[]).unwrap();
    assert_eq!(d.names(), ["d0"]);
    assert_eq!(Mesh::new(&comm, &[2], &["x"]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(Mesh::new(&comm, &[1, 1], &["a", "a"]).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(Mesh::with_ranks(&comm, &[1], &["x"], &[3]).unwrap_err().status(), Status::InvalidArgument);
    assert!(Mesh::with_ranks(&comm, &[1], &["x"], &[0]).unwrap().is_member());
    assert_eq!(Mesh::new(&comm, &[1], &["a\0b"]).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn one_rank_redistribute_and_plan() {
    let comm = solo();
    let mesh = Mesh::new(&comm, &[1], &["dp"]).unwrap();
    let a: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let mut out = vec![0f32; 12];
    let mut colmajor = vec![0f32; 12];
    {
        let src = ShardedTensor::from_slice(&mesh, &[3, 4], &[Shard(0)], &a).unwrap();
        assert_eq!(src.local::<f32>().unwrap(), &a[..]);
        assert!(src.local::<f64>().is_err());
        let v = src.local_view().unwrap();
        assert_eq!(
            (v.data as usize, v.dtype, v.shape.as_slice()),
            (a.as_ptr() as usize, Some(Dtype::F32), &[3i64, 4][..])
        );
        let mut dst = ShardedTensor::new(&mesh, &[3, 4], &[Replicate], &mut out).unwrap();
        redistribute(&src, &mut dst).unwrap();
        assert_eq!(dst.local::<f32>().unwrap(), &a[..]);
        let steps = plan(&src, &dst).unwrap();
        for s in &steps {
            assert!(!s.to_string().is_empty());
        }
        // Host memory takes no stream.
        let e = unsafe { redistribute_on_stream(&src, &mut dst, 0x1234usize as *mut std::ffi::c_void) }.unwrap_err();
        assert_eq!(e.status(), Status::Unsupported, "{e}");
        // A read-only tensor is never a destination.
        let mut ro = ShardedTensor::from_slice(&mesh, &[3, 4], &[Replicate], &a).unwrap();
        assert_eq!(redistribute(&src, &mut ro).unwrap_err().status(), Status::InvalidArgument);
        // A column-major destination: strides (1, 3).
        let view = TensorView::strided(&mut colmajor, &[3, 4], &[1, 3]).unwrap();
        let mut cm = ShardedTensor::from_view(&mesh, &[3, 4], &[Replicate], view).unwrap();
        comm.scope(|s| s.redistribute(&src, &mut cm)?.wait()).unwrap();
        assert!(cm.local::<f32>().is_err()); // not a contiguous slice
        assert_eq!(full::<f32>(&src).unwrap().unwrap(), a);
        assert_eq!(full::<f64>(&src).unwrap_err().status(), Status::InvalidArgument);
        // The wrong local length, and a dtype mismatch, are refused.
        let mut short = vec![0f32; 11];
        assert!(ShardedTensor::new(&mesh, &[3, 4], &[Replicate], &mut short).is_err());
        let mut d64 = vec![0f64; 12];
        let mut t64 = ShardedTensor::new(&mesh, &[3, 4], &[Replicate], &mut d64).unwrap();
        assert!(redistribute(&src, &mut t64).is_err());
        assert!(ShardedTensor::create(&mesh, &[3, 4], Dtype::F64, &[Partial(Op::Prod)], None, Some("p")).is_err());
    }
    for i in 0..3 {
        for j in 0..4 {
            assert_eq!(colmajor[i + 3 * j], a[4 * i + j]);
        }
    }
    // set_local: point the destination at the next buffer.
    let mut next = vec![0f32; 12];
    let mut first = vec![0f32; 12];
    {
        let src = ShardedTensor::from_slice(&mesh, &[3, 4], &[Shard(1)], &a).unwrap();
        let mut dst = ShardedTensor::new(&mesh, &[3, 4], &[Replicate], &mut first).unwrap();
        dst.set_local(&mut next).unwrap();
        redistribute(&src, &mut dst).unwrap();
        dst.destroy().unwrap();
    }
    assert_eq!(next, a);
    assert!(first.iter().all(|&v| v == 0.0));
}

#[test]
fn one_rank_checkpoint() {
    let comm = solo();
    let mesh = Mesh::new(&comm, &[1], &["dp"]).unwrap();
    let tmp = TempDir::new("ckpt");
    let dir = tmp.0.join("ck");
    let w: Vec<f32> = (0..12).map(|v| v as f32 * 0.5).collect();
    let b = [7i64, -8, 9];
    {
        let tw = ShardedTensor::from_slice(&mesh, &[3, 4], &[Shard(0)], &w).unwrap();
        let tb = ShardedTensor::from_slice(&mesh, &[3], &[Replicate], &b).unwrap();
        let cfg = CheckpointConfig { fsync: false };
        checkpoint::save(&comm, &dir, &[("w", &tw), ("b", &tb)], Some(&cfg)).unwrap();
    }
    assert!(dir.join("index.weft").exists());
    let mut w2 = vec![0f32; 12];
    let mut b2 = [0i64; 3];
    {
        let view = TensorView::strided(&mut w2, &[3, 4], &[1, 3]).unwrap(); // column-major
        let mut tw = ShardedTensor::from_view(&mesh, &[3, 4], &[Replicate], view).unwrap();
        let mut tb = ShardedTensor::new(&mesh, &[3], &[Shard(0)], &mut b2).unwrap();
        checkpoint::load(&dir, &mut [("w", &mut tw), ("b", &mut tb)]).unwrap();
        let e = checkpoint::load(&dir, &mut [("nope", &mut tb)]).unwrap_err();
        assert!(e.message().contains("nope"), "{e}");
    }
    assert_eq!(b2, b);
    for i in 0..3 {
        for j in 0..4 {
            assert_eq!(w2[i + 3 * j], w[4 * i + j]);
        }
    }
    let ck = Checkpoint::open(&dir).unwrap();
    let infos = ck.tensors().unwrap();
    assert_eq!(ck.len().unwrap(), 2);
    let tw = infos.iter().find(|t| t.name == "w").unwrap();
    assert_eq!((tw.dtype, tw.shape.as_slice()), (Some(Dtype::F32), &[3usize, 4][..]));
    assert!(tw.nshards >= 1);
    ck.verify().unwrap();
    let st = tmp.0.join("all.safetensors");
    ck.export_safetensors(&st).unwrap();
    ck.close().unwrap();
    let bytes = std::fs::read(&st).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
    assert!(header.contains("\"w\"") && header.contains("F32") && header.contains("I64"), "{header}");

    // A flipped byte in a data file is found by verify. (Shards are aligned in the data files:
    // flip the last byte, which belongs to a shard, not to the padding between them.)
    let victim = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "index.weft" && p.is_file())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut raw = std::fs::read(&victim).unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 0xff;
    std::fs::write(&victim, raw).unwrap();
    assert!(Checkpoint::open(&dir).unwrap().verify().is_err());
    assert!(Checkpoint::open(tmp.0.join("missing")).is_err());
}
