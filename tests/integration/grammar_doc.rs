//! GRAMMAR.md stays true: its complete example parses and checks.

use memctl::{check, lang};

#[test]
fn the_complete_example_in_grammar_md_checks() {
    let doc = include_str!("../../GRAMMAR.md");
    let section = doc.split("## A complete example").nth(1).expect("the section");
    let code = section.split("```mem\n").nth(1).and_then(|s| s.split("```").next()).expect("a mem block");
    let spec = lang::parse_str("GRAMMAR.md", code).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let program = check::check(&spec, &memctl::prims::Primitives)
        .unwrap_or_else(|d| panic!("{}", d.render(&spec.sources, false)));
    assert_eq!(program.experiments.len(), 1);
    assert_eq!(program.experiments[0].trials.len(), 4);
}
