//! The filter language end to end: parse, check against runs, evaluate.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::prepare;
use crate::store::{RunSummary, Status};
use crate::value::Value;

fn run(id: u64, experiment: &str, params: &[(&str, Value)], metrics: &[(&str, f64)]) -> RunSummary {
    RunSummary {
        experiment: experiment.into(),
        model: if params.iter().any(|(k, _)| *k == "gates") { "stm".into() } else { "lstm".into() },
        seed: id,
        params: Arc::new(params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()),
        task_options: Arc::new([("pairs".to_string(), Value::Int(4))].into()),
        train: Arc::new(
            [("lr".to_string(), Value::Float(3e-3)), ("optimizer".to_string(), Value::Str("adam".into()))].into(),
        ),
        final_metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>(),
        started_at: 1_738_281_600.0 + id as f64 * 86400.0, // 2025-01-31T00:00:00Z + id days
        ..RunSummary::made_up(id)
    }
}

/// 1: stm d=48 gates, acc 0.95; 2: stm d=96 no gates, acc 0.5, failed; 3: lstm, acc 0.7,
/// tagged; 4: stm d=48 no gates, running, no metrics.
fn runs() -> Vec<RunSummary> {
    let mut r1 = run(1, "sam_d48", &[("d", Value::Int(48)), ("gates", Value::Bool(true))], &[("accuracy", 0.95)]);
    r1.steps_to_converge = Some(300);
    let mut r2 = run(2, "sam_d96", &[("d", Value::Int(96)), ("gates", Value::Bool(false))], &[("accuracy", 0.5)]);
    r2.status = Status::Failed;
    let mut r3 = run(3, "baseline", &[("hidden", Value::Int(64))], &[("accuracy", 0.7)]);
    r3.tags = vec!["ablation".into(), "best".into()];
    let mut r4 = run(4, "sam_d48", &[("d", Value::Int(48)), ("gates", Value::Bool(false))], &[]);
    r4.status = Status::Running;
    vec![r1, r2, r3, r4]
}

/// Ids of the runs `filter` keeps.
fn ids(filter: &str) -> Vec<u64> {
    let runs = runs();
    let q = prepare(filter, &runs).unwrap_or_else(|e| panic!("{}", e.0.render(&e.1, false)));
    runs.iter().filter(|r| q.matches(r)).map(|r| r.id).collect()
}

/// The rendered error for `filter`.
fn error(filter: &str) -> String {
    match prepare(filter, &runs()) {
        Ok(q) => panic!("`{filter}` was accepted: {q:?}"),
        Err(e) => e.0.render(&e.1, false),
    }
}

#[test]
fn and_binds_tighter_than_or() {
    // `a or b and c` is `a or (b and c)`.
    assert_eq!(ids("d == 96 or d == 48 and gates"), vec![1, 2]);
    assert_eq!(ids("(d == 96 or d == 48) and gates"), vec![1]);
    assert_eq!(ids("gates and d == 48 or status == \"failed\""), vec![1, 2]);
}

#[test]
fn not_binds_tighter_than_and_and_parentheses_override() {
    // `not a and b` is `(not a) and b`.
    assert_eq!(ids("not gates and d == 48"), vec![4]);
    assert_eq!(ids("not (gates and d == 48)"), vec![2, 3, 4]);
    assert_eq!(ids("not not gates"), vec![1]);
    assert_eq!(ids("((accuracy > 0.6))"), vec![1, 3]);
}

#[test]
fn in_lists_tags_and_substrings() {
    assert_eq!(ids("d in [48, 96]"), vec![1, 2, 4]);
    assert_eq!(ids("d not in [48]"), vec![2]);
    assert_eq!(ids("status in [\"done\", \"failed\"] and d in [96]"), vec![2]);
    assert_eq!(ids("\"ablation\" in tags"), vec![3]);
    assert_eq!(ids("'best' not in tags"), vec![1, 2, 4]);
    assert_eq!(ids("\"d4\" in experiment"), vec![1, 4]);
    assert_eq!(ids("d in [48, 96] and (status == \"done\" or accuracy > 0.9)"), vec![1]);
}

#[test]
fn numbers_compare_numerically_and_strings_as_text() {
    assert_eq!(ids("d == 48.0"), vec![1, 4]);
    assert_eq!(ids("d >= 50"), vec![2]);
    assert_eq!(ids("lr == 0.003 and train.optimizer == \"adam\" and id <= 2"), vec![1, 2]);
    // Strings order as text: "baseline" < "sam_d48" < "sam_d96".
    assert_eq!(ids("experiment < \"sam\""), vec![3]);
    assert_eq!(ids("experiment ~ \"sam_*\" and experiment ~ \"*8\""), vec![1, 4]);
    assert_eq!(ids("metric.accuracy > 0.6 and param.d == 48"), vec![1]);
}

#[test]
fn a_missing_field_fails_every_test_and_not_inverts_that() {
    // Run 3 (an LSTM) has no `gates` and no `d`; run 4 (running) has no accuracy.
    assert_eq!(ids("gates == false"), vec![2, 4]);
    assert_eq!(ids("gates != true"), vec![2, 4]);
    assert_eq!(ids("not gates"), vec![2, 3, 4]);
    assert_eq!(ids("accuracy < 2"), vec![1, 2, 3]);
    assert_eq!(ids("not accuracy < 2"), vec![4]);
    assert_eq!(ids("steps_to_converge > 0"), vec![1]);
}

#[test]
fn dates_compare_by_time() {
    assert_eq!(ids("started >= 2025-02-03"), vec![3, 4]);
    assert_eq!(ids("started < \"2025-02-02T00:00:01\""), vec![1, 2]);
    assert!(error("started > \"yesterday\"").contains("is a date, but \"yesterday\" is not one"));
    assert!(error("started > 2025-02-30").contains("`2025-02-30` is not a date"));
    // A quoted date has the form's separators and digits, nothing else.
    for text in ["2025x02y03", "+025-02-03", "2025-02-03 12:00", "2025-02-03T12-00", "2025-2-03"] {
        assert!(error(&format!("started > \"{text}\"")).contains("is not one"), "{text}");
    }
}

/// A day written in a filter is the whole day (a minute the whole minute): runs that started
/// at noon of it are equal to it, and at most it.
#[test]
fn a_day_in_a_filter_holds_all_day() {
    let mut runs = runs();
    for r in &mut runs {
        r.started_at += 12.0 * 3600.0 + 30.0;
    }
    let ids = |filter: &str| -> Vec<u64> {
        let q = prepare(filter, &runs).unwrap_or_else(|e| panic!("{}", e.0.render(&e.1, false)));
        runs.iter().filter(|r| q.matches(r)).map(|r| r.id).collect()
    };
    assert_eq!(ids("started == 2025-02-02"), vec![2]);
    assert_eq!(ids("started != 2025-02-02"), vec![1, 3, 4]);
    assert_eq!(ids("started <= 2025-02-02"), vec![1, 2]);
    assert_eq!(ids("started < 2025-02-02"), vec![1]);
    assert_eq!(ids("started > 2025-02-02"), vec![3, 4]);
    assert_eq!(ids("started >= 2025-02-02"), vec![2, 3, 4]);
    assert_eq!(ids("2025-02-02 >= started"), vec![1, 2], "a date on the left");
    assert_eq!(ids("started in [2025-02-01, 2025-02-04]"), vec![1, 4]);
    assert_eq!(ids("started == \"2025-02-03T12:00\""), vec![3], "a minute");
    assert_eq!(ids("started == \"2025-02-03T12:00:00\""), Vec::<u64>::new(), "a second");
    // A number compares with a date as Unix seconds.
    assert_eq!(ids("steps_to_converge < 2025-02-02"), vec![1]);
    assert_eq!(ids("steps_to_converge != 2025-02-02"), vec![1]);
}

/// Asserts that `filter` is rejected with a message containing every one of `parts`.
fn assert_error(filter: &str, parts: &[&str]) {
    let e = error(filter);
    for part in parts {
        assert!(e.contains(part), "`{filter}`: no {part:?} in\n{e}");
    }
}

#[test]
fn a_string_compared_with_a_number_is_a_located_error() {
    assert_error(
        "d == \"48\"",
        &[
            "`d` is a number, but is compared with the string \"48\"",
            "<--where>:1:6",
            "write the number without quotes: 48",
        ],
    );
    assert_error("experiment == 3", &["`experiment` is a string, but is compared with the number 3", "quote the text"]);
    assert_error("d in [48, \"96\"]", &["<--where>:1:11"]);
}

#[test]
fn unknown_fields_and_statuses_get_suggestions() {
    assert_error("accurcy > 0.9", &["no run has a field `accurcy`", "<--where>:1:1", "did you mean `accuracy`?"]);
    assert_error("d == 48 and status == done", &["<--where>:1:23", "quote it: \"done\""]);
    assert_error("status == \"finished\"", &["no status \"finished\""]);
    assert_error("status == \"faild\"", &["did you mean `failed`?"]);
    assert_error("foo.d == 1", &["unknown namespace `foo`"]);
}

#[test]
fn misuse_of_kinds_is_reported() {
    assert!(error("d").contains("`d` is a number, not true or false"));
    assert!(error("gates > true").contains("`>` needs numbers, strings or dates"));
    assert!(error("d in 48").contains("`in` needs a list on its right"));
    assert!(error("d ~ \"4*\"").contains("`~` matches strings"));
}

#[test]
fn syntax_errors_are_located_with_hints() {
    assert_error("d = 48", &["<--where>:1:3", "compare with `==`"]);
    assert_error("(d == 48", &["<--where>:1:9", "a `(` is not closed"]);
    // A list cut after a number: the place is its end, where a `,` or `]` was due, not the
    // number (which pest first tried as a date).
    assert_error("d in [1, 2", &["<--where>:1:11", "expected `,` or `]`", "a `[` is not closed"]);
    assert_error("d in [8,", &["a `[` is not closed"]);
    assert_error("d == 48 && gates", &["<--where>:1:9", "combine tests with `and`"]);
    assert_error("d == 48 and", &["expected"]);
    assert_error(&"(".repeat(100), &["nested deeper"]);
}

#[test]
fn glob_patterns() {
    use super::eval::glob;
    assert!(glob("sam_*", "sam_d48"));
    assert!(glob("*d?8", "sam_d48"));
    assert!(glob("*", ""));
    assert!(!glob("sam_?", "sam_d48"));
    assert!(glob("a*b*c", "aXbYbZc"));
    assert!(!glob("a*b*c", "aXbYbZ"));
}

#[test]
fn an_empty_store_accepts_any_names() {
    let q = prepare("whatever > 1 and \"x\" in tags", &[]);
    assert!(q.is_ok());
}

#[test]
fn nesting_counts_brackets_and_nots_alike_up_to_the_cap() {
    use super::limits::MAX_NESTING;
    // An even number of `not`s keeps what `gates` keeps; the deepest accepted tree is checked
    // and evaluated.
    assert_eq!(ids(&format!("{}gates", "not ".repeat(MAX_NESTING))), vec![1]);
    let half = MAX_NESTING / 2;
    let mixed = format!("{}{}gates{}", "(".repeat(half), "not ".repeat(half), ")".repeat(half));
    assert_eq!(ids(&mixed), vec![1]);
    // One level more, by a `not` or by a bracket, is refused where it goes beyond the cap.
    let col = 4 * MAX_NESTING + 1;
    let message = format!("brackets and `not`s nested deeper than {MAX_NESTING} levels");
    let at = format!("<--where>:1:{col}");
    assert_error(&format!("{}gates", "not ".repeat(MAX_NESTING + 1)), &["error[Q011]", &message, &at, "in pairs"]);
    let over = format!("{}(not gates)", "not ".repeat(MAX_NESTING));
    assert_error(&over, &["error[Q011]", &at]);
    let over = format!("{}{}not gates{}", "(".repeat(half), "not ".repeat(half), ")".repeat(half));
    assert_error(&over, &["error[Q011]", &format!("<--where>:1:{}", half + 4 * half + 1)]);
}

#[test]
fn a_chain_of_many_thousand_nots_is_refused_not_a_stack_overflow() {
    // The parser's tree for these would be 100 000 levels deep.
    let e = error(&format!("d == 48 or {}gates", "not ".repeat(100_000)));
    assert!(e.contains("error[Q011]") && e.contains("<--where>:1:"), "{e}");
}

#[test]
fn whole_numbers_compare_exactly_past_two_to_the_fifty_third() {
    // Two seeds a float cannot tell apart, and an int parameter beside a float literal.
    let mut a = run(1, "e", &[("d", Value::Int(48))], &[]);
    let mut b = run(2, "e", &[("d", Value::Int(48))], &[]);
    (a.seed, b.seed) = (u64::MAX - 1, u64::MAX);
    let runs = vec![a, b];
    let kept = |filter: &str| -> Vec<u64> {
        let q = prepare(filter, &runs).unwrap_or_else(|e| panic!("{}", e.0.render(&e.1, false)));
        runs.iter().filter(|r| q.matches(r)).map(|r| r.id).collect()
    };
    assert_eq!(kept(&format!("seed == {}", u64::MAX - 1)), [1]);
    assert_eq!(kept(&format!("seed < {}", u64::MAX)), [1]);
    assert_eq!(kept(&format!("seed in [{}]", u64::MAX)), [2]);
    assert_eq!(kept("d == 48.0 and d < 48.5 and d in [48, 1e3]"), [1, 2]);
}

/// A diverged run's NaN metric is unequal to every number: `!=` keeps it, as `not ==` does,
/// and no ordering comparison does.
#[test]
fn nan_is_unequal_to_every_number_and_in_no_order() {
    let mut all = runs();
    all[0].final_metrics.insert("accuracy".into(), f64::NAN);
    let ids = |filter: &str| {
        let q = prepare(filter, &all).unwrap_or_else(|e| panic!("{}", e.0.render(&e.1, false)));
        all.iter().filter(|r| q.matches(r)).map(|r| r.id).collect::<Vec<_>>()
    };
    // As `not accuracy == 0.5` does for it (that also keeps run 4, which has no accuracy).
    assert_eq!(ids("accuracy != 0.5"), [1, 3]);
    assert_eq!(ids("not accuracy == 0.5"), [1, 3, 4]);
    assert_eq!(ids("accuracy == accuracy"), [2, 3]);
    assert_eq!(ids("accuracy < 2 or accuracy >= 2"), [2, 3]);
}
