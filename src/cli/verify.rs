//! `nvfp4-oracle verify`: whether a certificate is this oracle's and is about the kernel in front
//! of it: its signature holds (this machine's key), it was made under this model version, it is
//! a whole campaign's (not one shard's), and its source hash is that of the kernel's files now.

use super::external::ExternalArgs;
use super::EXIT_FAIL;
use clap::Args;
use nvfp4_harness::certify::report::{Certificate, BUILD};
use nvfp4_harness::error::{Error, Result};
use nvfp4_harness::kernels::KernelUnderTest;
use nvfp4_model::model::MODEL_VERSION;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Certificates to verify (`<kernel>.json`).
    #[arg(required = true, value_name = "CERTIFICATE.json")]
    pub certificates: Vec<PathBuf>,
    /// The kernels as they are now (a --manifest, --submission or --library; a built-in kernel
    /// is found by the certificate's name): their source hash must be the certificate's.
    #[command(flatten)]
    pub external: ExternalArgs,
}

/// One check of one certificate: what was checked and whether it holds.
struct Check {
    what: String,
    holds: bool,
}

pub fn run(args: VerifyArgs) -> Result<ExitCode> {
    let external = args.external.kernels()?;
    let registry = nvfp4_harness::worker::registry();
    let mut all_hold = true;
    // The table is printed once every certificate is read: an unreadable one is an error with
    // no half-printed table before it.
    let mut rows = Vec::new();
    for path in &args.certificates {
        let text = nvfp4_model::bounded_read::read_text(
            path,
            "certificate",
            nvfp4_model::bounded_read::JSON_CAP,
        )?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|err| Error::file(path, format!("not a certificate: {err}")))?;
        let mut checks = vec![match nvfp4_harness::certify::signing::verify(&value) {
            Ok(()) => Check {
                what: "signed with this machine's key".into(),
                holds: true,
            },
            Err(why) => Check {
                what: format!("signature: {why}"),
                holds: false,
            },
        }];
        let certificate: Certificate = serde_json::from_value(value)
            .map_err(|err| Error::file(path, format!("not a certificate of this oracle: {err}")))?;
        checks.push(Check {
            what: format!(
                "model version {} (this oracle's: {MODEL_VERSION})",
                certificate.model_version
            ),
            holds: certificate.model_version == MODEL_VERSION,
        });
        checks.push(Check {
            what: match certificate.shard {
                Some(shard) => format!("a whole campaign: it is shard {shard}; merge the shards"),
                None => "a whole campaign (not one shard)".into(),
            },
            holds: certificate.shard.is_none(),
        });
        let kernel: Option<&dyn KernelUnderTest> = external
            .iter()
            .map(|k| k as &dyn KernelUnderTest)
            .chain(registry.iter().map(|k| k.as_ref()))
            .find(|k| k.name() == certificate.kernel);
        checks.push(match kernel {
            None => Check {
                what: format!(
                    "source hash: no kernel named {} given (--manifest, --submission, --library) \
                     or built in",
                    certificate.kernel
                ),
                holds: false,
            },
            Some(kernel) => {
                let now = kernel.source_hash();
                Check {
                    what: format!(
                        "source hash {} (the kernel's files now: {})",
                        short(certificate.source_hash.as_deref()),
                        short(now.as_deref())
                    ),
                    holds: now == certificate.source_hash,
                }
            }
        });
        // A note, not a check: another build of the oracle with the same model judges alike.
        if certificate.build != BUILD {
            rows.push(format!(
                "| {} | made by oracle build {} (this one: {BUILD}) | note |",
                path.display(),
                certificate.build
            ));
        }
        for check in &checks {
            rows.push(format!(
                "| {} | {} | {} |",
                path.display(),
                check.what,
                if check.holds { "yes" } else { "**no**" }
            ));
            all_hold &= check.holds;
        }
        rows.push(format!(
            "| {} | status: {:?} | - |",
            path.display(),
            certificate.status
        ));
    }
    println!("| certificate | check | holds |\n|---|---|---|");
    rows.iter().for_each(|row| println!("{row}"));
    Ok(if all_hold {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}

fn short(hash: Option<&str>) -> String {
    hash.map_or("none".into(), |h| h.chars().take(12).collect())
}
