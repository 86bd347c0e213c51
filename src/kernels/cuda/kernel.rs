//! One fused kernel, one module: the [`FusedKernel`] trait a fused op implements, and the one
//! candle custom op ([`Fused`]) that runs any of them, on the CPU by its Rust twin and on CUDA
//! by its kernel.
//!
//! A kernel's module says everything about it in one place: the entry point in its `.cu`
//! file, which operands it takes and the output they give ([`FusedKernel::sizes`]), its launch
//! shape and scalar arguments ([`FusedKernel::launch`]), the same computation on the CPU
//! ([`FusedKernel::cpu`]), and the gradients of its operands ([`FusedKernel::backward`]).
//! `build.rs` finds the `.cu` file by itself, and the CUDA emulation test runs any
//! `FusedKernel` against its CPU twin from these methods alone. Adding a CUDA path is then
//! four files: the `.cu`, its module, a one-line hook in the primitive, and an emulation case
//! (docs/architecture.md, "A fused CUDA kernel").

use candle_core::{
    CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Result, Shape, Storage, StorageRef, Tensor, bail,
};

use super::fused::{RealKernel, run_cpu};
use super::launch_shape::LaunchShape;
use crate::kernels::cpu::real::Real;
#[cfg(feature = "cuda")]
use candle_core::CudaStorage;

/// One pass of a fused op (a forward, or the backward that op's gradient runs): a CUDA kernel
/// and its CPU twin.
pub trait FusedKernel: Copy + Send + Sync + 'static {
    /// What the operands' layouts say that both the kernel and the CPU twin need (rows, widths).
    type Sizes: Copy;

    /// The kernel's entry point in its `.cu` file (`extern "C" __global__ void …`), also the
    /// candle op's name. The `entries!` macro writes it and `module`.
    fn entry(&self) -> &'static str;

    /// The output's shape and the sizes, from the operands' layouts; an error (with what does
    /// not fit) for operands the kernel does not take. Operands arrive contiguous.
    fn sizes(&self, operands: &[&Layout]) -> Result<(Shape, Self::Sizes)>;

    /// The output's elements from the operands' (each contiguous), in f32 or f64.
    fn cpu<T: Real>(&self, sizes: Self::Sizes, operands: &[&[T]]) -> Vec<T>;

    /// The kernel's launch: its grid and the scalar arguments that follow its buffers (the
    /// operands, then the output). An error when a size is past what the kernel indexes.
    fn launch(&self, sizes: Self::Sizes) -> Result<Launch>;

    /// The module that holds the kernel (`modules`' table, one per `.cu` file).
    #[cfg(feature = "cuda")]
    fn module(&self) -> &'static super::modules::Module;

    /// The gradients of the operands from the output's gradient `grad`, one per operand (`None`
    /// where an operand takes none). A backward pass itself has none.
    fn backward(&self, operands: &[&Tensor], out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let _ = (operands, out, grad);
        bail!("{} has no gradient of its own", self.entry())
    }
}

/// [`FusedKernel::entry`] and `FusedKernel::module` (with the `cuda` feature) from the module's
/// constant in `modules` (the `.cu` file's stem in capitals) and each pass's entry point:
/// `entries! { GRU_CELL: Gru::Forward => "gru_cell_fwd", Gru::Backward => "gru_cell_bwd" }`
/// inside the `impl FusedKernel`.
macro_rules! entries {
    ($module:ident: $($pass:pat => $entry:literal),+ $(,)?) => {
        fn entry(&self) -> &'static str {
            match self {
                $($pass => $entry),+
            }
        }

        #[cfg(feature = "cuda")]
        fn module(&self) -> &'static $crate::kernels::cuda::modules::Module {
            &$crate::kernels::cuda::modules::$module
        }
    };
}
pub(crate) use entries;

/// Declares the passes of a fused op of one kernel each way: `Forward`, and the `Backward` that
/// the forward's gradient runs. `two_passes! { pub enum Softmax }`, the enum's doc comment
/// inside the braces.
macro_rules! two_passes {
    ($(#[$doc:meta])* $vis:vis enum $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $name {
            Forward,
            Backward,
        }
    };
}
pub(crate) use two_passes;

/// candle's `cpu_fwd` and (with the `cuda` feature) `cuda_fwd`, which take each operand as a
/// storage and a layout (the `$s: $l` pairs), handing them on as one slice to the op's own
/// `on_cpu` and `on_cuda`: `forwards!(s1: l1, s2: l2)` inside an `impl CustomOp2`.
macro_rules! forwards {
    ($($s:ident: $l:ident),+) => {
        fn cpu_fwd(
            &self,
            $($s: &candle_core::CpuStorage, $l: &candle_core::Layout),+
        ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
            self.on_cpu(&[$(($s, $l)),+])
        }

        #[cfg(feature = "cuda")]
        fn cuda_fwd(
            &self,
            $($s: &candle_core::CudaStorage, $l: &candle_core::Layout),+
        ) -> candle_core::Result<(candle_core::CudaStorage, candle_core::Shape)> {
            self.on_cuda(&[$(($s, $l)),+])
        }
    };
}
pub(crate) use forwards;

/// A kernel's grid and the scalar arguments after its buffers, in the kernel's order: the ints
/// first, then the floats.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub shape: LaunchShape,
    pub ints: Vec<i32>,
    pub floats: Vec<f32>,
}

impl Launch {
    /// `shape` with `sizes` as the kernel's int arguments, each checked to fit a C int.
    pub fn with_ints(entry: &str, shape: LaunchShape, sizes: &[usize]) -> Result<Launch> {
        let ints = sizes.iter().map(|&s| i32::try_from(s)).collect::<std::result::Result<Vec<_>, _>>();
        let Ok(ints) = ints else { bail!("{entry}: sizes {sizes:?} are more than the kernel indexes") };
        Ok(Launch { shape, ints, floats: Vec::new() })
    }
}

/// The candle op of a [`FusedKernel`]: `Fused(pass).apply(&[x])` (or `x.apply_op1(Fused(pass))`,
/// and `apply_op2`, `apply_op3` for two or three operands); [`Fused::apply_no_bwd`] for a pass of
/// any number of operands without a gradient of its own.
#[derive(Clone, Copy)]
pub struct Fused<K>(pub K);

/// A pass of more than three operands: candle's op takes the first, and the op holds the others,
/// read beside it (none takes a gradient: a backward pass's operands, its output gradient say).
struct Held<K> {
    pass: Fused<K>,
    rest: Vec<Tensor>,
}

/// The CPU twin of one call, for [`run_cpu`].
struct Twin<K: FusedKernel>(K, K::Sizes);

impl<K: FusedKernel> RealKernel for Twin<K> {
    fn run<T: Real>(&self, operands: &[&[T]]) -> Vec<T> {
        self.0.cpu(self.1, operands)
    }
}

impl<K: FusedKernel> Fused<K> {
    /// The pass on `operands` (one to three, each made contiguous), as a candle op whose
    /// backward is the pass's [`FusedKernel::backward`].
    pub fn apply(self, operands: &[&Tensor]) -> Result<Tensor> {
        let operands = operands.iter().map(|t| t.contiguous()).collect::<Result<Vec<_>>>()?;
        match operands.as_slice() {
            [a] => a.apply_op1(self),
            [a, b] => a.apply_op2(b, self),
            [a, b, c] => a.apply_op3(b, c, self),
            _ => bail!("{}: {} operands, where candle's ops take one to three", self.0.entry(), operands.len()),
        }
    }

    /// The pass on `operands` (one or more), as a candle op without a backward: the backward
    /// passes, whose operands may be more than candle's three.
    pub fn apply_no_bwd(self, operands: &[&Tensor]) -> Result<Tensor> {
        match operands {
            [] => bail!("{}: no operands", self.0.entry()),
            [a] => a.apply_op1_no_bwd(&self),
            [a, b] => a.apply_op2_no_bwd(b, &self),
            [a, b, c] => a.apply_op3_no_bwd(b, c, &self),
            [a, rest @ ..] => {
                a.apply_op1_no_bwd(&Held { pass: self, rest: rest.iter().map(|t| (*t).clone()).collect() })
            }
        }
    }

    fn on_cpu(&self, operands: &[(&CpuStorage, &Layout)]) -> Result<(CpuStorage, Shape)> {
        let layouts: Vec<&Layout> = operands.iter().map(|(_, l)| *l).collect();
        contiguous(self.0.entry(), &layouts)?;
        let (shape, sizes) = self.0.sizes(&layouts)?;
        Ok((run_cpu(&Twin(self.0, sizes), operands, self.0.entry())?, shape))
    }

    #[cfg(feature = "cuda")]
    fn on_cuda(&self, operands: &[(&CudaStorage, &Layout)]) -> Result<(CudaStorage, Shape)> {
        let layouts: Vec<&Layout> = operands.iter().map(|(_, l)| *l).collect();
        contiguous(self.0.entry(), &layouts)?;
        let (shape, sizes) = self.0.sizes(&layouts)?;
        let launch = self.0.launch(sizes)?;
        let config = super::modules::launch_config(launch.shape);
        let (entry, len) = (self.0.entry(), shape.elem_count());
        // SAFETY: a FusedKernel's kernel takes its operands, the output and `launch`'s ints and
        // floats, in this order, and writes every element of an output of `sizes`' shape within
        // `launch.shape` (its CPU twin and the CUDA emulation test check both).
        let out = unsafe {
            super::modules::run(self.0.module(), entry, operands, len, config, &launch.ints, &launch.floats)
        }?;
        super::fused::record_launch(entry);
        Ok((out, shape))
    }

    fn gradients(&self, operands: &[&Tensor], out: &Tensor, grad: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let grads = self.0.backward(operands, out, grad)?;
        if grads.len() != operands.len() {
            bail!("{}: {} gradients for {} operands", self.0.entry(), grads.len(), operands.len());
        }
        Ok(grads)
    }
}

/// Every operand contiguous: the kernels and the twins read them as laid out.
fn contiguous(entry: &str, layouts: &[&Layout]) -> Result<()> {
    if let Some(l) = layouts.iter().find(|l| !l.is_contiguous()) {
        bail!("{entry} takes contiguous operands, not {:?} with strides {:?}", l.dims(), l.stride());
    }
    Ok(())
}

impl<K: FusedKernel> CustomOp1 for Fused<K> {
    fn name(&self) -> &'static str {
        self.0.entry()
    }

    forwards!(s: l);

    fn bwd(&self, x: &Tensor, out: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let mut grads = self.gradients(&[x], out, grad)?.into_iter();
        Ok(grads.next().flatten())
    }
}

impl<K: FusedKernel> CustomOp2 for Fused<K> {
    fn name(&self) -> &'static str {
        self.0.entry()
    }

    forwards!(s1: l1, s2: l2);

    fn bwd(&self, a: &Tensor, b: &Tensor, out: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let mut grads = self.gradients(&[a, b], out, grad)?.into_iter();
        Ok((grads.next().flatten(), grads.next().flatten()))
    }
}

impl<K: FusedKernel> CustomOp3 for Fused<K> {
    fn name(&self) -> &'static str {
        self.0.entry()
    }

    forwards!(s1: l1, s2: l2, s3: l3);

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        c: &Tensor,
        out: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let mut grads = self.gradients(&[a, b, c], out, grad)?.into_iter();
        Ok((grads.next().flatten(), grads.next().flatten(), grads.next().flatten()))
    }
}

impl<K: FusedKernel> Held<K> {
    /// The held operands' storages (read-locked while the op runs) and layouts.
    fn held(&self) -> Vec<(StorageRef<'_>, &Layout)> {
        self.rest.iter().map(|t| t.storage_and_layout()).collect()
    }

    /// candle's operand, then the held ones, each on the backend `pick` takes.
    fn operands<'a, S>(
        &self,
        first: (&'a S, &'a Layout),
        held: &'a [(StorageRef<'a>, &'a Layout)],
        pick: impl Fn(&Storage) -> Option<&S>,
    ) -> Result<Vec<(&'a S, &'a Layout)>> {
        let mut operands = vec![first];
        for (storage, layout) in held {
            let Some(s) = pick(storage) else { bail!("{}: operands on different devices", self.pass.0.entry()) };
            operands.push((s, *layout));
        }
        Ok(operands)
    }
}

impl<K: FusedKernel> CustomOp1 for Held<K> {
    fn name(&self) -> &'static str {
        self.pass.0.entry()
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let held = self.held();
        let operands = self.operands((s, l), &held, |s| if let Storage::Cpu(s) = s { Some(s) } else { None })?;
        self.pass.on_cpu(&operands)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        let held = self.held();
        let operands = self.operands((s, l), &held, |s| if let Storage::Cuda(s) = s { Some(s) } else { None })?;
        self.pass.on_cuda(&operands)
    }
}

/// The rows of kernels that run a warp per row of the last axis (softmax, normalisation): every
/// operand of the same shape, `rows` rows of `n`.
#[derive(Clone, Copy, Debug)]
pub struct Rows {
    pub rows: usize,
    pub n: usize,
}

impl Rows {
    /// The rows of `operands`, which must all have the first one's dims and at least one axis.
    pub fn of(what: &str, operands: &[&Layout]) -> Result<Rows> {
        let Some(first) = operands.first() else { bail!("{what}: no operands") };
        let Some(&n) = first.dims().last() else { bail!("{what} over the last axis of a scalar") };
        if let Some(other) = operands.iter().find(|l| l.dims() != first.dims()) {
            bail!("{what}: an operand {:?} beside {:?}", other.dims(), first.dims());
        }
        Ok(Rows { rows: first.shape().elem_count().checked_div(n).unwrap_or(0), n })
    }

    /// [`FusedKernel::sizes`] of a kernel over rows whose output is shaped as its first operand.
    pub fn sizes(what: &str, operands: &[&Layout]) -> Result<(Shape, Rows)> {
        let rows = Rows::of(what, operands)?;
        Ok((operands[0].shape().clone(), rows))
    }

    /// A warp per row, eight to a block of 256 threads; `rows` and `n` as the kernel's ints.
    pub fn warp_per_row(self, entry: &str) -> Result<Launch> {
        let Ok(rows) = u32::try_from(self.rows) else { bail!("{entry}: {} rows", self.rows) };
        Launch::with_ints(entry, LaunchShape::warp_per_row(rows), &[self.rows, self.n])
    }
}
