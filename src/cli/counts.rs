//! Parsers of the command line's counts (`--threads 0`, `--iters 0`, `--jobs 100000`): a count
//! that cannot work is refused where it is typed, not met later as a NaN or a machine that
//! runs out of threads.

/// How many times the cores `--jobs` or `--threads` may ask for: a few trials or threads per
/// core can make sense (a GPU's trials mostly wait), thousands only exhaust the machine.
pub const MOST_PER_CORE: usize = 8;

/// `--jobs` and `--threads`: each starts that many threads, so at least one and at most
/// [`MOST_PER_CORE`] per core.
pub fn thread_count(text: &str) -> Result<usize, String> {
    let n = at_least_one(text)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most = cores * MOST_PER_CORE;
    if n > most {
        return Err(format!(
            "{n} is more than this machine takes: each starts a thread, and {most} ({MOST_PER_CORE} per core, {cores} cores) is the most"
        ));
    }
    Ok(n)
}

/// A count of steps, passes or iterations: zero of them would measure or check nothing.
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is not a whole number")),
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
        assert!(thread_count("0").unwrap_err().contains("at least 1"));
        let many = thread_count(&(cores * MOST_PER_CORE + 1).to_string()).unwrap_err();
        assert!(many.contains("is the most"), "{many}");
        assert!(thread_count("four").unwrap_err().contains("not a whole number"));
    }

    #[test]
    fn a_count_of_zero_steps_is_refused() {
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").unwrap_err().contains("at least 1"));
        assert!(at_least_one("-2").unwrap_err().contains("not a whole number"));
    }
}
