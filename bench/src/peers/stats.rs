//! The arithmetic of the table: medians and spreads over rounds, and ratios.

/// Median of `xs` (mean of the middle two for an even count); `None` when empty or when any
/// value is not finite.
pub fn median(xs: &[f64]) -> Option<f64> {
    let s = sorted(xs)?;
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

fn sorted(xs: &[f64]) -> Option<Vec<f64>> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    Some(s)
}

/// Minimum, median and maximum of a set of figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub n: usize,
}

/// The spread of `xs`; `None` when empty or when any value is not finite.
pub fn spread(xs: &[f64]) -> Option<Spread> {
    let s = sorted(xs)?;
    Some(Spread { min: s[0], median: median(&s)?, max: s[s.len() - 1], n: s.len() })
}

/// Cadence / peer, when both are positive finite figures.
pub fn ratio(cadence: f64, peer: f64) -> Option<f64> {
    (cadence.is_finite() && peer.is_finite() && cadence > 0.0 && peer > 0.0).then(|| cadence / peer)
}

/// `v` rotated left by `by` (round `r` starts at element `r mod len`).
pub fn rotate<T: Clone>(v: &[T], by: usize) -> Vec<T> {
    if v.is_empty() {
        return Vec::new();
    }
    let k = by % v.len();
    v[k..].iter().chain(&v[..k]).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
        assert_eq!(median(&[1.0, f64::INFINITY, 2.0]), None);
    }

    #[test]
    fn spreads() {
        assert_eq!(spread(&[0.9, 0.7, 1.3]), Some(Spread { min: 0.7, median: 0.9, max: 1.3, n: 3 }));
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(50.0, 100.0), Some(0.5));
        assert_eq!(ratio(150.0, 100.0), Some(1.5));
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(0.0, 1.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        assert_eq!(ratio(1.0, f64::INFINITY), None);
    }

    #[test]
    fn rotations() {
        assert_eq!(rotate(&[1, 2, 3], 0), vec![1, 2, 3]);
        assert_eq!(rotate(&[1, 2, 3], 1), vec![2, 3, 1]);
        assert_eq!(rotate(&[1, 2, 3], 5), vec![3, 1, 2]);
        assert_eq!(rotate::<u8>(&[], 3), Vec::<u8>::new());
    }
}
