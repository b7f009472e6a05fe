//! What CuTe DSL's lowered host code says of each kernel launch: the block size, the dynamic
//! shared memory and the cluster, none of which the kernel's PTX holds (CuTe DSL sets them at
//! launch, in the `cudaLaunchConfig_t` it fills and the launch attributes it appends), and which
//! kernel is launched. The cluster reaches the census as a comment line put at the head of the
//! kernel's PTX ([`annotate`]): the census reads PTX text only, and the comment changes nothing
//! ptxas compiles.

use std::collections::HashMap;
use std::fmt;

/// One kernel launch found in the host code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub dynamic_shared: Option<u64>,
    pub threads: Option<u32>,
    /// The symbol of the kernel launched (`kernels_<entry>`), where the launch call names it.
    pub kernel: Option<String>,
    pub cluster: LaunchCluster,
}

/// The cluster a launch asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaunchCluster {
    /// No cluster attribute: every CTA is a cluster of its own.
    Without,
    Shape([u32; 3]),
    /// Set from values computed at run time, or in a form not read here.
    Unknown,
}

impl fmt::Display for LaunchCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchCluster::Without => write!(f, "none"),
            LaunchCluster::Shape([x, y, z]) => write!(f, "{x}x{y}x{z}"),
            LaunchCluster::Unknown => write!(f, "unknown"),
        }
    }
}

impl LaunchCluster {
    fn parse(text: &str) -> Option<LaunchCluster> {
        match text {
            "none" => Some(LaunchCluster::Without),
            "unknown" => Some(LaunchCluster::Unknown),
            _ => {
                let dims: Vec<u32> = text.split('x').filter_map(|d| d.parse().ok()).collect();
                let dims: [u32; 3] = dims.try_into().ok()?;
                Some(LaunchCluster::Shape(dims))
            }
        }
    }
}

/// The comment that carries a launch's cluster in the PTX handed to the census:
/// `// nvfp4-oracle launch: ENTRY cluster 2x1x1` (or `none`, `unknown`). Written by preflight
/// for a submission's kernels; a PTX file given with `--ptx` may carry it to say how its kernel
/// is launched.
pub const LAUNCH_COMMENT: &str = "// nvfp4-oracle launch:";

/// `ptx` with a launch comment at its head for each launch of one of its entries.
pub fn annotate(ptx: &str, entries: &[&str], launches: &[Launch]) -> String {
    let mut head = String::new();
    for launch in launches {
        let Some(entry) = launch.kernel.as_deref().and_then(|kernel| {
            entries
                .iter()
                .find(|e| kernel == **e || kernel.ends_with(&format!("_{e}")))
        }) else {
            continue;
        };
        head.push_str(&format!(
            "{LAUNCH_COMMENT} {entry} cluster {}\n",
            launch.cluster
        ));
    }
    head + ptx
}

/// The launch comments of `ptx`: (entry, cluster), in order.
pub fn launch_comments(ptx: &str) -> Vec<(String, LaunchCluster)> {
    ptx.lines()
        .filter_map(|line| line.trim().strip_prefix(LAUNCH_COMMENT))
        .filter_map(|rest| {
            let mut words = rest.split_whitespace();
            let entry = words.next()?;
            (words.next()? == "cluster").then_some(())?;
            Some((entry.to_string(), LaunchCluster::parse(words.next()?)?))
        })
        .collect()
}

const CONFIG: &str = "!llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>";
/// One `cudaLaunchAttribute`: its id, padding, and a 64-byte value.
const ATTRIBUTE: &str = "!llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>";
/// The value of `cudaLaunchAttributeClusterDimension`: x, y, z.
const DIMS: &str = "!llvm.struct<(i32, i32, i32)>";
/// `cudaLaunchAttributeClusterDimension` in CUDA's `cudaLaunchAttributeID`.
const CLUSTER_DIMENSION: u64 = 4;

/// A pointer into a launch's configuration: (config, field) for the config's own fields, the
/// attribute slot for an attribute's.
#[derive(Debug, Clone)]
enum Field {
    Block(String, usize),
    DynamicShared(String),
    AttributeId(String),
    AttributeValue(String),
    ClusterDim(String, usize),
}

#[derive(Default)]
struct Config {
    block: [Option<u64>; 3],
    dynamic_shared: Option<u64>,
    kernel: Option<String>,
    /// Each attribute slot addressed. The host code also addresses slots only to read them,
    /// looking for an attribute set already.
    attributes: Vec<Attribute>,
}

/// One slot of a launch's attribute array.
struct Attribute {
    slot: String,
    /// The id stored in it: None where none is, Some(None) for one computed at run time.
    id: Option<Option<u64>>,
    /// For a cluster, its dimensions.
    dims: [Option<u64>; 3],
}

/// The launches in CuTe DSL's lowered host code: each `cudaLaunchConfig_t` it fills (grid,
/// block, dynamic shared memory, stream, attributes) and passes to `cudaLaunchKernelEx`, read
/// where its fields are stored as constants. The attributes are appended in a loop over the
/// attribute array; a slot whose id is stored as 4 (cluster dimension) holds the cluster's
/// x, y, z. SSA names are per function, so each function is read on its own.
pub fn host_launches(ir: &str) -> Vec<Launch> {
    let mut configs: Vec<(String, Config)> = Vec::new();
    let mut function_start = 0;
    let mut constants = HashMap::new();
    let mut fields: HashMap<String, Field> = HashMap::new();
    let mut symbols: HashMap<String, String> = HashMap::new();
    let mut loads: HashMap<String, String> = HashMap::new();
    for line in ir.lines().map(str::trim) {
        if line.starts_with("llvm.func ") {
            function_start = configs.len();
            constants.clear();
            fields.clear();
            symbols.clear();
            loads.clear();
            continue;
        }
        let Some((name, rest)) = line.split_once(" = ") else {
            if let Some(stored) = line.strip_prefix("llvm.store ") {
                let mut parts = stored.split([',', ' ']).filter(|s| !s.is_empty());
                let (Some(value), Some(pointer)) = (parts.next(), parts.next()) else {
                    continue;
                };
                let value = constants.get(value).copied();
                let Some(field) = fields.get(pointer) else {
                    continue;
                };
                store(&mut configs[function_start..], field, value);
            }
            continue;
        };
        let name = name.to_string();
        if let Some(constant) = rest.strip_prefix("llvm.mlir.constant(") {
            let value = constant.split([' ', ':', ')']).next().unwrap_or("");
            if let Ok(value) = value.parse::<u64>() {
                constants.insert(name, value);
            }
        } else if let Some(symbol) = rest.strip_prefix("llvm.mlir.addressof @") {
            let symbol = symbol.split([' ', ':']).next().unwrap_or("");
            symbols.insert(name, symbol.to_string());
        } else if let Some(loaded) = rest.strip_prefix("llvm.load ") {
            let pointer = loaded.split([' ', ':']).next().unwrap_or("");
            loads.insert(name, pointer.to_string());
        } else if rest.starts_with("llvm.alloca ") && rest.contains(&format!("x {CONFIG}")) {
            configs.push((name, Config::default()));
        } else if let Some(call) = rest.strip_prefix("llvm.call @_cudaLaunchKernelEx(") {
            // The second argument is the kernel: a load of the address of its handle.
            let kernel = call
                .split([',', ')'])
                .nth(1)
                .map(str::trim)
                .and_then(|arg| loads.get(arg))
                .and_then(|pointer| symbols.get(pointer));
            if let (Some(kernel), Some((_, config))) =
                (kernel, configs[function_start..].last_mut())
            {
                config.kernel = Some(kernel.clone());
            }
        } else if let Some(gep) = rest.strip_prefix("llvm.getelementptr ") {
            let Some((base, indices)) = gep.split_once('[') else {
                continue;
            };
            let indices: Vec<&str> = indices
                .split(']')
                .next()
                .unwrap_or("")
                .split(", ")
                .collect();
            let field = if gep.ends_with(CONFIG) {
                // Only the config allocated here: the same struct reloaded through a pointer
                // is read by the launch, not filled.
                if !configs[function_start..].iter().any(|c| c.0 == base) {
                    continue;
                }
                match indices[..] {
                    ["0", "2"] => Some(Field::DynamicShared(base.to_string())),
                    ["0", "1", i] => i
                        .parse()
                        .ok()
                        .filter(|i| *i < 3)
                        .map(|i| Field::Block(base.to_string(), i)),
                    _ => None,
                }
            } else if gep.ends_with(ATTRIBUTE) {
                match indices[..] {
                    // A slot of the attribute array: it belongs to the launch being filled.
                    [_] => {
                        if let Some((_, config)) = configs[function_start..].last_mut() {
                            config.attributes.push(Attribute {
                                slot: name.clone(),
                                id: None,
                                dims: [None; 3],
                            });
                        }
                        None
                    }
                    ["0", "0"] => Some(Field::AttributeId(base.to_string())),
                    ["0", "2"] => Some(Field::AttributeValue(base.to_string())),
                    _ => None,
                }
            } else if gep.ends_with(DIMS) {
                match (fields.get(base), &indices[..]) {
                    (Some(Field::AttributeValue(slot)), ["0", i]) => i
                        .parse()
                        .ok()
                        .filter(|i| *i < 3)
                        .map(|i| Field::ClusterDim(slot.clone(), i)),
                    _ => None,
                }
            } else {
                None
            };
            if let Some(field) = field {
                fields.insert(name, field);
            }
        }
    }
    configs
        .into_iter()
        .map(|(_, config)| Launch {
            dynamic_shared: config.dynamic_shared,
            threads: match config.block {
                [Some(x), Some(y), Some(z)] => u32::try_from(x * y * z).ok(),
                _ => None,
            },
            cluster: cluster_of(&config),
            kernel: config.kernel,
        })
        .collect()
}

fn slot_of<'a>(configs: &'a mut [(String, Config)], slot: &str) -> Option<&'a mut Attribute> {
    configs
        .iter_mut()
        .rev()
        .find_map(|(_, c)| c.attributes.iter_mut().find(|a| a.slot == slot))
}

fn config_of<'a>(configs: &'a mut [(String, Config)], base: &str) -> Option<&'a mut Config> {
    configs
        .iter_mut()
        .rev()
        .find(|c| c.0 == base)
        .map(|c| &mut c.1)
}

/// Stores `value` (a constant, or None for a value computed at run time) where `field` points,
/// in `configs` (the launches of the function being read).
fn store(configs: &mut [(String, Config)], field: &Field, value: Option<u64>) {
    match field {
        Field::Block(base, i) => {
            if let Some(config) = config_of(configs, base) {
                config.block[*i] = value;
            }
        }
        Field::DynamicShared(base) => {
            if let Some(config) = config_of(configs, base) {
                config.dynamic_shared = value;
            }
        }
        Field::AttributeId(slot) => {
            if let Some(attribute) = slot_of(configs, slot) {
                attribute.id = Some(value);
            }
        }
        Field::ClusterDim(slot, i) => {
            if let Some(attribute) = slot_of(configs, slot) {
                attribute.dims[*i] = value;
            }
        }
        Field::AttributeValue(_) => {}
    }
}

fn cluster_of(config: &Config) -> LaunchCluster {
    // An attribute whose id is not a constant might be the cluster: unknown, not "without".
    if config.attributes.iter().any(|a| a.id == Some(None)) {
        return LaunchCluster::Unknown;
    }
    match config
        .attributes
        .iter()
        .find(|a| a.id == Some(Some(CLUSTER_DIMENSION)))
    {
        None => LaunchCluster::Without,
        Some(Attribute {
            dims: [Some(x), Some(y), Some(z)],
            ..
        }) => match (u32::try_from(*x), u32::try_from(*y), u32::try_from(*z)) {
            (Ok(x), Ok(y), Ok(z)) => LaunchCluster::Shape([x, y, z]),
            _ => LaunchCluster::Unknown,
        },
        Some(_) => LaunchCluster::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CuTe DSL 4.8.1's lowered host code for GPU MODE's dual-GEMM submission, cut to the
    /// launch configuration's stores (names and values as compiled).
    const HOST: &str = r#"
  llvm.func @cutlass_host(%arg0: !llvm.ptr) -> i32 {
    %21 = llvm.mlir.constant(55424 : i64) : i64
    %23 = llvm.mlir.constant(1 : i32) : i32
    %43 = llvm.mlir.constant(128 : i32) : i32
    %338 = llvm.alloca %337 x !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)> : (i32) -> !llvm.ptr
    %341 = llvm.getelementptr %338[0, 1, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %43, %341 : i32, !llvm.ptr
    %342 = llvm.getelementptr %338[0, 1, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %23, %342 : i32, !llvm.ptr
    %343 = llvm.getelementptr %338[0, 1, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %23, %343 : i32, !llvm.ptr
    %344 = llvm.getelementptr %338[0, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %21, %344 : i64, !llvm.ptr
    %345 = llvm.getelementptr %338[0, 0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %68, %345 : i32, !llvm.ptr
    "#;

    /// CuTe DSL 4.8.1's host code for our test kernel as a CTA pair launched with
    /// `cluster=(2, 1, 1)`, cut to the launch: the attribute array, the slot the cluster
    /// dimension (id 4) is written to, and the launch call naming the kernel.
    const CLUSTER: &str = r#"
  llvm.func @cutlass_mma_host(%arg0: !llvm.struct<(ptr<1>)>) -> i32 {
    %0 = llvm.mlir.constant(4 : i32) : i32
    %4 = llvm.mlir.constant(6 : i32) : i32
    %6 = llvm.mlir.constant(0 : i32) : i32
    %7 = llvm.mlir.constant(2 : i32) : i32
    %8 = llvm.mlir.constant(1 : i32) : i32
    %12 = llvm.alloca %8 x !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)> : (i32) -> !llvm.ptr
    %13 = llvm.alloca %8 x !llvm.array<17 x struct<(i32, array<4 x i8>, array<64 x i8>)>> : (i32) -> !llvm.ptr
    %14 = llvm.getelementptr %12[0, 4] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %13, %14 : !llvm.ptr, !llvm.ptr
    %26 = llvm.load %25 : !llvm.ptr -> !llvm.ptr
    %27 = llvm.getelementptr %26[0, 5] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
  ^bb1(%31: i32):  // 2 preds: ^bb3, ^bb5
    %32 = llvm.getelementptr %30[%31] : (!llvm.ptr, i32) -> !llvm.ptr, !llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>
    %33 = llvm.getelementptr %32[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>
    llvm.store %4, %33 : i32, !llvm.ptr
    %34 = llvm.getelementptr %32[0, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>
    llvm.store %6, %34 : i32, !llvm.ptr
  ^bb6:  // pred: ^bb7
    %40 = llvm.getelementptr %30[%45] : (!llvm.ptr, i32) -> !llvm.ptr, !llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>
    %41 = llvm.getelementptr %40[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>
    %42 = llvm.load %41 : !llvm.ptr -> i32
  ^bb9(%52: i32):  // 2 preds: ^bb11, ^bb13
    %53 = llvm.getelementptr %51[%52] : (!llvm.ptr, i32) -> !llvm.ptr, !llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>
    %54 = llvm.getelementptr %53[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>
    llvm.store %0, %54 : i32, !llvm.ptr
    %55 = llvm.getelementptr %53[0, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i32, array<4 x i8>, array<64 x i8>)>
    %56 = llvm.getelementptr %55[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i32, i32, i32)>
    llvm.store %7, %56 : i32, !llvm.ptr
    %57 = llvm.getelementptr %55[0, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i32, i32, i32)>
    llvm.store %8, %57 : i32, !llvm.ptr
    %58 = llvm.getelementptr %55[0, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(i32, i32, i32)>
    llvm.store %8, %58 : i32, !llvm.ptr
  ^bb24:  // pred: ^bb17
    %93 = llvm.load %92 : !llvm.ptr -> !llvm.ptr
    %100 = llvm.mlir.addressof @kernels_kernel_cutlass_mma_kernel_0 : !llvm.ptr
    %101 = llvm.load %100 : !llvm.ptr -> !llvm.ptr
    %102 = llvm.call @_cudaLaunchKernelEx(%93, %101, %96) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
  }
    "#;

    #[test]
    fn a_launch_reads_its_block_and_dynamic_shared_memory() {
        assert_eq!(
            host_launches(HOST),
            vec![Launch {
                dynamic_shared: Some(55424),
                threads: Some(128),
                kernel: None,
                cluster: LaunchCluster::Without,
            }]
        );
        // A size computed at run time (not a constant) is unknown, not guessed.
        let dynamic = HOST.replace("llvm.store %21, %344", "llvm.store %99, %344");
        assert_eq!(host_launches(&dynamic)[0].dynamic_shared, None);
        assert_eq!(host_launches("llvm.store %1, %2 : i64, !llvm.ptr"), vec![]);
    }

    #[test]
    fn a_launch_reads_its_cluster_and_kernel() {
        let launches = host_launches(CLUSTER);
        assert_eq!(launches.len(), 1, "{launches:?}");
        assert_eq!(launches[0].cluster, LaunchCluster::Shape([2, 1, 1]));
        assert_eq!(
            launches[0].kernel.as_deref(),
            Some("kernels_kernel_cutlass_mma_kernel_0")
        );
        // Without the cluster attribute (the slot holding id 4), no cluster; with its id or a
        // dimension computed at run time, an unknown one.
        let without = CLUSTER.replace("llvm.store %0, %54", "llvm.store %4, %54");
        assert_eq!(host_launches(&without)[0].cluster, LaunchCluster::Without);
        let id = CLUSTER.replace("llvm.store %0, %54", "llvm.store %arg1, %54");
        assert_eq!(host_launches(&id)[0].cluster, LaunchCluster::Unknown);
        let dim = CLUSTER.replace("llvm.store %7, %56", "llvm.store %arg1, %56");
        assert_eq!(host_launches(&dim)[0].cluster, LaunchCluster::Unknown);
    }

    #[test]
    fn the_cluster_reaches_the_census_as_a_comment() {
        let ptx = ".visible .entry kernel_cutlass_mma_kernel_0(\n)\n{\n ret;\n}\n";
        let text = annotate(
            ptx,
            &["kernel_cutlass_mma_kernel_0"],
            &host_launches(CLUSTER),
        );
        assert!(text.ends_with(ptx), "{text}");
        assert_eq!(
            launch_comments(&text),
            [(
                "kernel_cutlass_mma_kernel_0".to_string(),
                LaunchCluster::Shape([2, 1, 1])
            )]
        );
        // A launch of a kernel the PTX does not hold says nothing of it.
        assert_eq!(annotate(ptx, &["other"], &host_launches(CLUSTER)), ptx);
        for cluster in [LaunchCluster::Without, LaunchCluster::Unknown] {
            let line = format!("{LAUNCH_COMMENT} k cluster {cluster}");
            assert_eq!(launch_comments(&line), [("k".to_string(), cluster)]);
        }
    }
}
