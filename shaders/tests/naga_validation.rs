//! Every WGSL module parses and validates with naga (the same front end wgpu uses), and
//! every declared entry point and binding exists. Runs in a plain `cargo test`.

use arlbook_shaders::{Binding, KERNELS, SHARED};
use naga::valid::{Capabilities, ValidationFlags, Validator};

fn validate(name: &str, source: &str) -> naga::Module {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("{name}: parse error\n{}", e.emit_to_string(source)));
    Validator::new(ValidationFlags::all(), Capabilities::empty())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name}: invalid\n{}", e.emit_to_string(source)));
    module
}

#[test]
fn every_kernel_validates_and_declares_its_entry_points() {
    for kernel in KERNELS {
        let module = validate(kernel.name, kernel.source);
        let entries: Vec<&str> = module
            .entry_points
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(entries.len(), kernel.entry_points.len(), "{}", kernel.name);
        for entry in kernel.entry_points {
            assert!(
                entries.contains(entry),
                "{}: no entry point {entry}",
                kernel.name
            );
        }
        for (_, var) in module.global_variables.iter() {
            let Some(binding) = &var.binding else {
                continue;
            };
            assert_eq!(binding.group, 0, "{}", kernel.name);
            let declared = kernel
                .bindings
                .get(binding.binding as usize)
                .unwrap_or_else(|| {
                    panic!("{}: binding {} undeclared", kernel.name, binding.binding)
                });
            let is_uniform = var.space == naga::AddressSpace::Uniform;
            assert_eq!(
                is_uniform,
                *declared == Binding::Uniform,
                "{} binding {}",
                kernel.name,
                binding.binding
            );
        }
    }
}

#[test]
fn shared_files_validate_alone() {
    for (name, source) in SHARED {
        validate(name, source);
    }
}

#[test]
fn every_wgsl_file_on_disk_is_embedded() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(arlbook_shaders::WGSL_DIR);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let embedded = KERNELS.iter().any(|k| k.source.contains(&text))
            || SHARED.iter().any(|(_, s)| s.contains(&text));
        assert!(embedded, "{} is not embedded in any kernel", path.display());
    }
}
