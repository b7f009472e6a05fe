//! The parts of a campaign: which cases a kernel runs (fixed, production, regime, range, model
//! and random cases, drawn before anything runs, and a shard's share of them), how each runs and
//! is judged against the model, and what the campaign covered. `run_campaign.rs`, beside this
//! room, runs them in order and shrinks the first failure.

pub(crate) mod cases;
pub(crate) mod coverage;
pub(crate) mod cross_check;
pub(crate) mod defaults;
pub(crate) mod fixed_cases;
pub(crate) mod limits;
pub(crate) mod model_strata;
pub(crate) mod models;
pub(crate) mod pipeline;
pub(crate) mod plan;
pub(crate) mod production;
pub(crate) mod range_draw;
pub(crate) mod reference_engine;
pub(crate) mod references_ahead;
pub(crate) mod regime_draw;
pub(crate) mod regimes;
pub(crate) mod sampling;
pub(crate) mod shape_ranges;
pub(crate) mod shard;
pub(crate) mod values_seen;

pub(crate) use cases::CaseSpec;
pub(crate) use limits::CampaignLimits;
