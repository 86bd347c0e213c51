//! Always: the git commit memctl is built from, which every run record keeps
//! (`VERGEN_GIT_SHA`, `VERGEN_GIT_DIRTY`; see `src/build_info.rs`).
//!
//! With the `cuda` feature: memctl's own CUDA kernels (every `src/kernels/**/*.cu`) compiled to
//! PTX with the toolkit's `nvcc`, as candle's kernels are, and embedded in the binary. PTX for
//! compute capability `CUDA_COMPUTE_CAP` (default 80) is compiled again by the driver for the
//! GPU it meets, so one build serves the A100, the H100 and later. Beside each PTX, `ptxas`
//! compiles its SASS for that capability (a cubin): a card of it loads that without the
//! driver's compilation at the first launch (`device::tuning::PREBUILT_SASS`). It writes the
//! table of modules (`cuda_modules.rs`) that `kernels::cuda::modules` includes, so a new `.cu`
//! file needs no line here. The default build needs no CUDA toolkit and does nothing here.

use std::path::{Path, PathBuf};
use std::process::Command;

use vergen_gitcl::{Emitter, GitclBuilder};

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
    let sources = cuda_sources(Path::new("src/kernels"));
    let mut table = String::from("// The kernel modules build.rs compiled: one per `src/kernels/**/*.cu`.\n");
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let name = src.file_stem().and_then(|s| s.to_str()).expect("a kernel file's name is UTF-8");
        let ptx = out.join(format!("{name}.ptx"));
        run(Command::new(&nvcc).args(["--ptx", "-O3", &format!("-arch=compute_{cap}"), "-o"]).arg(&ptx).arg(src));
        let cubin = out.join(format!("{name}.cubin"));
        run(Command::new(&ptxas).args(["-O3", &format!("-arch=sm_{cap}"), "-o"]).arg(&cubin).arg(&ptx));
        table.push_str(&format!("module!({}, \"{name}\");\n", name.to_uppercase()));
    }
    std::fs::write(out.join("cuda_modules.rs"), table).expect("OUT_DIR is writable");
}

/// Every `.cu` file below `dir`, sorted; two with one name would build one module twice.
fn cuda_sources(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        println!("cargo:rerun-if-changed={}", dir.display());
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a readable folder entry").path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "cu") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, &mut found);
    found.sort();
    let mut names: Vec<_> = found.iter().filter_map(|p| p.file_stem()).collect();
    names.sort();
    if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
        panic!("two kernel files are named {:?}: a module's name is its file's", twice[0]);
    }
    found
}

/// Runs a toolkit's program; a failure stops the build with what ran.
fn run(command: &mut Command) {
    let status =
        command.status().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}; set CUDA_HOME to the CUDA toolkit"));
    assert!(status.success(), "{command:?} failed");
}
