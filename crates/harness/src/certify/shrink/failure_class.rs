//! The bug class of a failure that left no output to diagnose: what a certificate's diagnosis
//! line adds in parentheses after the failure's own words.

use crate::kernels::KernelFailure;
use nvfp4_model::compare::diagnosis::BugClass;

/// The bug class of a failure that left no output to diagnose (none for an exception or a
/// broken output contract: the message says it all).
pub(crate) fn failure_class(failure: &KernelFailure) -> Option<BugClass> {
    match failure {
        KernelFailure::OutOfBounds(_) | KernelFailure::ModifiedInputs(_) => {
            Some(BugClass::OutOfBounds)
        }
        KernelFailure::Hung(_) | KernelFailure::Unordered(_) => Some(BugClass::Race),
        // A crash is called an out-of-bounds access only where its words say a bad address
        // (the guard pages after every tensor make such an access fault); any other crash (out
        // of device memory, an illegal instruction, a worker that died without a word) is
        // reported in its own words, with no class guessed.
        KernelFailure::Crashed(why) if address_fault(why) => Some(BugClass::OutOfBounds),
        KernelFailure::Crashed(_) | KernelFailure::Refused(_) => None,
        KernelFailure::Raised(_) | KernelFailure::BadOutput(_) => None,
    }
}

/// Whether a crash's words name a bad address: the driver's error names, the CUDA runtime's
/// and torch's messages for them, or the host's segmentation fault.
fn address_fault(why: &str) -> bool {
    let lower = why.to_ascii_lowercase();
    [
        "cuda_error_illegal_address",
        "illegal memory access",
        "cuda_error_misaligned_address",
        "misaligned address",
        "out of bounds",
        "segmentation fault",
        "sigsegv",
    ]
    .iter()
    .any(|words| lower.contains(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_is_an_out_of_bounds_access_only_where_its_words_say_a_bad_address() {
        for words in [
            "DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, \"an illegal memory access was encountered\")",
            "RuntimeError: CUDA error: misaligned address",
            "the worker process died; its last words: Segmentation fault (core dumped)",
        ] {
            let crash = KernelFailure::Crashed(words.into());
            assert_eq!(
                failure_class(&crash),
                Some(BugClass::OutOfBounds),
                "{words}"
            );
        }
        for words in [
            "the worker process died",
            "DriverError(CUDA_ERROR_ILLEGAL_INSTRUCTION, \"an illegal instruction was encountered\")",
            "CUDA_ERROR_LAUNCH_FAILED",
        ] {
            let crash = KernelFailure::Crashed(words.into());
            assert_eq!(failure_class(&crash), None, "{words}");
        }
        let refused = KernelFailure::Refused("K must be a multiple of 256".into());
        assert_eq!(failure_class(&refused), None);
    }

    #[test]
    fn a_crash_out_of_device_memory_is_not_called_an_out_of_bounds_access() {
        let oom = KernelFailure::Crashed(
            "the worker process died; its last words: RuntimeError: cuMemCreate failed with \
             CUDA driver error 2 (CUDA_ERROR_OUT_OF_MEMORY)"
                .into(),
        );
        assert_eq!(failure_class(&oom), None);
        let torch = KernelFailure::Crashed("torch.OutOfMemoryError: CUDA out of memory.".into());
        assert_eq!(failure_class(&torch), None);
        let fault = KernelFailure::Crashed("an illegal memory access was encountered".into());
        assert_eq!(failure_class(&fault), Some(BugClass::OutOfBounds));
    }
}
