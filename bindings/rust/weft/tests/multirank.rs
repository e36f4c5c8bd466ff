//! Multi-rank test. Run by `cargo test`, it starts `weftrun -n 3 <this test binary>` with
//! WEFT_RUST_MULTIRANK_CHILD=1 and checks the job's exit status; each rank then runs every
//! collective (blocking, in place and asynchronous) and compares with the expected values.
//! weftrun: $WEFTRUN, else the repository's build/bin/weftrun.
use std::fmt::Debug;
use std::time::Duration;

#[path = "common/launcher.rs"]
mod launcher;

use weft::{Bf16, Comm, Config, Op, P2POp, Status, WeftType, F16};

const RANKS: usize = 3;
const CHILD_FLAG: &str = "WEFT_RUST_MULTIRANK_CHILD";

#[test]
fn multirank() {
    if launcher::is_child(CHILD_FLAG) {
        child();
        return;
    }
    launcher::run_under_weftrun("multirank", RANKS, CHILD_FLAG, 120);
}

/// Small integers as every element type (exact in all of them for |v| <= 120).
trait Val: WeftType + PartialEq + Debug {
    fn of(v: i64) -> Self;
}
macro_rules! val_as {
    ($($t:ty),*) => {$( impl Val for $t { fn of(v: i64) -> Self { v as $t } } )*};
}
val_as!(f32, f64, i8, u8, i32, u32, i64, u64);
impl Val for F16 {
    fn of(v: i64) -> Self {
        F16::from_f32(v as f32)
    }
}
impl Val for Bf16 {
    fn of(v: i64) -> Self {
        Bf16::from_f32(v as f32)
    }
}

fn vals<T: Val>(f: impl Fn(usize) -> i64, n: usize) -> Vec<T> {
    (0..n).map(|i| T::of(f(i))).collect()
}

fn ok<T>(what: &str, r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Every dtype through allreduce (blocking and in place), broadcast and allgather.
fn dtype_sweep<T: Val>(comm: &Comm, name: &str) {
    let (r, n) = (comm.rank() as i64, comm.size() as i64);
    let count = 5;
    let send: Vec<T> = vals(|i| (r + 1) * (i as i64 + 1), count);
    let mut recv: Vec<T> = vals(|_| 0, count);
    ok(name, comm.allreduce(&send, &mut recv, Op::Sum));
    assert_eq!(recv, vals::<T>(|i| n * (n + 1) / 2 * (i as i64 + 1), count), "{name} allreduce sum");

    let mut buf = send.clone();
    ok(name, comm.allreduce_in_place(&mut buf, Op::Max));
    assert_eq!(buf, vals::<T>(|i| n * (i as i64 + 1), count), "{name} allreduce max");

    let mut b: Vec<T> = if r == 1 { vals(|i| 7 + i as i64, count) } else { vals(|_| 0, count) };
    ok(name, comm.broadcast(&mut b, 1));
    assert_eq!(b, vals::<T>(|i| 7 + i as i64, count), "{name} broadcast");

    let mut all: Vec<T> = vals(|_| 0, count * n as usize);
    ok(name, comm.allgather(&send, &mut all));
    assert_eq!(
        all,
        vals::<T>(|j| ((j / count) as i64 + 1) * ((j % count) as i64 + 1), count * n as usize),
        "{name} allgather"
    );
}

/// weft_p2p_batch: a two-way ring in one blocking batch, a self exchange, matching with plain
/// send/recv, an asynchronous batch in a scope, and an error naming the op.
fn p2p_batch(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let (right, left) = ((rank + 1) % size, (rank + size - 1) % size);
    let to_right = vec![rank as f64; 1000];
    let to_left: Vec<i32> = (0..5).map(|i| -(rank as i32) * 10 - i).collect();
    let (mut from_left, mut from_right) = (vec![0f64; 1000], vec![0i32; 5]);
    let mut own = [0u8; 3];
    ok(
        "p2p_batch ring",
        comm.p2p_batch([
            P2POp::send(&to_right, right),
            P2POp::send(&to_left, left),
            P2POp::recv(&mut from_left, left),
            P2POp::recv(&mut from_right, right),
            P2POp::send(&[7u8, 8, 9], rank),
            P2POp::recv(&mut own, rank),
        ]),
    );
    assert!(from_left.iter().all(|&v| v == left as f64));
    assert_eq!(from_right, (0..5).map(|i| -(right as i32) * 10 - i).collect::<Vec<_>>());
    assert_eq!(own, [7, 8, 9]);
    ok("p2p_batch empty", comm.p2p_batch([]));

    // Batch send, plain receive; plain send, batch receive (issue order per pair).
    let mut got = [0u32; 2];
    let msg = [rank as u32, 1];
    ok(
        "plain send, batch recv",
        comm.scope(|s| {
            let req = s.send(&msg, right)?;
            comm.p2p_batch([P2POp::recv(&mut got, left)])?;
            req.wait()
        }),
    );
    assert_eq!(got, [left as u32, 1]);
    let mut got2 = [0u32; 2];
    ok(
        "batch send, plain recv",
        comm.scope(|s| {
            let req = s.p2p_batch([P2POp::send(&msg, right)])?;
            comm.recv(&mut got2, left)?;
            req.wait()
        }),
    );
    assert_eq!(got2, [left as u32, 1]);

    // Asynchronous: the scope holds the buffers until the batch completes.
    let out = vec![rank as i32 + 1; 64];
    let mut inbox = vec![0i32; 64];
    ok(
        "p2p_batch async",
        comm.scope(|s| {
            let req = s.p2p_batch([P2POp::recv(&mut inbox, left), P2POp::send(&out, right)])?;
            req.wait()
        }),
    );
    assert!(inbox.iter().all(|&v| v == left as i32 + 1));

    // A bad peer is refused before anything is posted, naming the op.
    let e = comm.p2p_batch([P2POp::send(&out, right), P2POp::send(&out, size)]).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("ops[1].peer"), "{e}");
}

fn child() {
    let comm = ok("init", Comm::from_env());
    let (rank, size) = (comm.rank(), comm.size());
    assert_eq!(size, RANKS);
    assert!(comm.local_rank() < comm.local_size());
    let r = rank as i64;

    p2p_batch(&comm);

    dtype_sweep::<f32>(&comm, "f32");
    dtype_sweep::<f64>(&comm, "f64");
    dtype_sweep::<F16>(&comm, "f16");
    dtype_sweep::<Bf16>(&comm, "bf16");
    dtype_sweep::<i8>(&comm, "i8");
    dtype_sweep::<u8>(&comm, "u8");
    dtype_sweep::<i32>(&comm, "i32");
    dtype_sweep::<u32>(&comm, "u32");
    dtype_sweep::<i64>(&comm, "i64");
    dtype_sweep::<u64>(&comm, "u64");

    // Ops on integers: wrap, truncating average.
    let mut p = [r as i32 + 2, -(r as i32) - 1];
    ok("prod", comm.allreduce_in_place(&mut p, Op::Prod));
    assert_eq!(p, [2 * 3 * 4, -6]);
    let mut a = [r as i32 * 2 + 1];
    ok("avg", comm.allreduce_in_place(&mut a, Op::Avg));
    assert_eq!(a, [(1 + 3 + 5) / 3]);
    let mut m = [r as u8 + 10, 255 - r as u8];
    ok("min", comm.allreduce_in_place(&mut m, Op::Min));
    assert_eq!(m, [10, 253]);
    let mut w = [200u8];
    ok("wrap", comm.allreduce_in_place(&mut w, Op::Sum));
    assert_eq!(w, [(600 % 256) as u8]);

    // A large buffer (several shared-memory slots, pipelined algorithms).
    let big = 300_007;
    let send: Vec<f32> = (0..big).map(|i| (i % 1000) as f32 + r as f32).collect();
    let mut recv = vec![0f32; big];
    ok("big allreduce", comm.allreduce(&send, &mut recv, Op::Sum));
    assert!(recv.iter().enumerate().all(|(i, &v)| v == 3.0 * (i % 1000) as f32 + 3.0));

    // reduce / reduce_in_place.
    let contrib: Vec<i64> = vals(|i| r * 10 + i as i64, 4);
    let mut out = vec![0i64; 4];
    ok("reduce", comm.reduce(&contrib, if rank == 2 { Some(&mut out) } else { None }, Op::Sum, 2));
    if rank == 2 {
        assert_eq!(out, vals::<i64>(|i| 30 + 3 * i as i64, 4));
    }
    let mut c2 = contrib.clone();
    ok("reduce in place", comm.reduce_in_place(&mut c2, Op::Max, 0));
    if rank == 0 {
        assert_eq!(c2, vals::<i64>(|i| 20 + i as i64, 4));
    }

    // allgather in place.
    let mut ag = vec![-1i32; 2 * size];
    ag[2 * rank] = r as i32;
    ag[2 * rank + 1] = 100 + r as i32;
    ok("allgather in place", comm.allgather_in_place(&mut ag));
    assert_eq!(ag, [0, 100, 1, 101, 2, 102]);

    // allgatherv: rank i contributes i + 1 elements, placed with a gap of one.
    let counts: Vec<usize> = (0..size).map(|i| i + 1).collect();
    let displs = vec![0usize, 2, 5];
    let mine = vec![r as u32 * 10; rank + 1];
    let mut agv = vec![99u32; 8];
    ok("allgatherv", comm.allgatherv(&mine, &mut agv, &counts, &displs));
    assert_eq!(agv, [0, 99, 10, 10, 99, 20, 20, 20]);
    let mut agv2 = vec![99u32; 8];
    agv2[displs[rank]..displs[rank] + rank + 1].fill(r as u32 * 10);
    ok("allgatherv in place", comm.allgatherv_in_place(&mut agv2, &counts, &displs));
    assert_eq!(agv2, agv);

    // reduce_scatter: block j of every rank's send is (j + 1) * (r + 1).
    let rs_send: Vec<f64> = (0..2 * size).map(|j| ((j / 2) as f64 + 1.0) * (r as f64 + 1.0)).collect();
    let mut rs = [0f64; 2];
    ok("reduce_scatter", comm.reduce_scatter(&rs_send, &mut rs, Op::Sum));
    assert_eq!(rs, [(r as f64 + 1.0) * 6.0; 2]);
    let mut rs_ip = rs_send.clone();
    ok("reduce_scatter in place", comm.reduce_scatter_in_place(&mut rs_ip, Op::Sum));
    assert_eq!(&rs_ip[2 * rank..2 * rank + 2], &rs);

    // alltoall: element for rank j from rank r is 10 r + j.
    let a2a: Vec<i8> = (0..size).map(|j| (10 * r + j as i64) as i8).collect();
    let mut a2a_out = vec![0i8; size];
    ok("alltoall", comm.alltoall(&a2a, &mut a2a_out));
    assert_eq!(a2a_out, (0..size).map(|i| (10 * i + rank) as i8).collect::<Vec<_>>());
    let mut a2a_ip = a2a.clone();
    ok("alltoall in place", comm.alltoall_in_place(&mut a2a_ip));
    assert_eq!(a2a_ip, a2a_out);

    // alltoallv: rank r sends j + 1 copies of (10 r + j) to rank j.
    let scounts: Vec<usize> = (0..size).map(|j| j + 1).collect();
    let sdispls: Vec<usize> = (0..size).map(|j| j * (j + 1) / 2).collect();
    let send_v: Vec<u64> = (0..size).flat_map(|j| std::iter::repeat_n((10 * r) as u64 + j as u64, j + 1)).collect();
    let rcounts = vec![rank + 1; size];
    let rdispls: Vec<usize> = (0..size).map(|i| i * (rank + 1)).collect();
    let mut recv_v = vec![0u64; size * (rank + 1)];
    ok("alltoallv", comm.alltoallv(&send_v, &scounts, &sdispls, &mut recv_v, &rcounts, &rdispls));
    let want_v: Vec<u64> = (0..size).flat_map(|i| std::iter::repeat_n((10 * i + rank) as u64, rank + 1)).collect();
    assert_eq!(recv_v, want_v);
    // In place with equal counts: one element to and from each rank.
    let ones = vec![1usize; size];
    let seq: Vec<usize> = (0..size).collect();
    let mut ip_v: Vec<u64> = (0..size).map(|j| (10 * r) as u64 + j as u64).collect();
    ok("alltoallv in place", comm.alltoallv_in_place(&mut ip_v, &ones, &seq, &ones, &seq));
    assert_eq!(ip_v, (0..size).map(|i| (10 * i + rank) as u64).collect::<Vec<_>>());

    // gather / scatter, plain and in place, root 1.
    let g_send = [r as f32, -(r as f32)];
    let mut g_out = vec![0f32; 2 * size];
    ok("gather", comm.gather(&g_send, if rank == 1 { Some(&mut g_out) } else { None }, 1));
    if rank == 1 {
        assert_eq!(g_out, [0.0, -0.0, 1.0, -1.0, 2.0, -2.0]);
    }
    let mut g_ip = if rank == 1 { vec![0f32, 0.0, 1.0, -1.0, 0.0, 0.0] } else { g_send.to_vec() };
    ok("gather in place", comm.gather_in_place(&mut g_ip, 1));
    if rank == 1 {
        assert_eq!(g_ip, g_out);
    }
    let table: Vec<i32> = (0..2 * size as i32).collect();
    let mut part = [0i32; 2];
    ok("scatter", comm.scatter(if rank == 1 { Some(&table[..]) } else { None }, &mut part, 1));
    assert_eq!(part, [2 * r as i32, 2 * r as i32 + 1]);
    let mut s_ip = if rank == 1 { table.clone() } else { vec![0i32; 2] };
    ok("scatter in place", comm.scatter_in_place(&mut s_ip, 1));
    let mine = if rank == 1 { &s_ip[2..4] } else { &s_ip[..] };
    assert_eq!(mine, &part);

    // Point to point around the ring.
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    let msg = [r as u16 as i32; 3];
    let mut got = [0i32; 3];
    if rank % 2 == 0 {
        ok("send", comm.send(&msg, next));
        ok("recv", comm.recv(&mut got, prev));
    } else {
        ok("recv", comm.recv(&mut got, prev));
        ok("send", comm.send(&msg, next));
    }
    assert_eq!(got, [prev as i32; 3]);
    ok("barrier", comm.barrier());

    // Asynchronous: several operations in flight, completed out of order, then p2p async.
    let x = vec![r as f32 + 1.0; 1000];
    let mut xs = vec![0f32; 1000];
    let mut y = vec![F16::from_f32(r as f32); 16];
    let mut z = [0u8; 4];
    let mut ring = [0i64; 2];
    let ring_msg = [r * 7, r * 7 + 1];
    ok(
        "async",
        comm.scope(|s| {
            let r1 = s.allreduce(&x, &mut xs, Op::Sum)?;
            let r2 = s.allreduce_in_place(&mut y, Op::Max)?;
            if rank == 0 {
                z = [1, 2, 3, 4];
            }
            let mut r3 = s.broadcast(&mut z, 0)?;
            let rr = s.recv(&mut ring, prev)?;
            let rs = s.send(&ring_msg, next)?;
            let rb = s.barrier()?;
            while !r3.test()? {
                std::thread::sleep(Duration::from_micros(100));
            }
            r2.wait()?;
            r1.wait()?;
            rs.wait()?;
            rr.wait()?;
            rb.wait()?;
            r3.wait()
        }),
    );
    assert!(xs.iter().all(|&v| v == 6.0));
    assert!(y.iter().all(|&v| v == F16::from_f32(2.0)));
    assert_eq!(z, [1, 2, 3, 4]);
    assert_eq!(ring, [prev as i64 * 7, prev as i64 * 7 + 1]);

    // Every other collective asynchronously, checked against the blocking results above.
    let mut ag_a = vec![0i32; 2 * size];
    let mut rs_a = [0f64; 2];
    let mut a2a_a = vec![0i8; size];
    let mut agv_a = vec![99u32; 8];
    let mut v_a = vec![0u64; size * (rank + 1)];
    let mut g_a = vec![0f32; 2 * size];
    let mut part_a = [0i32; 2];
    let mut red_a = vec![0i64; 4];
    let ag_send = [r as i32, 100 + r as i32];
    let mine_v = vec![r as u32 * 10; rank + 1];
    ok(
        "async 2",
        comm.scope(|s| {
            let reqs = vec![
                s.allgather(&ag_send, &mut ag_a)?,
                s.reduce_scatter(&rs_send, &mut rs_a, Op::Sum)?,
                s.alltoall(&a2a, &mut a2a_a)?,
                s.allgatherv(&mine_v, &mut agv_a, &counts, &displs)?,
                s.alltoallv(&send_v, &scounts, &sdispls, &mut v_a, &rcounts, &rdispls)?,
                s.gather(&g_send, if rank == 1 { Some(&mut g_a[..]) } else { None }, 1)?,
                s.scatter(if rank == 1 { Some(&table[..]) } else { None }, &mut part_a, 1)?,
                s.reduce(&contrib, if rank == 2 { Some(&mut red_a[..]) } else { None }, Op::Sum, 2)?,
            ];
            for q in reqs.into_iter().rev() {
                q.wait()?;
            }
            Ok(())
        }),
    );
    assert_eq!(ag_a, ag);
    assert_eq!(rs_a, rs);
    assert_eq!(a2a_a, a2a_out);
    assert_eq!(agv_a, agv);
    assert_eq!(v_a, recv_v);
    if rank == 1 {
        assert_eq!(g_a, g_out);
    }
    assert_eq!(part_a, part);
    if rank == 2 {
        assert_eq!(red_a, out);
    }

    // split: even and odd ranks; rank 2 asks for no color in a second split.
    let sub = ok("split", comm.split(Some(rank as u32 % 2), -(r as i32), None)).unwrap();
    let want_size = if rank % 2 == 0 { 2 } else { 1 };
    assert_eq!(sub.size(), want_size);
    let mut s = [r as i32];
    ok("sub allreduce", sub.allreduce_in_place(&mut s, Op::Sum));
    assert_eq!(s[0], if rank % 2 == 0 { 2 } else { 1 });
    if rank == 0 {
        assert_eq!(sub.rank(), 1, "key -rank orders rank 2 first");
    }
    let none = ok("split nocolor", comm.split(if rank == 2 { None } else { Some(0) }, 0, None));
    assert_eq!(none.is_none(), rank == 2);
    drop(none);
    ok("destroy sub", sub.destroy());

    // Errors: a receive nobody matches times out on a dup with a short deadline, on rank 0
    // only; the others go on and the world communicator stays usable.
    let cfg = Config { timeout: Some(Duration::from_millis(400)), name: Some("short".into()), ..Config::default() };
    let short = ok("split with config", comm.split(Some(0), r as i32, Some(&cfg))).unwrap();
    if rank == 0 {
        let mut never = [0u8; 4];
        let err = short.recv(&mut never, 1).unwrap_err();
        assert_eq!(err.status(), Status::Timeout, "{err}");
        assert!(!err.message().is_empty());
        eprintln!("expected timeout: {err}");
    }
    drop(short);
    ok("dup", comm.dup()).barrier().unwrap();
    ok("final barrier", comm.barrier());
    ok("destroy", comm.destroy());
    println!("rank {rank}: all Rust binding checks passed");
}
