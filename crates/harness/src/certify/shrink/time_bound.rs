//! One bound on everything a campaign does after its first failing case (the shape shrink, the
//! failing region, the diagnosis and identification, the data shrink): a rejecting campaign
//! writes its certificate within [`AFTER_FIRST_FAILURE`] of that case, whatever its shape (a
//! deployment-size case costs up to a second per run), saying what it did not finish. Each step
//! gets until a share of the bound; a step that ends early leaves its time to the next.

use std::time::{Duration, Instant};

/// The time from a campaign's first failing case to its certificate.
pub const AFTER_FIRST_FAILURE: Duration = Duration::from_secs(90);

/// What is done after a failure, in order, each with the share of the bound by which it ends
/// (the last share leaves the certificate a few seconds to be written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    ShapeShrink,
    Region,
    Identification,
    DataShrink,
}

impl Step {
    fn share(self) -> f64 {
        match self {
            Step::ShapeShrink => 0.45,
            Step::Region => 0.60,
            Step::Identification => 0.75,
            Step::DataShrink => 0.92,
        }
    }

    /// What the certificate says of this step when the bound stopped it.
    pub fn unfinished_words(self) -> &'static str {
        match self {
            Step::ShapeShrink => {
                "the shape shrink (the minimal case may be larger than the smallest trigger)"
            }
            Step::Region => "the failing region (dimensions marked unresolved)",
            Step::Identification => {
                "the wrong-problem identification (not every nearby problem was tried)"
            }
            Step::DataShrink => "the data shrink",
        }
    }
}

/// The bound of one failure, from its first failing case.
#[derive(Debug, Clone, Copy)]
pub struct TimeBound {
    started: Instant,
    total: Duration,
}

impl TimeBound {
    /// From now: the first failing case has just been judged.
    pub fn from_now() -> Self {
        TimeBound::with_total(AFTER_FIRST_FAILURE)
    }

    /// A bound of another length (tests).
    pub fn with_total(total: Duration) -> Self {
        TimeBound {
            started: Instant::now(),
            total,
        }
    }

    /// The instant by which `step` ends.
    pub fn end_of(&self, step: Step) -> Instant {
        self.started + self.total.mul_f64(step.share())
    }

    /// Whether `step`'s time is over.
    pub fn over(&self, step: Step) -> bool {
        Instant::now() >= self.end_of(step)
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}
