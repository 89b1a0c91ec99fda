//! A numeric configuration field defined once: its dotted name, default, allowed range and
//! unit side by side (`Field`). Defaults (`Default` impls) and validation (the range
//! check and its message) both read the same constant, so they cannot drift apart.

use std::fmt;

/// One numeric configuration field: name, default, inclusive range `min..=max`, unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Field<T> {
    /// The dotted path in the configuration file, e.g. `availability.owner_cpu_max`.
    pub name: &'static str,
    /// The value when the file does not set it.
    pub default: T,
    /// The least allowed value.
    pub min: T,
    /// The greatest allowed value.
    pub max: T,
    /// What the number counts, for messages and docs (e.g. `seconds`).
    pub unit: &'static str,
}

/// A number a [`Field`] can hold; validation compares it as `f64`.
pub trait FieldValue: Copy + PartialOrd + fmt::Display {
    /// The value as `f64` (exact for every range used here).
    fn as_f64(self) -> f64;
}

impl FieldValue for f64 {
    fn as_f64(self) -> f64 {
        self
    }
}

impl FieldValue for u64 {
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl FieldValue for u32 {
    fn as_f64(self) -> f64 {
        f64::from(self)
    }
}

/// A field's current value beside its range, as numbers: one row of a validation table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Checked {
    /// The dotted field name.
    pub name: &'static str,
    /// The value to check.
    pub value: f64,
    /// The least allowed value.
    pub min: f64,
    /// The greatest allowed value.
    pub max: f64,
    /// What the number counts.
    pub unit: &'static str,
}

impl<T: FieldValue> Field<T> {
    /// Whether `v` lies in `min..=max` (a NaN never does).
    pub fn contains(&self, v: T) -> bool {
        self.min <= v && v <= self.max
    }

    /// This field with value `v`, for a validation table.
    pub fn check(&self, v: T) -> Checked {
        Checked { name: self.name, value: v.as_f64(), min: self.min.as_f64(), max: self.max.as_f64(), unit: self.unit }
    }
}

impl Checked {
    /// Whether the value lies in its range (a NaN never does).
    #[cfg(test)]
    pub(crate) fn in_range(&self) -> bool {
        (self.min..=self.max).contains(&self.value)
    }

    /// The range as written in messages, e.g. `0..=20`.
    #[cfg(test)]
    pub(crate) fn range_text(&self) -> String {
        format!("{}..={}", fmt_bound(self.min), fmt_bound(self.max))
    }
}

/// A bound or value as written in messages: `20`, not `20.0`; `0.05` as is.
pub fn fmt_bound(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
