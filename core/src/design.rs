//! Designed experiments for `taillab attribute`: which cells (combinations of factor
//! levels) to run, in how many blocks, in what order.
//!
//! **Full factorial.** Every combination of every factor's levels, the first factor
//! outermost. Each cell runs once per block; with treatment coding every main effect and
//! every two-factor interaction is estimable.
//!
//! **Resolution-IV fraction** (every factor at two levels). With `m` base factors there
//! are `2^m` runs; every factor's column is a product ("word") of an *odd* number of base
//! factors, the base factors themselves first. The product of two odd words is even and
//! never a single factor's column, and the product of three odd words is odd: so no main
//! effect is aliased with another main effect or with a two-factor interaction — resolution
//! IV, whatever the words chosen. There are `2^(m-1)` odd words in `m` letters, so `k`
//! factors need `2^m ≥ 2k` runs (`k = 4` in 8, `k ≤ 8` in 16, `k ≤ 16` in 32): the
//! smallest resolution-IV designs (a folded-over resolution-III design). Longer words are
//! taken first, which keeps the aliasing among the two-factor interactions to a minimum.
//! Two-factor interactions are aliased with each other in chains ([`Design::aliases`]):
//! the analysis estimates main effects only in a fraction.
//!
//! **Blocks and order.** The whole design is replicated `blocks` times; within each block
//! the cells run in an order shuffled from a seed, recorded in `design.json`, so a slow
//! drift of the host falls on every cell alike and a block's effect can be taken out.
//! Block `b` of a cell is its run `b` (`points/<cell>/run-<b>/`), which also makes every
//! cell of a block use the same arrival seed (common random numbers).
//!
//! Schema history: `taillab.design/1` — first version.

use crate::arrival::derive_seed;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// Schema of `design.json` (history in the module doc).
pub const DESIGN_SCHEMA: &str = "taillab.design/1";

/// One factor: a configuration key and the levels it takes (the first is the base level).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Factor {
    /// The configuration key (`interference.hogs`, `app.noise`).
    pub key: String,
    /// Its levels as configuration values, the base level first.
    pub levels: Vec<String>,
}

impl Factor {
    /// Parses `KEY=L1|L2|...` (the levels are checked against the key elsewhere).
    pub fn parse(s: &str) -> Result<Factor, crate::error::ValueError> {
        let (k, v) = s.split_once('=').ok_or_else(|| {
            crate::error::ValueError::new(
                s,
                format!("--factor `{s}`: write KEY=L1|L2, e.g. --factor harness.wait=hybrid|spin"),
            )
        })?;
        Ok(Factor {
            key: k.trim().to_string(),
            levels: v.split('|').map(|l| l.trim().to_string()).collect(),
        })
    }
}

/// Which design to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The full factorial when it fits in the run cap, else a resolution-IV fraction.
    Auto,
    /// Every combination.
    Full,
    /// A resolution-IV fraction (every factor at two levels).
    Fractional,
}

impl std::str::FromStr for Want {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || match s {
            "auto" => Ok(Want::Auto),
            "full" => Ok(Want::Full),
            "fractional" => Ok(Want::Fractional),
            _ => Err(format!(
                "design `{s}`: one of auto, full, fractional (resolution IV)"
            )),
        })
    }
}

/// A design: its cells, blocks and run order (`design.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Design {
    /// [`DESIGN_SCHEMA`].
    pub schema: String,
    /// The factors, in the order given; factor `i` is letter `A + i` in generators.
    pub factors: Vec<Factor>,
    /// `full` or `fractional`.
    pub kind: String,
    /// The resolution of a fraction (none for a full factorial: nothing is aliased).
    pub resolution: Option<u32>,
    /// How each added factor's column is made from the base factors, e.g. `D = ABC`.
    pub generators: Vec<String>,
    /// Two-factor interactions that are aliased with each other, one chain per entry
    /// (`["A×B", "C×D"]`): a fraction cannot tell them apart.
    pub aliases: Vec<Vec<String>>,
    /// Each cell's level index per factor.
    pub cells: Vec<Vec<usize>>,
    /// Replicates of the whole design.
    pub blocks: usize,
    /// The seed of the run order.
    pub seed: u64,
    /// Per block, the cells (indices into `cells`) in the order they run.
    pub order: Vec<Vec<usize>>,
}

impl Design {
    /// Runs the design makes: cells × blocks.
    pub fn runs(&self) -> usize {
        self.cells.len() * self.blocks
    }

    /// Factor `i`'s letter in generators and alias chains (A, B, …, Z, then F27, …).
    pub fn letter(i: usize) -> String {
        if i < 26 {
            ((b'A' + i as u8) as char).to_string()
        } else {
            format!("F{}", i + 1)
        }
    }
}

/// Makes the design of `factors` replicated in `blocks` blocks, at most `max_runs` runs,
/// the order shuffled from `seed`. Every error is one line saying what to change.
pub fn plan(
    factors: &[Factor],
    blocks: usize,
    max_runs: usize,
    want: Want,
    seed: u64,
) -> Result<Design, crate::error::Invalid> {
    design(factors, blocks, max_runs, want, seed).map_err(crate::error::Invalid)
}

fn design(
    factors: &[Factor],
    blocks: usize,
    max_runs: usize,
    want: Want,
    seed: u64,
) -> Result<Design, String> {
    check_factors(factors)?;
    if blocks < 2 {
        return Err(format!(
            "--blocks {blocks}: give at least 2 (the CIs resample each cell's runs, one per block)"
        ));
    }
    let full: usize = factors.iter().map(|f| f.levels.len()).product();
    let two_level = factors.iter().all(|f| f.levels.len() == 2);
    let frac_runs = two_level.then(|| fraction_size(factors.len()) * blocks);
    let use_fraction = match want {
        Want::Full => false,
        Want::Fractional => {
            if let Some(f) = factors.iter().find(|f| f.levels.len() != 2) {
                return Err(format!(
                    "--design fractional needs two levels per factor; {} has {}: use --design full, or two of its levels",
                    f.key,
                    f.levels.len()
                ));
            }
            true
        }
        Want::Auto => full * blocks > max_runs && frac_runs.is_some_and(|r| r < full * blocks),
    };
    let (kind, cells, generators, aliases, resolution) = if use_fraction {
        fraction(factors.len())
    } else {
        ("full", full_cells(factors), vec![], vec![], None)
    };
    let runs = cells.len() * blocks;
    if runs > max_runs {
        let mut hint = String::new();
        if !use_fraction {
            if let Some(fr) = frac_runs.filter(|r| *r < runs) {
                hint = format!(", --design fractional ({fr} runs)");
            }
        }
        return Err(format!(
            "the {kind} design has {} cells × {blocks} blocks = {runs} runs, more than --max-runs {max_runs}: \
             raise --max-runs, or use fewer factors, levels or blocks{hint}",
            cells.len()
        ));
    }
    let order = (0..blocks)
        .map(|b| {
            let mut o: Vec<usize> = (0..cells.len()).collect();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(derive_seed(seed, 5000 + b as u64));
            o.shuffle(&mut rng);
            o
        })
        .collect();
    Ok(Design {
        schema: DESIGN_SCHEMA.into(),
        factors: factors.to_vec(),
        kind: kind.into(),
        resolution,
        generators,
        aliases,
        cells,
        blocks,
        seed,
        order,
    })
}

/// One line per mistake: no factor, a factor given twice, one level, a level given twice.
fn check_factors(factors: &[Factor]) -> Result<(), String> {
    if factors.is_empty() {
        return Err(
            "give at least one factor: --factor KEY=L1|L2 (or [attribute.factors] in --file)"
                .into(),
        );
    }
    for (i, f) in factors.iter().enumerate() {
        if factors[..i].iter().any(|g| g.key == f.key) {
            return Err(format!(
                "factor {} is given twice: give all its levels in one --factor",
                f.key
            ));
        }
        if f.levels.len() < 2 {
            return Err(format!(
                "factor {} has one level ({}): a factor needs two or more, e.g. --factor {}=A|B",
                f.key,
                f.levels.join(""),
                f.key
            ));
        }
        if let Some((j, l)) = f
            .levels
            .iter()
            .enumerate()
            .find(|(j, l)| f.levels[..*j].contains(l))
        {
            return Err(format!(
                "factor {}: level `{l}` is given twice (levels {} and {})",
                f.key,
                f.levels.iter().position(|x| x == l).unwrap_or(0) + 1,
                j + 1
            ));
        }
    }
    Ok(())
}

/// Every combination of levels, the first factor outermost.
fn full_cells(factors: &[Factor]) -> Vec<Vec<usize>> {
    let mut cells = vec![vec![]];
    for f in factors {
        cells = cells
            .into_iter()
            .flat_map(|c| {
                (0..f.levels.len()).map(move |l| {
                    let mut c = c.clone();
                    c.push(l);
                    c
                })
            })
            .collect();
    }
    cells
}

/// Base factors of the smallest resolution-IV fraction of `k` two-level factors.
fn base_factors(k: usize) -> usize {
    let mut m = 1;
    while (1usize << (m - 1)) < k {
        m += 1;
    }
    m
}

/// Cells of that fraction (below 4 factors it is the full factorial).
fn fraction_size(k: usize) -> usize {
    if k < 4 {
        1 << k
    } else {
        1 << base_factors(k)
    }
}

type Fraction = (
    &'static str,
    Vec<Vec<usize>>,
    Vec<String>,
    Vec<Vec<String>>,
    Option<u32>,
);

/// The resolution-IV fraction of `k` two-level factors (module doc): its cells, generators,
/// alias chains among two-factor interactions and resolution.
fn fraction(k: usize) -> Fraction {
    if k < 4 {
        let f: Vec<Factor> = (0..k)
            .map(|_| Factor {
                key: String::new(),
                levels: vec![String::new(); 2],
            })
            .collect();
        return ("full", full_cells(&f), vec![], vec![], None);
    }
    let m = base_factors(k);
    // Factor columns as bit masks over the m base factors.
    let mut words: Vec<u32> = (0..m).map(|j| 1u32 << j).collect();
    let mut odd: Vec<u32> = (1u32..(1 << m))
        .filter(|w| w.count_ones() % 2 == 1 && w.count_ones() > 1)
        .collect();
    odd.sort_by_key(|w| (std::cmp::Reverse(w.count_ones()), *w));
    words.extend(odd.into_iter().take(k - m));
    let cells = (0..(1u32 << m))
        .map(|r| {
            words
                .iter()
                .map(|w| ((r & w).count_ones() % 2) as usize)
                .collect()
        })
        .collect();
    let name = |w: u32| -> String {
        (0..m)
            .filter(|j| w & (1 << j) != 0)
            .map(Design::letter)
            .collect()
    };
    let generators = (m..k)
        .map(|i| format!("{} = {}", Design::letter(i), name(words[i])))
        .collect();
    // Two-factor interactions by the word they estimate; chains of two or more are aliased.
    let mut chains: std::collections::BTreeMap<u32, Vec<String>> = Default::default();
    for i in 0..k {
        for j in i + 1..k {
            chains.entry(words[i] ^ words[j]).or_default().push(format!(
                "{}×{}",
                Design::letter(i),
                Design::letter(j)
            ));
        }
    }
    let aliases = chains.into_values().filter(|c| c.len() > 1).collect();
    // The shortest word of the defining relation: the products of added columns with the
    // base factors they are made of, and of those words with each other.
    let mut relation: Vec<u32> = Vec::new();
    // Each added factor i gives the word (its column) × (factor i itself): in the full
    // alphabet of k letters that is the base letters of its column plus letter i.
    let full_word = |i: usize| -> u64 { (words[i] as u64) | (1u64 << i) };
    let added: Vec<u64> = (m..k).map(full_word).collect();
    for s in 1u32..(1 << added.len()) {
        let w = (0..added.len())
            .filter(|t| s & (1 << t) != 0)
            .fold(0u64, |acc, t| acc ^ added[t]);
        relation.push(w.count_ones());
    }
    let resolution = relation.into_iter().min();
    ("fractional", cells, generators, aliases, resolution)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two(n: usize) -> Vec<Factor> {
        (0..n)
            .map(|i| Factor {
                key: format!("app.f{i}"),
                levels: vec!["a".into(), "b".into()],
            })
            .collect()
    }

    /// A full factorial holds every combination once; blocks reorder it, from the seed.
    #[test]
    fn full_factorial_blocks_and_order() {
        let mut f = two(2);
        f.push(Factor {
            key: "app.x".into(),
            levels: vec!["1".into(), "2".into(), "3".into()],
        });
        let d = plan(&f, 3, 100, Want::Auto, 7).unwrap();
        assert_eq!(d.kind, "full");
        assert_eq!(d.cells.len(), 12);
        assert_eq!(d.runs(), 36);
        let mut seen = d.cells.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 12);
        for o in &d.order {
            let mut s = o.clone();
            s.sort();
            assert_eq!(s, (0..12).collect::<Vec<_>>());
        }
        assert_ne!(d.order[0], d.order[1], "blocks shuffled alike");
        assert_eq!(plan(&f, 3, 100, Want::Auto, 7).unwrap(), d);
        assert_ne!(plan(&f, 3, 100, Want::Auto, 8).unwrap().order, d.order);
    }

    /// Over the cap, two-level factors get the smallest resolution-IV fraction: balanced
    /// columns, every pair of columns orthogonal (main effects clear of each other) and
    /// every column orthogonal to every product of two others (clear of two-factor
    /// interactions).
    #[test]
    fn fractions_are_resolution_four() {
        for (k, cells) in [(4, 8), (5, 16), (8, 16), (9, 32), (12, 32)] {
            let d = plan(&two(k), 2, 2 * cells, Want::Auto, 1).unwrap();
            assert_eq!(
                (d.kind.as_str(), d.cells.len()),
                ("fractional", cells),
                "k={k}"
            );
            assert!(d.resolution.unwrap() >= 4, "k={k}: {:?}", d.resolution);
            let col = |i: usize| -> Vec<i32> {
                d.cells
                    .iter()
                    .map(|c| if c[i] == 0 { -1 } else { 1 })
                    .collect()
            };
            let dot = |a: &[i32], b: &[i32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<i32>();
            for i in 0..k {
                assert_eq!(
                    col(i).iter().sum::<i32>(),
                    0,
                    "k={k}: factor {i} unbalanced"
                );
                for j in 0..k {
                    if j == i {
                        continue;
                    }
                    assert_eq!(dot(&col(i), &col(j)), 0, "k={k}: {i} and {j} aliased");
                    for l in j + 1..k {
                        if l == i {
                            continue;
                        }
                        let jl: Vec<i32> = col(j).iter().zip(col(l)).map(|(a, b)| a * b).collect();
                        assert_eq!(dot(&col(i), &jl), 0, "k={k}: {i} aliased with {j}x{l}");
                    }
                }
            }
            assert!(
                d.cells.contains(&vec![0; k]),
                "the base cell is in the design"
            );
        }
        let d = plan(&two(4), 2, 16, Want::Fractional, 1).unwrap();
        assert_eq!(d.generators, vec!["D = ABC"]);
        assert_eq!(d.aliases.len(), 3, "{:?}", d.aliases);
        assert_eq!(plan(&two(6), 2, 1000, Want::Auto, 1).unwrap().kind, "full");
    }

    /// Bad input is one line naming the factor and what to change.
    #[test]
    fn bad_designs_say_why() {
        let e = |f: &[Factor], blocks, max, want| plan(f, blocks, max, want, 1).unwrap_err();
        let mut one = two(2);
        one[1].levels.truncate(1);
        assert!(e(&one, 3, 100, Want::Auto)
            .0
            .contains("app.f1 has one level"));
        assert!(e(&[], 3, 100, Want::Auto).0.contains("at least one factor"));
        let big = e(&two(3), 3, 10, Want::Auto);
        assert!(big.0.contains("24 runs, more than --max-runs 10"), "{big}");
        let big = e(&two(5), 3, 40, Want::Full);
        assert!(big.0.contains("--design fractional (48 runs)"), "{big}");
        let mut three = two(4);
        three[0].levels.push("c".into());
        assert!(e(&three, 2, 100, Want::Fractional)
            .0
            .contains("two levels per factor"));
        assert!(e(&two(2), 1, 100, Want::Auto).0.contains("at least 2"));
        let mut dup = two(2);
        dup[1].key = dup[0].key.clone();
        assert!(e(&dup, 2, 100, Want::Auto).0.contains("given twice"));
        assert!(Factor::parse("harness.wait").is_err());
    }
}
