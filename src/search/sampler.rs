//! The next configuration of a search: a grid walks every combination of the listed values in
//! order; random draws each name independently; TPE (tree-structured Parzen estimators,
//! Bergstra et al. 2011) draws from where the best configurations so far lie, after a few
//! random ones. A proposal depends only on the study's seed, the configuration's index and the
//! outcomes so far, so a second sweep on the same spec continues the study where the first
//! left it.
//!
//! TPE is the `tpe` crate's (by a maintainer of Optuna's benchmark tools): one univariate
//! estimator per searched name, as Optuna's default `TPESampler` does, rebuilt from the
//! outcomes at every proposal. Log-uniform names are modelled on the log of their value;
//! listed values as categories.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_tpe::SeedableRng as _;

use super::outcome::{self, ConfigOutcome};
use crate::check::search::{Domain, Sampler, SearchSpec};
use crate::value::Value;

/// Why no configuration could be proposed.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("the grid has {size} configurations; there is no configuration {index}")]
    PastGrid { index: usize, size: usize },
    #[error(
        "a grid in a seeded order holds its whole order in memory, and this one has {size} configurations \
         (at most {SHUFFLED_GRID_LIMIT}); list fewer values, or use `random` or `tpe`"
    )]
    TooLargeToShuffle { size: usize },
    /// A random or TPE search of a finite space that has tried each of its configurations.
    #[error("its space has {size} configuration{}, and each has been tried", if *.size == 1 { "" } else { "s" })]
    Exhausted { size: usize },
    #[error("TPE could not propose a value for `{name}`: {reason}")]
    Tpe { name: String, reason: String },
}

/// The values (one per searched name, in the order of `spec.dims`) of configuration `index`,
/// from the `outcomes` of the configurations before it (any order).
pub fn propose(
    spec: &SearchSpec,
    index: usize,
    outcomes: &[ConfigOutcome],
    configs: &[Vec<Value>],
) -> Result<Vec<Value>, SampleError> {
    let (seed, proposal) = match spec.sampler {
        Sampler::Grid { order } => return grid(spec, order, index),
        Sampler::Random { seed } => (seed, random(spec, seed, index)),
        Sampler::Tpe { seed, startup } => {
            let known = outcomes.iter().filter(|o| o.config < configs.len()).count();
            match &spec.metric {
                Some(metric) if known >= startup => (seed, tpe_proposal(spec, seed, index, outcomes, configs, metric)?),
                _ => (seed, random(spec, seed, index)),
            }
        }
    };
    if configs.contains(&proposal) { untried(spec, seed, index, configs) } else { Ok(proposal) }
}

/// The most configurations of a finite space (every name listed, or a narrow integer range)
/// that [`untried`] walks to find the ones not tried yet: four times the most a study may
/// try, so that a larger space always has three untried configurations in four for a random
/// draw to find.
const WALKED_SPACE_LIMIT: usize = 4 * crate::check::limits::MAX_TRIALS;

/// A configuration in place of a proposal tried already (trying it again would run the same
/// trials): drawn from the untried ones of a small finite space, `Exhausted` when there are
/// none; in a larger space, a fresh random draw (a repeat there is rare, and after 64 repeats
/// in a row the proposal stands).
fn untried(spec: &SearchSpec, seed: u64, index: usize, configs: &[Vec<Value>]) -> Result<Vec<Value>, SampleError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ index as u64);
    match spec.space_size() {
        Some(size) if size <= WALKED_SPACE_LIMIT => {
            let lists: Vec<Vec<Value>> = spec.dims.iter().map(|d| d.domain.listed().unwrap_or_default()).collect();
            let tried: std::collections::HashSet<String> = configs.iter().map(|c| format!("{c:?}")).collect();
            let open: Vec<Vec<Value>> = (0..size)
                .map(|rest| combination(&lists, rest))
                .filter(|c| !tried.contains(&format!("{c:?}")))
                .collect();
            if open.is_empty() {
                return Err(SampleError::Exhausted { size });
            }
            Ok(open[rng.random_range(0..open.len())].clone())
        }
        _ => {
            let mut last = vec![];
            for _ in 0..64 {
                last = random(spec, rng.random(), index);
                if !configs.contains(&last) {
                    break;
                }
            }
            Ok(last)
        }
    }
}

/// The most configurations a grid walked in a seeded order has (its order is a shuffled list
/// of them, 8 bytes each).
pub const SHUFFLED_GRID_LIMIT: usize = 1 << 24;

/// The `index`-th combination: in order, the first name varying slowest, or at the `index`-th
/// place of the permutation that the seed `order` draws.
fn grid(spec: &SearchSpec, order: Option<u64>, index: usize) -> Result<Vec<Value>, SampleError> {
    use rand::seq::SliceRandom;
    let lists: Vec<Vec<Value>> = spec.dims.iter().map(|d| d.domain.listed().unwrap_or_default()).collect();
    let size = lists.iter().map(Vec::len).product::<usize>();
    if index >= size {
        return Err(SampleError::PastGrid { index, size });
    }
    let rest = match order {
        None => index,
        Some(_) if size > SHUFFLED_GRID_LIMIT => return Err(SampleError::TooLargeToShuffle { size }),
        Some(seed) => {
            let mut walk: Vec<usize> = (0..size).collect();
            walk.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
            walk[index]
        }
    };
    Ok(combination(&lists, rest))
}

/// Combination `rest` of the lists, the first list varying slowest.
fn combination(lists: &[Vec<Value>], mut rest: usize) -> Vec<Value> {
    let mut out = vec![Value::Int(0); lists.len()];
    for (i, l) in lists.iter().enumerate().rev() {
        out[i] = l[rest % l.len()].clone();
        rest /= l.len();
    }
    out
}

/// An independent draw of every name, seeded by the study's seed and the index.
fn random(spec: &SearchSpec, seed: u64, index: usize) -> Vec<Value> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index as u64);
    spec.dims
        .iter()
        .map(|d| match &d.domain {
            Domain::Values(v) => v[rng.random_range(0..v.len())].clone(),
            Domain::Uniform { low, high } => Value::Float(rng.random_range(*low..*high)),
            Domain::LogUniform { low, high } => Value::Float(rng.random_range(low.ln()..high.ln()).exp()),
            Domain::IntUniform { low, high } => Value::Int(rng.random_range(*low..=*high)),
        })
        .collect()
}

/// The numeric form of a value for TPE: the log for a log-uniform name, the index of a listed
/// value, the value itself otherwise.
fn encode(domain: &Domain, v: &Value) -> Option<f64> {
    match domain {
        Domain::Values(values) => values.iter().position(|x| x == v).map(|i| i as f64),
        Domain::LogUniform { .. } => v.as_float().filter(|f| *f > 0.0).map(f64::ln),
        Domain::Uniform { .. } => v.as_float(),
        Domain::IntUniform { .. } => v.as_float().map(|f| f + 0.5),
    }
}

fn decode(domain: &Domain, x: f64) -> Value {
    match domain {
        Domain::Values(values) => values[(x.floor().max(0.0) as usize).min(values.len() - 1)].clone(),
        Domain::LogUniform { low, high } => Value::Float(x.exp().clamp(*low, *high)),
        Domain::Uniform { low, high } => Value::Float(x.clamp(*low, *high)),
        Domain::IntUniform { low, high } => Value::Int((x.floor() as i64).clamp(*low, *high)),
    }
}

fn range(domain: &Domain) -> (f64, f64) {
    match domain {
        Domain::Values(values) => (0.0, values.len() as f64),
        Domain::LogUniform { low, high } => (low.ln(), high.ln()),
        Domain::Uniform { low, high } => (*low, *high),
        Domain::IntUniform { low, high } => (*low as f64, *high as f64 + 1.0),
    }
}

/// The share of the ranked outcomes TPE takes as the good ones (Hyperopt's default).
const GAMMA: f64 = 0.25;

fn tpe_proposal(
    spec: &SearchSpec,
    seed: u64,
    index: usize,
    outcomes: &[ConfigOutcome],
    configs: &[Vec<Value>],
    metric: &crate::check::search::Metric,
) -> Result<Vec<Value>, SampleError> {
    let mut ranked: Vec<ConfigOutcome> = outcomes.iter().filter(|o| o.config < configs.len()).cloned().collect();
    outcome::rank(&mut ranked, metric);
    let mut rng = rand_tpe::rngs::StdRng::seed_from_u64(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ index as u64);
    let mut out = vec![];
    for (i, dim) in spec.dims.iter().enumerate() {
        let fail = |reason: String| SampleError::Tpe { name: dim.name.name.clone(), reason };
        let (low, high) = range(&dim.domain);
        let r = tpe::range(low, high).map_err(|e| fail(e.to_string()))?;
        let estimator = match dim.domain {
            Domain::Values(_) => tpe::histogram_estimator(),
            _ => tpe::parzen_estimator(),
        };
        let mut optim =
            tpe::TpeOptimizerBuilder::new().gamma(GAMMA).build(estimator, r).map_err(|e| fail(e.to_string()))?;
        // TPE minimises: the rank (0 = best) is the value to minimise.
        for (rank, o) in ranked.iter().enumerate() {
            if let Some(x) = configs[o.config].get(i).and_then(|v| encode(&dim.domain, v)) {
                optim
                    .tell(x.clamp(low, high - f64::EPSILON.max(high.abs() * 1e-12)), rank as f64)
                    .map_err(|e| fail(e.to_string()))?;
            }
        }
        let x = optim.ask(&mut rng).map_err(|e| fail(e.to_string()))?;
        out.push(decode(&dim.domain, x));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::search::{Dim, Metric};
    use crate::search::outcome::Stage;

    fn spec(sampler: Sampler, dims: Vec<(&str, Domain)>) -> SearchSpec {
        SearchSpec {
            dims: dims
                .into_iter()
                .map(|(n, domain)| Dim {
                    name: crate::lang::ast::Ident { name: n.into(), span: Default::default() },
                    domain,
                    span: Default::default(),
                })
                .collect(),
            seeds: vec![1],
            trials: 12,
            sampler,
            prune: None,
            metric: Some(Metric { name: "val_accuracy".into(), higher_is_better: true, span: Default::default() }),
            span: Default::default(),
        }
    }

    fn ints(v: &[i64]) -> Domain {
        Domain::Values(v.iter().map(|i| Value::Int(*i)).collect())
    }

    #[test]
    fn a_grid_walks_every_combination_with_the_first_name_slowest() {
        let s = spec(Sampler::Grid { order: None }, vec![("a", ints(&[1, 2])), ("b", ints(&[10, 20, 30]))]);
        let all: Vec<String> =
            (0..6).map(|i| propose(&s, i, &[], &[]).unwrap().iter().map(|v| v.to_string()).collect()).collect();
        assert_eq!(all, ["110", "120", "130", "210", "220", "230"]);
        assert!(matches!(propose(&s, 6, &[], &[]), Err(SampleError::PastGrid { index: 6, size: 6 })));
    }

    #[test]
    fn a_seeded_grid_walks_every_combination_once_in_an_order_its_seed_fixes() {
        let dims = || vec![("a", ints(&[1, 2])), ("b", ints(&[10, 20, 30]))];
        let walk = |seed| -> Vec<String> {
            let s = spec(Sampler::Grid { order: Some(seed) }, dims());
            (0..6).map(|i| propose(&s, i, &[], &[]).unwrap().iter().map(|v| v.to_string()).collect()).collect()
        };
        let mut sorted = walk(1);
        assert_ne!(sorted, ["110", "120", "130", "210", "220", "230"], "seed 1 leaves this grid in order");
        assert_eq!(walk(1), sorted);
        assert_ne!(walk(2), sorted);
        sorted.sort();
        assert_eq!(sorted, ["110", "120", "130", "210", "220", "230"]);
        let s = spec(Sampler::Grid { order: Some(1) }, dims());
        assert!(matches!(propose(&s, 6, &[], &[]), Err(SampleError::PastGrid { index: 6, size: 6 })));
        let values = |n: i64| Domain::Values((0..n).map(Value::Int).collect());
        let huge = spec(Sampler::Grid { order: Some(1) }, vec![("a", values(4097)), ("b", values(4096))]);
        let too_large = propose(&huge, 0, &[], &[]);
        assert!(matches!(too_large, Err(SampleError::TooLargeToShuffle { size }) if size == 4097 << 12));
        let ok = spec(Sampler::Grid { order: Some(1) }, vec![("a", ints(&[1, 2])), ("b", values(4096))]);
        assert!(propose(&ok, 0, &[], &[]).is_ok());
    }

    #[test]
    fn random_draws_are_the_same_for_the_same_seed_and_index_and_stay_in_their_domain() {
        let s = spec(Sampler::Random { seed: 3 }, vec![("lr", Domain::LogUniform { low: 1e-4, high: 1e-2 })]);
        let a = propose(&s, 5, &[], &[]).unwrap();
        assert_eq!(a, propose(&s, 5, &[], &[]).unwrap());
        assert_ne!(a, propose(&s, 6, &[], &[]).unwrap());
        for i in 0..50 {
            let lr = propose(&s, i, &[], &[]).unwrap()[0].as_float().unwrap();
            assert!((1e-4..=1e-2).contains(&lr), "{lr}");
        }
    }

    /// TPE learns where the good values are: with the best outcomes all near lr = 1e-3 (and
    /// d = 32), most of its proposals fall near there, far more than random draws do.
    #[test]
    fn tpe_proposes_near_the_best_configurations_so_far() {
        let s = spec(
            Sampler::Tpe { seed: 1, startup: 4 },
            vec![("lr", Domain::LogUniform { low: 1e-4, high: 1e-2 }), ("d", ints(&[16, 32, 48]))],
        );
        // 20 configurations spread over the space; the metric peaks at lr = 1e-3, d = 32.
        let mut configs = vec![];
        let mut outcomes = vec![];
        for i in 0..20 {
            let lr = 1e-4 * 100f64.powf(i as f64 / 19.0);
            let d = [16, 32, 48][i % 3];
            let value = 1.0 - (lr.log10() + 3.0).abs() - if d == 32 { 0.0 } else { 0.3 };
            configs.push(vec![Value::Float(lr), Value::Int(d)]);
            outcomes.push(ConfigOutcome { config: i, stage: Stage::Finished, value });
        }
        let (mut near, mut at_32) = (0, 0);
        for index in 20..60 {
            let v = propose(&s, index, &outcomes, &configs).unwrap();
            let lr = v[0].as_float().unwrap();
            near += usize::from((lr.log10() + 3.0).abs() < 0.5);
            at_32 += usize::from(v[1] == Value::Int(32));
        }
        // Random draws would put about half the rates within half a decade of 1e-3, and a
        // third of the widths at 32.
        assert!(near >= 30, "{near} of 40 proposals near lr = 1e-3");
        assert!(at_32 >= 24, "{at_32} of 40 proposals at d = 32");
    }

    #[test]
    fn tpe_draws_at_random_until_it_has_enough_outcomes() {
        let s = spec(Sampler::Tpe { seed: 2, startup: 4 }, vec![("d", ints(&[16, 32, 48]))]);
        let random_spec = spec(Sampler::Random { seed: 2 }, vec![("d", ints(&[16, 32, 48]))]);
        assert_eq!(propose(&s, 0, &[], &[]).unwrap(), propose(&random_spec, 0, &[], &[]).unwrap());
    }

    /// Random and TPE searches of a finite space propose each configuration once, then stop:
    /// a repeat would run the same trials again.
    #[test]
    fn a_finite_space_is_proposed_once_each_then_exhausted() {
        for sampler in [Sampler::Random { seed: 4 }, Sampler::Tpe { seed: 4, startup: 2 }] {
            let s = spec(sampler.clone(), vec![("a", ints(&[1, 2])), ("b", ints(&[10, 20, 30]))]);
            let (mut configs, mut outcomes) = (vec![], vec![]);
            for index in 0..6 {
                let c = propose(&s, index, &outcomes, &configs).unwrap();
                assert!(!configs.contains(&c), "{sampler:?}: {c:?} again at {index}");
                assert_eq!(c, propose(&s, index, &outcomes, &configs).unwrap(), "the same study proposes the same");
                outcomes.push(ConfigOutcome { config: index, stage: Stage::Finished, value: index as f64 });
                configs.push(c);
            }
            assert!(matches!(propose(&s, 6, &outcomes, &configs), Err(SampleError::Exhausted { size: 6 })));
        }
        // Every searched name fixed on the command line: one configuration, the empty one.
        let none = spec(Sampler::Random { seed: 1 }, vec![]);
        assert_eq!(propose(&none, 0, &[], &[]).unwrap(), Vec::<Value>::new());
        assert!(matches!(propose(&none, 1, &[], &[vec![]]), Err(SampleError::Exhausted { size: 1 })));
    }
}
