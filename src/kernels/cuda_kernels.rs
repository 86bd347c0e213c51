//! Launching memctl's own CUDA kernels (`src/kernels/cuda/*.cu`, built to PTX and SASS by
//! `build.rs` with the toolkit's `nvcc` and `ptxas`, loaded by candle's device on first use).

use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, CudaFunc, WrapErr};
use candle_core::{CudaStorage, Layout, Result, Storage, Tensor};

use super::launch_shape::{self, LaunchShape};

/// One of memctl's kernel modules: its PTX, and its SASS (a cubin `build.rs` compiles from the
/// PTX for the card it targets), which candle's device loads instead where memctl asks
/// (`kernels::fused`'s `prebuilt_sass`) and the card takes it.
struct Module {
    name: &'static str,
    ptx: &'static str,
    sass: &'static [u8],
}

impl Module {
    /// `kernel` of this module on `dev`, the module loaded at its first use.
    fn function(&self, dev: &CudaDevice, kernel: &str) -> Result<CudaFunc> {
        dev.get_or_load_custom_func_with_sass(kernel, self.name, self.ptx, Some(self.sass))
    }
}

macro_rules! module {
    ($cst:ident, $file:literal) => {
        const $cst: Module = Module {
            name: concat!("memctl_", $file),
            ptx: include_str!(concat!(env!("OUT_DIR"), "/", $file, ".ptx")),
            sass: include_bytes!(concat!(env!("OUT_DIR"), "/", $file, ".cubin")),
        };
    };
}

module!(LSTM_CELL, "lstm_cell");
module!(LAYER_NORM, "layer_norm");
module!(ITEM_GATE, "item_gate");
module!(SOFTMAX, "softmax");
module!(SCALE, "scale");
module!(OPTIM, "optim");
module!(SAM_ATTEND, "sam_attend");
module!(SUM_PARTS, "sum_parts");
module!(HEAD_MOVE, "head_move");
module!(SPD_SOLVE, "spd_solve");
module!(NAM_WRITE, "nam_write");
module!(GRU_CELL, "gru_cell");
module!(L2_NORMALIZE, "l2_normalize");
module!(OUTER, "outer");
module!(KANERVA_WRITE, "kanerva_write");
module!(KANERVA_ADDRESS, "kanerva_address");
module!(LERP, "lerp");
module!(REL_READ, "rel_read");

/// `sum_parts.cu`'s first argument: up to 32 device pointers, by value.
#[repr(C, align(8))]
struct Parts([u64; PARTS_PER_LAUNCH]);

const PARTS_PER_LAUNCH: usize = 32;

/// cudarc's launch configuration of a [`LaunchShape`].
fn launch_config(shape: LaunchShape) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (shape.blocks, 1, 1),
        block_dim: (shape.threads, 1, 1),
        shared_mem_bytes: shape.shared_bytes,
    }
}

// SAFETY: plain old data, laid out as sum_parts.cu's `struct Parts`.
unsafe impl candle_core::cuda_backend::cudarc::driver::DeviceRepr for Parts {}

/// `first` plus every tensor of `rest` (f32, each of `first`'s elements and layout: contiguous,
/// or a strided matrix), into a new contiguous buffer: one launch of `sum_parts` per 32 parts,
/// each after the first adding to the buffer.
pub fn sum_parts((first, layout): (&CudaStorage, &Layout), rest: &[Tensor]) -> Result<CudaStorage> {
    use candle_core::cuda_backend::cudarc::driver::DevicePtr;
    let n = layout.shape().elem_count();
    // Where element i sits: i / cols · s0 + i % cols · s1, within `span` elements of the start.
    let (cols, s0, s1, span) = match (layout.is_contiguous(), layout.dims(), layout.stride()) {
        (true, _, _) => (n, n, 1, n),
        (false, &[rows, cols], &[s0, s1]) => (cols, s0, s1, (rows.max(1) - 1) * s0 + (cols.max(1) - 1) * s1 + 1),
        _ => candle_core::bail!("sum_parts: parts laid out as {:?} (contiguous or two axes only)", layout.stride()),
    };
    let (Ok(count), Ok(cols), Ok(s0), Ok(s1)) =
        (i32::try_from(n), i32::try_from(cols), i32::try_from(s0), i32::try_from(s1))
    else {
        candle_core::bail!("sum_parts: {n} elements are more than the kernel indexes")
    };
    let dev = first.device.clone();
    // SAFETY: every element is written by the first launch (accumulate = 0).
    let out = unsafe { dev.alloc::<f32>(n)? };
    if n == 0 {
        return Ok(CudaStorage::wrap_cuda_slice(out, dev));
    }
    let stream = dev.cuda_stream();
    let start = layout.start_offset();
    let guards: Vec<_> = rest.iter().map(|t| t.storage_and_layout()).collect();
    let mut views = vec![first.as_cuda_slice::<f32>()?.slice(start..start + span)];
    for (storage, l) in &guards {
        let Storage::Cuda(s) = &**storage else { candle_core::bail!("sum_parts: a part is not on a CUDA device") };
        // Contiguous parts agree whatever the strides of axes of one (candle ignores those).
        let same = l.dims() == layout.dims()
            && if layout.is_contiguous() { l.is_contiguous() } else { l.stride() == layout.stride() };
        if !same {
            candle_core::bail!(
                "sum_parts: a part laid out as {:?} for a sum laid out as {:?}",
                l.stride(),
                layout.stride()
            );
        }
        views.push(s.as_cuda_slice::<f32>()?.slice(l.start_offset()..l.start_offset() + span));
    }
    let func = SUM_PARTS.function(&dev, "sum_parts")?;
    for (launch, chunk) in views.chunks(PARTS_PER_LAUNCH).enumerate() {
        let mut parts = Parts([0; PARTS_PER_LAUNCH]);
        // Event tracking is off (`device::open`): the pointers carry no synchronisation to keep.
        for (slot, view) in parts.0.iter_mut().zip(chunk) {
            *slot = view.device_ptr(&stream).0;
        }
        let (parts_in_chunk, accumulate) = (chunk.len() as i32, i32::from(launch > 0));
        let mut builder = func.builder();
        builder.arg(&parts).arg(&out).arg(&parts_in_chunk).arg(&count).arg(&cols).arg(&s0).arg(&s1).arg(&accumulate);
        // SAFETY: sum_parts takes the pointers, the output, the number of pointers, n, cols, s0,
        // s1 and the accumulate flag, in this order; each pointer's view spans every element the
        // layout reaches (checked above), and the grid-stride loop stays below n.
        unsafe { builder.launch(launch_config(LaunchShape::per_element(count as u32))) }.w()?;
    }
    Ok(CudaStorage::wrap_cuda_slice(out, dev))
}

/// Runs `kernel` of `lstm_cell.cu` on its f32 operands (contiguous, as laid out), one thread
/// per `(example, unit)`, into a new buffer of `batch · width` elements.
pub fn lstm_cell(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    batch: usize,
    hidden: usize,
    width: usize,
) -> Result<CudaStorage> {
    // The kernels index with C ints: the thread count must fit one.
    let (Ok(threads), Ok(b), Ok(h)) = (i32::try_from(batch * hidden), i32::try_from(batch), i32::try_from(hidden))
    else {
        candle_core::bail!("{kernel}: {batch} × {hidden} elements are more than the kernel indexes")
    };
    let config = launch_config(LaunchShape::per_element(threads.max(1) as u32));
    // SAFETY: lstm_cell.cu's kernels take their operands, the output, batch and hidden, in
    // this order, guard the threads past batch · hidden, and write every output element.
    unsafe { run(&LSTM_CELL, kernel, operands, batch * width, config, &[b, h], &[]) }
}

/// Runs `kernel` of `gru_cell.cu` on its f32 operands (contiguous, as laid out), one thread
/// per `(example, unit)`, into a new buffer of `len` elements.
pub fn gru_cell(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    batch: usize,
    hidden: usize,
    len: usize,
) -> Result<CudaStorage> {
    let (Ok(threads), Ok(b), Ok(h)) = (u32::try_from(batch * hidden), i32::try_from(batch), i32::try_from(hidden))
    else {
        candle_core::bail!("{kernel}: {batch} × {hidden} units are more than the kernel indexes")
    };
    let config = launch_config(LaunchShape::per_element(threads.max(1)));
    // SAFETY: gru_cell.cu's kernels take their operands, the output, batch and hidden, in this
    // order, guard the threads past batch · hidden, and write every output element (`len` is
    // batch · hidden forward, 7 · batch · hidden backward).
    unsafe { run(&GRU_CELL, kernel, operands, len, config, &[b, h], &[]) }
}

/// Runs `kernel` of `layer_norm.cu` on its f32 operands (`x` `[rows, n]` first, then the
/// per-column ones), one block of 256 threads per row, into a new buffer of `rows · width`.
pub fn layer_norm(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    rows: usize,
    n: usize,
    width: usize,
    eps: f32,
) -> Result<CudaStorage> {
    let (Ok(r), Ok(cols), Ok(_)) = (i32::try_from(rows), i32::try_from(n), u32::try_from(rows)) else {
        candle_core::bail!("{kernel}: {rows} rows of {n} are more than the kernel indexes")
    };
    let config = launch_config(LaunchShape::blocks_of_256(rows.max(1) as u32));
    // SAFETY: layer_norm.cu's kernels take their operands, the output, rows, n and eps, in this
    // order, run one block (of a multiple of 32 threads) per row, return at once for a block
    // past the last row, and write every output element of their row.
    unsafe { run(&LAYER_NORM, kernel, operands, rows * width, config, &[r, cols], &[eps]) }
}

/// Runs `kernel` of `item_gate.cu` on its f32 operands (contiguous, as laid out), one thread
/// per `(row, column)` of `rows × d` cells, into a new buffer of `len` elements.
pub fn item_gate(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    rows: usize,
    d: usize,
    len: usize,
) -> Result<CudaStorage> {
    // The kernels index cells with C ints (the output's offsets with size_t).
    let (Ok(cells), Ok(r), Ok(w)) = (i32::try_from(rows * d), i32::try_from(rows), i32::try_from(d)) else {
        candle_core::bail!("{kernel}: {rows} × {d} cells are more than the kernel indexes")
    };
    let config = launch_config(LaunchShape::per_element(cells.max(1) as u32));
    // SAFETY: item_gate.cu's kernels take their three operands, the output, rows and d, in
    // this order, guard the threads past rows · d, and write every output element (`len` is
    // rows · d forward, 4 · rows · d backward).
    unsafe { run(&ITEM_GATE, kernel, operands, len, config, &[r, w], &[]) }
}

/// Runs `kernel` of `softmax.cu` on its f32 operands (`[rows, n]`, contiguous, as laid out),
/// one warp per row (eight to a block), into a new buffer of `rows · n` elements.
pub fn softmax(kernel: &str, operands: &[(&CudaStorage, &Layout)], rows: usize, n: usize) -> Result<CudaStorage> {
    let (Ok(r), Ok(cols), Ok(rows32)) = (i32::try_from(rows), i32::try_from(n), u32::try_from(rows)) else {
        candle_core::bail!("{kernel}: {rows} rows of {n} are more than the kernel indexes")
    };
    let config = launch_config(LaunchShape::warp_per_row(rows32));
    // SAFETY: softmax.cu's kernels take their operands, the output, rows and n, in this order,
    // run one warp per row, return (whole warps) past the last row, and write every output
    // element of their row.
    unsafe { run(&SOFTMAX, kernel, operands, rows * n, config, &[r, cols], &[]) }
}

/// Runs `kernel` of `l2_normalize.cu` on its f32 operands (`[rows, n]`, contiguous, as laid
/// out), one warp per row (eight to a block), into a new buffer of `rows · n` elements.
pub fn l2_normalize(kernel: &str, operands: &[(&CudaStorage, &Layout)], rows: usize, n: usize) -> Result<CudaStorage> {
    let (Ok(r), Ok(cols), Ok(rows32)) = (i32::try_from(rows), i32::try_from(n), u32::try_from(rows)) else {
        candle_core::bail!("{kernel}: {rows} rows of {n} are more than the kernel indexes")
    };
    let config = launch_config(LaunchShape::warp_per_row(rows32));
    // SAFETY: l2_normalize.cu's kernels take their operands, the output, rows and n, in this
    // order, run one warp per row, return (whole warps) past the last row, and write every
    // output element of their row.
    unsafe { run(&L2_NORMALIZE, kernel, operands, rows * n, config, &[r, cols], &[]) }
}

/// Runs `kanerva_address.cu` forward or `backward` on its f32 operands (contiguous, as laid out)
/// for `batch` examples of the machines `s` with the ridge `lambda`, into a new buffer of `len`
/// elements: the kernel of a block per example and machine, then the one that sums over the
/// machines, through a scratch buffer of [`parts_len`](super::kanerva_address_op::parts_len)
/// floats.
pub fn kanerva_address(
    backward: bool,
    operands: &[(&CudaStorage, &Layout)],
    len: usize,
    batch: usize,
    s: super::kanerva_manual::Machines,
    lambda: f64,
) -> Result<CudaStorage> {
    let (kernel, sum_kernel) = if backward {
        ("kanerva_address_bwd", "kanerva_address_bwd_sum")
    } else {
        ("kanerva_address_fwd", "kanerva_address_fwd_sum")
    };
    let parts_len = super::kanerva_address_op::parts_len(backward, batch, s.k, s.c);
    let (Ok(_), Ok(_), Ok(b), Ok(k), Ok(c), Ok(m)) = (
        i32::try_from(len),
        i32::try_from(parts_len),
        i32::try_from(batch),
        i32::try_from(s.k),
        i32::try_from(s.c),
        i32::try_from(s.m),
    ) else {
        candle_core::bail!("{kernel}: {len} elements are more than the kernel indexes")
    };
    let Some((first, _)) = operands.first() else { candle_core::bail!("{kernel}: no operands") };
    let dev = first.device.clone();
    let views = operands
        .iter()
        .map(|(st, l)| {
            let start = l.start_offset();
            Ok(st.as_cuda_slice::<f32>()?.slice(start..start + l.shape().elem_count()))
        })
        .collect::<Result<Vec<_>>>()?;
    // SAFETY: between them the two kernels write every element (see below).
    let out = unsafe { dev.alloc::<f32>(len)? };
    if len == 0 || batch * s.k == 0 {
        return Ok(CudaStorage::wrap_cuda_slice(out, dev));
    }
    // Allocated and freed on the stream (cuMemAllocAsync, cuMemFreeAsync: no host
    // synchronisation, so a graph capture records both), so dropping it at the end of this
    // function, after the launches, is safe.
    // SAFETY: the first kernel writes every element before the second reads it.
    let parts = unsafe { dev.alloc::<f32>(parts_len)? };
    let lambda = lambda as f32;
    let func = KANERVA_ADDRESS.function(&dev, kernel)?;
    let mut builder = func.builder();
    for v in &views {
        builder.arg(v);
    }
    builder.arg(&out).arg(&parts).arg(&b).arg(&k).arg(&c).arg(&m).arg(&lambda);
    // SAFETY: the first kernel takes its operands (r, packed, and backward g), the output, the
    // scratch, batch, k, c, m and λ, in this order; launch_shape gives it a block per example and
    // machine with the shared memory it indexes, blocks past the last return whole, and each
    // writes its machine's w_i (forward) or R̄_i (backward) and its share of the scratch.
    unsafe { builder.launch(launch_config(launch_shape::kanerva_address(b as u32, k as u32, c as u32, m as u32))) }
        .w()?;
    let sum = KANERVA_ADDRESS.function(&dev, sum_kernel)?;
    let mut builder = sum.builder();
    if backward {
        let Some(packed) = views.get(1) else { candle_core::bail!("{kernel}: no packed code and noises") };
        builder.arg(packed);
    }
    builder.arg(&parts).arg(&out).arg(&b).arg(&k).arg(&c).arg(&m);
    // SAFETY: the sum kernels take (backward: the packed code and noises,) the scratch, the
    // output, batch, k, c and m, in this order; a warp per example, warps past the last return,
    // and each writes its example's μ (forward) or z̄ and η̄ (backward), and NaN over its w or R̄
    // where a machine was not positive definite.
    unsafe { builder.launch(launch_config(launch_shape::kanerva_address_sum(b as u32))) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev))
}

/// Runs `kernel` of `kanerva_write.cu` on its f32 operands (contiguous, as laid out) for
/// `batch` examples of the machines `s`, into a new buffer of `len` elements.
pub fn kanerva_write(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    len: usize,
    batch: usize,
    s: super::kanerva_manual::Machines,
) -> Result<CudaStorage> {
    let (Ok(_), Ok(b), Ok(k), Ok(c), Ok(m)) =
        (i32::try_from(len), i32::try_from(batch), i32::try_from(s.k), i32::try_from(s.c), i32::try_from(s.m))
    else {
        candle_core::bail!("{kernel}: {len} elements are more than the kernel indexes")
    };
    let backward = kernel == "kanerva_write_bwd";
    let config = launch_config(launch_shape::kanerva_write(backward, b as u32, k as u32, c as u32, m as u32));
    // SAFETY: kanerva_write.cu's kernels take their three operands, the output, batch, k, c and
    // m, in this order; launch_shape gives them the blocks and the shared memory they index,
    // blocks past the last return whole, and between them they write every output element
    // (forward: R' and V'; backward: V̄ and every packed gradient).
    unsafe { run(&KANERVA_WRITE, kernel, operands, len, config, &[b, k, c, m], &[]) }
}

/// Runs `kernel` of `outer.cu` on its f32 operands (contiguous, as laid out) for `rows` outer
/// products of `n` and `m` elements, into a new buffer of `len` elements: the forward with a
/// thread per output element, the backward with a block of 256 threads per row.
pub fn outer(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    rows: usize,
    n: usize,
    m: usize,
    len: usize,
) -> Result<CudaStorage> {
    let (Ok(r), Ok(n), Ok(m), Ok(_)) =
        (i32::try_from(rows), i32::try_from(n), i32::try_from(m), u32::try_from(rows * n * m))
    else {
        candle_core::bail!("{kernel}: {rows} outer products of {n} × {m} are more than the kernel indexes")
    };
    let config = launch_config(launch_shape::outer(kernel == "outer_bwd", r as u32, n as u32, m as u32));
    // SAFETY: outer.cu's kernels take their operands, the output, rows, n and m, in this order;
    // the forward guards the threads past rows · n · m and writes each output element once; the
    // backward runs a block (whole warps) per row, returns for a block past the last, and
    // writes its row's n + m gradients (len = rows · (n + m)).
    unsafe { run(&OUTER, kernel, operands, len, config, &[r, n, m], &[]) }
}

/// Runs `kernel` of `rel_read.cu` on its f32 operands (contiguous, as laid out) into a new
/// buffer of `len` elements, for `batch` examples of `nq` slots of `d × d2`.
pub fn rel_read(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    (batch, nq, d, d2): (usize, usize, usize, usize),
    len: usize,
) -> Result<CudaStorage> {
    let (Ok(b), Ok(q), Ok(dd), Ok(dd2), Ok(_)) = (
        i32::try_from(batch),
        i32::try_from(nq),
        i32::try_from(d),
        i32::try_from(d2),
        u32::try_from(batch * nq * d * d2 + batch * nq * d),
    ) else {
        candle_core::bail!("{kernel}: {batch} memories of {nq} × {d} × {d2} are more than the kernel indexes")
    };
    let config = launch_config(launch_shape::rel_read(kernel, b as u32, q as u32, dd as u32));
    // SAFETY: rel_read.cu's kernels take their operands, the output, batch, nq, d (and d2 but for
    // rel_read_bwd_inputs), in this order; launch_shape gives the shared memory each indexes
    // (p, and b or gp), blocks past the last return whole, and each writes its example's (or
    // slot's) share of the output, len being v (batch d2), [d Mr | gu] or [d c | d b].
    match kernel {
        "rel_read_bwd_inputs" => unsafe { run(&REL_READ, kernel, operands, len, config, &[b, q, dd], &[]) },
        _ => unsafe { run(&REL_READ, kernel, operands, len, config, &[b, q, dd, dd2], &[]) },
    }
}

/// Runs `kernel` of `lerp.cu` on its f32 operands (contiguous, as laid out; the weights one per
/// run of `per` elements) with a thread per element of `n`, into a new buffer of `len` elements.
pub fn lerp(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    n: usize,
    per: usize,
    len: usize,
) -> Result<CudaStorage> {
    let (Ok(count), Ok(per)) = (i32::try_from(n), i32::try_from(per.max(1))) else {
        candle_core::bail!("{kernel}: {n} elements are more than the kernel indexes")
    };
    let config = launch_config(launch_shape::lerp(count as u32));
    // SAFETY: lerp.cu's kernels take their operands, the output, n and per, in this order; each
    // guards the threads past n and writes element i (forward, len = n) or i and n + i
    // (backward, len = 2n); the weights hold n / per elements (the caller's `fits`).
    unsafe { run(&LERP, kernel, operands, len, config, &[count, per], &[]) }
}

/// Runs `kernel` of `scale.cu` on its f32 operands (`n` elements each but the one-element `α`,
/// contiguous, as laid out) with `blocks` blocks of 256 threads, into a new buffer of `len`
/// elements (the forward's `n`; the backward's `n + blocks`, one partial sum per block).
pub fn scale(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    n: usize,
    len: usize,
    blocks: usize,
) -> Result<CudaStorage> {
    let (Ok(count), Ok(grid)) = (i32::try_from(n), u32::try_from(blocks.max(1))) else {
        candle_core::bail!("{kernel}: {n} elements are more than the kernel indexes")
    };
    let config = launch_config(LaunchShape::blocks_of_256(grid));
    // SAFETY: scale.cu's kernels take their operands, the output and n, in this order; the
    // forward's grid-stride loop writes every element below n, and the backward's blocks each
    // write their share of the first n and their own partial sum at n + block (len = n + blocks).
    unsafe { run(&SCALE, kernel, operands, len, config, &[count], &[]) }
}

/// Runs `kernel` of `head_move.cu` on its f32 operands (contiguous, as laid out) into a new
/// buffer of `len` elements: the forward with a thread per cell of `rows × cells`, the backward
/// with a thread per row.
pub fn head_move(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    rows: usize,
    cells: usize,
    moves: usize,
    len: usize,
) -> Result<CudaStorage> {
    let (Ok(_), Ok(r), Ok(c), Ok(m)) =
        (i32::try_from(rows * cells), i32::try_from(rows), i32::try_from(cells), i32::try_from(moves))
    else {
        candle_core::bail!("{kernel}: {rows} × {cells} cells are more than the kernel indexes")
    };
    let config = launch_config(launch_shape::head_move(kernel, r as u32, c as u32));
    // SAFETY: head_move.cu's kernels take their operands, the output, rows, cells and moves, in
    // this order, guard the threads past their count, and write every output element (the
    // forward one per cell; the backward each row's gradients in the three parts of `len`).
    unsafe { run(&HEAD_MOVE, kernel, operands, len, config, &[r, c, m], &[]) }
}

/// Runs `kernel` of `sam_attend.cu` on its f32 operands (contiguous, as laid out) for `batch`
/// examples of `n` rows and `nq` queries, into a new buffer of `len` elements: the forward's
/// `[B, nq, n, n]`, the backward's `[B, n, 3nq]`. The caller checked
/// [`super::sam_attend_op::fits_a_block`].
pub fn sam_attend(
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    len: usize,
    batch: usize,
    n: usize,
    nq: usize,
) -> Result<CudaStorage> {
    let (Ok(_), Ok(b), Ok(n), Ok(nq)) = (i32::try_from(len), i32::try_from(batch), i32::try_from(n), i32::try_from(nq))
    else {
        candle_core::bail!("{kernel}: {len} elements are more than the kernel indexes")
    };
    let config = launch_config(launch_shape::sam_attend(kernel == "sam_attend_bwd", b as u32, n as u32, nq as u32));
    // SAFETY: sam_attend.cu's kernels take their operands, the output, batch, n and nq, in this
    // order; launch_shape gives them the blocks and the shared memory they index, blocks past
    // the last example return whole, and between them they write every output element.
    unsafe { run(&SAM_ATTEND, kernel, operands, len, config, &[b, n, nq], &[]) }
}

/// Runs `nam_write.cu`'s `tape_write_bwd_split` on tape_write_bwd's f32 operands (contiguous,
/// as laid out), one block per tape of `cells × features`, into a new buffer of `len` elements.
/// [`super::nam_write_op::tape_split_shared_bytes`] must fit a block.
pub fn tape_write_bwd_split(
    operands: &[(&CudaStorage, &Layout)],
    count: usize,
    cells: usize,
    features: usize,
    len: usize,
) -> Result<CudaStorage> {
    let (Ok(n), Ok(r), Ok(c), Ok(blocks)) =
        (i32::try_from(count), i32::try_from(cells), i32::try_from(features), u32::try_from(count))
    else {
        candle_core::bail!(
            "the fused tape write's backward: {count} tapes of {cells} × {features} are more than it indexes"
        )
    };
    let config = launch_config(launch_shape::tape_write_bwd_split(blocks, cells, features));
    // SAFETY: tape_write_bwd_split takes tape_write_bwd's operands and ints, runs one block
    // (a multiple of 32 threads) per tape, returns for a block past the last, writes every output
    // element of its tape, and uses at most `tape_split_shared_bytes` of shared memory.
    unsafe { run(&NAM_WRITE, "tape_write_bwd_split", operands, len, config, &[n, r, c], &[]) }
}

/// Runs the forward or the backward kernel of `nam_write.cu` for `orientation` on its f32
/// operands (contiguous, as laid out), one block per memory of `rows × cols`, into a new buffer
/// of `len` elements. [`super::nam_write_op::fits_a_block`] says whether the backward's shared
/// memory fits.
pub fn nam_write(
    orientation: super::nam_write_op::Orientation,
    backward: bool,
    operands: &[(&CudaStorage, &Layout)],
    count: usize,
    rows: usize,
    cols: usize,
    len: usize,
) -> Result<CudaStorage> {
    let kernel = if backward { "backward" } else { "forward" };
    let (Ok(n), Ok(r), Ok(c), Ok(blocks)) =
        (i32::try_from(count), i32::try_from(rows), i32::try_from(cols), u32::try_from(count))
    else {
        candle_core::bail!(
            "the fused NAM write's {kernel}: {count} memories of {rows} × {cols} are more than it indexes"
        )
    };
    let shape = launch_shape::nam_write(orientation, backward, blocks, rows, cols);
    let config = launch_config(shape);
    let name = orientation.kernel(backward);
    // SAFETY: nam_write.cu's kernels take their operands, the output, the number of memories,
    // rows and cols, in this order, run one block (a multiple of 32 threads) per memory, return
    // for a block past the last, write every output element of their memory, and use at most
    // `shape.shared_bytes` of shared memory (`backward_shared_bytes`).
    unsafe { run(&NAM_WRITE, name, operands, len, config, &[n, r, c], &[]) }
}

/// `X = A⁻¹ B` by `spd_solve.cu`: `a` `[batch, n, n]` (SPD, lower triangle read) and `b`
/// `[batch, n, r]`, f32, contiguous as laid out, into a new `[batch, n, r]` buffer. One block
/// per system; its factor and right-hand sides (in f64) in shared memory where they fit,
/// otherwise in a global workspace allocated here.
pub fn spd_solve(
    (a, la): (&CudaStorage, &Layout),
    (b, lb): (&CudaStorage, &Layout),
    batch: usize,
    n: usize,
    r: usize,
) -> Result<CudaStorage> {
    let per_system = n * n + n * r;
    let (Ok(n32), Ok(r32), Ok(blocks), Ok(_)) =
        (i32::try_from(n), i32::try_from(r), u32::try_from(batch), i32::try_from(per_system))
    else {
        candle_core::bail!("spd_solve: {batch} systems of {n} × {n} are more than the kernel indexes")
    };
    let dev = a.device.clone();
    // SAFETY: the kernel writes every element of every system's solution.
    let out = unsafe { dev.alloc::<f32>(batch * n * r)? };
    if batch == 0 || n == 0 || r == 0 {
        return Ok(CudaStorage::wrap_cuda_slice(out, dev));
    }
    let a_view = a.as_cuda_slice::<f32>()?.slice(la.start_offset()..la.start_offset() + batch * n * n);
    let b_view = b.as_cuda_slice::<f32>()?.slice(lb.start_offset()..lb.start_offset() + batch * n * r);
    let (shape, use_shared) = launch_shape::spd_solve(blocks, n, r);
    let func = SPD_SOLVE.function(&dev, "spd_solve_f32")?;
    let mut builder = func.builder();
    builder.arg(&a_view).arg(&b_view).arg(&out);
    // The workspace, when the block's shared memory is too small: freed on the stream after
    // the kernel (stream-ordered), so dropping it at the end of this function is safe.
    // SAFETY: the kernel writes each element of its system's share before reading it.
    let global_work = if use_shared { None } else { Some(unsafe { dev.alloc::<f64>(batch * per_system)? }) };
    let null: u64 = 0;
    match &global_work {
        Some(work) => builder.arg(work),
        None => builder.arg(&null),
    };
    let flag = i32::from(use_shared);
    builder.arg(&n32).arg(&r32).arg(&flag);
    // SAFETY: spd_solve.cu's kernel takes A, B, X, the workspace, n, r and the shared flag, in
    // this order; each block reads its system's n² + n r elements and writes its n r, and
    // touches only its own share of the workspace (batch · (n² + n r) doubles) or its shared
    // memory (`shape.shared_bytes`, requested above).
    unsafe { builder.launch(launch_config(shape)) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev))
}

/// Runs `kernel` of `optim.cu` over `n` elements, one thread each (grid-stride), on the f32
/// elements of `read` and then of `written` (each from its layout's start offset), followed by
/// `n` and then `ints` and `floats`. The kernel rewrites the `written` tensors' memory in place.
///
/// # Safety
/// The kernel must take exactly these arguments in this order and stay within each tensor's
/// elements; the caller has checked that every tensor is contiguous f32 on this device with
/// the elements the kernel reads. The `written` tensors are rewritten under read locks (candle
/// does not lend a write lock outside its crate): nothing may read or write them on the host
/// meanwhile, and on the device the stream orders the kernel after their earlier uses.
pub unsafe fn optim_in_place(
    kernel: &str,
    read: &[&Tensor],
    written: &[&Tensor],
    n: usize,
    ints: &[i32],
    floats: &[f32],
) -> Result<()> {
    let Ok(count) = i32::try_from(n) else {
        candle_core::bail!("{kernel}: {n} elements are more than the kernel indexes")
    };
    if n == 0 {
        return Ok(());
    }
    let guards: Vec<_> = read.iter().chain(written).map(|t| t.storage_and_layout()).collect();
    let mut device = None;
    let views = guards
        .iter()
        .map(|(storage, layout)| {
            let Storage::Cuda(s) = &**storage else {
                candle_core::bail!("{kernel}: an operand is not on a CUDA device")
            };
            device.get_or_insert_with(|| s.device.clone());
            let start = layout.start_offset();
            Ok(s.as_cuda_slice::<f32>()?.slice(start..start + layout.shape().elem_count()))
        })
        .collect::<Result<Vec<_>>>()?;
    let Some(dev) = device else { candle_core::bail!("{kernel}: no operands") };
    let func = OPTIM.function(&dev, kernel)?;
    let mut builder = func.builder();
    for v in &views {
        builder.arg(v);
    }
    builder.arg(&count);
    for i in ints {
        builder.arg(i);
    }
    for f in floats {
        builder.arg(f);
    }
    // SAFETY: the argument list is the kernel's (the caller's contract).
    unsafe { builder.launch(launch_config(LaunchShape::per_element(count as u32))) }.w()?;
    Ok(())
}

/// Launches `kernel` of `module` with the operands' f32 elements (each from its layout's start
/// offset, contiguous), a new output buffer of `len` elements, then `ints` and `floats`.
///
/// # Safety
/// The kernel must take exactly these arguments in this order, and write every element of the
/// output (it is not initialised) without reading or writing past any buffer.
unsafe fn run(
    module: &Module,
    kernel: &str,
    operands: &[(&CudaStorage, &Layout)],
    len: usize,
    config: LaunchConfig,
    ints: &[i32],
    floats: &[f32],
) -> Result<CudaStorage> {
    let Some((first, _)) = operands.first() else { candle_core::bail!("{kernel}: no operands") };
    let dev = first.device.clone();
    let views = operands
        .iter()
        .map(|(s, l)| {
            let start = l.start_offset();
            Ok(s.as_cuda_slice::<f32>()?.slice(start..start + l.shape().elem_count()))
        })
        .collect::<Result<Vec<_>>>()?;
    // SAFETY: every element is written by the kernel (the caller's contract).
    let out = unsafe { dev.alloc::<f32>(len)? };
    if len == 0 {
        return Ok(CudaStorage::wrap_cuda_slice(out, dev));
    }
    let func = module.function(&dev, kernel)?;
    let mut builder = func.builder();
    for v in &views {
        builder.arg(v);
    }
    builder.arg(&out);
    for i in ints {
        builder.arg(i);
    }
    for f in floats {
        builder.arg(f);
    }
    // SAFETY: the argument list is the kernel's (the caller's contract).
    unsafe { builder.launch(config) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev))
}
