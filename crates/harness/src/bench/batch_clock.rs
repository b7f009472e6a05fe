//! The batch clock's rules, apart from the GPU that feeds them.
//!
//! Why a batch: the parent's clock around one request carries the request's round trip, whose
//! noise on a busy host is as large as a call (measured on the H100: an honest control's time
//! per request beyond its CUDA-event sample ranged from -72 to 2,934 us across runs), so no
//! bound on one request can both hold a forger and spare an honest kernel, and none can time
//! a call of 10-30 us. Over a batch of R calls that run back to back in one request, the round
//! trip's noise is divided by R. The kernel cannot move this clock: it is the parent's, around
//! a request whose inputs the parent wrote, less the same request served by a baseline worker
//! that never loaded the kernel.
//!
//! The per-call CUDA-event figure stays beside it as the latency of a cold call (each call
//! alone, L2 flushed by the parent first). An honest cold call is never faster than the same
//! call in a warm stream, so a latency below the batch figure by more than
//! [`LATENCY_SLACK`] is "timing not trusted", with both numbers.

/// How far below the batch figure the cold-call latency may lie before it is not trusted: the
/// two clocks' own noise (a batch of tens of milliseconds is read to about 1%; the events'
/// median to about as much), with room for a stream that runs a little slower than a lone call
/// because its calls contend for DRAM with the previous call's tail.
pub const LATENCY_SLACK: f64 = 0.05;

/// A batch should last this long, so that a round trip's noise (hundreds of microseconds on a
/// busy host) is under 1% of it.
pub const TARGET_BATCH_US: f64 = 50_000.0;

/// The inputs of one batch together are at least this many times the L2, so that every call
/// reads its inputs from DRAM.
pub const L2_TIMES: usize = 4;

/// Batches timed per shape, each on inputs no call has seen: the reported figure is their
/// median, their spread the table's.
pub const BATCHES: usize = 3;

/// The most calls one batch holds (a call of a few microseconds would ask for tens of
/// thousands).
pub const MAX_SLOTS: usize = 4096;

/// The median of `values` (the upper one of an even count); None when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

/// How many calls one batch holds, and what bounded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotChoice {
    pub slots: usize,
    /// The memory bound kept the batch's inputs below [`L2_TIMES`] the L2 (a finding: calls
    /// may then read part of their inputs from L2).
    pub below_l2: bool,
    /// The memory bound kept the batch shorter than [`TARGET_BATCH_US`].
    pub shorter_than_target: bool,
}

/// The calls of a batch: enough that their inputs (`input_bytes` a call) fill [`L2_TIMES`]
/// the L2 and that they last [`TARGET_BATCH_US`] at `estimate_us` a call, at most what
/// `memory_bytes` holds at `slot_bytes` a call (inputs and output) and [`MAX_SLOTS`]; at least
/// two. `estimate_us` is the kernel's own CUDA-event median: a kernel that reports less than
/// it takes only lengthens its batches, and one that reports more shortens them, never below
/// the L2 bound.
pub fn choose_slots(
    input_bytes: usize,
    slot_bytes: usize,
    l2_bytes: usize,
    estimate_us: f64,
    memory_bytes: usize,
) -> SlotChoice {
    let for_l2 = (L2_TIMES * l2_bytes).div_ceil(input_bytes.max(1));
    let for_time = (TARGET_BATCH_US / estimate_us.max(1.0)).ceil() as usize;
    let wanted = for_l2.max(for_time).clamp(2, MAX_SLOTS);
    let fits = (memory_bytes / slot_bytes.max(1)).max(2);
    let slots = wanted.min(fits);
    SlotChoice {
        slots,
        below_l2: slots < for_l2,
        shorter_than_target: slots < for_time.min(MAX_SLOTS),
    }
}

/// What the parent's clock measured over one shape's batches.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchClock {
    /// Calls in each batch.
    pub slots: usize,
    /// The parent's clock around each batch request of the kernel's worker (request sent to
    /// reply received), microseconds.
    pub kernel_batch_us: Vec<f64>,
    /// The same requests, without the kernel, served by the baseline worker.
    pub baseline_batch_us: Vec<f64>,
    /// The lone-call batches' requests (each call alone, L2 flushed and the device
    /// synchronized around it), the kernel's and the baseline's.
    pub lone_kernel_batch_us: Vec<f64>,
    pub lone_baseline_batch_us: Vec<f64>,
}

/// Each of `kernel`'s requests less the fastest of `baseline`'s, over `slots` calls.
fn less_fastest(kernel: &[f64], baseline: &[f64], slots: usize) -> Vec<f64> {
    let Some(fastest) = baseline.iter().copied().min_by(f64::total_cmp) else {
        return Vec::new();
    };
    kernel
        .iter()
        .map(|batch| (batch - fastest) / slots.max(1) as f64)
        .collect()
}

impl BatchClock {
    /// The time per call of each batch: its request less the fastest baseline request (a
    /// worker that never loaded the kernel: nothing of the kernel's can raise it), divided by
    /// the calls. Empty without a baseline request.
    pub fn per_call_us(&self) -> Vec<f64> {
        less_fastest(&self.kernel_batch_us, &self.baseline_batch_us, self.slots)
    }

    /// The time per lone call of each lone-call batch, as [`Self::per_call_us`].
    pub fn lone_per_call_us(&self) -> Vec<f64> {
        less_fastest(
            &self.lone_kernel_batch_us,
            &self.lone_baseline_batch_us,
            self.slots,
        )
    }

    /// The fastest lone-call batch's time per call: the cold call as the parent sees it. The
    /// fastest, because the host's noise only ever adds to a request, and no kernel can make a
    /// batch of fresh inputs, every call synchronized, faster than its calls take.
    pub fn lone_us(&self) -> Option<f64> {
        self.lone_per_call_us().into_iter().min_by(f64::total_cmp)
    }

    /// The median of [`Self::per_call_us`]: the time per call bench reports.
    pub fn median_per_call_us(&self) -> Option<f64> {
        median(&self.per_call_us())
    }
}

/// Why the cold-call latency (`latency_us`, the median CUDA-event sample of calls made one at
/// a time) is not trusted beside the batch figure (`batch_us`, the parent's time per call in a
/// stream), if it is not: it lies below it by more than [`LATENCY_SLACK`].
pub fn latency_finding(latency_us: f64, batch_us: f64) -> Option<String> {
    (latency_us < (1.0 - LATENCY_SLACK) * batch_us).then(|| {
        format!(
            "timing not trusted: the cold-call latency by CUDA events ({latency_us:.1} us) is \
             below the parent's time per call in a batch ({batch_us:.1} us) by {:.1}%, more \
             than the {:.0}% allowed: an honest call alone is never faster than in a stream, \
             so the events were falsified or the kernel worked outside its calls",
            100.0 * (1.0 - latency_us / batch_us),
            100.0 * LATENCY_SLACK
        )
    })
}

/// Lone-call batches timed per shape (each on inputs no call has seen).
pub const LONE_BATCHES: usize = 3;

/// How far below the parent's lone-call figure the cold-call latency by CUDA events may lie
/// before it is not trusted: a fraction of the lone figure ([`LONE_SLACK`]) plus a fixed amount
/// ([`LONE_SLACK_US`]). Both clocks time a call alone with L2 flushed before it, but not
/// identically: the events' calls run on one shared buffer whose address translations the
/// previous timed call left warm, after the parent's flush; a lone batch's calls each on their
/// own slot, after the worker's flush. Set from the H100 (results/bench-clock/README.md, the
/// library example at six shapes, beside three busy CPU loads): honest events lay between
/// 7.6 us below and 7.6 us above the parent's figure at 0.34-0.57 ms calls, within 1 us of it
/// at 70-90 us calls; the forgeries the library made (4.4-12.5%, or 18-30 us) were 5.6 us and
/// more below it. 1.75% + 2 us holds the worst honest row (7.6 us below a 565 us call,
/// 11.9 us allowed) and finds, by those honest rows, a timer that reports 0.8-4.6% or
/// 2.6-19.3 us less than the truth, depending on the shape: 5% and 20 us at every shape
/// measured. One honest run of one worker kind: the margins are thin (see the README).
pub const LONE_SLACK: f64 = 0.0175;
pub const LONE_SLACK_US: f64 = 2.0;

/// Lone-call batches run once more, on fresh inputs, before the lone rule's finding stands;
/// the fastest of every lone batch is then the parent's figure. Why: on the H100 x4 host, ten
/// runs of the library example beside three other benches (results/bench-clock/README.md,
/// third run), one bench had all three of its lone batches slowed (591.8-643.6 us a call
/// against 549-556 us in the other runs) and raised the one false alarm. A forged timer's
/// events lie below every lone batch, however many run; an honest kernel's need one lone batch
/// the host left alone.
pub const LONE_RECHECK_BATCHES: usize = 3;

/// Why the cold-call latency (`latency_us`, the median CUDA-event sample of calls made one at
/// a time) is not trusted beside the parent's lone-call figure (`lone_us`, its clock over a
/// batch of calls each made alone, less the baseline's same request, over the calls), if it is
/// not: it lies below it by more than [`LONE_SLACK`] of it plus [`LONE_SLACK_US`].
pub fn lone_finding(latency_us: f64, lone_us: f64) -> Option<String> {
    let allowed = LONE_SLACK * lone_us + LONE_SLACK_US;
    (latency_us < lone_us - allowed).then(|| {
        format!(
            "timing not trusted: the cold-call latency by CUDA events ({latency_us:.1} us) is \
             below the parent's time for a call alone ({lone_us:.1} us, its clock over a batch of \
             lone calls) by {:.1} us, more than the {allowed:.1} us allowed ({:.2}% + \
             {LONE_SLACK_US:.0} us): the events were falsified, or the kernel is faster when \
             timed by its own events than when the parent times it",
            lone_us - latency_us,
            100.0 * LONE_SLACK,
        )
    })
}

/// Why the judged outputs make a timing untrusted, if they do: every timed call's output was
/// judged, and `wrong` lists the calls (by name, e.g. "batch 2 call 17") wrong and in how many
/// elements; one wrong call of any number is a finding.
pub fn wrong_outputs_finding(judged: usize, wrong: &[(String, usize)]) -> Option<String> {
    let (first, elements) = wrong.first()?;
    Some(format!(
        "timing not trusted: {} of the {judged} timed calls' outputs were wrong (every output \
         judged, inputs never seen before); the first, {first}, in {elements} elements",
        wrong.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    #[test]
    fn a_batch_fills_four_times_the_l2_and_lasts_tens_of_milliseconds() {
        // 34 MB of inputs a call, a 50 MB L2, 2 ms a call: 6 calls fill 4x L2, 25 last 50 ms.
        let choice = choose_slots(34 * MB, 38 * MB, 50 * MB, 2000.0, 20_000 * MB);
        assert_eq!(choice.slots, 25);
        assert!(!choice.below_l2 && !choice.shorter_than_target);
        // 20 ms calls: the L2 bound rules (6 calls, 120 ms).
        assert_eq!(
            choose_slots(34 * MB, 38 * MB, 50 * MB, 20_000.0, 20_000 * MB).slots,
            6
        );
        // A 25 us call on small inputs: 2000 calls for 50 ms.
        assert_eq!(
            choose_slots(MB, MB + 4096, 50 * MB, 25.0, 20_000 * MB).slots,
            2000
        );
        // A kernel that reports 0 us gets the largest batch, not a division by zero.
        assert_eq!(choose_slots(MB, MB, 50 * MB, 0.0, 1 << 40).slots, MAX_SLOTS);
    }

    #[test]
    fn the_memory_bound_shortens_a_batch_and_says_what_it_cost() {
        // Room for 4 calls of 38 MB: below both the L2 bound (6) and the time bound (25).
        let choice = choose_slots(34 * MB, 38 * MB, 50 * MB, 2000.0, 160 * MB);
        assert_eq!(choice.slots, 4);
        assert!(choice.below_l2 && choice.shorter_than_target);
        // Room for 10: the L2 is covered, the batch shorter than its target.
        let choice = choose_slots(34 * MB, 38 * MB, 50 * MB, 2000.0, 380 * MB);
        assert_eq!(choice.slots, 10);
        assert!(!choice.below_l2 && choice.shorter_than_target);
    }

    #[test]
    fn the_time_per_call_is_the_batch_less_the_fastest_baseline_over_the_calls() {
        let clock = BatchClock {
            slots: 20,
            kernel_batch_us: vec![40_300.0, 40_500.0, 41_300.0],
            baseline_batch_us: vec![500.0, 300.0, 2_900.0],
            lone_kernel_batch_us: vec![43_000.0, 42_300.0, 45_000.0],
            lone_baseline_batch_us: vec![2_300.0, 2_500.0],
        };
        assert_eq!(clock.per_call_us(), vec![2000.0, 2010.0, 2050.0]);
        assert_eq!(clock.median_per_call_us(), Some(2010.0));
        // The lone calls: each lone batch less the fastest lone baseline, over the calls; the
        // fastest of them is the parent's figure.
        assert_eq!(clock.lone_per_call_us(), vec![2035.0, 2000.0, 2135.0]);
        assert_eq!(clock.lone_us(), Some(2000.0));
        // A baseline request slowed by the host's noise does not lower the figure: the
        // fastest is subtracted.
        let mut slowed = clock.clone();
        slowed.baseline_batch_us[1] = 3_000.0;
        assert_eq!(slowed.median_per_call_us(), Some(2000.0));
        // No baseline request: no figure.
        let mut none = clock;
        none.baseline_batch_us.clear();
        assert_eq!(none.median_per_call_us(), None);
    }

    #[test]
    fn a_forged_latency_is_not_trusted_and_an_honest_one_is() {
        // Honest: a cold call a little slower than the same call in a stream, or 4% faster
        // (the clocks' noise).
        assert_eq!(latency_finding(2100.0, 2000.0), None);
        assert_eq!(latency_finding(1920.0, 2000.0), None);
        // Forged by 6% at a call as long in a stream as alone: found, both numbers said.
        let finding = latency_finding(1880.0, 2000.0).expect("a finding");
        assert!(
            finding.contains("1880.0 us") && finding.contains("2000.0 us"),
            "{finding}"
        );
        assert!(finding.contains("6.0%"), "{finding}");
        // 20 us taken off a 40 us call.
        assert!(latency_finding(20.0, 40.0).is_some());
        // The edge: exactly 5% below is allowed.
        assert_eq!(latency_finding(1900.0, 2000.0), None);
    }

    #[test]
    fn a_latency_below_the_parents_lone_calls_is_not_trusted() {
        // Honest: the events agree with the parent's lone calls, or are slower.
        assert_eq!(lone_finding(565.0, 565.0), None);
        assert_eq!(lone_finding(580.0, 565.0), None);
        assert_eq!(lone_finding(69.0, 69.0), None);
        // The allowance: 1.75% and 2 us. The H100's worst honest row: 557.7 us by the events
        // against 565.3 us alone (11.9 us allowed); at 69.4 us, 3.2 us are allowed.
        assert_eq!(lone_finding(557.7, 565.3), None);
        assert_eq!(lone_finding(66.5, 69.4), None);
        // 20 us off a 565 us call, and 5% off it, are found, with both numbers said.
        let text = lone_finding(545.0, 565.0).expect("20 us of 565 us");
        assert!(
            text.contains("545.0 us") && text.contains("565.0 us"),
            "{text}"
        );
        assert!(text.contains("1.75% + 2 us"), "{text}");
        assert!(lone_finding(0.95 * 565.0, 565.0).is_some());
        // 5% and 20 us off a 69 us call.
        assert!(lone_finding(0.95 * 69.0, 69.0).is_some());
        assert!(lone_finding(49.0, 69.0).is_some());
    }

    #[test]
    fn one_wrong_call_in_a_hundred_is_a_finding() {
        assert_eq!(wrong_outputs_finding(100, &[]), None);
        let finding =
            wrong_outputs_finding(100, &[("batch 1 call 37".into(), 12)]).expect("a finding");
        assert!(finding.contains("1 of the 100"), "{finding}");
        assert!(finding.contains("batch 1 call 37") && finding.contains("12 elements"));
    }
}
