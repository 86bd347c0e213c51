//! memctl: machine code (SASS, a cubin) beside each module's PTX (vendor/README.md, "machine
//! code beside the PTX").
//!
//! The driver compiles PTX for the card at a module's first load, and caches the result
//! (`~/.nv/ComputeCache`). Uncached, that is seconds: `ptxas` takes 9 s on `binary.ptx` alone
//! on one core of the machine that builds memctl, and the first trial on a fresh GPU machine
//! started its first launch 6.5 s after opening the device. `ptxas` here compiles each module's
//! PTX for the architecture the PTX targets (its `.target`, e.g. `sm_90a` from
//! `CUDA_COMPUTE_CAP=90`), and `sass.rs` in `OUT_DIR` embeds the cubins. A card of another
//! architecture cannot load them and gets the PTX, as before.
//!
//! `conv` and `quantized` get none: memctl uses neither, and `quantized` alone would add a
//! minute to the build.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The modules that get SASS, as `lib.rs` names them and `cudaforge` names their PTX.
const WITH_SASS: &[&str] = &["affine", "binary", "cast", "fill", "indexing", "reduce", "sort", "ternary", "unary"];
const WITHOUT: &[&str] = &["conv", "quantized"];

pub fn build(out_dir: &Path) {
    let ptxas = ptxas();
    // One `ptxas` per module at once: each is single-threaded, and `binary` takes longest.
    std::thread::scope(|scope| {
        for name in WITH_SASS {
            let ptxas = &ptxas;
            scope.spawn(move || compile(ptxas, out_dir, name));
        }
    });
    let mut rs = String::from("// memctl: each module's SASS (vendor/candle-kernels/sass.rs); empty: none.\n");
    for name in WITH_SASS {
        rs += &format!(
            "pub const {}: &[u8] = include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.cubin\"));\n",
            name.to_uppercase()
        );
    }
    for name in WITHOUT {
        rs += &format!("pub const {}: &[u8] = &[];\n", name.to_uppercase());
    }
    std::fs::write(out_dir.join("sass.rs"), rs).expect("write sass.rs in OUT_DIR");
}

/// `ptxas` beside the `nvcc` that built the PTX (the toolkit's `bin`), else on `PATH`.
fn ptxas() -> PathBuf {
    ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|home| PathBuf::from(home).join("bin").join("ptxas"))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("ptxas"))
}

fn compile(ptxas: &Path, out_dir: &Path, name: &str) {
    let ptx = out_dir.join(format!("{name}.ptx"));
    let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| panic!("read {}: {e}", ptx.display()));
    let arch = target(&text).unwrap_or_else(|| panic!("{} names no .target", ptx.display()));
    let cubin = out_dir.join(format!("{name}.cubin"));
    let status = Command::new(ptxas)
        .args(["-O3", &format!("-arch={arch}"), "-o"])
        .arg(&cubin)
        .arg(&ptx)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {} to build {name}'s SASS: {e}; set CUDA_HOME", ptxas.display()));
    assert!(status.success(), "{} failed on {}", ptxas.display(), ptx.display());
}

/// The architecture a PTX module targets: `.target sm_90a` gives `sm_90a`.
fn target(ptx: &str) -> Option<&str> {
    ptx.lines()
        .find_map(|line| line.trim().strip_prefix(".target "))
        .and_then(|rest| rest.split([',', ' ']).next())
}
