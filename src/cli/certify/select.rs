//! Which kernels a certify run takes: the names and `*` patterns of `--kernel`, else every
//! kernel that can run here but the deliberately broken ones.

use nvfp4_harness::kernels::KernelUnderTest;
use nvfp4_harness::Result;

/// Whether `name` is what `pattern` names (`*` stands for any text); bench selects alike.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            name.starts_with(prefix) && name[prefix.len()..].ends_with(rest.trim_start_matches('*'))
        }
    }
}

/// Whether `pattern` selects the kernel `name` (deliberately broken where `broken`) of `all`
/// (each kernel's name and whether it is broken): a wildcard takes a broken kernel only where
/// every kernel it matches is broken ('hopper-test-*'), so that 'hopper-*' means the sound
/// variants; a kernel named whole is taken whatever it is.
pub(crate) fn selects(pattern: &str, (name, broken): (&str, bool), all: &[(&str, bool)]) -> bool {
    if !matches(pattern, name) {
        return false;
    }
    !broken
        || !pattern.contains('*')
        || all
            .iter()
            .all(|&(other, other_broken)| other_broken || !matches(pattern, other))
}

/// The kernels of `all` that `patterns` name (an unknown name is an error), or with none the
/// default selection (with `exact`, only kernels that declare a schedule).
pub(super) fn select(
    all: Vec<Box<dyn KernelUnderTest>>,
    patterns: &[String],
    exact: bool,
) -> Result<Vec<Box<dyn KernelUnderTest>>> {
    if patterns.is_empty() {
        return Ok(all
            .into_iter()
            .filter(|k| !k.is_deliberately_broken() && k.availability().is_ok())
            .filter(|k| !exact || k.schedule().is_some())
            .collect());
    }
    for pattern in patterns {
        if !all.iter().any(|k| matches(pattern, k.name())) {
            let names: Vec<&str> = all.iter().map(|k| k.name()).collect();
            return Err(nvfp4_model::Error::UnknownName {
                what: "kernel",
                given: pattern.clone(),
                expected: names.join(", "),
            }
            .into());
        }
    }
    Ok(all
        .into_iter()
        .filter(|k| patterns.iter().any(|p| matches(p, k.name())))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::{matches, select, selects};
    use half::f16;
    use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest};

    /// A registry entry as a GPU machine would list it: a name, whether it is deliberately
    /// broken, whether it can run here.
    struct Listed(&'static str, bool, bool);

    impl KernelUnderTest for Listed {
        fn name(&self) -> &str {
            self.0
        }
        fn is_deliberately_broken(&self) -> bool {
            self.1
        }
        fn availability(&self) -> Result<(), nvfp4_harness::kernels::Unavailable> {
            if self.2 {
                Ok(())
            } else {
                Err("no GPU".into())
            }
        }
        fn run(&self, _: &KernelCase, _: &mut [f16]) -> Result<(), KernelFailure> {
            Ok(())
        }
    }

    fn gpu_registry() -> Vec<Box<dyn KernelUnderTest>> {
        [
            Listed("cpu-tiled", false, true),
            Listed("cpu-mutant-gemm-only", true, true),
            Listed("hopper-baseline", false, true),
            Listed("hopper-test-spin", true, true),
            Listed("hopper-test-oob-write", true, true),
            Listed("hopper-test-persistent-7-ctas", true, true),
            Listed("blackwell-baseline", false, false),
        ]
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn KernelUnderTest>)
        .collect()
    }

    fn names(kernels: &[Box<dyn KernelUnderTest>]) -> Vec<&str> {
        kernels.iter().map(|k| k.name()).collect()
    }

    #[test]
    fn a_bare_certify_selects_no_deliberately_broken_kernel() {
        let chosen = select(gpu_registry(), &[], false).unwrap();
        assert_eq!(names(&chosen), ["cpu-tiled", "hopper-baseline"]);
        // Named, a broken kernel is certified all the same.
        let named = select(gpu_registry(), &["hopper-test-*".into()], false).unwrap();
        assert_eq!(names(&named).len(), 3);
    }

    /// bench's 'hopper-*' is the sound Hopper variants; the test kernels are had by naming them.
    #[test]
    fn a_wildcard_over_sound_kernels_leaves_the_broken_ones_out() {
        let all = [
            ("hopper-baseline", false),
            ("hopper-tiled", false),
            ("hopper-test-spin", true),
            ("hopper-test-oob-write", true),
        ];
        let chosen = |pattern: &str| -> Vec<&str> {
            all.iter()
                .filter(|&&kernel| selects(pattern, kernel, &all))
                .map(|&(name, _)| name)
                .collect()
        };
        assert_eq!(chosen("hopper-*"), ["hopper-baseline", "hopper-tiled"]);
        assert_eq!(
            chosen("hopper-test-*"),
            ["hopper-test-spin", "hopper-test-oob-write"]
        );
        assert_eq!(chosen("hopper-test-spin"), ["hopper-test-spin"]);
    }

    #[test]
    fn wildcards() {
        assert!(matches("cpu-mutant-*", "cpu-mutant-gemm-only"));
        assert!(matches("*", "cpu-tiled"));
        assert!(matches("cpu-tiled", "cpu-tiled"));
        assert!(!matches("cpu-mutant-*", "cpu-tiled"));
    }
}
