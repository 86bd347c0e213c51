//! Whether a pack may start now, by its memory ([`admit`]), and where it trains when a sweep
//! spreads its packs over several GPUs (`--device cuda:all`, `cuda:0,2`): on the GPU where it
//! leaves the most memory free, beside the packs the sweep runs there now. A pack that fits on
//! none of them beside what runs waits; one too large for every GPU even alone runs on the
//! largest once nothing else runs there. The rules are pure functions of each device's free
//! memory and what the sweep holds on it, so they are tested with stand-in devices;
//! `memory_budget` applies them.

use crate::device::DeviceSpec;

/// Whether a trial may start now, by its memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// It fits beside the trials running.
    Start,
    /// It fits alone, not beside the trials running: it waits for one to end.
    Wait,
    /// It does not fit even alone.
    TooLarge,
}

/// The admission of a trial that `needs` bytes on a device that had `free` bytes before the
/// sweep, of which the trials running on it now hold `reserved` (their estimates).
pub fn admit(free: u64, reserved: u64, needs: u64) -> Admission {
    if needs > free {
        Admission::TooLarge
    } else if needs <= free.saturating_sub(reserved) {
        Admission::Start
    } else {
        Admission::Wait
    }
}

/// Why a trial waits: what it needs, what its device had free, and what the trials running
/// there hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub needs: u64,
    pub free: u64,
    pub reserved: u64,
}

/// A device as the placement sees it: the memory it had free before the sweep (`None`: not
/// measured), and what the sweep's packs running on it hold and how many they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    pub device: DeviceSpec,
    pub free: Option<u64>,
    pub held: u64,
    pub packs: usize,
}

/// Where a pack goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    On(DeviceSpec),
    /// It fits on some device alone, on none beside what runs: what it lacks on the device
    /// that comes closest.
    Wait(Waiting),
}

/// The device among `rooms` for a pack that needs `needs` bytes: of those where it fits beside
/// what runs, the one it leaves the most memory free on, then the one running the fewest
/// packs, then the first listed. A device not measured fits anything and ranks after the
/// measured ones that fit. A pack not estimated (`None`, a search's trials) holds no memory,
/// so it goes where the fewest packs run, then where the most memory is free.
pub fn place(rooms: &[Room], needs: Option<u64>) -> Place {
    let left_after = |r: &Room| -> Option<Option<u64>> {
        match (r.free, needs) {
            (Some(free), Some(needs)) => match admit(free, r.held, needs) {
                Admission::Start => Some(Some(free - r.held - needs)),
                _ => None,
            },
            (Some(free), None) => Some(Some(free.saturating_sub(r.held))),
            (None, _) => Some(None),
        }
    };
    // Most memory left first (a measured device before an unmeasured one), fewest packs next
    // (first for a pack not estimated), then the order listed (the smallest index wins a tie).
    let best =
        rooms.iter().enumerate().filter_map(|(i, r)| Some((left_after(r)?, r.packs, i))).max_by(|a, b| match needs {
            Some(_) => a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)),
            None => b.1.cmp(&a.1).then(a.0.cmp(&b.0)).then(b.2.cmp(&a.2)),
        });
    if let Some((_, _, i)) = best {
        return Place::On(rooms[i].device);
    }
    let needs = needs.unwrap_or(0);
    // It fits nowhere beside what runs. Too large for every device even alone: the largest,
    // once it is empty. Otherwise it waits, reported against the device it comes closest on.
    let largest = rooms.iter().filter(|r| r.free.is_some()).max_by_key(|r| r.free);
    let fits_alone_somewhere = rooms.iter().any(|r| r.free.is_some_and(|f| needs <= f));
    match largest {
        Some(r) if !fits_alone_somewhere && r.held == 0 => Place::On(r.device),
        Some(r) if !fits_alone_somewhere => Place::Wait(Waiting { needs, free: r.free.unwrap_or(0), reserved: r.held }),
        _ => {
            let closest = rooms
                .iter()
                .filter(|r| r.free.is_some_and(|f| needs <= f))
                .min_by_key(|r| r.held.saturating_sub(r.free.unwrap_or(0) - needs))
                .unwrap_or(&rooms[0]);
            Place::Wait(Waiting { needs, free: closest.free.unwrap_or(0), reserved: closest.held })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1 << 30;

    #[test]
    fn a_trial_starts_only_beside_what_leaves_it_room() {
        // Two trials of 18.7 GB on a 24 GB device: the first starts, the second waits.
        let trial = 187 * GB / 10;
        assert_eq!(admit(24 * GB, 0, trial), Admission::Start);
        assert_eq!(admit(24 * GB, trial, trial), Admission::Wait);
        // Beside a trial that leaves it exactly its room it fits, not beside one a byte larger.
        let room = 24 * GB - trial;
        assert_eq!(admit(24 * GB, room, trial), Admission::Start);
        assert_eq!(admit(24 * GB, room + 1, trial), Admission::Wait);
        // A trial larger than the device never fits, whatever runs.
        assert_eq!(admit(24 * GB, 0, 25 * GB), Admission::TooLarge);
        assert_eq!(admit(24 * GB, 20 * GB, 25 * GB), Admission::TooLarge);
        // Reservations above the free memory (a trial too large that runs alone) leave none.
        assert_eq!(admit(24 * GB, 30 * GB, 1), Admission::Wait);
    }

    /// Stand-in GPUs with the free memory given, nothing running.
    fn gpus(free: &[u64]) -> Vec<Room> {
        free.iter()
            .enumerate()
            .map(|(i, &f)| Room { device: DeviceSpec::Cuda(i), free: Some(f * GB), held: 0, packs: 0 })
            .collect()
    }

    /// Places `packs` one after another (none ends), as a sweep's workers start them.
    fn place_all(rooms: &mut [Room], packs: &[u64]) -> Vec<Place> {
        packs
            .iter()
            .map(|&gb| {
                let p = place(rooms, Some(gb * GB));
                if let Place::On(d) = p {
                    let r = rooms.iter_mut().find(|r| r.device == d).unwrap();
                    r.held += gb * GB;
                    r.packs += 1;
                }
                p
            })
            .collect()
    }

    #[test]
    fn packs_go_to_the_gpu_with_the_most_memory_free_and_spread_over_equal_ones() {
        // Two 80 GB GPUs and one with 40 GB free (another job holds the rest): four packs of
        // 10 GB alternate over the two large ones until the third has as much left.
        let mut rooms = gpus(&[80, 80, 40]);
        let placed = place_all(&mut rooms, &[10, 10, 10, 10, 10, 10, 10, 10]);
        let on: Vec<usize> = placed
            .iter()
            .map(|p| match p {
                Place::On(DeviceSpec::Cuda(n)) => *n,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(on, [0, 1, 0, 1, 0, 1, 0, 1]);
        // 30 GB would be left on each: the GPU running the fewest packs.
        assert_eq!(place(&rooms, Some(10 * GB)), Place::On(DeviceSpec::Cuda(2)));
        let mut rooms = gpus(&[80, 80, 40]);
        place_all(&mut rooms, &[10; 9]);
        // 30 GB left on cuda:0 and cuda:1 with four packs each, 20 on cuda:2: the first listed.
        assert_eq!(place(&rooms, Some(10 * GB)), Place::On(DeviceSpec::Cuda(0)));
    }

    #[test]
    fn a_pack_that_fits_nowhere_beside_what_runs_waits_and_says_for_which_gpu() {
        let mut rooms = gpus(&[24, 16]);
        assert_eq!(place_all(&mut rooms, &[20, 12]), [Place::On(DeviceSpec::Cuda(0)), Place::On(DeviceSpec::Cuda(1))]);
        // 14 GB: 4 GB left on cuda:0 and 4 on cuda:1, and it would fit alone on either.
        let Place::Wait(w) = place(&rooms, Some(14 * GB)) else { panic!("placed beside a running pack") };
        assert_eq!(w.needs, 14 * GB);
        assert!(w.free >= 14 * GB && w.reserved > 0, "{w:?}");
    }

    #[test]
    fn a_pack_too_large_for_every_gpu_runs_on_the_largest_once_it_is_empty() {
        let mut rooms = gpus(&[24, 40]);
        assert_eq!(place(&rooms, Some(50 * GB)), Place::On(DeviceSpec::Cuda(1)));
        rooms[1].held = 5 * GB;
        rooms[1].packs = 1;
        assert!(matches!(place(&rooms, Some(50 * GB)), Place::Wait(Waiting { free, .. }) if free == 40 * GB));
    }

    #[test]
    fn packs_not_estimated_spread_by_the_packs_running_then_by_memory() {
        let mut rooms = gpus(&[80, 80]);
        rooms[0].held = GB;
        assert_eq!(place(&rooms, None), Place::On(DeviceSpec::Cuda(1)));
        // One pack on the larger GPU already: the next goes to the other, though it has less free.
        let mut rooms = gpus(&[80, 40]);
        rooms[0].packs = 1;
        assert_eq!(place(&rooms, None), Place::On(DeviceSpec::Cuda(1)));
        let mut blind: Vec<Room> = gpus(&[0, 0, 0]).into_iter().map(|r| Room { free: None, ..r }).collect();
        blind[0].packs = 2;
        blind[1].packs = 1;
        blind[2].packs = 1;
        assert_eq!(place(&blind, Some(GB)), Place::On(DeviceSpec::Cuda(1)));
    }
}
