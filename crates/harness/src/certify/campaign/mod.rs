//! The campaign: which cases a kernel runs (fixed, production, regime, range, model and random
//! cases, drawn before anything runs), how each runs and is judged against the model, what the
//! campaign covered, and the certify sequence around it.

pub(crate) mod cases;
pub(crate) mod coverage;
pub(crate) mod defaults;
pub(crate) mod limits;
pub(crate) mod models;
pub(crate) mod pipeline;
pub(crate) mod plan;
pub(crate) mod production;
pub(crate) mod range_draw;
pub(crate) mod reference_engine;
pub(crate) mod regime_draw;
pub(crate) mod regimes;
pub(crate) mod run;
pub(crate) mod sampling;
pub(crate) mod sequence;
pub(crate) mod shape_ranges;

// The modules of other rooms the campaign's files name.
use super::certificate::{report, shard};
use super::checks;
use super::shrink::{shrink_data, shrink_shape};
use super::trace::trace;

pub(crate) use cases::CaseSpec;
pub(crate) use limits::CampaignLimits;
pub(crate) use run::CampaignResult;
