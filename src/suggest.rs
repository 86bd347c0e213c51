//! "Did you mean …?" for misspelt names.

/// The candidate closest to `name`, if it is close enough to be a likely typo (edits counted
/// with transpositions: `setps` is one edit from `steps`).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::osa_distance(&lower, &c.to_lowercase()), c))
        // Every letter changed is no typo: `x` is not a misspelt `L`.
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(1) && *d < c.len().max(name.len()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// As [`closest`], at most `edits` edits away: for names that share long parts, where a third
/// of the name is too loose (`sam_table2_stm` and `sam_table2_stm_gpu` are two experiments).
pub fn closest_within<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>, edits: usize) -> Option<&'a str> {
    closest(name, candidates).filter(|c| strsim::osa_distance(&name.to_lowercase(), &c.to_lowercase()) <= edits)
}

/// `Some("did you mean `x`?")` for the closest candidate.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest(name, candidates).map(|c| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_only_near_misses() {
        assert_eq!(closest("samRaed", ["samRead", "relRead", "linear"]), Some("samRead"));
        assert_eq!(closest("lstmcell", ["lstmCell"]), Some("lstmCell"));
        assert_eq!(closest("banana", ["samRead", "linear"]), None);
        assert_eq!(closest("x", ["L", "k"]), None, "a one-letter name differs from every other");
        assert_eq!(closest("l", ["L", "k"]), Some("L"));
        assert_eq!(closest_within("tiny_stn", ["tiny_stm"], 2), Some("tiny_stm"));
        assert_eq!(closest_within("sam_table2_stm_gpu", ["sam_table2_stm"], 2), None);
    }
}
