//! Case files: safetensors files holding a problem's inputs (and, for reference cases, the
//! expected output and its acceptance interval), readable from Python with `safetensors` or torch.
//!
//! Tensor names for the dual GEMM: `a`, `b1`, `b2` (U8, packed FP4, `[L, MN, K/2]`), `sfa`, `sfb1`,
//! `sfb2` (F8_E4M3, plain `[L, MN, K/16]`), `sfa_permuted`, `sfb1_permuted`, `sfb2_permuted`
//! (F8_E4M3, the blocked layout as `[L, rest_mn, rest_k, 32, 4, 4]`, i.e. 512-byte atoms in memory
//! order). For the plain GEMM the B operand is `b`, `sfb`, `sfb_permuted`.

mod scaled_gemm;

pub use scaled_gemm::{
    read_scaled_gemm_case, read_scaled_gemm_operands, read_scaled_gemm_output,
    write_scaled_gemm_case, ScaledGemmCase, SCALED_GEMM_CASE_LAYOUT,
};

use crate::error::{Error, Result};
use crate::layout::BlockedScaleLayout;
use crate::model::bounds::KOrder;
use crate::model::{Reference, MODEL_VERSION};
use crate::problem::tensors::{problem_inputs_from_tensors, ByteType, TensorMap};
use crate::problem::{BlockScaledMatrix, DualGemmInputs, ProblemInputs, ProblemKind, Shape};
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Version of the case-file layout, stored in every file's metadata.
pub const CASE_FORMAT_VERSION: &str = "1";

/// One tensor to write.
pub struct OwnedTensor {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// Tensors and string metadata, written in one go.
#[derive(Default)]
pub struct CaseWriter {
    tensors: BTreeMap<String, OwnedTensor>,
    metadata: HashMap<String, String>,
}

impl CaseWriter {
    pub fn tensor(
        &mut self,
        name: &str,
        dtype: Dtype,
        shape: Vec<usize>,
        bytes: Vec<u8>,
    ) -> &mut Self {
        self.tensors.insert(
            name.to_string(),
            OwnedTensor {
                dtype,
                shape,
                bytes,
            },
        );
        self
    }

    pub fn meta(&mut self, key: &str, value: impl ToString) -> &mut Self {
        self.metadata.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds one block-scaled operand under `name`, `sf{name}` and `sf{name}_permuted`.
    pub fn operand(
        &mut self,
        name: &str,
        operand: &BlockScaledMatrix,
        padding_fill: u8,
    ) -> &mut Self {
        let dims = operand.scale_dims();
        let blocked = BlockedScaleLayout(dims);
        self.tensor(
            name,
            Dtype::U8,
            vec![dims.batches, dims.rows, operand.k() / 2],
            operand.data().to_vec(),
        );
        self.tensor(
            &format!("sf{name}"),
            Dtype::F8_E4M3,
            vec![dims.batches, dims.rows, dims.cols],
            operand.scales().to_vec(),
        );
        self.tensor(
            &format!("sf{name}_permuted"),
            Dtype::F8_E4M3,
            blocked.storage_shape().to_vec(),
            operand.blocked_scales(padding_fill),
        )
    }

    pub fn dual_gemm_inputs(&mut self, inputs: &DualGemmInputs, padding_fill: u8) -> &mut Self {
        let shape = inputs.shape;
        self.operand("a", &inputs.a, padding_fill)
            .operand("b1", &inputs.b1, padding_fill)
            .operand("b2", &inputs.b2, padding_fill)
            .meta("problem", "dual-gemm")
            .meta("shape", shape)
            .meta("m", shape.m)
            .meta("n", shape.n)
            .meta("k", shape.k)
            .meta("l", shape.l)
    }

    /// Any problem's operands. Metadata `shape` is the output's `[M, N, L]` with the problem's K
    /// (for the grouped GEMM M is the groups' total; `groups` lists each group's MxNxK).
    pub fn problem_inputs(&mut self, inputs: &ProblemInputs, padding_fill: u8) -> &mut Self {
        if let ProblemInputs::DualGemm(dual) = inputs {
            return self.dual_gemm_inputs(dual, padding_fill);
        }
        for (name, operand) in inputs.operands() {
            self.operand(&name, operand, padding_fill);
        }
        let (m, n, l) = inputs.output_dims();
        let k = inputs.operands()[0].1.k();
        let shape = Shape { m, n, k, l };
        if let ProblemInputs::GroupGemm(groups) = inputs {
            let list: Vec<String> = groups.groups.iter().map(|g| g.shape.to_string()).collect();
            self.meta("groups", list.join(","));
        }
        self.meta("problem", inputs.kind().name())
            .meta("shape", shape)
            .meta("m", m)
            .meta("n", n)
            .meta("k", k)
            .meta("l", l)
    }

    /// Adds a reference's `expected`, `lo` and `hi` as fp16 `[M, N, L]` tensors.
    pub fn reference(&mut self, shape: Shape, reference: &Reference, order: KOrder) -> &mut Self {
        let dims = vec![shape.m, shape.n, shape.l];
        for (name, values) in [
            ("expected", &reference.expected),
            ("lo", &reference.lo),
            ("hi", &reference.hi),
        ] {
            self.tensor(name, Dtype::F16, dims.clone(), fp16_bytes(values));
        }
        self.meta("model_version", MODEL_VERSION)
            .meta("k_order", order.name())
    }

    pub fn write(&mut self, path: &Path) -> Result<()> {
        self.meta("format_version", CASE_FORMAT_VERSION);
        self.meta(
            "generator",
            concat!("nvfp4-oracle ", env!("CARGO_PKG_VERSION")),
        );
        let views = self
            .tensors
            .iter()
            .map(|(name, tensor)| {
                TensorView::new(tensor.dtype, tensor.shape.clone(), &tensor.bytes)
                    .map(|view| (name.clone(), view))
                    .map_err(|err| Error::file(path, format!("tensor '{name}': {err}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let bytes = safetensors::serialize(views, Some(self.metadata.clone()))
            .map_err(|err| Error::file(path, format!("cannot serialize: {err}")))?;
        std::fs::write(path, bytes).map_err(|err| Error::file(path, format!("cannot write: {err}")))
    }
}

/// A case file read into memory, with typed accessors that check names, dtypes and shapes.
pub struct CaseReader {
    path: std::path::PathBuf,
    bytes: Vec<u8>,
}

impl CaseReader {
    pub fn open(path: &Path) -> Result<Self> {
        // Header first: a file that is not a case file is refused before its body is read.
        let bytes = crate::bounded_read::read_safetensors(path, u64::MAX)?;
        Self::from_bytes(bytes, path)
    }

    /// A case file already in memory; `label` names it in error messages.
    pub fn from_bytes(bytes: Vec<u8>, label: impl Into<std::path::PathBuf>) -> Result<Self> {
        let reader = CaseReader {
            path: label.into(),
            bytes,
        };
        reader.parsed()?;
        Ok(reader)
    }

    fn parsed(&self) -> Result<SafeTensors<'_>> {
        SafeTensors::deserialize(&self.bytes)
            .map_err(|err| Error::file(&self.path, format!("not a valid safetensors file: {err}")))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn metadata(&self) -> Result<HashMap<String, String>> {
        let (_, header) = SafeTensors::read_metadata(&self.bytes).map_err(|err| {
            Error::file(&self.path, format!("not a valid safetensors file: {err}"))
        })?;
        Ok(header.metadata().clone().unwrap_or_default())
    }

    pub fn meta(&self, key: &str) -> Result<String> {
        self.metadata()?.remove(key).ok_or_else(|| {
            Error::file(
                &self.path,
                format!("metadata has no '{key}' entry (is this an nvfp4-oracle case file?)"),
            )
        })
    }

    /// Whether the file holds tensor `name`.
    pub fn has_tensor(&self, name: &str) -> Result<bool> {
        Ok(self.parsed()?.tensor(name).is_ok())
    }

    /// The shape of tensor `name`, whatever its dtype.
    pub fn shape_of(&self, name: &str) -> Result<Vec<usize>> {
        let parsed = self.parsed()?;
        let view = parsed
            .tensor(name)
            .map_err(|_| Error::file(&self.path, format!("has no tensor '{name}'")))?;
        Ok(view.shape().to_vec())
    }

    /// The bytes of tensor `name`, which must have `dtype` and `shape`.
    pub fn tensor(&self, name: &str, dtype: Dtype, shape: &[usize]) -> Result<Vec<u8>> {
        let parsed = self.parsed()?;
        let view = parsed.tensor(name).map_err(|_| {
            let mut names = parsed.names();
            names.sort();
            Error::file(
                &self.path,
                format!(
                    "has no tensor '{name}' (it has: {})",
                    names
                        .iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        if view.dtype() != dtype || view.shape() != shape {
            return Err(Error::file(
                &self.path,
                format!(
                    "tensor '{name}' is {:?} {:?}, expected {:?} {:?}",
                    view.dtype(),
                    view.shape(),
                    dtype,
                    shape
                ),
            ));
        }
        Ok(view.data().to_vec())
    }

    pub fn shape(&self) -> Result<Shape> {
        let text = self.meta("shape")?;
        text.parse()
            .map_err(|err: Error| Error::file(&self.path, format!("metadata 'shape': {err}")))
    }

    /// Reads an operand written by [`CaseWriter::operand`], checking that the permuted copy agrees
    /// with the plain scales (a case whose two layouts disagree would judge kernels unfairly).
    pub fn operand(&self, name: &str, rows: usize, shape: Shape) -> Result<BlockScaledMatrix> {
        let data = self.tensor(name, Dtype::U8, &[shape.l, rows, shape.k / 2])?;
        let scales = self.tensor(
            &format!("sf{name}"),
            Dtype::F8_E4M3,
            &[shape.l, rows, shape.scale_cols()],
        )?;
        let operand = BlockScaledMatrix::new(name, rows, shape.k, shape.l, data, scales)?;
        let permuted = self.tensor(
            &format!("sf{name}_permuted"),
            Dtype::F8_E4M3,
            &BlockedScaleLayout(operand.scale_dims()).storage_shape(),
        )?;
        if crate::layout::blocked_to_plain(&permuted, operand.scale_dims()) != operand.scales() {
            return Err(Error::file(
                &self.path,
                format!("sf{name}_permuted does not hold the same scales as sf{name}"),
            ));
        }
        Ok(operand)
    }

    /// A user's own inputs of `problem` (names and layouts: [`problem::tensors`]); shapes come
    /// from the tensors, no metadata is needed.
    ///
    /// [`problem::tensors`]: crate::problem::tensors
    pub fn user_problem_inputs(&self, problem: ProblemKind) -> Result<ProblemInputs> {
        let parsed = self.parsed()?;
        let views: TensorMap<'_> = parsed
            .tensors()
            .into_iter()
            .map(|(name, view)| {
                let mut shape = view.shape().to_vec();
                let dtype = match view.dtype() {
                    Dtype::U8 => ByteType::U8,
                    Dtype::F8_E4M3 => ByteType::E4m3,
                    Dtype::F4 => {
                        // safetensors counts 4-bit elements; the reader wants bytes.
                        if let Some(last) = shape.last_mut() {
                            *last /= 2;
                        }
                        ByteType::Fp4x2
                    }
                    Dtype::F32 => ByteType::Other("F32"),
                    Dtype::F16 => ByteType::Other("F16"),
                    Dtype::BF16 => ByteType::Other("BF16"),
                    _ => ByteType::Other("a dtype other than U8, F4 or F8_E4M3"),
                };
                (name, (dtype, shape, view.data()))
            })
            .collect();
        problem_inputs_from_tensors(problem, &views, &self.path.display().to_string())
    }

    pub fn dual_gemm_inputs(&self) -> Result<DualGemmInputs> {
        let problem = self.meta("problem")?;
        if problem != "dual-gemm" {
            return Err(Error::file(
                &self.path,
                format!("holds a '{problem}' case, not a dual-gemm case"),
            ));
        }
        let shape = self.shape()?;
        DualGemmInputs::new(
            shape,
            self.operand("a", shape.m, shape)?,
            self.operand("b1", shape.n, shape)?,
            self.operand("b2", shape.n, shape)?,
        )
    }
}

/// fp16 values as little-endian bytes, the safetensors F16 encoding.
pub fn fp16_bytes(values: &[half::f16]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes())
        .collect()
}

pub fn f32_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

pub fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f64_from_bytes(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect()
}

pub fn fp16_from_bytes(bytes: &[u8]) -> Vec<half::f16> {
    bytes
        .chunks_exact(2)
        .map(|b| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
        .collect()
}

/// Refuses a case whose interval is empty somewhere (`lo > hi`: swapped or edited bounds), which
/// would otherwise fail every kernel; the message names the first such element by its index in
/// `dims` (row-major, as the tensors are stored). NaN bounds (a NaN answer) are not compared.
pub fn check_intervals(path: &Path, lo: &[f64], hi: &[f64], dims: &[usize]) -> Result<()> {
    let Some(first) = lo.iter().zip(hi).position(|(lo, hi)| lo > hi) else {
        return Ok(());
    };
    let mut index = Vec::with_capacity(dims.len());
    let mut rest = first;
    for &dim in dims.iter().rev() {
        index.push(rest % dim.max(1));
        rest /= dim.max(1);
    }
    index.reverse();
    let bad = lo.iter().zip(hi).filter(|(lo, hi)| lo > hi).count();
    Err(Error::file(
        path,
        format!(
            "element {index:?} has lo = {:?} above hi = {:?} ({bad} such elements): an interval \
             cannot be empty; are lo and hi swapped? Write the case again with `reference`",
            lo[first], hi[first]
        ),
    ))
}
