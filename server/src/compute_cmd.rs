//! `arlbook compute <name>`: the compute API on the command line.
//!
//! Reads one JSON object (stdin, or `--input FILE`), prints one JSON object on stdout.
//! A rejected input prints `{"error": {"field": ..., "message": ...}}` and exits with
//! status 2, as the contract in DESIGN.md says.

use crate::output::outln;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use arlbook_core::api::gpu::ComputedOn;
use arlbook_core::{FieldError, api, gpu};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

/// Exit status for a rejected input (the contract's "status 2").
const EXIT_BAD_INPUT: u8 = 2;

/// Arguments of `arlbook compute`.
#[derive(Debug, Args)]
pub struct ComputeArgs {
    /// The computation to run (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Read the request from this file instead of stdin.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Where to compute: the CPU reference, the GPU, or the GPU when one is found.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// List the computations with a one-line description each.
    #[arg(long)]
    list: bool,
    /// Print an example request for the computation instead of running it.
    #[arg(long)]
    example: bool,
    /// Pretty-print the JSON output.
    #[arg(long)]
    pretty: bool,
}

/// Compute backend selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The GPU when an adapter is found, else the CPU (said on stderr).
    Auto,
    /// The CPU reference implementation.
    Cpu,
    /// The wgpu compute path; fails when no adapter exists.
    Gpu,
}

/// Runs the command; `Ok` carries the exit status to use.
pub fn run(args: &ComputeArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        let width = api::ENTRIES.iter().map(|e| e.name.len()).max().unwrap_or(0);
        for entry in api::ENTRIES {
            outln!("{:width$}  {}", entry.name, entry.summary);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let Some(name) = args.name.as_deref() else {
        anyhow::bail!("name a computation, or pass --list");
    };
    if args.example {
        return Ok(match api::examples::example(name) {
            Some(request) => {
                print_json(&request, true);
                ExitCode::SUCCESS
            }
            None => print_error(&FieldError::new("name", format!("no example for `{name}`"))),
        });
    }
    let text = match &args.input {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading --input {}", path.display()))?,
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading the request from stdin")?;
            text
        }
    };
    let request = match parse_json(&text) {
        Ok(request) => request,
        Err(err) => return Ok(print_error(&err)),
    };
    let outcome = match args.backend {
        Backend::Cpu => api::compute(name, request),
        Backend::Gpu => match gpu::GpuContext::new_blocking() {
            Ok(ctx) => api::gpu::compute(name, request, &ctx).map(|computed| {
                report_fallback(&computed.backend);
                computed.response
            }),
            Err(e) => Err(FieldError::new(
                "backend",
                format!("--backend gpu needs a GPU adapter: {e}; use --backend cpu or auto"),
            )),
        },
        // Probing for an adapter costs a few hundred milliseconds; skip it when the
        // entry has no kernel anyway.
        Backend::Auto if !api::gpu::GPU_ENTRIES.contains(&name) => api::compute(name, request),
        // A software adapter (lavapipe, SwiftShader) is slower than the CPU reference
        // for every figure-sized request, so `auto` only takes a hardware GPU.
        Backend::Auto => match gpu::GpuContext::new_blocking() {
            Ok(ctx) if !ctx.is_software() => {
                api::gpu::compute(name, request, &ctx).map(|computed| {
                    report_fallback(&computed.backend);
                    computed.response
                })
            }
            Ok(ctx) => {
                eprintln!(
                    "arlbook: only a software GPU adapter ({}) was found; computing on the CPU \
                     (--backend gpu uses it anyway)",
                    ctx.adapter_name()
                );
                api::compute(name, request)
            }
            Err(e) => {
                eprintln!("arlbook: {e}; computing on the CPU (--backend auto)");
                api::compute(name, request)
            }
        },
    };
    match outcome {
        Ok(response) => {
            print_json(&response, args.pretty);
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => Ok(print_error(&err)),
    }
}

/// Says on stderr when the GPU path handed a request to the CPU.
fn report_fallback(backend: &ComputedOn) {
    if let ComputedOn::Cpu(reason) = backend {
        eprintln!("arlbook: computed on the CPU: {reason}");
    }
}

/// Parses the request text strictly (a key given twice is refused, naming it); syntax
/// errors name the whole request.
fn parse_json(text: &str) -> Result<Value, FieldError> {
    crate::strict_json::parse(text.as_bytes())
}

fn print_json(value: &Value, pretty: bool) {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    // Serialising a `Value` cannot fail; fall back to its Display form if it ever does.
    outln!("{}", text.unwrap_or_else(|_| value.to_string()));
}

fn print_error(err: &FieldError) -> ExitCode {
    print_json(&json!({ "error": err }), false);
    ExitCode::from(EXIT_BAD_INPUT)
}
