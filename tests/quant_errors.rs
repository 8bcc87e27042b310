//! Bad input to the quant API gives a typed error with a stable code, never a panic.

use edgellm::gguf::GgmlType;
use edgellm::quant::{
    check_vec_dot, dequantize, is_supported, quantize_activation, row_bytes, vec_dot, vec_dot_type,
    QuantError,
};

#[test]
fn unsupported_types_are_refused_with_their_code() {
    for ty in GgmlType::ALL {
        let bs = ty.block_size() as usize;
        let bytes = ty.bytes_for(bs as u64).unwrap() as usize;
        let src = vec![0u8; bytes];
        let mut dst = vec![0f32; bs];
        let r = dequantize(ty, &src, &mut dst);
        if is_supported(ty) {
            assert!(r.is_ok(), "{ty}: {r:?}");
        } else {
            let e = r.unwrap_err();
            assert_eq!(e.code(), "UNSUPPORTED_TENSOR_TYPE", "{ty}");
            assert!(e.to_string().contains(ty.name()), "{e}");
            let e = vec_dot(ty, &src, &src, bs).unwrap_err();
            assert_eq!(e.code(), "UNSUPPORTED_TENSOR_TYPE", "{ty}");
        }
    }
    // Activation-only formats are not weights.
    for ty in [GgmlType::Q8_1, GgmlType::Q8_K] {
        let n = ty.block_size() as usize;
        let b = vec![0u8; ty.type_size() as usize];
        assert_eq!(
            vec_dot(ty, &b, &b, n).unwrap_err().code(),
            "UNSUPPORTED_TENSOR_TYPE"
        );
    }
}

#[test]
fn vec_dot_type_pairs_like_llama_cpp() {
    use GgmlType::*;
    let pairs = [
        (F32, F32),
        (F16, F16),
        (BF16, BF16),
        (Q4_0, Q8_0),
        (Q5_0, Q8_0),
        (Q8_0, Q8_0),
        (Q4_1, Q8_1),
        (Q5_1, Q8_1),
        (Q2_K, Q8_K),
        (Q3_K, Q8_K),
        (Q4_K, Q8_K),
        (Q5_K, Q8_K),
        (Q6_K, Q8_K),
    ];
    for (w, a) in pairs {
        assert_eq!(vec_dot_type(w), a, "{w}");
    }
}

#[test]
fn wrong_lengths_give_bad_length_or_partial_block() {
    use GgmlType::*;
    // dst not a whole number of blocks
    let e = dequantize(Q4_K, &[0u8; 144], &mut [0f32; 255]).unwrap_err();
    assert_eq!(e.code(), "QUANT_PARTIAL_BLOCK");
    assert!(matches!(
        e,
        QuantError::PartialBlock {
            n: 255,
            block: 256,
            ..
        }
    ));
    // src one byte short / long
    let e = dequantize(Q4_K, &[0u8; 143], &mut [0f32; 256]).unwrap_err();
    assert_eq!(e.code(), "QUANT_BAD_LENGTH");
    assert!(
        matches!(
            e,
            QuantError::BadLength {
                expected: 144,
                got: 143,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        dequantize(Q8_0, &[0u8; 35], &mut [0f32; 32])
            .unwrap_err()
            .code(),
        "QUANT_BAD_LENGTH"
    );
    assert_eq!(
        dequantize(F16, &[0u8; 3], &mut [0f32; 2])
            .unwrap_err()
            .code(),
        "QUANT_BAD_LENGTH"
    );
    // vec_dot: each operand checked
    let w = vec![0u8; 34 * 2];
    let a = vec![0u8; 34 * 2];
    assert!(vec_dot(Q8_0, &w, &a, 64).is_ok());
    assert_eq!(
        vec_dot(Q8_0, &w, &a, 96).unwrap_err().code(),
        "QUANT_BAD_LENGTH"
    );
    assert_eq!(
        vec_dot(Q8_0, &w, &a, 63).unwrap_err().code(),
        "QUANT_PARTIAL_BLOCK"
    );
    assert_eq!(
        vec_dot(Q8_0, &w[..67], &a, 64).unwrap_err().code(),
        "QUANT_BAD_LENGTH"
    );
    assert_eq!(
        vec_dot(Q8_0, &w, &a[..67], 64).unwrap_err().code(),
        "QUANT_BAD_LENGTH"
    );
    // Q4_K weights need Q8_K activations (292 bytes per 256), not Q8_0-sized ones
    let w = vec![0u8; 144];
    assert_eq!(
        vec_dot(Q4_K, &w, &[0u8; 272], 256).unwrap_err().code(),
        "QUANT_BAD_LENGTH"
    );
    assert!(vec_dot(Q4_K, &w, &[0u8; 292], 256).is_ok());
    assert_eq!(
        check_vec_dot(Q4_1, 20, 34, 32).unwrap_err().code(),
        "QUANT_BAD_LENGTH"
    );
    assert!(check_vec_dot(Q4_1, 20, 36, 32).is_ok());
    // quantize_activation: partial block, non-activation type
    let mut out = vec![1u8; 7];
    assert_eq!(
        quantize_activation(Q8_K, &[0.0; 100], &mut out)
            .unwrap_err()
            .code(),
        "QUANT_PARTIAL_BLOCK"
    );
    let e = quantize_activation(Q4_0, &[0.0; 32], &mut out).unwrap_err();
    assert_eq!(e.code(), "QUANT_NOT_ACTIVATION_TYPE");
    assert!(matches!(e, QuantError::NotActivationType { ty: Q4_0 }));
    assert_eq!(
        quantize_activation(IQ2_XS, &[0.0; 256], &mut out)
            .unwrap_err()
            .code(),
        "QUANT_NOT_ACTIVATION_TYPE"
    );
    // row_bytes
    assert_eq!(row_bytes(Q6_K, 512).unwrap(), 420);
    assert_eq!(
        row_bytes(Q6_K, 100).unwrap_err().code(),
        "QUANT_PARTIAL_BLOCK"
    );
}

#[test]
fn quantize_activation_replaces_dst_contents() {
    let mut out = vec![0xaau8; 1000];
    quantize_activation(GgmlType::Q8_0, &[1.0; 64], &mut out).unwrap();
    assert_eq!(out.len(), 68);
    quantize_activation(GgmlType::F32, &[2.0; 3], &mut out).unwrap();
    assert_eq!(out, [0, 0, 0, 64, 0, 0, 0, 64, 0, 0, 0, 64]);
}

/// Garbage bytes (any bit pattern, NaN/Inf scales) in supported types never panic.
#[test]
fn arbitrary_bytes_never_panic() {
    let mut s: u64 = 1;
    for ty in GgmlType::ALL.into_iter().filter(|t| is_supported(*t)) {
        let n = ty.block_size() as usize * 4;
        let len = ty.bytes_for(n as u64).unwrap() as usize;
        for _ in 0..50 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s as u8
                })
                .collect();
            let mut out = vec![0f32; n];
            dequantize(ty, &bytes, &mut out).unwrap();
            if edgellm::quant::supports_vec_dot(ty) {
                let a_len = row_bytes(vec_dot_type(ty), n).unwrap();
                let act: Vec<u8> = bytes.iter().cycle().take(a_len).copied().collect();
                let _ = vec_dot(ty, &bytes, &act, n).unwrap();
            }
            let x: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let xn = x.len() / 256 * 256;
            let mut q = Vec::new();
            for a in [
                GgmlType::Q8_0,
                GgmlType::Q8_1,
                GgmlType::Q8_K,
                GgmlType::F16,
                GgmlType::BF16,
            ] {
                quantize_activation(a, &x[..xn], &mut q).unwrap();
            }
        }
    }
}
