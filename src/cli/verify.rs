//! `nvfp4-oracle verify`: whether a certificate is this oracle's and is about the kernel in front
//! of it: its signature holds (this machine's key), it was made under this model version, it is
//! a whole campaign's (not one shard's), and its source hash is that of the kernel's files now.

use super::exit_code::{EXIT_FAIL, EXIT_NOT_EXACT, EXIT_UNAVAILABLE};
use super::external::ExternalArgs;
use clap::Args;
use nvfp4_harness::certify::{Certificate, Status, BUILD};
use nvfp4_harness::kernels::KernelUnderTest;
use nvfp4_harness::{Error, Result};
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
    // A damaged key, or one another user could have planted, is named once (exit 2), not
    // reported as every certificate's edited signature.
    nvfp4_harness::certify::check_key()?;
    let external = args.external.kernels()?;
    let registry = nvfp4_harness::worker::registry();
    let mut all_hold = true;
    let mut verdicts: Vec<u8> = Vec::new();
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
        let mut checks = vec![match nvfp4_harness::certify::verify(&value) {
            Ok(()) => Check {
                what: "signed with this machine's key".into(),
                holds: true,
            },
            Err(why) => Check {
                what: format!("signature: {why}"),
                holds: false,
            },
        }];
        let certificate: Certificate =
            match serde_json::from_value(value.clone()) {
                Ok(certificate) => certificate,
                // A certificate of an older format (one committed under results/ by an earlier
                // build): a verdict of its own, not an error with a parser's words.
                Err(err) if value.get("kernel").is_some() && value.get("tool").is_some() => {
                    rows.push(format!(
                    "| {} | format: made by oracle build {} in a format this build ({BUILD}) no \
                     longer reads ({err}); certify the kernel again | **no** |",
                    path.display(),
                    value.get("build").and_then(|b| b.as_str()).unwrap_or("unknown"),
                ));
                    all_hold = false;
                    continue;
                }
                Err(err) => {
                    return Err(Error::file(
                        path,
                        format!("not a certificate of this oracle: {err}"),
                    ))
                }
            };
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
        // The verdict decides the exit code as certify's did: a failed kernel is not made
        // good by a sound certificate of its failure.
        let (verdict, _) = nvfp4_harness::certify::verdict(&certificate);
        let verdict_code = match certificate.status {
            Status::Certified => 0,
            Status::Failed => EXIT_FAIL,
            Status::ScheduleDiffers => EXIT_NOT_EXACT,
            Status::Unavailable => EXIT_UNAVAILABLE,
        };
        verdicts.push(verdict_code);
        rows.push(format!(
            "| {} | verdict: {verdict} | {} |",
            path.display(),
            if verdict_code == 0 { "yes" } else { "**no**" }
        ));
    }
    println!("| certificate | check | holds |\n|---|---|---|");
    rows.iter().for_each(|row| println!("{row}"));
    // A check that fails, or a failed verdict, is 1; else an unavailable kernel 4, a schedule
    // that differs 3 (1 outranks them, as in certify).
    Ok(if !all_hold || verdicts.contains(&EXIT_FAIL) {
        ExitCode::from(EXIT_FAIL)
    } else if verdicts.contains(&EXIT_UNAVAILABLE) {
        ExitCode::from(EXIT_UNAVAILABLE)
    } else if verdicts.contains(&EXIT_NOT_EXACT) {
        ExitCode::from(EXIT_NOT_EXACT)
    } else {
        ExitCode::SUCCESS
    })
}

fn short(hash: Option<&str>) -> String {
    hash.map_or("none".into(), |h| h.chars().take(12).collect())
}
