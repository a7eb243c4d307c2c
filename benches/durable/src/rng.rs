//! The delays: xorshift64* seeded with 42, the same sequence for every
//! system.

/// xorshift64* (Vigna): `x ^= x >> 12; x ^= x << 25; x ^= x >> 27;`
/// then `x * 0x2545F4914F6CDD1D`.
pub struct XorShift64Star(u64);

impl XorShift64Star {
    /// The generator seeded with 42.
    pub fn seeded() -> Self {
        XorShift64Star(42)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `n` delays in milliseconds, uniform in `[0, span_ms)`.
pub fn delays_ms(n: usize, span_ms: u64) -> Vec<u64> {
    let mut rng = XorShift64Star::seeded();
    (0..n).map(|_| rng.next_u64() % span_ms).collect()
}
