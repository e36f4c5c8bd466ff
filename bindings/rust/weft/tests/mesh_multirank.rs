//! Multi-rank test of meshes, sharded tensors, redistribution and checkpoints. Run by
//! `cargo test`, it starts `weftrun -n 4 <this test binary>` with WEFT_RUST_MESH_CHILD=1 and
//! checks the job's exit status; each rank then builds 1-d and 2-d meshes, redistributes
//! between layouts and between meshes, and saves and loads a checkpoint, comparing every
//! local piece with the slice of the global tensor it should hold.
//! weftrun: $WEFTRUN, else the repository's build/bin/weftrun.

#[path = "common/launcher.rs"]
mod launcher;

use std::path::PathBuf;

use weft::Placement::{Partial, Replicate, Shard};
use weft::{
    checkpoint, full, plan, redistribute, Checkpoint, CheckpointConfig, Comm, Dtype, Mesh, Op, Placement,
    ShardedTensor, StepKind, TensorView,
};

const RANKS: usize = 4;
const CHILD_FLAG: &str = "WEFT_RUST_MESH_CHILD";

#[test]
fn mesh_multirank() {
    if launcher::is_child(CHILD_FLAG) {
        child();
        return;
    }
    launcher::run_under_weftrun("mesh_multirank", RANKS, CHILD_FLAG, 120);
}

fn ok<T>(what: &str, r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Global tensor of `shape` (row-major): distinct exact values.
fn global(shape: &[usize], salt: usize) -> Vec<f64> {
    (0..shape.iter().product::<usize>()).map(|i| ((i * 3 + salt) % 1000) as f64 - 300.0).collect()
}

/// The box `b` of the row-major global tensor `g` of shape `shape`, row-major.
fn slice_of(g: &[f64], shape: &[usize], b: &weft::LocalBox) -> Vec<f64> {
    let mut out = Vec::with_capacity(b.len());
    let n = b.len();
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        let mut flat = 0;
        for d in 0..shape.len() {
            flat = flat * shape[d] + b.offset[d] + idx[d];
        }
        out.push(g[flat]);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < b.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

fn piece(mesh: &Mesh, layout: &[Placement], g: &[f64], shape: &[usize]) -> Vec<f64> {
    slice_of(g, shape, &ok("local_box", mesh.local_box(layout, shape, None)))
}

fn chunk(n: usize, k: usize, i: usize) -> (usize, usize) {
    let c = n.div_ceil(k);
    ((i * c).min(n), ((i + 1) * c).min(n))
}

fn child() {
    let comm = ok("init", Comm::from_env());
    let (rank, size) = (comm.rank(), comm.size());
    assert_eq!(size, RANKS);

    // ---- meshes
    let line = ok("line", Mesh::new(&comm, &[size], &["dp"]));
    let grid = ok("grid", Mesh::new(&comm, &[2, size / 2], &["dp", "tp"]));
    assert_eq!(grid.coords(), Some(&[rank / 2, rank % 2][..]));
    assert_eq!(grid.mesh_rank(), Some(rank));
    assert_eq!(ok("parent", grid.parent_rank(3)), 3);
    {
        let tp = ok("tp", grid.comm_by_names(&["tp"]));
        assert_eq!((tp.size(), tp.rank()), (2, rank % 2));
        let mut x = [rank as i64];
        ok("tp allreduce", tp.allreduce_in_place(&mut x, Op::Sum));
        assert_eq!(x[0], (rank / 2 * 2 + rank / 2 * 2 + 1) as i64);
        let dp = ok("dp", grid.comm(&[0]));
        let mut y = [rank as i64];
        ok("dp allreduce", dp.allreduce_in_place(&mut y, Op::Sum));
        assert_eq!(y[0], (rank % 2 * 2 + 2) as i64);
    }
    for n in [0usize, 1, 5, 7] {
        for i in 0..size {
            let b = ok("local_box", line.local_box(&[Shard(0)], &[n, 3], Some(i)));
            let (lo, hi) = chunk(n, size, i);
            assert_eq!(b.shape, vec![hi - lo, 3], "n {n} i {i}");
        }
    }

    // ---- S -> R on a line (uneven: 7 rows over 4 ranks)
    let shape = [7usize, 3];
    let g = global(&shape, 0);
    let mine = piece(&line, &[Shard(0)], &g, &shape);
    let mut all = vec![0f64; g.len()];
    {
        let src = ok("src", ShardedTensor::from_slice(&line, &shape, &[Shard(0)], &mine));
        let mut dst = ok("dst", ShardedTensor::new(&line, &shape, &[Replicate], &mut all));
        ok("S->R", redistribute(&src, &mut dst));
        let steps = ok("plan", plan(&src, &dst));
        let gathers: Vec<_> = steps.iter().filter(|s| s.kind == StepKind::AllGather).collect();
        assert_eq!(gathers.len(), 1, "{steps:?}");
        assert_eq!((gathers[0].mesh_dim, gathers[0].from, gathers[0].to), (Some(0), Some(Shard(0)), Some(Replicate)));
        assert!(gathers[0].max_bytes_sent >= gathers[0].bytes_sent);
        assert_eq!(ok("full", full::<f64>(&src)).unwrap(), g);
    }
    assert_eq!(all, g);

    // ---- S(0) -> S(1), Partial(sum) -> R and -> S, asynchronously too
    {
        let src = ok("src", ShardedTensor::from_slice(&line, &shape, &[Shard(0)], &mine));
        let mut out = vec![0f64; ok("ls", line.local_shape(&[Shard(1)], &shape)).iter().product()];
        let mut dst = ok("dst", ShardedTensor::new(&line, &shape, &[Shard(1)], &mut out));
        ok("S0->S1", comm.scope(|s| s.redistribute(&src, &mut dst)?.wait()));
        assert_eq!(ok("local", dst.local::<f64>()), &piece(&line, &[Shard(1)], &g, &shape)[..]);
    }
    let term: Vec<f64> = g.iter().map(|v| v * (rank + 1) as f64).collect();
    let total: Vec<f64> = g.iter().map(|v| v * (1..=size).sum::<usize>() as f64).collect();
    for layout in [[Replicate], [Shard(0)]] {
        let src = ok("partial", ShardedTensor::from_slice(&line, &shape, &[Partial(Op::Sum)], &term));
        let mut out = vec![0f64; ok("ls", line.local_shape(&layout, &shape)).iter().product()];
        let mut dst = ok("dst", ShardedTensor::new(&line, &shape, &layout, &mut out));
        ok("P->x", redistribute(&src, &mut dst));
        assert_eq!(ok("local", dst.local::<f64>()), &piece(&line, &layout, &total, &shape)[..], "{layout:?}");
        let want = if layout == [Replicate] { StepKind::AllReduce } else { StepKind::ReduceScatter };
        assert!(ok("plan", plan(&src, &dst)).iter().any(|s| s.kind == want));
    }

    // ---- 2-d mesh: every layout pair through full and a column-major destination
    let shape2 = [6usize, 5];
    let g2 = global(&shape2, 7);
    let layouts: [[Placement; 2]; 4] =
        [[Shard(0), Shard(1)], [Replicate, Shard(0)], [Shard(1), Replicate], [Shard(0), Shard(0)]];
    for from in &layouts {
        let mine2 = piece(&grid, from, &g2, &shape2);
        let src = ok("src2", ShardedTensor::from_slice(&grid, &shape2, from, &mine2));
        assert_eq!(ok("full2", full::<f64>(&src)).unwrap(), g2, "{from:?}");
        for to in &layouts {
            let b = ok("box", grid.local_box(to, &shape2, None));
            let mut cm = vec![0f64; b.len()];
            {
                // column-major: strides (1, rows)
                let view = ok("view", TensorView::strided(&mut cm, &b.shape, &[1, b.shape[0].max(1)]));
                let mut dst = ok("dst2", ShardedTensor::from_view(&grid, &shape2, to, view));
                ok("2d", redistribute(&src, &mut dst));
            }
            let want = slice_of(&g2, &shape2, &b);
            for i in 0..b.shape[0] {
                for j in 0..b.shape[1] {
                    assert_eq!(cm[i + j * b.shape[0]], want[i * b.shape[1] + j], "{from:?} -> {to:?}");
                }
            }
        }
    }

    // ---- between meshes: the line -> a mesh of ranks [3, 1] (descriptors on 0 and 2), and back
    let pair = ok("pair", Mesh::with_ranks(&comm, &[2], &["pp"], &[3, 1]));
    assert_eq!(pair.is_member(), rank == 3 || rank == 1);
    assert_eq!(ok("parent", pair.parent_rank(0)), 3);
    let member = pair.is_member();
    let mut buf = vec![0f64; if member { ok("ls", pair.local_shape(&[Shard(1)], &shape)).iter().product() } else { 0 }];
    {
        let src = ok("src", ShardedTensor::from_slice(&line, &shape, &[Shard(0)], &mine));
        let mut dst = if member {
            ok("dst", ShardedTensor::new(&pair, &shape, &[Shard(1)], &mut buf))
        } else {
            ok("descriptor", ShardedTensor::descriptor(&pair, &shape, Dtype::F64, &[Shard(1)]))
        };
        ok("mesh to mesh", redistribute(&src, &mut dst));
        assert!(!ok("plan", plan(&src, &dst)).is_empty());
    }
    if member {
        assert_eq!(buf, piece(&pair, &[Shard(1)], &g, &shape));
    }
    {
        // and back to the line, from the pair's pieces (descriptors on the other ranks)
        let back_src = if member {
            ok("back src", ShardedTensor::from_slice(&pair, &shape, &[Shard(1)], &buf))
        } else {
            ok("back descriptor", ShardedTensor::descriptor(&pair, &shape, Dtype::F64, &[Shard(1)]))
        };
        let mut back = vec![0f64; g.len()];
        {
            let mut bdst = ok("back dst", ShardedTensor::new(&line, &shape, &[Replicate], &mut back));
            ok("back", redistribute(&back_src, &mut bdst));
        }
        assert_eq!(back, g);
    }

    // ---- checkpoint: save from the line, load on the grid and on one rank
    let mut path_buf = [0u8; 256];
    if rank == 0 {
        let p = std::env::temp_dir().join(format!("weft-rs-mesh-ckpt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        let s = p.to_str().unwrap().as_bytes();
        path_buf[..s.len()].copy_from_slice(s);
    }
    ok("bcast path", comm.broadcast(&mut path_buf, 0));
    let end = path_buf.iter().position(|&b| b == 0).unwrap();
    let dir = PathBuf::from(std::str::from_utf8(&path_buf[..end]).unwrap());
    let ints: Vec<i32> = (0..10).map(|i| i * 7 - 20).collect();
    {
        let tw = ok("w", ShardedTensor::from_slice(&line, &shape, &[Shard(0)], &mine));
        let tp = ok("p", ShardedTensor::from_slice(&line, &shape, &[Partial(Op::Sum)], &term));
        let ti = ok("i", ShardedTensor::from_slice(&line, &[10], &[Replicate], &ints));
        ok(
            "save",
            checkpoint::save(
                &comm,
                &dir,
                &[("w", &tw), ("p", &tp), ("i", &ti)],
                Some(&CheckpointConfig { fsync: false }),
            ),
        );
    }
    ok("barrier", comm.barrier());
    {
        let lw = [Replicate, Shard(1)];
        let mut w = vec![0f64; ok("ls", grid.local_shape(&lw, &shape)).iter().product()];
        let mut p = vec![0f64; g.len()];
        let mut i2 = vec![0i32; ok("ls", grid.local_shape(&[Shard(0), Shard(0)], &[10])).iter().product()];
        let mut tw = ok("w", ShardedTensor::new(&grid, &shape, &lw, &mut w));
        let mut tp = ok("p", ShardedTensor::new(&grid, &shape, &[Replicate, Replicate], &mut p));
        let mut ti = ok("i", ShardedTensor::new(&grid, &[10], &[Shard(0), Shard(0)], &mut i2));
        ok("load", checkpoint::load(&dir, &mut [("w", &mut tw), ("p", &mut tp), ("i", &mut ti)]));
        assert_eq!(ok("w", tw.local::<f64>()), &piece(&grid, &lw, &g, &shape)[..]);
        assert_eq!(ok("p", tp.local::<f64>()), &total[..]);
        let b = ok("box", grid.local_box(&[Shard(0), Shard(0)], &[10], None));
        assert_eq!(ok("i", ti.local::<i32>()), &ints[b.offset[0]..b.offset[0] + b.shape[0]]);
    }
    if rank == 2 {
        let ck = ok("open", Checkpoint::open(&dir));
        let mut names: Vec<String> = ok("tensors", ck.tensors()).into_iter().map(|t| t.name).collect();
        names.sort();
        assert_eq!(names, ["i", "p", "w"]);
        let ti = ok("tensor", ck.tensors()).into_iter().find(|t| t.name == "i").unwrap();
        assert_eq!((ti.dtype, ti.shape.as_slice(), ti.nshards), (Some(Dtype::I32), &[10usize][..], 1));
        ok("verify", ck.verify());
    }
    ok("barrier", comm.barrier());
    if rank == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
    drop(pair);
    ok("destroy grid", grid.destroy());
    drop(line);
    ok("destroy", comm.destroy());
    println!("rank {rank}: all Rust mesh checks passed");
}
