//! A name in a dashboard request that nothing in the store has (a curve, a metric, an experiment):
//! answered 404 with the names there are, rather than an empty table or plot that looks like
//! a result.

use std::fmt;

use crate::suggest::did_you_mean;

#[derive(Clone, Debug, PartialEq)]
pub enum UnknownName {
    /// No run whose curves were asked for has a curve `name`.
    Curve { name: String, known: Vec<String> },
    /// No finished run of `experiment` has a final metric `name`.
    FinalMetric { name: String, experiment: String, known: Vec<String> },
    /// No run in the store belongs to experiment `name`.
    Experiment { name: String, known: Vec<String> },
    /// No finished run the filter keeps has a final metric `name`.
    Metric { name: String, known: Vec<String> },
}

impl UnknownName {
    /// The names there are, for the page to offer instead.
    pub fn known(&self) -> &[String] {
        match self {
            UnknownName::Curve { known, .. }
            | UnknownName::FinalMetric { known, .. }
            | UnknownName::Experiment { known, .. }
            | UnknownName::Metric { known, .. } => known,
        }
    }

    fn name(&self) -> &str {
        match self {
            UnknownName::Curve { name, .. }
            | UnknownName::FinalMetric { name, .. }
            | UnknownName::Experiment { name, .. }
            | UnknownName::Metric { name, .. } => name,
        }
    }
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnknownName::Curve { name, .. } => write!(f, "no run drawn has a curve `{name}`")?,
            UnknownName::FinalMetric { name, experiment, .. } => {
                write!(f, "no finished run of `{experiment}` has a final metric `{name}`")?
            }
            UnknownName::Experiment { name, .. } => write!(f, "no run in the store is of experiment `{name}`")?,
            UnknownName::Metric { name, .. } => write!(f, "no finished run shown has a final metric `{name}`")?,
        }
        match did_you_mean(self.name(), self.known().iter().map(String::as_str)) {
            Some(hint) => write!(f, "; {hint}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_unknown_name_and_suggests_a_near_one() {
        let known = vec!["val_accuracy".to_string(), "val_loss".to_string()];
        let e = UnknownName::Curve { name: "val_los".into(), known: known.clone() };
        assert_eq!(e.to_string(), "no run drawn has a curve `val_los`; did you mean `val_loss`?");
        let e = UnknownName::Experiment { name: "nosuch".into(), known };
        assert_eq!(e.to_string(), "no run in the store is of experiment `nosuch`");
    }
}
