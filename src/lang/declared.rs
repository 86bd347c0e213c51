//! The experiments a stored spec text declares (`RunRecord::spec_text`: every file of the spec
//! and its command-line overrides), read from its tokens, so any text has an answer: what
//! `memctl results` knows of the experiments that have not run yet.

use pest::Parser;

use super::parser::{MemParser, Rule};

/// The names after each `experiment` word that opens a block (`experiment NAME {`), in order.
pub fn declared_experiments(text: &str) -> Vec<String> {
    let Ok(pairs) = MemParser::parse(Rule::tokens, text) else { return vec![] };
    let tokens: Vec<&str> = pairs
        .flatten()
        .filter(|p| matches!(p.as_rule(), Rule::word | Rule::symbol | Rule::string))
        .map(|p| p.as_str())
        .collect();
    tokens.windows(3).filter(|w| w[0] == "experiment" && w[2] == "{").map(|w| w[1].to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_block_is_named_and_comments_and_strings_are_not() {
        let text = "// ---- specs/a.mem\n// experiment in_a_comment { }\ntask t = copy(note = \"experiment s {\")\n\
                    experiment first {\n  task t\n}\nexperiment second{ task t }\n// ---- <command line>\nseed=1";
        assert_eq!(declared_experiments(text), ["first", "second"]);
        assert!(declared_experiments("").is_empty());
    }
}
