//! Numbers the store keeps that may be NaN or infinite: a metric of a run whose weights
//! diverged (a test loss after a `max_time` stop), a rung's value. JSON has no such numbers,
//! so serde_json writes them as `null`; these read a `null` back as NaN, so that the record
//! stays readable (an infinity comes back as NaN: `null` kept no sign).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

/// One number (`#[serde(deserialize_with = "non_finite::number")]`).
pub fn number<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A number per name (a run's final metrics).
pub fn metrics<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
    let read = BTreeMap::<String, Option<f64>>::deserialize(d)?;
    Ok(read.into_iter().map(|(name, v)| (name, v.unwrap_or(f64::NAN))).collect())
}

/// `(step, number)` points per name: a run's curves.
pub type Curves = BTreeMap<String, Vec<(u64, f64)>>;

/// [`Curves`], each point's number read as [`number`] does.
pub fn curves<'de, D: Deserializer<'de>>(d: D) -> Result<Curves, D::Error> {
    let read = BTreeMap::<String, Vec<(u64, Option<f64>)>>::deserialize(d)?;
    Ok(read
        .into_iter()
        .map(|(name, points)| (name, points.into_iter().map(|(step, v)| (step, v.unwrap_or(f64::NAN))).collect()))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    struct Kept {
        #[serde(deserialize_with = "super::number")]
        one: f64,
        #[serde(deserialize_with = "super::metrics")]
        named: BTreeMap<String, f64>,
        #[serde(deserialize_with = "super::curves")]
        points: BTreeMap<String, Vec<(u64, f64)>>,
    }

    #[test]
    fn nan_and_infinities_written_as_null_read_back_as_nan_and_finite_numbers_as_they_were() {
        let kept = Kept {
            one: f64::NAN,
            named: [("loss".into(), f64::INFINITY), ("accuracy".into(), 0.25)].into(),
            points: [("loss".into(), vec![(1, 2.5), (2, f64::NEG_INFINITY)])].into(),
        };
        let json = serde_json::to_string(&kept).unwrap();
        assert!(json.contains("null"), "{json}");
        let back: Kept = serde_json::from_str(&json).unwrap();
        assert!(back.one.is_nan());
        assert!(back.named["loss"].is_nan());
        assert_eq!(back.named["accuracy"], 0.25);
        assert_eq!(back.points["loss"][0], (1, 2.5));
        assert!(back.points["loss"][1].1.is_nan());
    }

    #[test]
    fn a_value_of_another_type_is_still_an_error() {
        let json = r#"{"one": "x", "named": {}, "points": {}}"#;
        assert!(serde_json::from_str::<Kept>(json).is_err());
    }
}
