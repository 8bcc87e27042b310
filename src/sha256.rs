//! Incremental SHA-256 (FIPS 180-4), written for this crate.
//!
//! Why here: the browser runtime verifies a 250 MB+ model while it streams through the loader,
//! and WebCrypto only offers a one-shot `digest()` over a whole buffer (which would mean keeping
//! the whole file beside the wasm copy). `Sha256::update` takes any number of chunks of any size.

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// An incremental SHA-256 hasher.
#[derive(Clone)]
pub struct Sha256 {
    state: [u32; 8],
    /// Bytes not yet forming a whole 64-byte block.
    buf: [u8; 64],
    buf_len: usize,
    /// Total bytes hashed so far.
    len: u64,
}

impl Default for Sha256 {
    fn default() -> Self {
        Self::new()
    }
}

impl Sha256 {
    pub fn new() -> Self {
        Sha256 { state: H0, buf: [0; 64], buf_len: 0, len: 0 }
    }

    /// Bytes hashed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Feed more bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len = self.len.wrapping_add(data.len() as u64);
        if self.buf_len > 0 {
            let take = (64 - self.buf_len).min(data.len());
            self.buf[self.buf_len..self.buf_len + take].copy_from_slice(&data[..take]);
            self.buf_len += take;
            data = &data[take..];
            if self.buf_len < 64 {
                return;
            }
            let block = self.buf;
            compress(&mut self.state, &block);
            self.buf_len = 0;
        }
        let mut blocks = data.chunks_exact(64);
        for block in &mut blocks {
            compress(&mut self.state, block.try_into().unwrap());
        }
        let rest = blocks.remainder();
        self.buf[..rest.len()].copy_from_slice(rest);
        self.buf_len = rest.len();
    }

    /// The digest of everything fed so far (the hasher itself is left untouched).
    pub fn digest(&self) -> [u8; 32] {
        let mut state = self.state;
        let bit_len = self.len.wrapping_mul(8);
        let mut block = [0u8; 64];
        block[..self.buf_len].copy_from_slice(&self.buf[..self.buf_len]);
        block[self.buf_len] = 0x80;
        if self.buf_len >= 56 {
            compress(&mut state, &block);
            block = [0u8; 64];
        }
        block[56..].copy_from_slice(&bit_len.to_be_bytes());
        compress(&mut state, &block);
        let mut out = [0u8; 32];
        for (o, s) in out.chunks_exact_mut(4).zip(state.iter()) {
            o.copy_from_slice(&s.to_be_bytes());
        }
        out
    }

    /// The digest as 64 lowercase hex digits.
    pub fn hex_digest(&self) -> String {
        to_hex(&self.digest())
    }
}

/// SHA-256 of one buffer.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(data);
    h.digest()
}

/// Lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

/// One 64-byte block. The message schedule is kept as a rolling 16-word window and the rounds
/// are unrolled (eight at a time, rotating the variable names instead of moving values).
#[inline(always)]
fn compress(state: &mut [u32; 8], block: &[u8; 64]) {
    let mut w = [0u32; 16];
    for (i, c) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;

    macro_rules! round {
        ($a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $f:ident, $g:ident, $h:ident, $k:expr, $w:expr) => {
            let t1 = $h
                .wrapping_add($e.rotate_right(6) ^ $e.rotate_right(11) ^ $e.rotate_right(25))
                .wrapping_add(($e & $f) ^ (!$e & $g))
                .wrapping_add($k)
                .wrapping_add($w);
            let t2 = ($a.rotate_right(2) ^ $a.rotate_right(13) ^ $a.rotate_right(22))
                .wrapping_add(($a & $b) ^ ($a & $c) ^ ($b & $c));
            $d = $d.wrapping_add(t1);
            $h = t1.wrapping_add(t2);
        };
    }
    macro_rules! schedule {
        ($i:expr) => {{
            let w15 = w[($i + 1) & 15];
            let w2 = w[($i + 14) & 15];
            let s0 = w15.rotate_right(7) ^ w15.rotate_right(18) ^ (w15 >> 3);
            let s1 = w2.rotate_right(17) ^ w2.rotate_right(19) ^ (w2 >> 10);
            w[$i & 15] = w[$i & 15].wrapping_add(s0).wrapping_add(w[($i + 9) & 15]).wrapping_add(s1);
            w[$i & 15]
        }};
    }
    macro_rules! eight {
        ($base:expr, $wexpr:ident) => {
            round!(a, b, c, d, e, f, g, h, K[$base], $wexpr!($base));
            round!(h, a, b, c, d, e, f, g, K[$base + 1], $wexpr!($base + 1));
            round!(g, h, a, b, c, d, e, f, K[$base + 2], $wexpr!($base + 2));
            round!(f, g, h, a, b, c, d, e, K[$base + 3], $wexpr!($base + 3));
            round!(e, f, g, h, a, b, c, d, K[$base + 4], $wexpr!($base + 4));
            round!(d, e, f, g, h, a, b, c, K[$base + 5], $wexpr!($base + 5));
            round!(c, d, e, f, g, h, a, b, K[$base + 6], $wexpr!($base + 6));
            round!(b, c, d, e, f, g, h, a, K[$base + 7], $wexpr!($base + 7));
        };
    }
    macro_rules! plain {
        ($i:expr) => {
            w[$i]
        };
    }
    eight!(0, plain);
    eight!(8, plain);
    eight!(16, schedule);
    eight!(24, schedule);
    eight!(32, schedule);
    eight!(40, schedule);
    eight!(48, schedule);
    eight!(56, schedule);
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        *s = s.wrapping_add(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(data: &[u8]) -> String {
        to_hex(&sha256(data))
    }

    // FIPS 180-4 / NIST CAVP example vectors.
    #[test]
    fn known_vectors() {
        assert_eq!(hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(
            hex(b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
        );
        assert_eq!(
            hex(b"The quick brown fox jumps over the lazy dog"),
            "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592"
        );
    }

    #[test]
    fn one_million_a() {
        let mut h = Sha256::new();
        let chunk = [b'a'; 1000];
        for _ in 0..1000 {
            h.update(&chunk);
        }
        assert_eq!(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        assert_eq!(h.len(), 1_000_000);
    }

    #[test]
    fn padding_boundaries_and_chunking_agree() {
        // Lengths around the 55/56/64-byte padding edges, fed whole and in odd-sized pieces.
        let data: Vec<u8> = (0..300u32).map(|i| (i.wrapping_mul(31) ^ (i >> 3)) as u8).collect();
        for n in [0usize, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 300] {
            let whole = sha256(&data[..n]);
            for step in [1usize, 3, 7, 64, 65] {
                let mut h = Sha256::new();
                for piece in data[..n].chunks(step) {
                    h.update(piece);
                }
                assert_eq!(h.digest(), whole, "n={n} step={step}");
            }
        }
        // 56 bytes of 'a' (the two-block padding case): value from a reference implementation.
        assert_eq!(
            hex(&[b'a'; 56]),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"
        );
    }

    #[test]
    fn digest_does_not_consume() {
        let mut h = Sha256::new();
        h.update(b"ab");
        let _ = h.digest();
        h.update(b"c");
        assert_eq!(h.digest(), sha256(b"abc"));
    }
}
