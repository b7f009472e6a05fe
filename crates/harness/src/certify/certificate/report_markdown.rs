//! A certificate in words: the Markdown file beside each certificate's JSON (crates/harness/src/certify/certificate/report.rs
//! builds the certificate; this file only renders it).

use super::report::Certificate;

impl Certificate {
    /// "62 of 62 planned: 24 fixed edge cases, 18 golden, 20 random (as requested)".
    pub(super) fn cases_run_in_words(&self) -> String {
        let c = &self.coverage;
        let planned = c.planned_edge_cases
            + c.planned_golden_cases
            + c.planned_production_cases
            + c.planned_large_cases
            + c.planned_regime_cases.unwrap_or(0)
            + c.ranges.as_ref().map_or(0, |r| r.planned_cases)
            + c.models.iter().map(|m| m.planned).sum::<usize>()
            + c.planned_stagnation_cases
            + self.cases_requested;
        if self.unavailable_reason.is_some() {
            return "0 (not run)".to_string();
        }
        format!(
            "{} of {planned} planned: {} fixed edge, {} golden, {} at production shapes, {} at models' shapes, {} in shape ranges, {} random large, {} in deployment regimes, {} stagnation (per-product rounding's worst case) and {} random (--cases){}",
            c.cases,
            c.planned_edge_cases,
            c.planned_golden_cases,
            c.planned_production_cases,
            c.models.iter().map(|m| m.planned).sum::<usize>(),
            c.ranges.as_ref().map_or(0, |r| r.planned_cases),
            c.planned_large_cases,
            c.planned_regime_cases.unwrap_or(0),
            c.planned_stagnation_cases,
            self.cases_requested,
            if let Some(shard) = self.shard {
                format!(
                    "; this is shard {shard}, its share of the cases only: `nvfp4-oracle merge` \
                     combines the {} shards (bench trusts only the merge)",
                    shard.count
                )
            } else if let Some(count) = self.merged_shards {
                format!(
                    "; merged from {count} shards{}",
                    if self.failure.is_some() {
                        " (each ran until its own first failure, so more cases than an \
                         unsharded campaign, which stops at the first)"
                    } else {
                        ""
                    }
                )
            } else if c.cases < planned && self.failure.is_some() {
                "; the campaign stops at the first failure".to_string()
            } else if c.production_size_skipped {
                "; the production-size cases skipped (--quick): bench will not time this kernel \
                 on this certificate"
                    .to_string()
            } else if c.cases < planned {
                "; stopped by the time budget".to_string()
            } else {
                String::new()
            }
        )
    }

    /// The coverage table's production row: how many production and random large cases ran,
    /// how many were judged on sampled rows, and why a CPU kernel runs fewer and thinner ones.
    pub(super) fn production_size_in_words(&self) -> String {
        let c = &self.coverage;
        let ran = |class: &str| c.by_shape_class.get(class).copied().unwrap_or(0);
        let mut words = format!(
            "{} of {} at the benchmark and competition test shapes, {} of {} at random large \
             shapes (N past 2048, K past 4096, L up to 4; on a GPU M past 2048 too, and one case \
             whose A has more than 2^31 elements)",
            ran("production"),
            c.planned_production_cases,
            ran("large"),
            c.planned_large_cases,
        );
        if c.sampled_cases > 0 {
            words.push_str(&format!(
                "; {} judged on sampled rows ({} of {} rows, every 128-row tile represented; \
                 every element checked for unwritten poison and misplaced NaN)",
                nvfp4_model::compare::diagnosis::plural(c.sampled_cases, "case"),
                c.sampled_rows_judged,
                c.sampled_rows_of
            ));
        }
        for note in [&c.production_note, &c.large_note].into_iter().flatten() {
            words.push_str(&format!("; {note}"));
        }
        words
    }

    /// The coverage table's regime row: per deployment regime, the cases of the campaign whose
    /// shape lies in it and how many were judged on sampled rows; the regimes with none.
    pub(super) fn regimes_in_words(&self) -> String {
        let c = &self.coverage;
        let mut reached = Vec::new();
        let mut missing = Vec::new();
        for regime in super::regimes::Regime::ALL {
            match c.by_regime.get(regime.name()) {
                Some(count) if count.cases > 0 => reached.push(format!(
                    "{}: {} ({})",
                    regime.name(),
                    count.cases,
                    match count.sampled {
                        0 => "judged whole".to_string(),
                        s if s == count.cases => "on sampled rows".to_string(),
                        s => format!("{s} on sampled rows"),
                    }
                )),
                _ => missing.push(regime.name()),
            }
        }
        let mut words = if reached.is_empty() {
            "none reached".to_string()
        } else {
            let total = c.deployment_cases;
            format!(
                "{} case(s) in at least one ({}); {}",
                total.cases,
                match total.sampled {
                    0 => "all judged whole".to_string(),
                    s => format!("{s} on sampled rows"),
                },
                reached.join(", ")
            )
        };
        if !missing.is_empty() {
            words.push_str(&format!(
                "; no case in {} (bench will not time a shape there on this certificate)",
                missing.join(", ")
            ));
        }
        if let Some(note) = &c.regime_note {
            words.push_str(&format!("; {note}"));
        }
        words
    }

    /// The coverage table's shape-range row: the pairs and band triples reached, and why the
    /// rest were not.
    pub(super) fn ranges_in_words(&self) -> String {
        let Some(r) = &self.coverage.ranges else {
            return "not recorded (a certificate from before the ranges)".to_string();
        };
        let mut words = format!(
            "{} range case(s); pairs reached {} of {}, band triples {} of {}",
            r.planned_cases, r.pairs_covered, r.pairs_total, r.triples_covered, r.triples_total
        );
        if !r.pairs_left.is_empty() {
            let mut by_why: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
            for (cell, why) in &r.pairs_left {
                by_why.entry(why).or_default().push(cell);
            }
            for (why, cells) in by_why {
                words.push_str(&format!(
                    "; {} pair(s) {why} (e.g. {})",
                    cells.len(),
                    cells.iter().take(3).copied().collect::<Vec<_>>().join("; ")
                ));
            }
        }
        for (why, count) in &r.triples_left {
            words.push_str(&format!("; {count} triple(s) {why}"));
        }
        words.push_str(" (bench will not time a shape in a pair no case reached)");
        words
    }

    /// The coverage table's model row: per model, its shapes planned and those left out.
    pub(super) fn models_in_words(&self) -> String {
        self.coverage
            .models
            .iter()
            .map(|m| {
                let mut words = format!("{}: {} shape(s) run", m.model, m.planned);
                if !m.left_out.is_empty() {
                    words.push_str(&format!(
                        ", {} left out (e.g. {}: {})",
                        m.left_out.len(),
                        m.left_out[0].0,
                        m.left_out[0].1
                    ));
                }
                words
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn markdown(&self) -> String {
        let c = &self.coverage;
        let mut md = format!(
            "# Certificate: {}\n\n| | |\n|---|---|\n| status | **{:?}** |\n| problem | {} |\n| supported shapes | {} |\n| cases run | {} |\n| by distribution | {} |\n| by shape class (aligned: every dimension a multiple of 128 x 128 x 256) | {} |\n| FP4 codes seen | {} of 16 |\n| scale exponent fields seen | {} of 16{} |\n| worst distance from the model's answer (passing cases, elements with intervals <= 2 ulps) | {} |\n| seed | {} |\n| K order accepted | {} |\n| model version | {} |\n| tool | {} (build {}) |\n| machine | {} {} with {} CPUs{} |\n| created | {} |\n| time | {:.1} s |\n",
            self.kernel,
            self.status,
            self.problem,
            self.supported_shapes,
            self.cases_run_in_words(),
            c.by_distribution.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", "),
            c.by_shape_class
                .iter()
                .map(|(k, v)| match c.seconds_by_shape_class.get(k) {
                    Some(s) => format!("{k}: {v} ({s:.1} s)"),
                    None => format!("{k}: {v}"),
                })
                .collect::<Vec<_>>()
                .join(", "),
            c.fp4_codes_seen.len(),
            c.scale_exponents_seen.len(),
            if c.nan_scales_seen { ", NaN scales too" } else { "" },
            if c.cases == 0 {
                "- (no case ran)".to_string()
            } else {
                nvfp4_model::compare::diagnosis::plural(c.worst_ulps_from_expected as usize, "ulp")
            },
            self.seed,
            self.k_order,
            self.model_version,
            self.tool,
            self.build,
            self.machine.os,
            self.machine.arch,
            self.machine.cpus,
            self.machine.cpu_model.as_ref().map_or(String::new(), |m| format!(" ({m})")),
            self.created,
            self.elapsed_seconds,
        );
        if self.unavailable_reason.is_none() {
            md.push_str(&format!(
                "| production-size cases | {} |\n",
                self.production_size_in_words()
            ));
            md.push_str(&format!(
                "| deployment regimes (cases whose shape lies in each, drawn per run) | {} |\n",
                self.regimes_in_words()
            ));
            md.push_str(&format!(
                "| shape ranges (octaves of M, N, K, L: docs/guides/coverage.md) | {} |\n",
                self.ranges_in_words()
            ));
            if !c.models.is_empty() {
                md.push_str(&format!(
                    "| models (--model) | {} |\n",
                    self.models_in_words()
                ));
            }
            md.push_str(&format!(
                "| reference | {} |\n",
                self.reference.as_ref().map_or(
                    "the CPU model (the definition), every case".to_string(),
                    |r| r.in_words()
                )
            ));
            md.push_str(&format!(
                "| time by phase (summed over cases; they overlap: a case judged whole has its model computed beside its kernel run, and a fixed case its inputs made and its judgement done beside the kernel runs of its neighbours) | {} |\n",
                ["inputs", "kernel", "model", "judgement"]
                    .iter()
                    .map(|p| format!(
                        "{p}: {:.1} s",
                        c.seconds_by_phase.get(*p).copied().unwrap_or(0.0)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(gpu) = &self.gpu {
            md.push_str(&format!(
                "\nGPU: {}, driver {}, CUDA {}, SM clock {} MHz\n",
                gpu.describe(),
                gpu.driver.as_deref().unwrap_or("unknown"),
                gpu.cuda.as_deref().unwrap_or("unknown"),
                gpu.sm_clock_mhz
                    .map_or("unknown".to_string(), |c| c.to_string()),
            ));
        }
        if let (Some(python), Some(torch)) = (&self.environment.python, &self.environment.torch) {
            md.push_str(&format!(
                "\nPython {python}, torch {torch} (CUDA {})\n",
                self.environment.torch_cuda.as_deref().unwrap_or("none")
            ));
        }
        if let Some(isolation) = &self.environment.isolation {
            md.push_str(&format!("\nWorker isolation: {isolation}\n"));
        }
        if let Some(guard_pages) = &self.environment.guard_pages {
            md.push_str(&format!("Tensor placement: {guard_pages}\n"));
        }
        if let Some(hash) = &self.source_hash {
            md.push_str(&format!("\nSource SHA-256: `{hash}`\n"));
        }
        if let Some(refused) = c.refuses_unsupported_shape {
            md.push_str(&format!(
                "\nA shape outside the declared support was {}.\n",
                if refused {
                    "refused cleanly"
                } else {
                    "NOT refused (its output was not judged)"
                }
            ));
        }
        if let Some(reason) = &self.unavailable_reason {
            md.push_str(&format!("\nNot run: {reason}\n"));
        }
        if let Some(exact) = &self.exact {
            let c = &exact.coverage;
            md.push_str(&format!(
                "\n## Exact (replay of the declared schedule)\n\n- outcome: **{}**\n- declared schedule: {}\n- cases replayed: {}, elements compared: {}, ambiguous (epilogue near-ties, either fp16 accepted): {} (the other candidate observed in {})\n- cases with differences: {} ({} elements)\n",
                exact.outcome.describe(),
                exact.schedule_name.as_deref().unwrap_or("none"),
                c.cases_replayed,
                c.elements_compared,
                c.ambiguous_elements,
                c.ambiguous_alternative_observed,
                c.cases_mismatching,
                c.elements_mismatching,
            ));
            if let Some(m) = &exact.mismatch {
                md.push_str(&format!(
                    "- first differing case: {} {} seed {}; minimal after {}: **{} {} seed {}** ({} of {} elements differ)\n- first difference: {}\n- the first differing output matches: {}\n- regenerate: `{}`\n",
                    m.first_case.shape,
                    m.first_case.dist.name(),
                    m.first_case.seed,
                    nvfp4_model::compare::diagnosis::plural(m.shrink_steps, "shrink step"),
                    m.minimal_case.shape,
                    m.minimal_case.dist.name(),
                    m.minimal_case.seed,
                    m.mismatching_elements,
                    m.elements,
                    m.difference,
                    if m.matching_schedules.is_empty() {
                        "no modelled schedule".to_string()
                    } else {
                        m.matching_schedules.join("; ")
                    },
                    m.regenerate,
                ));
            }
        }
        if let Some(f) = &self.failure {
            md.push_str(&format!(
                "\n## Failure: the minimal case (its shape shrunk; the verdict and the map below are its own)\n\n- first failing case: {} {} seed {}\n- minimal case after {}: **{} {} seed {}**\n- verdict: {}\n- diagnosis: **{}**\n{}- replay: `{}`\n- regenerate its inputs from the seed: `{}`\n\n```\n{}```\n",
                f.first_case.shape,
                f.first_case.dist.name(),
                f.first_case.seed,
                nvfp4_model::compare::diagnosis::plural(f.shrink_steps, "shrink step"),
                f.minimal_case.shape,
                f.minimal_case.dist.name(),
                f.minimal_case.seed,
                f.verdict,
                f.diagnosis,
                super::failure_report::region_and_identification_lines(f),
                f.replay,
                f.regenerate,
                f.failure_map
            ));
            if let Some(data) = &f.minimal_data {
                md.push_str(&super::shrink_data::markdown(data));
                match (&f.repro_minimal_data, f.replay_minimal()) {
                    (_, Some(replay)) => md.push_str(&format!(
                        "\nIts case file and the kernel's output on it, replayed: `{replay}`\n"
                    )),
                    (Some(path), None) => {
                        md.push_str(&format!("\nIts case file: `{}`\n", path.display()))
                    }
                    (None, None) => {}
                }
            }
        }
        md.push_str(&super::checks::determinism::markdown(
            self.sanitizer.as_ref(),
            self.determinism.as_ref(),
            &self.checks_skipped,
        ));
        md
    }
}
