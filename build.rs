//! Always: the git commit memctl is built from, which every run record keeps
//! (`VERGEN_GIT_SHA`, `VERGEN_GIT_DIRTY`; see `src/build_info.rs`).
//!
//! With the `cuda` feature: memctl's own CUDA kernels (`src/kernels/cuda/*.cu`) compiled to
//! PTX with the toolkit's `nvcc`, as candle's kernels are, and embedded in the binary. PTX for
//! compute capability `CUDA_COMPUTE_CAP` (default 80) is compiled again by the driver for the
//! GPU it meets, so one build serves the A100, the H100 and later. Beside each PTX, `ptxas`
//! compiles its SASS for that capability (a cubin): a card of it loads that without the
//! driver's compilation at the first launch (`kernels::fused`'s `prebuilt_sass`). The default
//! build needs no CUDA toolkit and does nothing here.

use std::path::PathBuf;
use std::process::Command;

use vergen_gitcl::{Emitter, GitclBuilder};

const KERNELS: &[&str] = &[
    "lstm_cell",
    "layer_norm",
    "item_gate",
    "softmax",
    "scale",
    "optim",
    "sam_attend",
    "sum_parts",
    "head_move",
    "spd_solve",
    "nam_write",
    "gru_cell",
    "l2_normalize",
    "outer",
    "kanerva_write",
    "kanerva_address",
    "lerp",
    "rel_read",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    emit_commit();
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        build_kernels();
    }
}

/// The commit and whether tracked files differ from it. Outside a git checkout (a source
/// tarball) vergen emits a placeholder and a warning instead of failing the build.
fn emit_commit() {
    let git = GitclBuilder::default().sha(false).dirty(false).build().expect("vergen's git settings");
    Emitter::default().add_instructions(&git).and_then(|e| e.emit()).expect("vergen emits the commit");
    // vergen reruns on a new commit (.git/HEAD and its ref); an edit to a tracked file changes
    // the dirty flag too, so the sources rerun it as well.
    for path in ["src", "grammar", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn build_kernels() {
    // Another toolkit writes another PTX version (a newer one than the driver knows fails to
    // load), so a change of toolkit rebuilds the kernels.
    for var in ["CUDA_COMPUTE_CAP", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let nvcc = ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|home| PathBuf::from(home).join("bin").join("nvcc"))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("nvcc"));
    // "90a" (an arch-specific target) is compute capability 90 for PTX.
    let cap = std::env::var("CUDA_COMPUTE_CAP")
        .ok()
        .and_then(|c| c.trim_end_matches(char::is_alphabetic).replace('.', "").parse::<u32>().ok())
        .unwrap_or(80)
        .min(90);
    let ptxas = nvcc.with_file_name("ptxas");
    for name in KERNELS {
        let src = format!("src/kernels/cuda/{name}.cu");
        println!("cargo:rerun-if-changed={src}");
        let ptx = out.join(format!("{name}.ptx"));
        run(Command::new(&nvcc).args(["--ptx", "-O3", &format!("-arch=compute_{cap}"), "-o"]).arg(&ptx).arg(&src));
        let cubin = out.join(format!("{name}.cubin"));
        run(Command::new(&ptxas).args(["-O3", &format!("-arch=sm_{cap}"), "-o"]).arg(&cubin).arg(&ptx));
    }
}

/// Runs a toolkit's program; a failure stops the build with what ran.
fn run(command: &mut Command) {
    let status =
        command.status().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}; set CUDA_HOME to the CUDA toolkit"));
    assert!(status.success(), "{command:?} failed");
}
