//! YCSB's key chooser and workload mixes, ported so that our key popularity is
//! the one YCSB users know.
//!
//! YCSB's `ScrambledZipfianGenerator` does not draw a Zipfian rank over the
//! table directly: it draws a rank over a fixed space of 10^10 items with
//! θ = 0.99 (whose ζ it hard-codes), then hashes the rank with its own 64-bit
//! FNV and takes it modulo the record count. Hot keys are thereby spread over
//! the key space instead of clustering at `user000…0`, which matters for an
//! ordered store (clustered hot keys would share leaves and cache lines). We
//! reproduce the generator, constants and hash exactly, so θ is fixed at 0.99.

use rand::Rng;

/// YCSB's `ScrambledZipfianGenerator.ITEM_COUNT`.
const ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB's `ScrambledZipfianGenerator.ZETAN`: ζ(10^10, 0.99), precomputed there
/// because summing 10^10 terms at start-up would take minutes.
const ZETAN: f64 = 26.469_028_201_783_02;
/// YCSB's `ZipfianGenerator.ZIPFIAN_CONSTANT`.
pub const THETA: f64 = 0.99;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the eight bytes of the value, low
/// byte first, then `Math.abs`.
pub fn fnvhash64(mut val: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= val & 0xff;
        val >>= 8;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    (h as i64).unsigned_abs()
}

/// Zipfian ranks over `ITEM_COUNT` items (Gray et al., "Quickly generating
/// billion-record synthetic databases", as in YCSB's `ZipfianGenerator`),
/// scrambled into `[0, records)`.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    records: u64,
    alpha: f64,
    eta: f64,
    half_pow_theta: f64,
}

impl ScrambledZipfian {
    /// A chooser over key numbers `[0, records)`; `records` must be > 0.
    pub fn new(records: u64) -> Self {
        assert!(records > 0, "callers validate the key count");
        let zeta2 = 1.0 + 0.5f64.powf(THETA);
        let n = ITEM_COUNT as f64;
        ScrambledZipfian {
            records,
            alpha: 1.0 / (1.0 - THETA),
            eta: (1.0 - (2.0 / n).powf(1.0 - THETA)) / (1.0 - zeta2 / ZETAN),
            half_pow_theta: 0.5f64.powf(THETA),
        }
    }

    /// The Zipfian rank (0 = most popular) before scrambling.
    pub fn rank<R: Rng>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * ZETAN;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1;
        }
        let r = (ITEM_COUNT as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(ITEM_COUNT - 1)
    }

    /// A key number in `[0, records)`.
    pub fn next<R: Rng>(&self, rng: &mut R) -> u64 {
        fnvhash64(self.rank(rng)) % self.records
    }
}

/// The YCSB core workloads we support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Update heavy: 50 % reads, 50 % updates.
    A,
    /// Read mostly: 95 % reads, 5 % updates.
    B,
    /// Read only.
    C,
    /// Short ranges: 95 % scans, 5 % inserts.
    E,
}

impl std::str::FromStr for Workload {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.to_ascii_lowercase().as_str() {
            "a" => Ok(Workload::A),
            "b" => Ok(Workload::B),
            "c" => Ok(Workload::C),
            "e" => Ok(Workload::E),
            _ => Err(()),
        }
    }
}

impl Workload {
    /// The letter the `workload` key takes (`a`, `b`, `c`, `e`).
    pub fn name(self) -> &'static str {
        match self {
            Workload::A => "a",
            Workload::B => "b",
            Workload::C => "c",
            Workload::E => "e",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn fnv_matches_ycsb() {
        // Values computed with YCSB's Java `Utils.fnvhash64` logic by hand:
        // for 0 the hash is FNV-1a of eight zero bytes.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnvhash64(0), (h as i64).unsigned_abs());
        assert_ne!(fnvhash64(1), fnvhash64(2));
    }

    #[test]
    fn zipfian_is_skewed_like_ycsb() {
        // With θ = 0.99 over 10^10 items, rank 0 has probability 1/ζ ≈ 3.8 %
        // and rank 1 about 1.9 %.
        let z = ScrambledZipfian::new(1_000_000);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let n = 200_000;
        let mut zero = 0;
        let mut one = 0;
        for _ in 0..n {
            match z.rank(&mut rng) {
                0 => zero += 1,
                1 => one += 1,
                _ => {}
            }
        }
        let p0 = zero as f64 / n as f64;
        let p1 = one as f64 / n as f64;
        assert!((p0 - 1.0 / ZETAN).abs() < 0.003, "p0 = {p0}");
        assert!((p1 - 0.5f64.powf(THETA) / ZETAN).abs() < 0.003, "p1 = {p1}");
        // Scrambling spreads the ten hottest ranks over the key space
        // rather than putting them on keys 0..10.
        let hot: Vec<u64> = (0..10).map(|r| fnvhash64(r) % 1_000_000).collect();
        assert!(hot.iter().filter(|&&k| k < 1000).count() < 3, "{hot:?}");
        for _ in 0..1000 {
            assert!(z.next(&mut rng) < 1_000_000);
        }
    }
}
