//! memctl's CUDA kernels (`src/kernels/cuda/**/*.cu`), run on the CPU by `tests/cuda_emulation/`
//! (CUDA's threads, barriers and warp shuffles on host threads), against memctl's CPU ops.
//!
//! CI has no GPU: without this, a kernel is only compiled there, and checked against the CPU
//! by `memctl doctor --check` on a GPU machine. Here each kernel runs with the launch shape its
//! launcher uses (`kernels::cuda::launch_shape`), twice: under AddressSanitizer and
//! UndefinedBehavior- Sanitizer (a read or write past a buffer), and under ThreadSanitizer (a
//! missing barrier is a race between the block's threads). Output buffers start as NaN, so an
//! element the kernel never writes shows. The emulation runs a block's threads concurrently but not
//! the GPU's memory model or its float rounding of fused multiply-adds, so results agree to a
//! tolerance.
//!
//! Needs g++ with C++20 (Debian's `g++`); without it the tests fail and say so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{Device, Tensor, Var};
use memctl::kernels::cuda::kanerva::{kanerva_address, spd_solve};
use memctl::kernels::cuda::kernel::{Fused, FusedKernel};
use memctl::kernels::cuda::launch_shape::LaunchShape;
use memctl::kernels::cuda::layers::gru_cell::Gru;
use memctl::kernels::cuda::layers::layer_norm::Norm;
use memctl::kernels::cuda::layers::lerp::Lerp;
use memctl::kernels::cuda::layers::lstm_cell::{Half, Lstm};
use memctl::kernels::cuda::layers::outer::Outer;
use memctl::kernels::cuda::layers::scale::Scale;
use memctl::kernels::cuda::layers::scale_rows::ScaleRows;
use memctl::kernels::cuda::layers::softmax::Softmax;
use memctl::kernels::cuda::layers::tanh::Tanh;
use memctl::kernels::cuda::nam::head_move::Move;
use memctl::kernels::cuda::nam::l2_normalize::Normalize;
use memctl::kernels::cuda::nam::nam_write::{NamWrite, Orientation};
use memctl::kernels::cuda::sam::item_gate::Gate;
use memctl::kernels::cuda::sam::sam_attend::Attend;

/// The sanitizers each kernel runs under, one runner binary each.
const SANITIZERS: [&str; 2] = ["address,undefined", "thread"];

/// The runner binaries (one per sanitizer), built once for each version of the kernels and the
/// emulation (a folder per version, so that test processes running at once, as under
/// cargo-nextest, and later runs share them).
fn runners() -> &'static [PathBuf] {
    static RUNNERS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    RUNNERS.get_or_init(build_runners)
}

fn build_runners() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Every `.cu` below src/kernels/cuda/ (one folder per family), sorted; build.rs makes sure
    // no two share a name, so each file's namespace below is its own.
    let mut files = crate::support::files_with_extension(&root.join("src/kernels/cuda"), "cu");
    // The emulation's own faulty kernels, which show that it catches what it claims.
    files.push(root.join("tests/cuda_emulation/faults.cu"));
    // Every kernel file in a namespace of its own (their helpers share names).
    let (mut source, mut list) = (String::new(), String::new());
    for file in &files {
        let namespace = format!("file_{}", file.file_stem().unwrap().to_str().unwrap());
        source.push_str(&format!("namespace {namespace} {{\n#line 1 \"{}\"\n", file.display()));
        for line in std::fs::read_to_string(file).unwrap().lines() {
            source.push_str(&emulated_line(line));
            source.push('\n');
            if let Some(rest) = line.split("extern \"C\" __global__ void ").nth(1) {
                list.push_str(&format!("KERNEL({namespace}, {})\n", rest.split('(').next().unwrap().trim()));
            }
        }
        source.push_str("}\n");
    }
    let emulation = root.join("tests/cuda_emulation");
    let version = {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        for text in [&source, &list] {
            text.hash(&mut h);
        }
        for file in ["emu.h", "runner.cpp"] {
            std::fs::read(emulation.join(file)).unwrap().hash(&mut h);
        }
        SANITIZERS.hash(&mut h);
        h.finish()
    };
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cuda_emulation/runners-{version:016x}"));
    let binaries: Vec<PathBuf> =
        SANITIZERS.iter().map(|s| home.join(format!("runner-{}", s.replace(',', "-")))).collect();
    if binaries.iter().all(|b| b.exists()) {
        return binaries;
    }
    // Built in a folder of this process's, then moved in whole (a rename: atomic).
    let dir = home.with_extension(format!("build-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(dir.join("kernel_source.cu"), source).unwrap();
    std::fs::write(dir.join("kernels.inc"), list).unwrap();
    let builds: Vec<_> = SANITIZERS
        .iter()
        .zip(&binaries)
        .map(|(sanitizer, target)| {
            let binary = dir.join(target.file_name().unwrap());
            let child = Command::new("g++")
                .args(["-std=c++20", "-O1", "-g", "-pthread", "-fno-sanitize-recover=all", "-Werror=return-type"])
                .arg(format!("-fsanitize={sanitizer}"))
                .arg("-I")
                .arg(&emulation)
                .arg("-I")
                .arg(&dir)
                .args(["-include", "emu.h"])
                .arg(emulation.join("runner.cpp"))
                .arg("-o")
                .arg(&binary)
                .output();
            (binary, target, std::thread::spawn(move || child))
        })
        .collect();
    for (binary, target, build) in builds {
        let out = build.join().unwrap().unwrap_or_else(|e| {
            panic!("cannot run g++ ({e}): the CUDA kernels' emulation needs a C++20 compiler (Debian: g++)")
        });
        assert!(out.status.success(), "building {}:\n{}", binary.display(), String::from_utf8_lossy(&out.stderr));
        std::fs::rename(&binary, target).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    binaries
}

/// A kernel file's line for the emulation: dynamic shared memory (`extern __shared__ T name[];`)
/// becomes the emulated block's.
fn emulated_line(line: &str) -> String {
    let code = line.trim_start();
    let Some(declaration) = code.strip_prefix("extern __shared__ ") else { return line.to_string() };
    let indent = &line[..line.len() - code.len()];
    let words: Vec<&str> = declaration.trim_end_matches(';').trim_end_matches("[]").split_whitespace().collect();
    let [ty, name] = words[..] else { panic!("a dynamic shared declaration the emulation cannot read: {line}") };
    format!("{indent}{ty}* {name} = emu::dynamic_shared<{ty}>();")
}

/// One argument of a launch, as `runner.cpp` reads it.
#[derive(Clone)]
enum Arg {
    /// A buffer of floats the kernel reads (and may write).
    In(Vec<f32>),
    /// A new buffer of this many floats, NaN-filled: the kernel's output.
    Out(usize),
    /// A new scratch buffer of this many doubles.
    Scratch64(usize),
    Null,
    I32(i32),
    F32(f32),
    /// `sum_parts.cu`'s struct of pointers.
    Parts(Vec<Vec<f32>>),
}

/// Runs `kernel` with `shape` and `args` under every sanitizer: the float buffers afterwards
/// (those of `In` and `Out`, in order), the same under each.
fn launch(kernel: &str, shape: LaunchShape, args: &[Arg]) -> Vec<Vec<f32>> {
    let results: Vec<Vec<Vec<f32>>> =
        try_launch(kernel, shape, args).into_iter().map(|r| r.unwrap_or_else(|e| panic!("{kernel}: {e}"))).collect();
    let bits =
        |r: &Vec<Vec<f32>>| -> Vec<Vec<u32>> { r.iter().map(|b| b.iter().map(|v| v.to_bits()).collect()).collect() };
    for other in &results[1..] {
        assert!(bits(other) == bits(&results[0]), "{kernel}: the sanitizers' runs differ");
    }
    results.into_iter().next().unwrap()
}

/// Runs `kernel` under each sanitizer: its buffers, or what the runner reported.
fn try_launch(kernel: &str, shape: LaunchShape, args: &[Arg]) -> Vec<Result<Vec<Vec<f32>>, String>> {
    static CASES: AtomicUsize = AtomicUsize::new(0);
    runners()
        .iter()
        .map(|runner| {
            let case = CASES.fetch_add(1, Ordering::Relaxed);
            let dir =
                Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cuda_emulation/{}-{case}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let mut spec = format!(
                "kernel {kernel}\ngrid {} 1 1\nblock {} 1 1\nshared {}\n",
                shape.blocks, shape.threads, shape.shared_bytes
            );
            // The buffers returned (those of `In` and `Out`, in order), by file name.
            let mut written = Vec::new();
            let mut files = 0;
            let mut file = |values: &[f32]| {
                let name = format!("in{files}");
                files += 1;
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                std::fs::write(dir.join(&name), bytes).unwrap();
                name
            };
            for arg in args {
                let line = match arg {
                    Arg::In(values) => {
                        let name = file(values);
                        written.push(name.clone());
                        format!("f32 {name}")
                    }
                    Arg::Out(count) => {
                        let name = format!("out{}", written.len());
                        written.push(name.clone());
                        format!("f32new {count} {name}")
                    }
                    Arg::Scratch64(count) => format!("f64new {count}"),
                    Arg::Null => "null".into(),
                    Arg::I32(v) => format!("i32 {v}"),
                    Arg::F32(v) => format!("f32v {v:e}"),
                    Arg::Parts(parts) => {
                        let names: Vec<String> = parts.iter().map(|p| file(p)).collect();
                        format!("parts {}", names.join(" "))
                    }
                };
                spec.push_str(&line);
                spec.push('\n');
            }
            let launch_file = dir.join("launch.txt");
            std::fs::write(&launch_file, spec).unwrap();
            let out = Command::new(runner).arg(&launch_file).output().unwrap();
            let result = if out.status.success() {
                Ok(written
                    .iter()
                    .map(|name| {
                        std::fs::read(dir.join(format!("{name}.out")))
                            .unwrap()
                            .chunks_exact(4)
                            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                            .collect()
                    })
                    .collect())
            } else {
                Err(format!("under {}:\n{}", runner.display(), String::from_utf8_lossy(&out.stderr)))
            };
            std::fs::remove_dir_all(&dir).unwrap();
            result
        })
        .collect()
}

/// Deterministic values in about [-1, 1].
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Sizes as the kernels' int arguments.
fn ints(sizes: &[usize]) -> Vec<Arg> {
    sizes.iter().map(|&s| Arg::I32(i32::try_from(s).unwrap())).collect()
}

fn tensor(data: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_slice(data, dims, &Device::Cpu).unwrap()
}

fn flat(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

/// `got` agrees with `want` to `tol` relative to `want`'s largest magnitude; every element written.
fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(!g.is_nan() || w.is_nan(), "{what}: element {i} not written (NaN), expected {w}");
        assert!((g - w).abs() <= tol * scale, "{what}: element {i} is {g}, the CPU's {w}");
    }
}

/// The gradients of `Σ f(inputs) ⊙ g` for each input, by memctl's CPU op and candle's autograd.
fn cpu_grads(inputs: &[Tensor], g: &Tensor, f: impl Fn(&[Tensor]) -> Tensor) -> (Tensor, Vec<Vec<f32>>) {
    let vars: Vec<Var> = inputs.iter().map(|t| Var::from_tensor(t).unwrap()).collect();
    let ts: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
    let y = f(&ts);
    let grads = (&y * g).unwrap().sum_all().unwrap().backward().unwrap();
    let out = ts.iter().map(|t| flat(grads.get(t).unwrap())).collect();
    (y.detach(), out)
}

/// A fused op's kernel (`pass`, as `FusedKernel` describes it: entry, launch shape, scalar
/// arguments) on `operands` (values and dims) under the emulation, against its CPU twin.
fn check_fused<K: FusedKernel>(pass: K, operands: &[(Vec<f32>, &[usize])], tol: f32) {
    let tensors: Vec<Tensor> = operands.iter().map(|(v, dims)| tensor(v, dims)).collect();
    let layouts: Vec<&candle_core::Layout> = tensors.iter().map(|t| t.layout()).collect();
    let (shape, sizes) = pass.sizes(&layouts).unwrap();
    let plan = pass.launch(sizes).unwrap();
    let want = Fused(pass).apply_no_bwd(&tensors.iter().collect::<Vec<_>>()).unwrap();
    let mut args: Vec<Arg> = operands.iter().map(|(v, _)| Arg::In(v.clone())).collect();
    args.push(Arg::Out(shape.elem_count()));
    args.extend(plan.ints.iter().map(|&i| Arg::I32(i)));
    args.extend(plan.floats.iter().map(|&f| Arg::F32(f)));
    let got = launch(pass.entry(), plan.shape, &args);
    assert_close(pass.entry(), &got[operands.len()], &flat(&want), tol);
}

#[test]
fn outer_product_kernels_agree_with_the_cpu() {
    let (rows, n, m) = (3usize, 5usize, 37usize);
    let (a, b, g) = (values(rows * n, 1), values(rows * m, 2), values(rows * n * m, 3));
    check_fused(Outer::Forward, &[(a.clone(), &[rows, n]), (b.clone(), &[rows, m])], 1e-6);
    check_fused(Outer::Backward, &[(a, &[rows, n]), (b, &[rows, m]), (g, &[rows, n, m])], 1e-5);
}

#[test]
fn gated_write_kernels_agree_with_the_cpu() {
    // A weight per example over 1 050 elements (more than a block of 1 024 threads covers), and
    // one weight for them all.
    for (examples, weights) in [(3usize, 3usize), (3, 1)] {
        let n = examples * 350;
        let (a, b, w, g) = (values(n, 1), values(n, 2), values(weights, 3), values(n, 4));
        let dims = [examples, 5, 70];
        let w_dims: &[usize] = if weights == 1 { &[] } else { &[examples, 1] };
        check_fused(Lerp::Forward, &[(a, &dims), (b, &dims), (w.clone(), w_dims)], 1e-6);
        check_fused(Lerp::Backward, &[(w, w_dims), (g, &dims)], 1e-6);
    }
}

/// `count` symmetric positive definite `n × n` matrices `Rᵀ R + n I`.
fn spd_matrices(count: usize, n: usize, seed: u64) -> Vec<f32> {
    let r = values(count * n * n, seed);
    let mut a = vec![0f32; count * n * n];
    for c in 0..count {
        let (rc, ac) = (&r[c * n * n..][..n * n], &mut a[c * n * n..][..n * n]);
        for i in 0..n {
            for j in 0..n {
                ac[i * n + j] =
                    (0..n).map(|p| rc[p * n + i] * rc[p * n + j]).sum::<f32>() + if i == j { n as f32 } else { 0.0 };
            }
        }
    }
    a
}

#[test]
fn spd_solve_kernel_agrees_with_the_cpu_in_shared_and_global_memory() {
    // PKM's systems of 8 in shared memory; 80 columns (52 KiB of f64) take the global workspace.
    for (batch, n, r) in [(4usize, 8usize, 3usize), (2, 80, 2), (3, 1, 1)] {
        let (a, b) = (spd_matrices(batch, n, 10 + n as u64), values(batch * n * r, 20 + n as u64));
        let want = memctl::kernels::cuda::kanerva::spd_solve::spd_solve(
            &tensor(&a, &[batch, n, n]),
            &tensor(&b, &[batch, n, r]),
        )
        .unwrap();
        let (shape, use_shared) = spd_solve::launch_shape(batch as u32, n, r);
        assert_eq!(use_shared, n != 80, "{n} columns in shared memory");
        let work = if use_shared { Arg::Null } else { Arg::Scratch64(batch * (n * n + n * r)) };
        let got = launch(
            "spd_solve_f32",
            shape,
            &[
                vec![Arg::In(a), Arg::In(b), Arg::Out(batch * n * r), work],
                ints(&[n, r]),
                vec![Arg::I32(i32::from(use_shared))],
            ]
            .concat(),
        );
        assert_close(&format!("spd_solve {batch} × {n} × {r}"), &got[2], &flat(&want), 1e-5);
    }
}

#[test]
fn spd_solve_kernel_gives_nan_for_a_matrix_that_is_not_positive_definite() {
    let (batch, n, r) = (2usize, 8usize, 2usize);
    let mut a = spd_matrices(batch, n, 30);
    let b = values(batch * n * r, 31);
    a[n * n..].iter_mut().for_each(|v| *v = -*v); // the second system: negative definite
    let want = memctl::kernels::cuda::kanerva::spd_solve::spd_solve(
        &tensor(&a[..n * n], &[1, n, n]),
        &tensor(&b[..n * r], &[1, n, r]),
    )
    .unwrap();
    let (shape, _) = spd_solve::launch_shape(batch as u32, n, r);
    let got = launch(
        "spd_solve_f32",
        shape,
        &[vec![Arg::In(a), Arg::In(b), Arg::Out(batch * n * r), Arg::Null], ints(&[n, r]), vec![Arg::I32(1)]].concat(),
    );
    assert_close("the positive definite system", &got[2][..n * r], &flat(&want), 1e-5);
    assert!(got[2][n * r..].iter().all(|v| v.is_nan()), "the other system: {:?}", &got[2][n * r..]);
}

/// NAM's write in `orientation`, forward and backward (and a tape's backward with its cells
/// split among warps): `count` memories of `rows × cols`.
fn check_nam_write(orientation: Orientation, count: usize, rows: usize, cols: usize) {
    let (address_len, value_len) = match orientation {
        Orientation::Tape => (rows, cols),
        Orientation::Matrix => (cols, rows),
    };
    let memory = values(count * rows * cols, 40);
    let address: Vec<f32> = values(count * address_len, 41).iter().map(|v| v.abs()).collect();
    // Each memory's `[v | pw | pe]`.
    let packed = values(count * (value_len + 2), 42);
    let g = values(count * rows * cols, 45);
    let (memory_dims, address_dims, packed_dims) = ([count, rows, cols], [count, address_len], [count, value_len + 2]);
    let forward: [(Vec<f32>, &[usize]); 3] = [(memory, &memory_dims), (address, &address_dims), (packed, &packed_dims)];
    check_fused(NamWrite::Forward(orientation), &forward, 1e-5);
    let backward = [forward.to_vec(), vec![(g, &memory_dims)]].concat();
    check_fused(NamWrite::Backward(orientation), &backward, 1e-5);
    if orientation == Orientation::Tape {
        check_fused(NamWrite::TapeBackwardSplit, &backward, 1e-5);
    }
}

#[test]
fn nam_write_kernels_agree_with_the_cpu_on_tapes() {
    // NAM-TM's tape (16 cells of 24 features), and features past one block's 256 threads; with
    // the cells split, more cells than a block's eight warps, and fewer.
    check_nam_write(Orientation::Tape, 3, 16, 24);
    check_nam_write(Orientation::Tape, 2, 5, 300);
}

#[test]
fn nam_write_kernels_agree_with_the_cpu_on_matrices() {
    // LSAM's memories, more rows than a block's eight warps, and keys past a warp's 32 lanes.
    check_nam_write(Orientation::Matrix, 3, 16, 16);
    check_nam_write(Orientation::Matrix, 2, 11, 70);
}

#[test]
fn l2_normalize_kernels_agree_with_the_cpu() {
    // Rows past a block's eight warps, and a row of zeros (the clamped norm).
    let (rows, n) = (11usize, 45usize);
    let mut x = values(rows * n, 50);
    x[2 * n..3 * n].iter_mut().for_each(|v| *v = 0.0);
    let g = values(rows * n, 51);
    check_fused(Normalize::Forward, &[(x.clone(), &[rows, n])], 1e-5);
    check_fused(Normalize::Backward, &[(x, &[rows, n]), (g, &[rows, n])], 1e-5);
}

#[test]
fn gru_cell_kernels_agree_with_the_cpu() {
    let (batch, hidden) = (3usize, 7usize);
    let (gi, gh, h, g) = (
        values(batch * 3 * hidden, 60),
        values(batch * 3 * hidden, 61),
        values(batch * hidden, 62),
        values(batch * hidden, 63),
    );
    let (gates, units): (&[usize], &[usize]) = (&[batch, 3 * hidden], &[batch, hidden]);
    check_fused(Gru::Forward, &[(gi.clone(), gates), (gh.clone(), gates), (h.clone(), units)], 1e-5);
    check_fused(Gru::Backward, &[(gi, gates), (gh, gates), (h, units), (g, units)], 1e-5);
}

#[test]
fn sam_attend_kernels_agree_with_the_cpu() {
    // n = 6: most of a backward row warp's lanes idle, a row block's warps past the last row,
    // one column block partly past n. n = 40: a row warp's lanes wrap along f,
    // the column blocks' warps over several rows each, two column tiles an example. nq = 16:
    // every register of the backward's per-query arrays in use.
    for (batch, n, nq, seed) in [(2usize, 6usize, 3usize, 70u64), (2, 40, 2, 72), (1, 9, 16, 74)] {
        let (y, g) = (values(batch * n * 3 * nq, seed), values(batch * nq * n * n, seed + 1));
        let (y_dims, g_dims): (&[usize], &[usize]) = (&[batch, n, 3 * nq], &[batch, nq, n, n]);
        check_fused(Attend::Forward { nq }, &[(y.clone(), y_dims)], 1e-5);
        check_fused(Attend::Backward { nq }, &[(y, y_dims), (g, g_dims)], 1e-5);
    }
}

/// `kanerva_address.cu` forward or `backward` on `(r, packed[, g])`, as its launcher runs it:
/// the kernel of a block per example and machine into `out_len` floats and the scratch, then
/// the one that sums over the machines. The output.
fn kanerva_address_launches(backward: bool, operands: &[Vec<f32>], out_len: usize, bkcm: [usize; 4]) -> Vec<f32> {
    let [b, k, c, m] = bkcm;
    let (kernel, sum_kernel) = if backward {
        ("kanerva_address_bwd", "kanerva_address_bwd_sum")
    } else {
        ("kanerva_address_fwd", "kanerva_address_fwd_sum")
    };
    let parts_len = memctl::kernels::cuda::kanerva::kanerva_address::parts_len(backward, b, k, c);
    let inputs: Vec<Arg> = operands.iter().map(|o| Arg::In(o.clone())).collect();
    let first = launch(
        kernel,
        kanerva_address::launch_shape(b as u32, k as u32, c as u32, m as u32),
        &[inputs, vec![Arg::Out(out_len), Arg::Out(parts_len)], ints(&bkcm), vec![Arg::F32(0.35)]].concat(),
    );
    let (out, parts) = (first[operands.len()].clone(), first[operands.len() + 1].clone());
    let packed = if backward { vec![Arg::In(operands[1].clone())] } else { vec![] };
    let summed = launch(
        sum_kernel,
        kanerva_address::sum_launch_shape(b as u32),
        &[packed.clone(), vec![Arg::In(parts), Arg::In(out)], ints(&bkcm)].concat(),
    );
    summed[packed.len() + 1].clone()
}

/// `got` is NaN where `want` is and agrees with it elsewhere (see [`assert_close`]).
fn assert_close_or_nan(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.is_nan(), w.is_nan(), "{what}: element {i} is {g}, the CPU's {w}");
    }
    let finite = |v: &[f32]| -> Vec<f32> { v.iter().zip(want).filter(|(_, w)| !w.is_nan()).map(|(g, _)| *g).collect() };
    assert_close(what, &finite(got), &finite(want), tol);
}

#[test]
fn kanerva_address_kernels_agree_with_the_cpu() {
    use memctl::kernels::blocks::kanerva::{least_squares_weights, machine_weights, readout};
    use memctl::kernels::cuda::kanerva::kanerva_address::address;
    // PKM's machines (k = 4 of 32 × 8); one machine of more columns than a warp has lanes and
    // a code shorter than them (a ridge-regularised, underdetermined system); a code longer
    // than a block has threads; then PKM's machines again with one machine of the second
    // example not positive definite (an infinite mean), which makes all that example's outputs
    // NaN and leaves the first's as they were.
    let cases = [(2usize, 4usize, 32usize, 8usize, 90u64, false), (3, 1, 5, 37, 92, false), (1, 3, 130, 2, 94, false)];
    for (b, k, c, m, seed, broken) in cases.into_iter().chain([(2, 4, 32, 8, 90, true)]) {
        let mut r = values(b * k * c * m, seed);
        if broken {
            r[(k + 2) * c * m + 5] = f32::INFINITY;
        }
        let z = values(b * c, seed + 1);
        let eta: Vec<f32> = values(b * k, seed + 2).iter().map(|e| 0.5 + e.abs()).collect();
        let (nw, nr) = (b * k * m, b * k * c * m);
        let g = values(nw + b * c, seed + 3);
        let inputs = [tensor(&r, &[b, k, c, m]), tensor(&z, &[b, c]), tensor(&eta, &[b, k])];
        // Candle's ops; where a machine is not positive definite, the fused op's CPU computation
        // (the tape's, `kanerva_manual`), which has the same NaN rule as the kernels.
        let (y, grads) = cpu_grads(&inputs, &tensor(&g, &[nw + b * c]), |t| {
            let (w, mu) = if broken {
                address(&t[0], &t[1], Some(&t[2]), 0.35).unwrap()
            } else {
                let w = least_squares_weights(&t[0], &t[1], 0.35).unwrap();
                let mu = readout(&t[0], &w, &machine_weights(Some(&t[2]), k, &t[1]).unwrap()).unwrap();
                (w, mu)
            };
            Tensor::cat(&[w.flatten_all().unwrap(), mu.flatten_all().unwrap()], 0).unwrap()
        });
        let packed: Vec<f32> = (0..b).flat_map(|i| [&z[i * c..][..c], &eta[i * k..][..k]].concat()).collect();
        let what =
            format!("kanerva_address ({b} × {k} × {c} × {m}{})", if broken { ", not positive definite" } else { "" });
        let fwd = kanerva_address_launches(false, &[r.clone(), packed.clone()], nw + b * c, [b, k, c, m]);
        assert_close_or_nan(&format!("{what} forward"), &fwd, &flat(&y), 1e-4);
        let bwd = kanerva_address_launches(true, &[r, packed, g], nr + b * (c + k), [b, k, c, m]);
        let g_packed: Vec<f32> =
            (0..b).flat_map(|i| [&grads[1][i * c..][..c], &grads[2][i * k..][..k]].concat()).collect();
        assert_close_or_nan(&format!("{what} backward (means)"), &bwd[..nr], &grads[0], 1e-4);
        assert_close_or_nan(&format!("{what} backward (code, noises)"), &bwd[nr..], &g_packed, 1e-4);
        if broken {
            assert!(fwd[k * m..nw].iter().chain(&bwd[k * c * m..nr]).all(|v| v.is_nan()), "{what}: the example's NaN");
            assert!(fwd[..k * m].iter().chain(&bwd[..k * c * m]).all(|v| v.is_finite()), "{what}: the other example");
        }
    }
}

#[test]
fn kanerva_write_kernels_agree_with_the_cpu() {
    use memctl::kernels::cpu::kanerva_manual::Machines;
    use memctl::kernels::cuda::kanerva::kanerva_write::Write;
    // PKM's machines (k = 4 of 32 × 8); one machine of more columns than a warp has lanes;
    // a code longer than a block has threads.
    for (b, k, c, m, seed) in [(2usize, 4usize, 32usize, 8usize, 80u64), (3, 1, 5, 37, 82), (1, 3, 130, 2, 84)] {
        let (r, w, delta) = (values(b * k * c * m, seed), values(b * k * m, seed + 1), values(b * c, seed + 2));
        let eta: Vec<f32> = values(b * k, seed + 3).iter().map(|e| 0.5 + e.abs()).collect();
        // Symmetric positive definite covariances A Aᵀ / m + I.
        let a = values(b * k * m * m, seed + 4);
        let mut v = vec![0f32; b * k * m * m];
        for (vs, as_) in v.chunks_exact_mut(m * m).zip(a.chunks_exact(m * m)) {
            for i in 0..m {
                for j in 0..m {
                    let dot: f32 = (0..m).map(|l| as_[i * m + l] * as_[j * m + l]).sum();
                    vs[i * m + j] = dot / m as f32 + if i == j { 1.0 } else { 0.0 };
                }
            }
        }
        let (nr, nv, width) = (b * k * c * m, b * k * m * m, k * m + c + k);
        let g = values(nr + nv, seed + 5);
        let packed: Vec<f32> = (0..b)
            .flat_map(|i| [&w[i * k * m..][..k * m], &delta[i * c..][..c], &eta[i * k..][..k]].concat())
            .collect();
        let (machines, r_dims, v_dims, packed_dims) = (Machines { k, c, m }, [b, k, c, m], [b, k, m, m], [b, width]);
        check_fused(
            Write::Forward(machines),
            &[(r, &r_dims), (v.clone(), &v_dims), (packed.clone(), &packed_dims)],
            1e-5,
        );
        check_fused(Write::Backward(machines), &[(v, &v_dims), (packed, &packed_dims), (g, &[nr + nv])], 1e-4);
    }
}

#[test]
fn sum_parts_kernel_sums_contiguous_transposed_and_stacked_transposed_parts() {
    let (rows, cols, parts) = (5usize, 7usize, 3usize);
    let data: Vec<Vec<f32>> = (0..parts).map(|k| values(rows * cols, 80 + k as u64)).collect();
    let n = rows * cols;
    // Contiguous: element i at i. Transposed: each part holds a [cols, rows] matrix read as its
    // transpose, element (i / cols, i % cols) at (i % cols) · rows + i / cols.
    for (layout, s0, s1) in [("contiguous", n, 1), ("transposed", 1, rows)] {
        let inner = if layout == "contiguous" { n } else { cols };
        let want: Vec<f32> = (0..n)
            .map(|i| {
                let at = i / inner * s0 + i % inner * s1;
                data.iter().map(|p| p[at]).sum()
            })
            .collect();
        let got = launch(
            "sum_parts",
            LaunchShape::per_element(n as u32),
            &[
                vec![Arg::Parts(data.clone()), Arg::Out(n), Arg::I32(parts as i32)],
                ints(&[n, inner, s0, s1, n, n]),
                vec![Arg::I32(0)],
            ]
            .concat(),
        );
        assert_close(&format!("sum_parts, {layout}"), &got[0], &want, 1e-6);
    }
    // A stack of 3 transposed matrices (a pack's weight read transposed): matrix m of [cols, rows]
    // at m · rows · cols, element (r, c) of its transpose at c · rows + r.
    let (m, mat) = (3usize, rows * cols);
    let data: Vec<Vec<f32>> = (0..parts).map(|k| values(m * mat, 85 + k as u64)).collect();
    let want: Vec<f32> = (0..m * mat)
        .map(|i| {
            let j = i % mat;
            let at = i / mat * mat + j % cols * rows + j / cols;
            data.iter().map(|p| p[at]).sum()
        })
        .collect();
    let got = launch(
        "sum_parts",
        LaunchShape::per_element((m * mat) as u32),
        &[
            vec![Arg::Parts(data), Arg::Out(m * mat), Arg::I32(parts as i32)],
            ints(&[m * mat, cols, 1, rows, mat, mat]),
            vec![Arg::I32(0)],
        ]
        .concat(),
    );
    assert_close("sum_parts, a stack of transposed matrices", &got[0], &want, 1e-6);
}

#[test]
fn head_move_kernels_agree_with_the_cpu_with_and_without_jump() {
    // Rows of fewer cells than a warp's lanes, and of more than two warps' worth (the backward's
    // lanes stride along a row), in a last block that is not full.
    for (rows, len, jump) in [(5usize, 9usize, false), (5, 9, true), (11, 70, false), (11, 70, true)] {
        let n_moves = if jump { 4 } else { 3 };
        let p = values(rows * len, 90);
        let m: Vec<f32> = values(rows * n_moves, 91).iter().map(|v| v.abs()).collect();
        let (j, g) = (values(rows * len, 92), values(rows * len, 93));
        // Without JUMP the position stands in as the (unread) jump operand.
        let j = if jump { j } else { p.clone() };
        let (cells, moves): (&[usize], &[usize]) = (&[rows, len], &[rows, n_moves]);
        check_fused(Move::Forward, &[(p.clone(), cells), (m.clone(), moves), (j.clone(), cells)], 1e-5);
        // A thread per row, and a warp per row (`HEAD_MOVE_WARPS`).
        for pass in [Move::Backward, Move::BackwardWarps] {
            let operands = [(p.clone(), cells), (m.clone(), moves), (g.clone(), cells), (j.clone(), cells)];
            check_fused(pass, &operands, 1e-5);
        }
    }
}

#[test]
fn softmax_kernels_agree_with_the_cpu() {
    // Rows past a block's eight warps; the backward reads the forward's output.
    let (rows, n) = (10usize, 40usize);
    let (x, y, g) =
        (values(rows * n, 100), values(rows * n, 102).iter().map(|v| v.abs()).collect(), values(rows * n, 101));
    check_fused(Softmax::Forward, &[(x, &[rows, n])], 1e-5);
    check_fused(Softmax::Backward, &[(y, &[rows, n]), (g, &[rows, n])], 1e-5);
}

#[test]
fn scale_kernels_agree_with_the_cpu() {
    // More elements than one partial sum's share: several blocks' partial sums of d α.
    let n = 5000usize;
    let (x, alpha, g) = (values(n, 110), vec![0.7f32], values(n, 111));
    check_fused(Scale::Forward, &[(x.clone(), &[n]), (alpha.clone(), &[1])], 1e-6);
    // The backward's partial sums split the elements by block, the CPU's by share: the sum of
    // them is what must agree.
    let (y, grads) = cpu_grads(&[tensor(&x, &[n]), tensor(&alpha, &[1])], &tensor(&g, &[n]), |t| {
        memctl::kernels::cuda::layers::scale::mul(&t[0], &t[1]).unwrap()
    });
    assert_eq!(flat(&y).len(), n);
    let plan = Scale::Backward.launch(n).unwrap();
    assert!(plan.shape.blocks > 1, "{n} elements take several partial sums");
    let out = n + plan.shape.blocks as usize;
    let bwd = launch(
        "scale_bwd",
        plan.shape,
        &[vec![Arg::In(x), Arg::In(alpha), Arg::In(g), Arg::Out(out)], ints(&[n])].concat(),
    );
    assert_close("scale_bwd, d x", &bwd[3][..n], &grads[0], 1e-6);
    let d_alpha: f32 = bwd[3][n..].iter().sum();
    assert_close("scale_bwd, d α", &[d_alpha], &grads[1], 1e-5);
}

#[test]
fn tanh_kernels_agree_with_the_cpu() {
    // More elements than one launch's threads cover in one pass of the grid-stride loop.
    let n = 70_000usize;
    let x: Vec<f32> = values(n, 115).iter().map(|v| 4.0 * v).collect();
    let (y, g): (Vec<f32>, Vec<f32>) = (x.iter().map(|v| v.tanh()).collect(), values(n, 116));
    check_fused(Tanh::Forward, &[(x, &[n])], 1e-6);
    check_fused(Tanh::Backward, &[(y, &[n]), (g, &[n])], 1e-6);
}

#[test]
fn scale_rows_kernels_agree_with_the_cpu() {
    // Rows of more elements than one partial sum's share (two per row), and rows of a few.
    for (rows, per) in [(3usize, 3000usize), (7, 5)] {
        let (x, alpha, g) = (values(rows * per, 112), values(rows, 113), values(rows * per, 114));
        check_fused(ScaleRows::Forward, &[(x.clone(), &[rows, per]), (alpha.clone(), &[rows, 1])], 1e-6);
        check_fused(ScaleRows::Backward, &[(x, &[rows, per]), (alpha, &[rows, 1]), (g, &[rows, per])], 1e-5);
    }
}

#[test]
fn layer_norm_kernels_agree_with_the_cpu() {
    // A row longer than a block's 256 threads; the backward writes every row's d x, then its g ⊙ x̂.
    let (rows, n) = (3usize, 300usize);
    let (x, w, b, g) = (values(rows * n, 120), values(n, 121), values(n, 122), values(rows * n, 123));
    check_fused(Norm::Forward, &[(x.clone(), &[rows, n]), (w.clone(), &[n]), (b, &[n])], 1e-5);
    check_fused(Norm::Backward, &[(x, &[rows, n]), (w, &[n]), (g, &[rows, n])], 1e-4);
    // A gain and a bias per block of rows (a pack of 3 trials, 2 rows each).
    let (rows, n, groups) = (6usize, 40usize, 3usize);
    let (x, w, b, g) = (values(rows * n, 124), values(groups * n, 125), values(groups * n, 126), values(rows * n, 127));
    check_fused(Norm::Forward, &[(x.clone(), &[rows, n]), (w.clone(), &[groups, n]), (b, &[groups, n])], 1e-5);
    check_fused(Norm::Backward, &[(x, &[rows, n]), (w, &[groups, n]), (g, &[rows, n])], 1e-4);
}

#[test]
fn the_emulation_catches_races_overruns_shuffles_with_returned_lanes_and_divergent_barriers() {
    let x = values(64, 130);
    let run = |kernel: &str| {
        try_launch(kernel, LaunchShape { blocks: 1, threads: 64, shared_bytes: 0 }, &[Arg::In(x.clone()), Arg::Out(64)])
    };
    // The sound kernel passes under both sanitizers, with the warps' sums.
    for result in run("fault_free") {
        let out = result.unwrap();
        assert_close("fault_free", &out[1][..2], &[x[..32].iter().sum(), x[32..].iter().sum()], 1e-6);
    }
    let [address, thread] = &run("fault_race")[..] else { unreachable!() };
    assert!(address.is_ok(), "a race is ThreadSanitizer's to find");
    assert!(thread.as_ref().is_err_and(|e| e.contains("data race")), "ThreadSanitizer: {thread:?}");
    let [address, _] = &run("fault_overrun")[..] else { unreachable!() };
    assert!(address.as_ref().is_err_and(|e| e.contains("heap-buffer-overflow")), "AddressSanitizer: {address:?}");
    // Dynamic shared memory of a float per thread: enough passes, one float short does not.
    let staged = |bytes: u32| {
        try_launch(
            "fault_shared_overrun",
            LaunchShape { blocks: 1, threads: 64, shared_bytes: bytes },
            &[Arg::In(x.clone()), Arg::Out(64)],
        )
    };
    for result in staged(64 * 4) {
        let reversed: Vec<f32> = x.iter().rev().copied().collect();
        assert_close("fault_shared_overrun, enough shared memory", &result.unwrap()[1], &reversed, 0.0);
    }
    let [address, _] = &staged(63 * 4)[..] else { unreachable!() };
    assert!(address.as_ref().is_err_and(|e| e.contains("heap-buffer-overflow")), "AddressSanitizer: {address:?}");
    for result in run("fault_shuffle_after_return") {
        assert!(result.as_ref().is_err_and(|e| e.contains("reads a lane that has returned")), "{result:?}");
    }
    for result in run("fault_divergent_barriers") {
        assert!(result.as_ref().is_err_and(|e| e.contains("wait at different barriers")), "{result:?}");
    }
}

#[test]
fn item_gate_kernels_agree_with_the_cpu() {
    let (rows, d) = (6usize, 5usize);
    let (g, x, m, go) =
        (values(rows * 2 * d, 140), values(rows * d, 141), values(rows * d, 142), values(rows * d, 143));
    check_fused(Gate::Forward, &[(g.clone(), &[rows, 2 * d]), (x.clone(), &[rows, d]), (m.clone(), &[rows, d])], 1e-6);
    check_fused(Gate::Backward, &[(g, &[rows, 2 * d]), ([x, m].concat(), &[2 * rows * d]), (go, &[rows, d])], 1e-6);
}

#[test]
fn lstm_cell_kernels_agree_with_the_cpu() {
    // Each half forward and backward; the out half reads c' where the state half reads c.
    let (batch, hidden) = (3usize, 6usize);
    let (pre, c, c_next) = (values(batch * 4 * hidden, 150), values(batch * hidden, 151), values(batch * hidden, 154));
    let (gc, gh) = (values(batch * hidden, 152), values(batch * hidden, 153));
    let (gates, units): (&[usize], &[usize]) = (&[batch, 4 * hidden], &[batch, hidden]);
    for (half, cell, g) in [(Half::State, &c, &gc), (Half::Out, &c_next, &gh)] {
        check_fused(Lstm::Forward(half), &[(pre.clone(), gates), (cell.clone(), units)], 1e-6);
        check_fused(Lstm::Backward(half), &[(pre.clone(), gates), (cell.clone(), units), (g.clone(), units)], 1e-5);
    }
}

/// The parameter after one update by each of `gradients`, by memctl's CPU optimiser.
fn cpu_updates(
    config: &memctl::train_config::TrainConfig,
    start: &[f32],
    gradients: &[Vec<f32>],
    clamp: Option<f64>,
) -> Vec<f32> {
    let p = Var::from_tensor(&tensor(start, &[start.len()])).unwrap();
    let mut opt = memctl::train::optim::build(config, vec![p.clone()]).unwrap();
    for g in gradients {
        opt.step(&[Some(tensor(g, &[g.len()]))], clamp).unwrap();
    }
    flat(p.as_tensor())
}

/// The scalars after `n` as the kernels' int and float arguments.
fn scalars(ints: &[i32], floats: &[f64]) -> Vec<Arg> {
    ints.iter().map(|&i| Arg::I32(i)).chain(floats.iter().map(|&f| Arg::F32(f as f32))).collect()
}

#[test]
fn optimizer_kernels_agree_with_the_cpu_optimizers() {
    use memctl::kernels::cuda::optim::optim_update::{
        AdamRule, RmsPropRule, adam_scalars, rmsprop_scalars, sgd_momentum_scalars,
    };
    use memctl::train_config::{OptimizerKind, TrainConfig};
    // More elements than a block; gradients to ±1 against a clamp at 0.5 (clipping by value).
    let n = 1500usize;
    let start = values(n, 160);
    let gradients: Vec<Vec<f32>> = (0..3).map(|u| values(n, 161 + u)).collect();
    let shape = LaunchShape::per_element(n as u32);
    for (momentum, clamp) in [(0.9, Some(0.5)), (0.0, None)] {
        let mut c = TrainConfig::plain(OptimizerKind::RmsProp, 1e-2);
        c.momentum = momentum;
        let rule = RmsPropRule { lr: c.lr, alpha: c.alpha, eps: c.eps, momentum: c.momentum };
        let (ints, floats) = rmsprop_scalars(&rule, clamp);
        let (mut p, mut sq, mut b) = (start.clone(), vec![0f32; n], vec![0f32; n]);
        for g in &gradients {
            let out = launch(
                "rmsprop_update",
                shape,
                &[
                    vec![Arg::In(g.clone()), Arg::In(p), Arg::In(sq), Arg::In(b), Arg::I32(n as i32)],
                    scalars(&ints, &floats),
                ]
                .concat(),
            );
            [p, sq, b] = [out[1].clone(), out[2].clone(), out[3].clone()];
        }
        assert_close(
            &format!("rmsprop_update, momentum {momentum}"),
            &p,
            &cpu_updates(&c, &start, &gradients, clamp),
            1e-5,
        );
    }
    for (decay, clamp) in [(0.01, None), (0.0, Some(0.5))] {
        let mut c = TrainConfig::plain(OptimizerKind::Adam, 1e-2);
        c.weight_decay = decay;
        let rule = AdamRule { lr: c.lr, beta1: c.beta1, beta2: c.beta2, eps: c.eps, weight_decay: c.weight_decay };
        let (ints, floats) = adam_scalars(&rule, clamp);
        let (mut p, mut m, mut v) = (start.clone(), vec![0f32; n], vec![0f32; n]);
        for (t, g) in gradients.iter().enumerate() {
            // Update t + 1's bias corrections, which the host writes before each update.
            let t = t as i32 + 1;
            let corrections = vec![(1.0 / (1.0 - c.beta1.powi(t))) as f32, (1.0 / (1.0 - c.beta2.powi(t))) as f32];
            let out = launch(
                "adam_update",
                shape,
                &[
                    vec![
                        Arg::In(g.clone()),
                        Arg::In(corrections),
                        Arg::In(p),
                        Arg::In(m),
                        Arg::In(v),
                        Arg::I32(n as i32),
                    ],
                    scalars(&ints, &floats),
                ]
                .concat(),
            );
            [p, m, v] = [out[2].clone(), out[3].clone(), out[4].clone()];
        }
        assert_close(&format!("adam_update, decay {decay}"), &p, &cpu_updates(&c, &start, &gradients, clamp), 1e-5);
    }
    // SGD's first update makes the momentum buffer (b = g, p − lr g); the kernel runs the others.
    let mut c = TrainConfig::plain(OptimizerKind::Sgd, 1e-2);
    c.momentum = 0.9;
    let clamp = Some(0.5);
    let (ints, floats) = sgd_momentum_scalars(c.lr, c.momentum, clamp);
    let mut b: Vec<f32> = gradients[0].iter().map(|g| g.clamp(-0.5, 0.5)).collect();
    let mut p: Vec<f32> = start.iter().zip(&b).map(|(p, b)| p - c.lr as f32 * b).collect();
    for g in &gradients[1..] {
        let out = launch(
            "sgd_momentum_update",
            shape,
            &[vec![Arg::In(g.clone()), Arg::In(p), Arg::In(b), Arg::I32(n as i32)], scalars(&ints, &floats)].concat(),
        );
        [p, b] = [out[1].clone(), out[2].clone()];
    }
    assert_close("sgd_momentum_update", &p, &cpu_updates(&c, &start, &gradients, clamp), 1e-5);
}
