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
    use super::{matches, select};
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

    #[test]
    fn wildcards() {
        assert!(matches("cpu-mutant-*", "cpu-mutant-gemm-only"));
        assert!(matches("*", "cpu-tiled"));
        assert!(matches("cpu-tiled", "cpu-tiled"));
        assert!(!matches("cpu-mutant-*", "cpu-tiled"));
    }
}
