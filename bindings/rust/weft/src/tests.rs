//! Single-process tests: a one-rank communicator from a unique id, argument checks made before
//! calling C, and errors the library reports. The multi-rank tests are in tests/multirank.rs.
use crate::*;

fn solo() -> Comm {
    let id = UniqueId::new().expect("weft_get_unique_id");
    let cfg =
        Config { timeout: Some(std::time::Duration::from_secs(20)), name: Some("solo".into()), ..Config::default() };
    Comm::init(&id, 0, 1, Some(&cfg)).expect("one-rank weft_comm_init")
}

#[test]
fn version_matches_the_header() {
    let v = version().unwrap();
    assert_eq!(v.abi, sys::WEFT_ABI_VERSION as u32);
    assert_eq!((v.major, v.minor, v.patch), (0, 1, 0));
}

#[test]
fn status_strings_and_codes() {
    assert!(Status::Timeout.description().starts_with("WEFT_ERR_TIMEOUT"));
    assert_eq!(Status::from_code(sys::WEFT_ERR_REMOTE), Some(Status::Remote));
    assert_eq!(Status::from_code(sys::WEFT_OK), None);
    assert_eq!(Status::from_code(sys::WEFT_IN_PROGRESS), None);
    assert_eq!(Status::from_code(77), Some(Status::Unknown(77)));
    for c in 1..=9 {
        assert_eq!(Status::from_code(c).unwrap().code(), c);
    }
    assert!(status_string(1234).contains("UNKNOWN"));
}

#[test]
fn library_errors_carry_status_and_message() {
    let id = UniqueId::new().unwrap();
    let err = Comm::init(&id, 3, 2, None).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("weft_comm_init"), "{err}");
    assert!(err.message().contains("rank"), "{err}");
    assert!(err.to_string().contains("WEFT_ERR_INVALID_ARGUMENT"), "{err}");
    assert_eq!(last_error(), err.message());
}

#[test]
fn config_name_with_nul_is_rejected() {
    let id = UniqueId::new().unwrap();
    let cfg = Config { name: Some("a\0b".into()), ..Config::default() };
    assert_eq!(Comm::init(&id, 0, 1, Some(&cfg)).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn unique_id_bytes_round_trip_and_stay_secret() {
    let id = UniqueId::new().unwrap();
    let back = UniqueId::from_bytes(id.to_bytes());
    assert_eq!(back.to_bytes(), id.to_bytes());
    assert_eq!(format!("{id:?}"), "UniqueId(..)");
}

#[test]
fn one_rank_collectives() {
    let comm = solo();
    assert_eq!((comm.rank(), comm.size(), comm.local_rank(), comm.local_size()), (0, 1, 0, 1));

    let send = [1.5f64, -2.0, 3.25];
    let mut recv = [0f64; 3];
    comm.allreduce(&send, &mut recv, Op::Sum).unwrap();
    assert_eq!(recv, send);
    let mut buf = [F16::from_f32(1.5), F16::from_f32(-0.25)];
    comm.allreduce_in_place(&mut buf, Op::Max).unwrap();
    assert_eq!(buf, [F16::from_f32(1.5), F16::from_f32(-0.25)]);
    let mut ints = [7i64, -9];
    comm.broadcast(&mut ints, 0).unwrap();
    comm.reduce_in_place(&mut ints, Op::Prod, 0).unwrap();
    assert_eq!(ints, [7, -9]);
    let mut out = [0u8; 2];
    comm.allgather(&[4u8, 5], &mut out).unwrap();
    assert_eq!(out, [4, 5]);
    comm.alltoall(&[9u8, 8], &mut out).unwrap();
    assert_eq!(out, [9, 8]);
    let mut bf = [Bf16::ZERO; 2];
    comm.reduce_scatter(&[Bf16::ONE, Bf16::from_f32(2.0)], &mut bf, Op::Sum).unwrap();
    assert_eq!(bf, [Bf16::ONE, Bf16::from_f32(2.0)]);
    comm.barrier().unwrap();
    // Empty buffers are fine.
    comm.allreduce::<u32>(&[], &mut [], Op::Sum).unwrap();
    comm.allgather_in_place::<i8>(&mut []).unwrap();
}

#[test]
fn lengths_are_checked_before_calling_c() {
    let comm = solo();
    let mut two = [0f32; 2];
    let e = comm.allreduce(&[1.0f32; 3], &mut two, Op::Sum).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().starts_with("allreduce:"), "{e}");
    assert_eq!(comm.broadcast(&mut two, 1).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(comm.allgather(&[1.0f32; 3], &mut two).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(comm.reduce(&[1.0f32; 2], None, Op::Sum, 0).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(comm.gather(&[1.0f32; 2], None, 0).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(comm.scatter::<f32>(None, &mut two, 0).unwrap_err().status(), Status::InvalidArgument);
    assert_eq!(comm.send(&[1u8], 1).unwrap_err().status(), Status::InvalidArgument);
    let e = comm.allgatherv(&[1.0f32; 2], &mut two, &[2, 0], &[0]).unwrap_err();
    assert!(e.message().contains("entries"), "{e}");
    let e = comm.allgatherv(&[1.0f32; 2], &mut two, &[2], &[1]).unwrap_err();
    assert!(e.message().contains("beyond"), "{e}");
    let e = comm.allgatherv(&[1.0f32; 1], &mut two, &[2], &[0]).unwrap_err();
    assert!(e.message().contains("counts[0]"), "{e}");
}

#[test]
fn async_requests_in_a_scope() {
    let comm = solo();
    let send = [1u32, 2, 3];
    let mut recv = [0u32; 3];
    let mut inplace = [5i32; 4];
    let mut never_waited = [1.0f32; 8];
    comm.scope(|s| {
        let mut r1 = s.allreduce(&send, &mut recv, Op::Sum)?;
        let r2 = s.allreduce_in_place(&mut inplace, Op::Min)?;
        let _r3 = s.allreduce_in_place(&mut never_waited, Op::Sum)?; // dropped: waits
        while !r1.test()? {
            std::thread::yield_now();
        }
        r1.wait()?;
        r2.wait()?;
        s.barrier()?.wait()
    })
    .unwrap();
    assert_eq!(recv, send);
    assert_eq!(inplace, [5; 4]);
    assert_eq!(never_waited, [1.0; 8]);

    // A forgotten request is still completed by the scope before the buffer is released.
    let mut buf = vec![3u64; 1 << 16];
    comm.scope(|s| {
        std::mem::forget(s.allreduce_in_place(&mut buf, Op::Sum).unwrap());
    });
    assert!(buf.iter().all(|&v| v == 3));

    // An argument error surfaces from the start call, not later.
    let mut odd = [0f32; 3];
    let err = comm.scope(|s| s.allreduce(&[1.0f32; 2], &mut odd, Op::Sum).map(|_| ())).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
}

#[test]
fn split_dup_and_abort() {
    let comm = solo();
    assert!(comm.split(None, 0, None).unwrap().is_none());
    let sub = comm.split(Some(3), 0, None).unwrap().unwrap();
    assert_eq!(sub.size(), 1);
    let dup = comm.dup().unwrap();
    dup.barrier().unwrap();
    let handle = dup.abort_handle();
    std::thread::scope(|t| {
        t.spawn(move || handle.abort().unwrap());
    });
    let err = dup.barrier().unwrap_err();
    assert_eq!(err.status(), Status::Aborted, "{err}");
    dup.destroy().unwrap();
    sub.destroy().unwrap();
    comm.barrier().unwrap(); // the parent is unaffected
}
