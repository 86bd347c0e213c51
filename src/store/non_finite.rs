//! Numbers the store keeps that may be NaN or infinite: a metric of a run whose weights
//! diverged (a test loss after a `max_time` stop), a rung's value. JSON has no such numbers, so
//! these write them as the strings `"NaN"`, `"inf"` and `"-inf"` and read them back as they
//! were. A `null`, which serde_json writes for any of them and older records hold, reads as NaN
//! (it kept no sign).
//!
//! Each is a module for `#[serde(with = "non_finite::metrics")]`.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A number as the store writes it.
#[derive(Clone, Copy)]
struct Number(f64);

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            x if x.is_finite() => s.serialize_f64(x),
            x if x.is_nan() => s.serialize_str("NaN"),
            x if x > 0.0 => s.serialize_str("inf"),
            _ => s.serialize_str("-inf"),
        }
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(f64),
            Text(String),
            Null(()),
        }
        match Written::deserialize(d)? {
            Written::Number(x) => Ok(Number(x)),
            Written::Null(()) => Ok(Number(f64::NAN)),
            Written::Text(t) => match t.as_str() {
                "NaN" => Ok(Number(f64::NAN)),
                "inf" => Ok(Number(f64::INFINITY)),
                "-inf" => Ok(Number(f64::NEG_INFINITY)),
                other => Err(D::Error::custom(format!("`{other}` is not a number"))),
            },
        }
    }
}

/// One number.
pub mod number {
    use super::*;

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        Number(*x).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Number::deserialize(d)?.0)
    }
}

/// A number per name (a run's final metrics).
pub mod metrics {
    use super::*;

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(m.iter().map(|(name, x)| (name, Number(*x))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        let read = BTreeMap::<String, Number>::deserialize(d)?;
        Ok(read.into_iter().map(|(name, x)| (name, x.0)).collect())
    }
}

/// `(step, number)` points per name: a run's curves.
pub type Curves = BTreeMap<String, Vec<(u64, f64)>>;

/// [`Curves`].
pub mod curves {
    use super::*;

    pub fn serialize<S: Serializer>(c: &Curves, s: S) -> Result<S::Ok, S::Error> {
        let written = c
            .iter()
            .map(|(name, points)| (name, points.iter().map(|(step, x)| (*step, Number(*x))).collect::<Vec<_>>()));
        s.collect_map(written)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Curves, D::Error> {
        let read = BTreeMap::<String, Vec<(u64, Number)>>::deserialize(d)?;
        Ok(read
            .into_iter()
            .map(|(name, points)| (name, points.into_iter().map(|(step, x)| (step, x.0)).collect()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    struct Kept {
        #[serde(with = "super::number")]
        one: f64,
        #[serde(with = "super::metrics")]
        named: BTreeMap<String, f64>,
        #[serde(with = "super::curves")]
        points: BTreeMap<String, Vec<(u64, f64)>>,
    }

    #[test]
    fn nan_and_infinities_read_back_as_they_were_written_and_finite_numbers_as_numbers() {
        let kept = Kept {
            one: f64::NAN,
            named: [("loss".into(), f64::INFINITY), ("accuracy".into(), 0.25)].into(),
            points: [("loss".into(), vec![(1, 2.5), (2, f64::NEG_INFINITY)])].into(),
        };
        let json = serde_json::to_string(&kept).unwrap();
        assert_eq!(
            json,
            r#"{"one":"NaN","named":{"accuracy":0.25,"loss":"inf"},"points":{"loss":[[1,2.5],[2,"-inf"]]}}"#
        );
        let back: Kept = serde_json::from_str(&json).unwrap();
        assert!(back.one.is_nan());
        assert_eq!(back.named["loss"], f64::INFINITY);
        assert_eq!(back.named["accuracy"], 0.25);
        assert_eq!(back.points["loss"], [(1, 2.5), (2, f64::NEG_INFINITY)]);
    }

    #[test]
    fn a_null_from_an_older_record_reads_as_nan() {
        let json = r#"{"one": null, "named": {"loss": null}, "points": {"loss": [[1, null]]}}"#;
        let back: Kept = serde_json::from_str(json).unwrap();
        assert!(back.one.is_nan() && back.named["loss"].is_nan() && back.points["loss"][0].1.is_nan());
    }

    #[test]
    fn a_value_of_another_type_is_still_an_error() {
        for json in [r#"{"one": "x", "named": {}, "points": {}}"#, r#"{"one": true, "named": {}, "points": {}}"#] {
            assert!(serde_json::from_str::<Kept>(json).is_err(), "{json}");
        }
    }
}
