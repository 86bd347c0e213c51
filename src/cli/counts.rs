//! Parsers of the command line's counts (`--threads 0`, `--iters 0`, `--jobs 100000`): a count
//! that cannot work is refused where it is typed, not met later as a NaN or a machine that
//! runs out of threads.

/// How many times the cores `--jobs` or `--threads` may ask for: a few trials or threads per
/// core can make sense (a GPU's trials mostly wait), thousands only exhaust the machine.
pub const MOST_PER_CORE: usize = 8;

/// A count clap refuses where it is typed; clap prints the message after the argument's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CountError {
    #[error("`{text}` is not a whole number")]
    NotAWholeNumber { text: String },
    #[error("must be at least 1")]
    Zero,
    #[error(
        "{asked} is more than this machine takes: each starts a thread, and {most} ({MOST_PER_CORE} per core, {cores} cores) is the most"
    )]
    MoreThanTheMachineTakes { asked: usize, most: usize, cores: usize },
}

/// `--jobs` and `--threads`: each starts that many threads, so at least one and at most
/// [`MOST_PER_CORE`] per core.
pub fn thread_count(text: &str) -> Result<usize, CountError> {
    let n = at_least_one(text)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most = cores * MOST_PER_CORE;
    if n > most {
        return Err(CountError::MoreThanTheMachineTakes { asked: n, most, cores });
    }
    Ok(n)
}

/// A count of steps, passes or iterations: zero of them would measure or check nothing.
pub fn at_least_one(text: &str) -> Result<usize, CountError> {
    match text.parse::<usize>() {
        Ok(0) => Err(CountError::Zero),
        Ok(n) => Ok(n),
        Err(_) => Err(CountError::NotAWholeNumber { text: text.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_and_threads_are_at_least_one_and_at_most_a_few_per_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(thread_count("1"), Ok(1));
        assert_eq!(thread_count(&(cores * MOST_PER_CORE).to_string()), Ok(cores * MOST_PER_CORE));
        assert_eq!(thread_count("0"), Err(CountError::Zero));
        let many = thread_count(&(cores * MOST_PER_CORE + 1).to_string()).unwrap_err().to_string();
        assert!(many.contains("is the most"), "{many}");
        assert_eq!(thread_count("four").unwrap_err().to_string(), "`four` is not a whole number");
    }

    #[test]
    fn a_count_of_zero_steps_is_refused() {
        assert_eq!(at_least_one("3"), Ok(3));
        assert_eq!(at_least_one("0").unwrap_err().to_string(), "must be at least 1");
        assert_eq!(at_least_one("-2"), Err(CountError::NotAWholeNumber { text: "-2".into() }));
    }
}
