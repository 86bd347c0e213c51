//! Turning stored runs into views: the `memctl runs` sheet and its formats (table, CSV, JSON,
//! Markdown), a run's record, a diff of two runs, ablation tables, a final metric against each swept parameter (all pure), and
//! learning-curve plots (written to a file).

pub mod ablation;
pub mod csv;
pub mod curves;
pub mod diff;
pub mod json;
pub mod markdown;
pub mod numbers;
pub mod plot;
pub mod provenance;
pub mod results;
pub mod scatter;
pub mod search;
pub mod selection;
pub mod sheet;
pub mod show;
pub mod table;
pub mod table_curves;
pub mod table_data;
pub mod verdict;
pub mod view;
