//! The problems nvfp4-oracle models: the dual GEMM with SiLU (primary), the plain GEMM and the
//! grouped GEMM, as typed, validated inputs; and their deterministic input generators.

pub mod generate;
pub mod memory;
pub mod operand;
pub mod scaled_gemm;
pub mod scaled_generate;
pub mod shape;
pub mod stagnation;
pub mod tensors;

pub use generate::Distribution;
pub use operand::BlockScaledMatrix;
pub use shape::{Shape, SCALE_BLOCK};

/// The output a kernel finds before it writes, part of every problem's contract: every element
/// holds this NaN pattern, so that one that still holds it afterwards was never written. (A
/// kernel's own NaNs are 0x7E00 or 0x7FFF in practice.)
pub const POISON: half::f16 = half::f16::from_bits(0x7D5A);

use crate::error::{Error, Result};

/// Which computation a case or a kernel is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemKind {
    /// `C = fp16(silu(A @ B1^T) * (A @ B2^T))`.
    DualGemm,
    /// `C = fp16(A @ B^T)`.
    Gemm,
    /// G independent GEMMs of their own shapes.
    GroupGemm,
    /// `c = fp16(A @ b)`: the GEMM with N = 1.
    Gemv,
}

impl ProblemKind {
    pub const ALL: [ProblemKind; 4] = [
        ProblemKind::DualGemm,
        ProblemKind::Gemm,
        ProblemKind::GroupGemm,
        ProblemKind::Gemv,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProblemKind::DualGemm => "dual-gemm",
            ProblemKind::Gemm => "gemm",
            ProblemKind::GroupGemm => "group-gemm",
            ProblemKind::Gemv => "gemv",
        }
    }

    /// The shape a campaign's `shape` stands for in this problem: the GEMV has N = 1; for the
    /// grouped GEMM, `l` counts groups and `m` is the largest group's M (see
    /// [`generate::group_shapes`]).
    pub fn normalize(self, shape: Shape) -> Shape {
        match self {
            ProblemKind::Gemv => Shape { n: 1, ..shape },
            _ => shape,
        }
    }
}

/// One instance's inputs, whatever the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemInputs {
    DualGemm(DualGemmInputs),
    Gemm(GemmInputs),
    /// A GEMM whose B has one row.
    Gemv(GemmInputs),
    GroupGemm(GroupGemmInputs),
}

impl From<DualGemmInputs> for ProblemInputs {
    fn from(inputs: DualGemmInputs) -> Self {
        ProblemInputs::DualGemm(inputs)
    }
}

impl ProblemInputs {
    pub fn kind(&self) -> ProblemKind {
        match self {
            ProblemInputs::DualGemm(_) => ProblemKind::DualGemm,
            ProblemInputs::Gemm(_) => ProblemKind::Gemm,
            ProblemInputs::Gemv(_) => ProblemKind::Gemv,
            ProblemInputs::GroupGemm(_) => ProblemKind::GroupGemm,
        }
    }

    /// Every operand with its name in the GPU MODE data tuple (groups numbered from 0).
    pub fn operands(&self) -> Vec<(String, &BlockScaledMatrix)> {
        match self {
            ProblemInputs::DualGemm(d) => vec![
                ("a".into(), &d.a),
                ("b1".into(), &d.b1),
                ("b2".into(), &d.b2),
            ],
            ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => {
                vec![("a".into(), &g.a), ("b".into(), &g.b)]
            }
            ProblemInputs::GroupGemm(groups) => groups
                .groups
                .iter()
                .enumerate()
                .flat_map(|(i, g)| [(format!("a{i}"), &g.a), (format!("b{i}"), &g.b)])
                .collect(),
        }
    }

    /// The output as one `[M, N, L]` array (L fastest). The grouped GEMM's groups' `[M_g, N_g]`
    /// matrices follow each other: as `[sum of M_g, N, 1]` when every group has the same N, else
    /// as one row `[1, sum of M_g N_g, 1]`.
    pub fn output_dims(&self) -> (usize, usize, usize) {
        match self {
            ProblemInputs::DualGemm(d) => (d.shape.m, d.shape.n, d.shape.l),
            ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => (g.shape.m, g.shape.n, g.shape.l),
            ProblemInputs::GroupGemm(groups) => {
                let n = groups.groups[0].shape.n;
                if groups.groups.iter().all(|g| g.shape.n == n) {
                    (groups.groups.iter().map(|g| g.shape.m).sum(), n, 1)
                } else {
                    let total = groups.groups.iter().map(|g| g.shape.m * g.shape.n).sum();
                    (1, total, 1)
                }
            }
        }
    }

    pub fn output_len(&self) -> usize {
        let (m, n, l) = self.output_dims();
        m * n * l
    }
}

impl std::str::FromStr for ProblemKind {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        crate::error::parse_name(&ProblemKind::ALL, ProblemKind::name, "problem", text)
    }
}

/// Inputs of the dual GEMM: A is M x K, B1 and B2 are N x K, all with L batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DualGemmInputs {
    pub shape: Shape,
    pub a: BlockScaledMatrix,
    pub b1: BlockScaledMatrix,
    pub b2: BlockScaledMatrix,
}

impl DualGemmInputs {
    pub fn new(
        shape: Shape,
        a: BlockScaledMatrix,
        b1: BlockScaledMatrix,
        b2: BlockScaledMatrix,
    ) -> Result<Self> {
        check_operand("a", &a, shape.m, shape)?;
        check_operand("b1", &b1, shape.n, shape)?;
        check_operand("b2", &b2, shape.n, shape)?;
        Ok(DualGemmInputs { shape, a, b1, b2 })
    }
}

/// Inputs of the plain GEMM: A is M x K, B is N x K.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GemmInputs {
    pub shape: Shape,
    pub a: BlockScaledMatrix,
    pub b: BlockScaledMatrix,
}

impl GemmInputs {
    pub fn new(shape: Shape, a: BlockScaledMatrix, b: BlockScaledMatrix) -> Result<Self> {
        check_operand("a", &a, shape.m, shape)?;
        check_operand("b", &b, shape.n, shape)?;
        Ok(GemmInputs { shape, a, b })
    }
}

/// Inputs of the grouped GEMM: independent GEMMs, each with L = 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupGemmInputs {
    pub groups: Vec<GemmInputs>,
}

impl GroupGemmInputs {
    pub fn new(groups: Vec<GemmInputs>) -> Result<Self> {
        if groups.is_empty() {
            return Err(Error::InvalidShape {
                dimension: "G",
                value: 0,
                requirement: "a grouped GEMM needs at least one group",
            });
        }
        if let Some(group) = groups.iter().find(|group| group.shape.l != 1) {
            return Err(Error::InvalidShape {
                dimension: "L",
                value: group.shape.l,
                requirement: "must be 1 in every group of a grouped GEMM",
            });
        }
        Ok(GroupGemmInputs { groups })
    }
}

fn check_operand(
    name: &'static str,
    operand: &BlockScaledMatrix,
    rows: usize,
    shape: Shape,
) -> Result<()> {
    let mismatch = |dimension, value, requirement| {
        Err(Error::InvalidShape {
            dimension,
            value,
            requirement,
        })
    };
    if operand.rows() != rows {
        return mismatch(
            name,
            operand.rows(),
            "rows do not match the problem's M (for a) or N (for b)",
        );
    }
    if operand.k() != shape.k {
        return mismatch(name, operand.k(), "K does not match the problem's K");
    }
    if operand.batches() != shape.l {
        return mismatch(
            name,
            operand.batches(),
            "batch count does not match the problem's L",
        );
    }
    Ok(())
}
