//! One timed shape's figures (median, extremes, spread, throughput): what every way of timing
//! produces, the report prints and a baseline compares. Its own file so that the report and the
//! ways of timing all use it without using each other.

use nvfp4_model::problem::Shape;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    pub variant: String,
    pub shape: Shape,
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// (p90 - p10) / median.
    pub spread: f64,
    pub reps: usize,
    pub input_sets: usize,
    /// Both GEMMs: 4 M N K / time.
    pub tflops: f64,
}

impl Timing {
    /// Median, extremes and spread of `samples` (microseconds, one per timed call).
    pub fn from_samples(
        name: &str,
        shape: Shape,
        mut samples: Vec<f64>,
        input_sets: usize,
    ) -> Timing {
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        let median = at(0.5);
        Timing {
            variant: name.to_string(),
            shape,
            median_us: median,
            min_us: samples[0],
            max_us: samples[samples.len() - 1],
            spread: (at(0.9) - at(0.1)) / median,
            reps: samples.len(),
            input_sets,
            tflops: 4.0 * (shape.m * shape.n * shape.k * shape.l) as f64 / median / 1e6,
        }
    }
}
