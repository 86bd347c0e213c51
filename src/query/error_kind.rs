//! Why a filter (`--where`) does not hold, as data: one [`QueryErrorKind`] per mistake, its
//! message in the one `Display`, and a stable code (`Q0xx`) printed with it, as the checker's
//! [`CheckErrorKind`](crate::check::error_kind::CheckErrorKind) does for specs.

use std::fmt;

use super::limits::MAX_NESTING;
use crate::diag::Diagnostic;

#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum QueryErrorKind {
    /// `what` (a field or "this value") is `kind`, used where a test is expected.
    NotATest {
        what: String,
        kind: &'static str,
    },
    UnknownNamespace {
        namespace: String,
    },
    UnknownField {
        name: String,
    },
    MatchNeedsStrings,
    /// Two operands described in words ("`d` (a number)", "the text \"x\"").
    Incomparable {
        a: String,
        b: String,
    },
    OrderingNeedsOrdered {
        op: &'static str,
    },
    InNeedsList,
    NotADate {
        field: String,
        text: String,
    },
    UnknownStatus {
        status: String,
    },
    /// A literal of the wrong kind for the field it is compared with (both in words).
    LiteralKind {
        field: String,
        kinds: String,
        literal: String,
    },
    /// More than [`MAX_NESTING`] brackets and `not`s around one part of the filter.
    TooDeep,
    OutOfRange {
        text: String,
    },
    BadDate {
        text: String,
    },
    /// What the parser expected, in words.
    Syntax {
        expected: String,
    },
    Internal,
}

impl QueryErrorKind {
    pub fn code(&self) -> &'static str {
        use QueryErrorKind::*;
        match self {
            NotATest { .. } => "Q001",
            UnknownNamespace { .. } => "Q002",
            UnknownField { .. } => "Q003",
            MatchNeedsStrings => "Q004",
            Incomparable { .. } => "Q005",
            OrderingNeedsOrdered { .. } => "Q006",
            InNeedsList => "Q007",
            NotADate { .. } => "Q008",
            UnknownStatus { .. } => "Q009",
            LiteralKind { .. } => "Q010",
            TooDeep => "Q011",
            OutOfRange { .. } => "Q012",
            BadDate { .. } => "Q013",
            Syntax { .. } => "Q014",
            Internal => "Q900",
        }
    }

    /// A diagnostic of this kind, to be located with [`Diagnostic::at`].
    pub fn error(self) -> Diagnostic {
        Diagnostic::error(self.to_string()).code(self.code())
    }
}

impl fmt::Display for QueryErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use QueryErrorKind::*;
        match self {
            NotATest { what, kind } => write!(f, "{what} is {kind}, not true or false"),
            UnknownNamespace { namespace } => write!(f, "unknown namespace `{namespace}`"),
            UnknownField { name } => write!(f, "no run has a field `{name}`"),
            MatchNeedsStrings => write!(f, "`~` matches strings against a pattern such as \"quick*\""),
            Incomparable { a, b } => write!(f, "cannot compare {a} with {b}"),
            OrderingNeedsOrdered { op } => write!(f, "`{op}` needs numbers, strings or dates"),
            InNeedsList => write!(f, "`in` needs a list on its right"),
            NotADate { field, text } => write!(f, "`{field}` is a date, but \"{text}\" is not one"),
            UnknownStatus { status } => write!(f, "no status \"{status}\""),
            LiteralKind { field, kinds, literal } => write!(f, "`{field}` is {kinds}, but is compared with {literal}"),
            TooDeep => write!(f, "brackets and `not`s nested deeper than {MAX_NESTING} levels"),
            OutOfRange { text } => write!(f, "`{text}` is out of range"),
            BadDate { text } => write!(f, "`{text}` is not a date"),
            Syntax { expected } => write!(f, "syntax error: expected {expected}"),
            Internal => write!(f, "internal error: unexpected filter parse tree (a bug in memctl)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_printed_with_the_message() {
        assert_eq!(crate::diag::count_distinct_codes(include_str!("error_kind.rs"), 'Q'), 15);
        let d = QueryErrorKind::UnknownStatus { status: "dne".into() }.error();
        assert_eq!((d.code, d.message.as_str()), (Some("Q009"), "no status \"dne\""));
    }
}
