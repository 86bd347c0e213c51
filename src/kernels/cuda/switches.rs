//! memctl's switches on CUDA: each fused kernel, each change to candle's CUDA path, graph
//! rewrite or loader policy, and the two options (TF32, the graph profile). Each is declared
//! beside the code it switches (a kernel's module, `device::tuning`) and registered there with
//! [`inventory`], so [`all`] lists every one without a table to keep.
//!
//! On the CPU the fused kernels always run (they are the CPU path's own ops); the switches
//! decide what runs on CUDA. One environment variable, [`VARIABLE`], changes them: unset, each
//! has its [`Standing`]; a comma-separated list turns the names in it on and those with a
//! leading `-` off (`MEMCTL_CUDA=lerp,-scale`). In the list, `0` turns every switch not named
//! off (candle's own path, to compare: `0,cuda_graphs`), and `1` every kernel and change on,
//! those awaiting a GPU measurement too (what `doctor --check` runs to check them; options stay
//! off unless named). `memctl doctor` lists them and says which run.

use std::sync::LazyLock;

use candle_core::{DType, Device, Tensor};

/// The environment variable that changes the switches.
pub const VARIABLE: &str = "MEMCTL_CUDA";

/// One switch: its name, as [`VARIABLE`] and `memctl doctor` write it, and its standing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    pub name: &'static str,
    pub standing: Standing,
}

/// Whether a switch is on when [`VARIABLE`] does not name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// On: it passed `memctl doctor --check` on a GPU and was measured to pay (the figure and
    /// date in its doc comment, the table in docs/performance.md).
    On,
    /// Off until a GPU run measures it: the measurement it waits for.
    AwaitsGpu(&'static str),
    /// Off unless asked: a choice for the user (it changes results or prints), not a pending
    /// measurement.
    Option,
}

impl Switch {
    /// A switch on by default.
    pub const fn on(name: &'static str) -> Switch {
        Switch { name, standing: Standing::On }
    }

    /// A switch off until the GPU measurement `waits_for`.
    pub const fn awaits_gpu(name: &'static str, waits_for: &'static str) -> Switch {
        Switch { name, standing: Standing::AwaitsGpu(waits_for) }
    }

    /// An option, off unless asked.
    pub const fn option(name: &'static str) -> Switch {
        Switch { name, standing: Standing::Option }
    }
}

inventory::collect!(Switch);

/// Every registered switch, by name.
pub fn all() -> Vec<Switch> {
    let mut all: Vec<Switch> = inventory::iter::<Switch>.into_iter().copied().collect();
    all.sort_by_key(|s| s.name);
    all
}

/// Whether the candle path uses `switch` for `t`: a fused kernel on the CPU always; on CUDA
/// (f32 only) as [`VARIABLE`] has it; never on other devices.
pub fn used_for(t: &Tensor, switch: Switch) -> bool {
    used_on(t.device(), t.dtype(), switch)
}

/// [`used_for`] a tensor of `dtype` on `device`.
pub fn used_on(device: &Device, dtype: DType, switch: Switch) -> bool {
    match device {
        Device::Cpu => true,
        Device::Cuda(_) => dtype == DType::F32 && on_cuda(switch),
        _ => false,
    }
}

/// Whether `switch` is on for CUDA, as [`VARIABLE`] has it.
pub fn on_cuda(switch: Switch) -> bool {
    SETTING.turns_on(switch)
}

/// Names in [`VARIABLE`] that no switch has (a misspelling turns nothing on or off).
pub fn unknown_names() -> Vec<String> {
    let known = all();
    SETTING.named().into_iter().filter(|n| !known.iter().any(|s| s.name == *n)).map(str::to_string).collect()
}

/// [`VARIABLE`], read once: `used_for` runs for every op of every eager time step.
static SETTING: LazyLock<Setting> = LazyLock::new(|| Setting::parse(std::env::var(VARIABLE).ok().as_deref()));

/// What [`VARIABLE`] says: a base, then the names turned on and those turned off.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Setting {
    base: Base,
    on: Vec<String>,
    off: Vec<String>,
}

/// The switches not named: `0` every one off, unset each by its standing, `1` every kernel and
/// change on (options stay off unless named).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Base {
    None,
    Standing,
    All,
}

impl Setting {
    fn parse(value: Option<&str>) -> Setting {
        let mut setting = Setting { base: Base::Standing, on: Vec::new(), off: Vec::new() };
        for item in value.unwrap_or("").split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match item {
                "0" => setting.base = Base::None,
                "1" => setting.base = Base::All,
                _ => match item.strip_prefix('-') {
                    Some(name) => setting.off.push(name.trim().to_string()),
                    None => setting.on.push(item.to_string()),
                },
            }
        }
        setting
    }

    fn turns_on(&self, switch: Switch) -> bool {
        if self.off.iter().any(|n| n == switch.name) {
            return false;
        }
        self.on.iter().any(|n| n == switch.name)
            || match self.base {
                Base::None => false,
                Base::Standing => switch.standing == Standing::On,
                Base::All => switch.standing != Standing::Option,
            }
    }

    fn named(&self) -> Vec<&str> {
        self.on.iter().chain(&self.off).map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: Switch = Switch::on("test_on");
    const NEW: Switch = Switch::awaits_gpu("test_new", "a test");
    const CHOICE: Switch = Switch::option("test_choice");

    #[test]
    fn the_variable_turns_none_the_standing_the_named_or_all_on() {
        let runs = |v: Option<&str>, s: Switch| Setting::parse(v).turns_on(s);
        for s in [ON, NEW] {
            assert!(!runs(Some("0"), s));
            assert!(runs(Some("1"), s));
            assert_eq!(runs(None, s), s.standing == Standing::On);
            assert_eq!(runs(Some("no such switch"), s), s.standing == Standing::On);
        }
        // One awaiting a GPU runs only when named (or with `1`); naming another does not run it.
        assert!(runs(Some("scale, test_new"), NEW) && !runs(Some("scale"), NEW) && runs(Some("scale"), ON));
        // A leading `-` turns one off, and only that one.
        assert!(!runs(Some("-test_on"), ON) && !runs(Some("test_new, - test_on"), ON));
        assert!(runs(Some("-scale"), ON) && runs(Some("-scale,test_new"), NEW));
        // An option runs only when named: neither `1` nor the standing turns it on.
        assert!(!runs(None, CHOICE) && !runs(Some("1"), CHOICE) && runs(Some("test_choice"), CHOICE));
        // A base and names together: `0` with one named back, `1` with an option.
        assert!(runs(Some("0,test_on"), ON) && !runs(Some("0,test_on"), NEW));
        assert!(runs(Some("1, test_choice"), CHOICE) && runs(Some("1, test_choice"), NEW));
    }

    #[test]
    fn every_registered_switch_has_a_unique_name_and_a_reason_when_off() {
        let all = all();
        let names: std::collections::BTreeSet<_> = all.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), all.len(), "names are unique");
        assert!(all.iter().any(|s| s.name == "item_gate"), "kernels register their switches");
        for s in &all {
            assert!(!matches!(s.standing, Standing::AwaitsGpu("")), "{} says what it waits for", s.name);
        }
    }
}
