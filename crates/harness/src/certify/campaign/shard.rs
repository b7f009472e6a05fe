//! Shards of a campaign, for a scheduler that spreads one kernel's certification over machines
//! (a CI matrix, a Slurm job array, a Kubernetes indexed Job): shard I of N runs the campaign's
//! cases whose index in campaign order (fixed cases first, then the random ones) is I - 1
//! modulo N. Every shard draws every random case from the same seed and skips the ones that are
//! not its own, so the N shards together run exactly the cases of the unsharded campaign, each
//! once, and a failing case is shrunk from the same proptest tree as unsharded. `merge`
//! (`certificate/merge.rs`) combines the shards' certificates into one.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// An explicit shard for any scheduler (a CI matrix sets it): `I/N`.
pub const SHARD_ENV: &str = "NVFP4_ORACLE_SHARD";
/// The shard count where the scheduler gives only an index (a Kubernetes indexed Job's
/// `JOB_COMPLETION_INDEX`).
pub const SHARD_COUNT_ENV: &str = "NVFP4_ORACLE_SHARD_COUNT";

impl Shard {
    pub fn new(index: usize, count: usize) -> Result<Shard> {
        if count == 0 || index == 0 || index > count {
            return Err(Error::Shard(format!(
                "shard {index}/{count}: the index must be between 1 and the count"
            )));
        }
        Ok(Shard { index, count })
    }

    /// `I/N`, e.g. `2/4`.
    pub fn parse(text: &str) -> Result<Shard> {
        let bad = || {
            Error::Shard(format!(
                "shard '{text}': expected I/N with 1 <= I <= N, e.g. 2/4"
            ))
        };
        let (index, count) = text.trim().split_once('/').ok_or_else(bad)?;
        let number = |s: &str| s.trim().parse::<usize>().map_err(|_| bad());
        Shard::new(number(index)?, number(count)?)
    }

    /// The shard the scheduler's environment names, if any: [`SHARD_ENV`]; Slurm's job array
    /// (`SLURM_ARRAY_TASK_ID`, counted from `SLURM_ARRAY_TASK_MIN`, of
    /// `SLURM_ARRAY_TASK_COUNT`; the array must be contiguous, e.g. `--array=0-3`); a
    /// Kubernetes indexed Job (`JOB_COMPLETION_INDEX`, from 0, with the count in
    /// [`SHARD_COUNT_ENV`]). `var` reads a variable (the process environment in use).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Shard>> {
        let number = |name: &str| -> Result<Option<usize>> {
            match var(name) {
                None => Ok(None),
                Some(text) => text.trim().parse().map(Some).map_err(|_| {
                    Error::Shard(format!("{name}={text}: not a non-negative whole number"))
                }),
            }
        };
        if let Some(text) = var(SHARD_ENV) {
            return Shard::parse(&text).map(Some);
        }
        if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let count = number("SLURM_ARRAY_TASK_COUNT")?.ok_or_else(|| {
                Error::Shard("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not".into())
            })?;
            if number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1) != 1 || id < min {
                return Err(Error::Shard(
                    "a Slurm job array of shards must be contiguous (e.g. --array=0-3)".into(),
                ));
            }
            return Shard::new(id - min + 1, count).map(Some);
        }
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let count = number(SHARD_COUNT_ENV)?.ok_or_else(|| {
                Error::Shard(format!(
                    "JOB_COMPLETION_INDEX is set: say how many shards there are with \
                     {SHARD_COUNT_ENV} (the Job's completions) or --shard I/N"
                ))
            })?;
            return Shard::new(index + 1, count).map(Some);
        }
        Ok(None)
    }

    /// Whether the case at `index` (0-based, campaign order) is this shard's.
    pub fn owns(&self, index: usize) -> bool {
        index % self.count == self.index - 1
    }

    /// How many of the cases `0..planned` are this shard's.
    pub fn share_of(&self, planned: usize) -> usize {
        (0..planned).filter(|&i| self.owns(i)).count()
    }

    /// What a shard's files are called beside the unsharded ones: `<kernel>.shard-2-of-4`.
    pub fn file_stem(&self, kernel: &str) -> String {
        format!("{kernel}.shard-{}-of-{}", self.index, self.count)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn shards_deal_every_case_to_exactly_one() {
        let shards: Vec<Shard> = (1..=4).map(|i| Shard::new(i, 4).unwrap()).collect();
        for case in 0..103 {
            assert_eq!(shards.iter().filter(|s| s.owns(case)).count(), 1);
        }
        let shares: usize = shards.iter().map(|s| s.share_of(103)).sum();
        assert_eq!(shares, 103);
        assert_eq!(shards[0].share_of(103), 26);
        assert_eq!(shards[3].share_of(103), 25);
    }

    #[test]
    fn the_flag_and_the_schedulers_name_the_same_shards() {
        assert_eq!(Shard::parse("2/4").unwrap(), Shard::new(2, 4).unwrap());
        for bad in ["0/4", "5/4", "2", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Shard::from_env(env(&[])).unwrap(), None);
        assert_eq!(
            Shard::from_env(env(&[(SHARD_ENV, "3/4")])).unwrap(),
            Some(Shard::new(3, 4).unwrap())
        );
        // Slurm: --array=0-3 (ids from 0) and --array=1-4 (from 1) name the same shards.
        for (id, min) in [("2", "0"), ("3", "1")] {
            let vars = [
                ("SLURM_ARRAY_TASK_ID", id),
                ("SLURM_ARRAY_TASK_MIN", min),
                ("SLURM_ARRAY_TASK_COUNT", "4"),
            ];
            assert_eq!(
                Shard::from_env(env(&vars)).unwrap(),
                Some(Shard::new(3, 4).unwrap())
            );
        }
        let stepped = [
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
        ];
        assert!(Shard::from_env(env(&stepped)).is_err());
        // Kubernetes: the index from 0, the count given apart.
        let k8s = [("JOB_COMPLETION_INDEX", "0"), (SHARD_COUNT_ENV, "4")];
        assert_eq!(
            Shard::from_env(env(&k8s)).unwrap(),
            Some(Shard::new(1, 4).unwrap())
        );
        let message = Shard::from_env(env(&[("JOB_COMPLETION_INDEX", "1")]))
            .unwrap_err()
            .to_string();
        assert!(message.contains(SHARD_COUNT_ENV), "{message}");
    }
}
