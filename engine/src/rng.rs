//! Named, seeded random number generators, identical on every host.
//!
//! Workloads, fuzzing and the trace command draw from [`Xoshiro256StarStar`]
//! (Blackman and Vigna's xoshiro256**), seeded through SplitMix64 as its
//! authors recommend. Both are defined over 64-bit integers only, so the same
//! seed gives the same stream on x86_64 and aarch64.

/// SplitMix64, used to expand a 64-bit seed into generator state.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// Next output.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// xoshiro256**.
#[derive(Clone, Debug)]
pub struct Xoshiro256StarStar {
    s: [u64; 4],
}

impl Xoshiro256StarStar {
    /// The algorithm's name, recorded in reports next to the seed.
    pub const NAME: &'static str = "xoshiro256**";

    /// Seed through SplitMix64.
    pub fn seed_from_u64(seed: u64) -> Self {
        let mut sm = SplitMix64(seed);
        Xoshiro256StarStar { s: std::array::from_fn(|_| sm.next_u64()) }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_known_answers() {
        // Reference outputs of SplitMix64 seeded with 1234567.
        let mut s = SplitMix64(1234567);
        assert_eq!(s.next_u64(), 6457827717110365317);
        assert_eq!(s.next_u64(), 3203168211198807973);
    }

    #[test]
    fn xoshiro_known_answers() {
        // State {1, 2, 3, 4}: the reference implementation's first outputs.
        let mut x = Xoshiro256StarStar { s: [1, 2, 3, 4] };
        assert_eq!(x.next_u64(), 11520);
        assert_eq!(x.next_u64(), 0);
        assert_eq!(x.next_u64(), 1509978240);
        assert_eq!(x.next_u64(), 1215971899390074240);
    }

    #[test]
    fn below_stays_in_range() {
        let mut x = Xoshiro256StarStar::seed_from_u64(7);
        assert!((0..10_000).all(|_| x.below(13) < 13));
    }
}
