//! Trials that run at once share their device's memory. A sweep starts a trial only when its
//! memory estimate fits in what the device had free before the sweep began, less the
//! estimates of the sweep's trials running on that device now; a trial that fits alone but not
//! beside them waits for one of them to end. (A trial that cannot fit even alone is refused
//! before the sweep, `C095`.) Other processes' use shows only in the free memory measured at
//! the start. A sweep spread over several GPUs (`--device cuda:all`) places each pack on one
//! of them as it starts ([`super::placement`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::placement::{self, Admission, Place, Room, Waiting, admit};
use crate::device::DeviceSpec;

/// A trial's estimate, and the device it trains on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    pub device: DeviceSpec,
    pub bytes: u64,
}

/// The sweep's memory ledger: each device's free memory before the sweep and each trial's
/// estimate (by trial key), and the estimates held by the trials running.
#[derive(Default)]
pub struct MemoryBudget {
    free: HashMap<DeviceSpec, u64>,
    needs: HashMap<String, Need>,
    /// The GPUs the sweep spreads its packs over; empty: each trial trains on its own device.
    spread: Vec<DeviceSpec>,
    ledger: Mutex<Ledger>,
    released: Condvar,
}

/// What the packs running now hold on each device, and how many run there.
#[derive(Default)]
struct Ledger {
    held: HashMap<DeviceSpec, u64>,
    packs: HashMap<DeviceSpec, usize>,
}

impl Ledger {
    fn take(&mut self, device: DeviceSpec, bytes: u64) {
        *self.held.entry(device).or_insert(0) += bytes;
        *self.packs.entry(device).or_insert(0) += 1;
    }

    fn give_back(&mut self, device: DeviceSpec, bytes: u64) {
        if let Some(held) = self.held.get_mut(&device) {
            *held = held.saturating_sub(bytes);
        }
        if let Some(packs) = self.packs.get_mut(&device) {
            *packs = packs.saturating_sub(1);
        }
    }

    fn held(&self, device: DeviceSpec) -> u64 {
        self.held.get(&device).copied().unwrap_or(0)
    }
}

/// How often a waiting trial looks at the sweep's cancel flag (set from a signal handler,
/// which cannot wake it).
const CANCEL_POLL: Duration = Duration::from_millis(200);

impl MemoryBudget {
    /// A budget that starts every trial at once (nothing estimated, or free memory unknown).
    pub fn unlimited() -> MemoryBudget {
        MemoryBudget::default()
    }

    /// `free`: each device's free memory now; `needs`: the trials' estimates, by trial key. A
    /// trial or device left out is not limited.
    pub fn new(free: HashMap<DeviceSpec, u64>, needs: HashMap<String, Need>) -> MemoryBudget {
        MemoryBudget { free, needs, ..MemoryBudget::default() }
    }

    /// The budget of a sweep that places each pack on one of `gpus` (`--device cuda:all`), by
    /// [`placement::place`]; `free` should hold each one's free memory.
    pub fn spread_over(self, gpus: Vec<DeviceSpec>) -> MemoryBudget {
        MemoryBudget { spread: gpus, ..self }
    }

    /// The GPUs the sweep spreads its packs over (empty: none).
    pub fn spread(&self) -> &[DeviceSpec] {
        &self.spread
    }

    /// Waits until the trial `trial_key` fits beside the trials running, then holds its
    /// estimate until the returned reservation is dropped. Calls `waits` once if it has to
    /// wait; `None` if `cancel` is set while it waits. A trial too large even alone (the
    /// check before the sweep refuses those) waits until nothing else runs on its device.
    pub fn reserve(
        &self,
        trial_key: &str,
        cancel: &AtomicBool,
        waits: impl FnOnce(Waiting),
    ) -> Option<Reservation<'_>> {
        self.reserve_pack(&[trial_key], cancel, waits)
    }

    /// [`MemoryBudget::reserve`] for the trials of a pack, which train at once on one device:
    /// their estimates added up. In a spread sweep the reservation says which GPU it took
    /// ([`Reservation::device`]).
    pub fn reserve_pack(
        &self,
        trial_keys: &[&str],
        cancel: &AtomicBool,
        waits: impl FnOnce(Waiting),
    ) -> Option<Reservation<'_>> {
        let need = self.need_of(trial_keys);
        let unheld = Reservation { budget: self, on: None, bytes: 0, placed: None };
        if self.spread.is_empty() && need.is_none_or(|n| !self.free.contains_key(&n.device)) {
            return Some(unheld);
        }
        let mut waits = Some(waits);
        let mut ledger = self.ledger.lock().ok()?;
        loop {
            let place = match need {
                _ if !self.spread.is_empty() => placement::place(&self.rooms(&ledger), need.map(|n| n.bytes)),
                Some(n) => self.place_on_own_device(n, &ledger),
                None => return Some(unheld),
            };
            let waiting = match place {
                Place::On(device) => {
                    let bytes = need.map_or(0, |n| n.bytes);
                    ledger.take(device, bytes);
                    let placed = (!self.spread.is_empty()).then_some(device);
                    return Some(Reservation { budget: self, on: Some(device), bytes, placed });
                }
                Place::Wait(w) => w,
            };
            if cancel.load(Ordering::SeqCst) {
                return None;
            }
            if let Some(waits) = waits.take() {
                waits(waiting);
            }
            ledger = self.released.wait_timeout(ledger, CANCEL_POLL).ok()?.0;
        }
    }

    /// A pack that trains on its trials' own device: there now, or it waits (one too large even
    /// alone goes once nothing else runs there).
    fn place_on_own_device(&self, need: Need, ledger: &Ledger) -> Place {
        let free = self.free.get(&need.device).copied().unwrap_or(u64::MAX);
        let held = ledger.held(need.device);
        match admit(free, held, need.bytes) {
            Admission::Start => Place::On(need.device),
            Admission::TooLarge if held == 0 => Place::On(need.device),
            Admission::Wait | Admission::TooLarge => Place::Wait(Waiting { needs: need.bytes, free, reserved: held }),
        }
    }

    /// The spread GPUs as the placement sees them now.
    fn rooms(&self, ledger: &Ledger) -> Vec<Room> {
        self.spread
            .iter()
            .map(|&device| Room {
                device,
                free: self.free.get(&device).copied(),
                held: ledger.held(device),
                packs: ledger.packs.get(&device).copied().unwrap_or(0),
            })
            .collect()
    }
}

impl MemoryBudget {
    /// What the trials `trial_keys` need together (on the first one's device), if any is
    /// estimated.
    fn need_of(&self, trial_keys: &[&str]) -> Option<Need> {
        let needs: Vec<Need> = trial_keys.iter().filter_map(|k| self.needs.get(*k).copied()).collect();
        let device = needs.first()?.device;
        Some(Need { device, bytes: needs.iter().filter(|n| n.device == device).map(|n| n.bytes).sum() })
    }

    /// Whether the trials `trial_keys` fit together in their device's free memory (in a spread
    /// sweep, the largest GPU's), with nothing else running (a pack larger than that is split).
    pub fn fits_together(&self, trial_keys: &[&str]) -> bool {
        let Some(need) = self.need_of(trial_keys) else { return true };
        let free = match self.spread.is_empty() {
            true => self.free.get(&need.device).copied(),
            false => self.spread.iter().map(|d| self.free.get(d).copied()).max().flatten(),
        };
        free.is_none_or(|free| need.bytes <= free)
    }
}

/// A running pack's hold on its estimate; released when dropped.
pub struct Reservation<'a> {
    budget: &'a MemoryBudget,
    /// The device whose ledger it holds a place in.
    on: Option<DeviceSpec>,
    bytes: u64,
    /// The GPU a spread sweep placed it on.
    placed: Option<DeviceSpec>,
}

impl Reservation<'_> {
    /// The GPU the pack trains on, where the sweep spreads its packs (`None`: its trials' own
    /// device).
    pub fn device(&self) -> Option<DeviceSpec> {
        self.placed
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let Some(device) = self.on else { return };
        if let Ok(mut ledger) = self.budget.ledger.lock() {
            ledger.give_back(device, self.bytes);
        }
        self.budget.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1 << 30;

    fn budget(free: u64, trials: &[(&str, u64)]) -> MemoryBudget {
        let needs =
            trials.iter().map(|&(key, bytes)| (key.to_string(), Need { device: DeviceSpec::Cpu, bytes })).collect();
        MemoryBudget::new(HashMap::from([(DeviceSpec::Cpu, free)]), needs)
    }

    #[test]
    fn a_trial_that_fits_alone_waits_for_the_running_one_to_end() {
        let budget = budget(24 * GB, &[("a", 18 * GB), ("b", 18 * GB), ("c", 4 * GB)]);
        let cancel = AtomicBool::new(false);
        let a = budget.reserve("a", &cancel, |_| panic!("a waits")).unwrap();
        // `c` fits beside `a`; `b` does not, and says why.
        let c = budget.reserve("c", &cancel, |_| panic!("c waits")).unwrap();
        let b_started = AtomicBool::new(false);
        let waited = Mutex::new(None);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _b = budget.reserve("b", &cancel, |w| *waited.lock().unwrap() = Some(w)).unwrap();
                b_started.store(true, Ordering::SeqCst);
            });
            // Ending `c` leaves `a` in the way; `b` starts once `a` ends, never beside it.
            drop(c);
            while waited.lock().unwrap().is_none() {
                std::thread::yield_now();
            }
            assert!(!b_started.load(Ordering::SeqCst), "b started beside a");
            drop(a);
        });
        assert!(b_started.load(Ordering::SeqCst));
        let reserved = 18 * GB + 4 * GB;
        assert!(
            matches!(*waited.lock().unwrap(), Some(Waiting { needs, free, reserved: r })
                if needs == 18 * GB && free == 24 * GB && (r == reserved || r == 18 * GB)),
            "{:?}",
            waited.lock().unwrap()
        );
        // Everything released: the ledger is empty again.
        assert_eq!(budget.ledger.lock().unwrap().held(DeviceSpec::Cpu), 0);
    }

    #[test]
    fn a_waiting_trial_gives_up_when_the_sweep_is_cancelled() {
        let budget = budget(10 * GB, &[("a", 8 * GB), ("b", 8 * GB)]);
        let cancel = AtomicBool::new(false);
        let _a = budget.reserve("a", &cancel, |_| {}).unwrap();
        let b = budget.reserve("b", &cancel, |_| cancel.store(true, Ordering::SeqCst));
        assert!(b.is_none(), "b was admitted beside a");
    }

    #[test]
    fn a_trial_too_large_even_alone_runs_only_when_nothing_else_does() {
        let budget = budget(10 * GB, &[("small", 2 * GB), ("huge", 12 * GB)]);
        let cancel = AtomicBool::new(false);
        let small = budget.reserve("small", &cancel, |_| {}).unwrap();
        let huge = budget.reserve("huge", &cancel, |_| cancel.store(true, Ordering::SeqCst));
        assert!(huge.is_none(), "huge was admitted beside small");
        drop(small);
        cancel.store(false, Ordering::SeqCst);
        let _huge = budget.reserve("huge", &cancel, |_| panic!("huge waits alone")).unwrap();
        // While it runs, nothing else fits.
        let small = budget.reserve("small", &cancel, |_| cancel.store(true, Ordering::SeqCst));
        assert!(small.is_none());
    }

    #[test]
    fn trials_not_estimated_are_not_held_back() {
        let budget = budget(10 * GB, &[("a", 10 * GB)]);
        let cancel = AtomicBool::new(false);
        let _a = budget.reserve("a", &cancel, |_| panic!("a waits")).unwrap();
        let _unknown = budget.reserve("not estimated", &cancel, |_| panic!("waits")).unwrap();
        let unlimited = MemoryBudget::unlimited();
        let _any = unlimited.reserve("a", &cancel, |_| panic!("waits")).unwrap();
    }

    #[test]
    fn a_spread_sweep_places_each_pack_on_a_gpu_and_gives_its_place_back_when_it_ends() {
        // Stand-in GPUs: cuda:0 with 24 GB free, cuda:1 with 16; packs of 12 GB.
        let needs = ["a", "b", "c"].map(|k| (k.to_string(), Need { device: DeviceSpec::Cuda(0), bytes: 12 * GB }));
        let free = HashMap::from([(DeviceSpec::Cuda(0), 24 * GB), (DeviceSpec::Cuda(1), 16 * GB)]);
        let budget = MemoryBudget::new(free, needs.into_iter().collect())
            .spread_over(vec![DeviceSpec::Cuda(0), DeviceSpec::Cuda(1)]);
        let cancel = AtomicBool::new(false);
        let a = budget.reserve("a", &cancel, |_| panic!("a waits")).unwrap();
        let b = budget.reserve("b", &cancel, |_| panic!("b waits")).unwrap();
        assert_eq!((a.device(), b.device()), (Some(DeviceSpec::Cuda(0)), Some(DeviceSpec::Cuda(1))));
        // 12 GB left on cuda:0 and 4 on cuda:1: the third goes beside `a`.
        let c = budget.reserve("c", &cancel, |_| panic!("c waits")).unwrap();
        assert_eq!(c.device(), Some(DeviceSpec::Cuda(0)));
        // Full everywhere: a fourth waits until one ends, then takes its place.
        let d = budget.reserve_pack(&["a"], &cancel, |_| cancel.store(true, Ordering::SeqCst));
        assert!(d.is_none(), "placed on a full GPU");
        cancel.store(false, Ordering::SeqCst);
        drop(b);
        let d = budget.reserve_pack(&["a"], &cancel, |_| panic!("waits with cuda:1 empty")).unwrap();
        assert_eq!(d.device(), Some(DeviceSpec::Cuda(1)));
        drop((a, c, d));
        let ledger = budget.ledger.lock().unwrap();
        assert_eq!((ledger.held(DeviceSpec::Cuda(0)), ledger.held(DeviceSpec::Cuda(1))), (0, 0));
        assert_eq!(ledger.packs.values().sum::<usize>(), 0);
    }

    #[test]
    fn a_sweep_on_one_device_does_not_say_where_its_packs_went() {
        let budget = budget(10 * GB, &[("a", GB)]);
        let cancel = AtomicBool::new(false);
        assert_eq!(budget.reserve("a", &cancel, |_| {}).unwrap().device(), None);
    }
}
