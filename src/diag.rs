//! Located diagnostics: what went wrong, where, and what to do about it.
//!
//! A [`Diagnostic`] is data (message, labelled spans, hints); [`Diagnostic::render`] turns it
//! into the familiar compiler layout with annotate-snippets:
//!
//! ```text
//! error: unknown primitive `samRaed`
//!   --> specs/x.mem:12:9
//!    |
//! 12 |     R = samRaed(Mi)
//!    |         ^^^^^^^ not a primitive
//!    |
//!    = help: did you mean `samRead`?
//! ```

use std::fmt;

use annotate_snippets::{AnnotationKind, Level, Renderer, Snippet};

use crate::source::{SourceMap, Span, floor_char_boundary};

/// A span with a short label ("expected [d, d]").
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub span: Span,
    pub text: String,
}

/// One user-facing error about a spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// The stable code of the kind of mistake (`C014`, `P003`), printed as `error[C014]`.
    pub code: Option<&'static str>,
    pub message: String,
    pub primary: Option<Label>,
    pub secondary: Vec<Label>,
    pub hints: Vec<String>,
}

/// Snippets never show more than this many lines of a multi-line span.
const MAX_SNIPPET_LINES: usize = 6;

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Diagnostic {
        Diagnostic { code: None, message: message.into(), primary: None, secondary: vec![], hints: vec![] }
    }

    /// Sets the stable code of the kind of mistake.
    pub fn code(mut self, code: &'static str) -> Diagnostic {
        self.code = Some(code);
        self
    }

    /// Points the diagnostic at `span` with a label.
    pub fn at(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.primary = Some(Label { span, text: label.into() });
        self
    }

    /// Adds a secondary location ("defined here").
    pub fn also(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label { span, text: label.into() });
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hints.push(hint.into());
        self
    }

    /// `path:line:col` of the primary span, if any.
    pub fn location(&self, sources: &SourceMap) -> Option<String> {
        self.primary.as_ref().map(|l| sources.location(l.span))
    }

    /// Renders the diagnostic; `color` selects ANSI styling.
    pub fn render(&self, sources: &SourceMap, color: bool) -> String {
        let renderer = if color { Renderer::styled() } else { Renderer::plain() };
        let mut title = Level::ERROR.primary_title(self.message.as_str());
        if let Some(code) = self.code {
            title = title.id(code);
        }
        let labels = self.primary.iter().map(|l| (l, AnnotationKind::Primary));
        let labels = labels.chain(self.secondary.iter().map(|l| (l, AnnotationKind::Context)));
        let mut elements = Vec::new();
        for (label, kind) in labels {
            elements.push(snippet(sources, label, kind));
        }
        let mut group = title.elements(elements);
        for hint in &self.hints {
            group = group.element(Level::HELP.message(hint.as_str()));
        }
        renderer.render(&[group])
    }
}

/// A snippet holding only the lines the label covers, so that a huge file or line is never
/// printed whole (annotate-snippets trims long lines to the terminal width).
fn snippet<'a>(
    sources: &'a SourceMap,
    label: &'a Label,
    kind: AnnotationKind,
) -> Snippet<'a, annotate_snippets::Annotation<'a>> {
    let file = sources.get(label.span.file);
    let text = file.text.as_str();
    let first = file.line_range(label.span.start);
    let mut last = file.line_range(label.span.end.saturating_sub(1).max(label.span.start));
    let shown_lines = text[first.start..last.end.max(first.start)].matches('\n').count() + 1;
    if shown_lines > MAX_SNIPPET_LINES {
        last = first.clone();
    }
    let excerpt_end = last.end.max(first.end);
    let start = floor_char_boundary(text, label.span.start.min(excerpt_end));
    let mut end = floor_char_boundary(text, label.span.end.min(excerpt_end)).max(start);
    if end == start && end < text.len() {
        // An empty span (e.g. "expected ... at end of line") still gets one caret.
        end = next_char_boundary(text, end).min(excerpt_end.max(end));
    }
    let (line, _) = file.line_col(first.start);
    Snippet::source(&text[first.start..excerpt_end])
        .line_start(line)
        .path(file.path.to_str().unwrap_or("<non-UTF-8 path>"))
        .annotation(kind.span(start - first.start..end - first.start).label(label.text.as_str()))
}

fn next_char_boundary(s: &str, i: usize) -> usize {
    let mut j = i + 1;
    while j < s.len() && !s.is_char_boundary(j) {
        j += 1;
    }
    j.min(s.len())
}

/// Several diagnostics from one check.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn render(&self, sources: &SourceMap, color: bool) -> String {
        let mut out = String::new();
        for d in &self.0 {
            out.push_str(&d.render(sources, color));
            out.push_str("\n\n");
        }
        out
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Diagnostics {
        Diagnostics(vec![d])
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// How many codes an error-kind file gives out in its `fn code` (each string literal `"X…"`
/// there), asserting that they are distinct, each a `prefix` and three digits: the file's test
/// that no code is given twice.
#[cfg(test)]
pub(crate) fn count_distinct_codes(source: &'static str, prefix: char) -> usize {
    let body = &source[source.find("pub fn code").unwrap_or(0)..source.find("pub fn error(self)").unwrap_or(0)];
    let codes: Vec<&str> = body.split('"').skip(1).step_by(2).collect();
    let mut sorted = codes.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), codes.len(), "a code is given twice: {codes:?}");
    assert!(codes.iter().all(|c| c.len() == 4 && c.starts_with(prefix)), "{codes:?}");
    codes.len()
}
