//! Why a spec does not read (before it is checked), as data: one [`SpecErrorKind`] per mistake,
//! its message in the one `Display`, and a stable code (`S0xx`) printed with it, as the
//! checker's [`CheckErrorKind`](crate::check::error_kind::CheckErrorKind) does past the parser.

use std::fmt;

use super::limits::{MAX_EXPR_DEPTH, MAX_NESTING, MAX_SPEC_BYTES, MAX_USE_DEPTH};
use crate::diag::Diagnostic;

#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SpecErrorKind {
    /// What the parser expected, in words.
    Syntax {
        expected: String,
    },
    UnclosedString,
    UnclosedComment,
    BracketsTooDeep,
    ExpressionTooDeep,
    NumberOutOfRange,
    UseTooDeep,
    CannotRead {
        path: String,
        reason: String,
    },
    NotUtf8,
    /// A file past [`MAX_SPEC_BYTES`] (or without end, a device): not a spec.
    TooLarge {
        path: String,
    },
    /// A bug in memctl's parser (`what` went wrong).
    Internal {
        what: String,
    },
}

impl SpecErrorKind {
    pub fn code(&self) -> &'static str {
        use SpecErrorKind::*;
        match self {
            Syntax { .. } => "S001",
            UnclosedString => "S002",
            UnclosedComment => "S003",
            BracketsTooDeep => "S004",
            ExpressionTooDeep => "S005",
            NumberOutOfRange => "S006",
            UseTooDeep => "S007",
            CannotRead { .. } => "S008",
            NotUtf8 => "S009",
            TooLarge { .. } => "S010",
            Internal { .. } => "S900",
        }
    }

    /// A diagnostic of this kind, to be located with [`Diagnostic::at`].
    pub fn error(self) -> Diagnostic {
        Diagnostic::error(self.to_string()).code(self.code())
    }
}

impl fmt::Display for SpecErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SpecErrorKind::*;
        match self {
            Syntax { expected } => write!(f, "syntax error: expected {expected}"),
            UnclosedString => write!(f, "unclosed string"),
            UnclosedComment => write!(f, "unclosed comment"),
            BracketsTooDeep => write!(f, "brackets nested more than {MAX_NESTING} levels deep"),
            ExpressionTooDeep => {
                write!(f, "expression more than {MAX_EXPR_DEPTH} levels deep (each operator of a chain is one)")
            }
            NumberOutOfRange => write!(f, "number out of range"),
            UseTooDeep => write!(f, "`use` nested more than {MAX_USE_DEPTH} files deep"),
            CannotRead { path, reason } => write!(f, "cannot read `{path}`: {reason}"),
            NotUtf8 => write!(f, "spec files must be UTF-8 text"),
            TooLarge { path } => write!(f, "`{path}` is larger than {} MiB, which no spec is", MAX_SPEC_BYTES >> 20),
            Internal { what } => write!(f, "internal error in memctl's parser: {what}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_printed_with_the_message() {
        assert_eq!(crate::diag::count_distinct_codes(include_str!("error_kind.rs"), 'S'), 11);
        let d = SpecErrorKind::UnclosedComment.error();
        assert_eq!((d.code, d.message.as_str()), (Some("S003"), "unclosed comment"));
    }
}
