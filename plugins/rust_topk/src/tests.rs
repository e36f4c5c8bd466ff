// The codec's own tests (cargo test --offline; ctest runs them as plugin.rust_topk_cargo_test).
// Expected values are written out by hand from the format in lib.rs's header.
use super::*;

fn encoded(values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; bytes(values.len())];
    encode(values, &mut out).expect("encode");
    out
}

fn pairs(enc: &[u8]) -> Vec<(u32, f32)> {
    enc[HEADER..]
        .chunks_exact(PAIR)
        .map(|p| (u32::from_le_bytes(p[..4].try_into().unwrap()), f32::from_le_bytes(p[4..].try_into().unwrap())))
        .collect()
}

#[test]
fn kept_and_bytes_are_ceil_count_over_16() {
    let cases = [(0, 0), (1, 1), (15, 1), (16, 1), (17, 2), (32, 2), (33, 3), (1000, 63)];
    for (count, k) in cases {
        assert_eq!(kept(count), k, "count {count}");
        assert_eq!(bytes(count), 4 + 8 * k, "count {count}");
        assert_eq!(weft_topk_bytes(count), 4 + 8 * k);
        assert_eq!(weft_topk_kept(count), k);
    }
}

#[test]
fn keeps_the_largest_magnitudes_in_index_order() {
    // 17 values: k = 2; the largest |x| are -9 (index 12) and 7 (index 3).
    let mut v = vec![0.5f32; 17];
    v[3] = 7.0;
    v[12] = -9.0;
    v[5] = -6.5;
    let enc = encoded(&v);
    assert_eq!(&enc[..4], &17u32.to_le_bytes());
    assert_eq!(pairs(&enc), vec![(3, 7.0), (12, -9.0)]);
}

#[test]
fn ties_go_to_the_lower_index() {
    // 16 values, k = 1: |-3| at 9 and |3| at 2 and 14 tie; index 2 wins.
    let mut v = vec![1.0f32; 16];
    v[9] = -3.0;
    v[2] = 3.0;
    v[14] = 3.0;
    assert_eq!(pairs(&encoded(&v)), vec![(2, 3.0)]);
    // Signed zeros have equal magnitude: the lowest index, with its sign.
    let z = [-0.0f32, 0.0, -0.0];
    let p = pairs(&encoded(&z));
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].0, 0);
    assert_eq!(p[0].1.to_bits(), (-0.0f32).to_bits());
}

#[test]
fn nan_and_inf_rank_above_every_number() {
    let mut v = vec![1e30f32; 33]; // k = 3
    v[7] = f32::NAN;
    v[20] = f32::NEG_INFINITY;
    let p = pairs(&encoded(&v));
    assert_eq!(p.len(), 3);
    assert_eq!(p[0].0, 0); // the first of the 1e30 ties
    assert_eq!(p[1].0, 7);
    assert!(p[1].1.is_nan());
    assert_eq!(p[2], (20, f32::NEG_INFINITY));
}

#[test]
fn decode_writes_zeros_and_the_kept_values() {
    let v: Vec<f32> = (0..40).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.25).collect();
    let enc = encoded(&v);
    let mut out = vec![123.0f32; v.len()];
    decode(&enc, &mut out).expect("decode");
    let kept_pairs = pairs(&enc);
    assert_eq!(kept_pairs.len(), 3);
    for (i, x) in out.iter().enumerate() {
        match kept_pairs.iter().find(|p| p.0 as usize == i) {
            Some(_) => assert_eq!(x.to_bits(), v[i].to_bits()),
            None => assert_eq!(x.to_bits(), 0.0f32.to_bits(), "index {i} was not kept: it decodes to +0"),
        }
    }
    // Through the C entries too.
    let mut enc2 = vec![0u8; bytes(v.len())];
    let mut out2 = vec![9.0f32; v.len()];
    unsafe {
        assert_eq!(weft_topk_encode(v.as_ptr(), v.len(), enc2.as_mut_ptr().cast()), 0);
        assert_eq!(weft_topk_decode(enc2.as_ptr().cast(), v.len(), out2.as_mut_ptr()), 0);
    }
    assert_eq!(enc2, enc);
    assert_eq!(out2, out);
}

#[test]
fn empty_input_is_a_bare_count() {
    assert_eq!(encoded(&[]), 0u32.to_le_bytes().to_vec());
    let mut out: [f32; 0] = [];
    unsafe {
        let mut enc = [0u8; 4];
        assert_eq!(weft_topk_encode(std::ptr::null(), 0, enc.as_mut_ptr().cast()), 0);
        assert_eq!(weft_topk_decode(enc.as_ptr().cast(), 0, out.as_mut_ptr()), 0);
    }
}

#[test]
fn decode_refuses_bytes_that_are_not_an_encoding() {
    let v = vec![1.0f32; 20]; // k = 2
    let good = encoded(&v);
    let mut out = vec![0.0f32; 20];
    let mut wrong_count = good.clone();
    wrong_count[..4].copy_from_slice(&21u32.to_le_bytes());
    assert_eq!(decode(&wrong_count, &mut out), Err(INVALID_ARGUMENT));
    let mut out_of_range = good.clone();
    out_of_range[HEADER + PAIR..HEADER + PAIR + 4].copy_from_slice(&20u32.to_le_bytes());
    assert_eq!(decode(&out_of_range, &mut out), Err(INVALID_ARGUMENT));
    let mut unsorted = good.clone();
    unsorted[HEADER + PAIR..HEADER + PAIR + 4].copy_from_slice(&0u32.to_le_bytes()); // 0 after 0
    assert_eq!(decode(&unsorted, &mut out), Err(INVALID_ARGUMENT));
    assert_eq!(decode(&good[..good.len() - 1], &mut out), Err(INVALID_ARGUMENT));
    unsafe {
        assert_eq!(weft_topk_decode(wrong_count.as_ptr().cast(), 20, out.as_mut_ptr()), INVALID_ARGUMENT);
    }
}

#[test]
fn a_panic_becomes_internal_at_the_boundary() {
    assert_eq!(guard(|| panic!("deliberate, for the test")), INTERNAL);
    assert_eq!(guard(|| 0), 0);
}

#[test]
fn manifest_is_a_flatbuffer_with_weft_identifier() {
    let mut size = 0usize;
    let p = unsafe { weft_plugin_manifest(&mut size) };
    assert!(!p.is_null());
    assert!(size > 8);
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) };
    assert_eq!(&bytes[4..8], b"WFPM");
}
