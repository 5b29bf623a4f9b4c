//! TPC-C's random functions (clause 2.1.6 and 4.3.2): uniform ranges, NURand,
//! a-strings, n-strings, zip codes and customer last names.
//!
//! The C constants of NURand are fixed here rather than drawn per run, because
//! the spec requires every terminal (for us: every client, whatever its seed)
//! to use the same C per field, and the C used for C_LAST at run time must
//! stand in a given relation to the one used when the data was loaded
//! (clause 2.1.6.1). The test `c_constants_follow_the_rules` checks that relation.

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The generator behind every TPC-C draw, client and loader alike (seedable, fast).
pub type TpccRng = Xoshiro256PlusPlus;

/// C for C_LAST when the database is generated.
pub const C_LAST_LOAD: u32 = 157;
/// C for C_LAST at run time: |C_LAST_RUN - C_LAST_LOAD| must lie in 65..=119
/// and be neither 96 nor 112, so the run-time name distribution differs from
/// the load-time one as the spec intends.
pub const C_LAST_RUN: u32 = 223;
/// C for C_ID (customer ids) at run time.
pub const C_ID: u32 = 259;
/// C for OL_I_ID (item ids) at run time.
pub const C_OL_I_ID: u32 = 7_911;

/// The ten syllables customer last names are built from (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Uniform integer in `lo..=hi` (the spec's "random within [x .. y]").
pub fn uniform(rng: &mut TpccRng, lo: u32, hi: u32) -> u32 {
    rng.gen_range(lo..=hi)
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(rng: &mut TpccRng, a: u32, x: u32, y: u32, c: u32) -> u32 {
    (((uniform(rng, 0, a) | uniform(rng, x, y)) + c) % (y - x + 1)) + x
}

/// Random alphanumeric string whose length is uniform in `lo..=hi`.
pub fn astring(rng: &mut TpccRng, lo: usize, hi: usize) -> String {
    let n = rng.gen_range(lo..=hi);
    (0..n)
        .map(|_| ALNUM[rng.gen_range(0..ALNUM.len())] as char)
        .collect()
}

/// Random numeric string whose length is uniform in `lo..=hi`.
pub fn nstring(rng: &mut TpccRng, lo: usize, hi: usize) -> String {
    let n = rng.gen_range(lo..=hi);
    (0..n)
        .map(|_| (b'0' + rng.gen_range(0..10u8)) as char)
        .collect()
}

/// Zip code: a 4-digit n-string followed by "11111" (clause 4.3.2.7).
pub fn zip(rng: &mut TpccRng) -> String {
    let mut s = nstring(rng, 4, 4);
    s.push_str("11111");
    s
}

/// Two random upper-case letters (state codes).
pub fn state(rng: &mut TpccRng) -> String {
    (0..2)
        .map(|_| (b'A' + rng.gen_range(0..26u8)) as char)
        .collect()
}

/// An a-string of 26..=50 characters, with "ORIGINAL" inserted at a random
/// place in 10 % of the rows (I_DATA and S_DATA, clause 4.3.3.1).
pub fn data_with_original(rng: &mut TpccRng) -> String {
    let mut s = astring(rng, 26, 50);
    if rng.gen_range(0..10) == 0 {
        let at = rng.gen_range(0..=s.len() - 8);
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    s
}

/// The customer last name for a number in 0..=999: the syllables of its three digits.
pub fn last_name(num: u32) -> String {
    let n = num as usize;
    let mut s = String::with_capacity(15);
    s.push_str(SYLLABLES[(n / 100) % 10]);
    s.push_str(SYLLABLES[(n / 10) % 10]);
    s.push_str(SYLLABLES[n % 10]);
    s
}

/// The last-name number of a customer drawn at run time: NURand(255, 0, 999).
pub fn run_last_name_num(rng: &mut TpccRng) -> u32 {
    nurand(rng, 255, 0, 999, C_LAST_RUN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn c_constants_follow_the_rules() {
        let d = C_LAST_RUN.abs_diff(C_LAST_LOAD);
        assert!((65..=119).contains(&d) && d != 96 && d != 112, "delta {d}");
        const { assert!(C_LAST_RUN <= 255 && C_LAST_LOAD <= 255 && C_ID <= 1023 && C_OL_I_ID <= 8191) };
    }

    #[test]
    fn last_names_are_built_from_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = TpccRng::seed_from_u64(1);
        let mut hits = vec![0u32; 3001];
        for _ in 0..200_000 {
            let v = nurand(&mut rng, 1023, 1, 3000, C_ID);
            assert!((1..=3000).contains(&v));
            hits[v as usize] += 1;
        }
        // A uniform draw would put about 67 in each bucket; NURand's OR makes
        // some ids several times more popular than the mean.
        let max = *hits.iter().max().unwrap();
        assert!(max > 3 * 200_000 / 3000, "max bucket {max}: not skewed");
    }

    #[test]
    fn strings_have_the_asked_lengths() {
        let mut rng = TpccRng::seed_from_u64(2);
        for _ in 0..1000 {
            let s = astring(&mut rng, 8, 16);
            assert!((8..=16).contains(&s.len()));
            let d = data_with_original(&mut rng);
            assert!((26..=50).contains(&d.len()));
            assert_eq!(zip(&mut rng).len(), 9);
        }
    }
}
