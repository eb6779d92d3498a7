//! Numbers whose range is held by construction: `Unit` in [0, 1], `Signed` in [-1, 1]. Every
//! way in clamps (and a NaN becomes the range's neutral value), so no arithmetic elsewhere can
//! leave a value out of range.

use serde::{Deserialize, Deserializer, Serialize};

/// A value in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize)]
#[serde(transparent)]
pub struct Unit(f64);

/// A value in [-1, 1].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize)]
#[serde(transparent)]
pub struct Signed(f64);

impl Unit {
    pub const ZERO: Unit = Unit(0.0);
    pub const ONE: Unit = Unit(1.0);

    pub fn new(x: f64) -> Unit {
        if x.is_nan() {
            Unit(0.0)
        } else {
            Unit(x.clamp(0.0, 1.0))
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }

    /// This value moved by `delta`, clamped.
    pub fn nudge(self, delta: f64) -> Unit {
        Unit::new(self.0 + delta)
    }

    /// This value moved toward `target` by the fraction `rate` (clamped to [0, 1]) of the gap.
    pub fn toward(self, target: f64, rate: f64) -> Unit {
        Unit::new(self.0 + (target - self.0) * rate.clamp(0.0, 1.0))
    }
}

impl Signed {
    pub const ZERO: Signed = Signed(0.0);

    pub fn new(x: f64) -> Signed {
        if x.is_nan() {
            Signed(0.0)
        } else {
            Signed(x.clamp(-1.0, 1.0))
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }

    pub fn nudge(self, delta: f64) -> Signed {
        Signed::new(self.0 + delta)
    }

    pub fn toward(self, target: f64, rate: f64) -> Signed {
        Signed::new(self.0 + (target - self.0) * rate.clamp(0.0, 1.0))
    }
}

// Reading back from the store clamps too: a hand-edited row cannot smuggle a value out.
impl<'de> Deserialize<'de> for Unit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        f64::deserialize(d).map(Unit::new)
    }
}

impl<'de> Deserialize<'de> for Signed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        f64::deserialize(d).map(Signed::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_in_clamps() {
        assert_eq!(Unit::new(1.5).get(), 1.0);
        assert_eq!(Unit::new(-0.5).get(), 0.0);
        assert_eq!(Unit::new(f64::NAN).get(), 0.0);
        assert_eq!(Signed::new(-3.0).get(), -1.0);
        assert_eq!(Signed::new(f64::INFINITY).get(), 1.0);
        assert_eq!(Unit::new(0.9).nudge(0.5).get(), 1.0);
        assert_eq!(Signed::new(0.0).toward(1.0, 7.0).get(), 1.0);
        let u: Unit = serde_json::from_str("4.0").unwrap();
        assert_eq!(u.get(), 1.0);
    }
}
