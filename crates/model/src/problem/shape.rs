//! Problem shapes, validated once so that everything downstream can trust them.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// Elements of K that share one scale.
pub const SCALE_BLOCK: usize = 16;

/// `M x N x K` with `L` batches: C is M x N, A is M x K, B (and B1, B2) N x K.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub l: usize,
}

impl Shape {
    pub fn new(m: usize, n: usize, k: usize, l: usize) -> Result<Self> {
        let positive = "must be at least 1";
        for (dimension, value) in [("M", m), ("N", n), ("K", k), ("L", l)] {
            if value == 0 {
                return Err(Error::InvalidShape {
                    dimension,
                    value,
                    requirement: positive,
                });
            }
        }
        if k % SCALE_BLOCK != 0 {
            return Err(Error::InvalidShape {
                dimension: "K",
                value: k,
                requirement: "must be a multiple of 16 (one e4m3 scale covers 16 consecutive k)",
            });
        }
        // Keeps every exact sum of K products inside the model's 128-bit accumulator with room
        // to spare, and every buffer index inside usize on 64-bit hosts.
        const LIMIT: usize = 1 << 24;
        for (dimension, value) in [("M", m), ("N", n), ("K", k), ("L", l)] {
            if value > LIMIT {
                return Err(Error::InvalidShape {
                    dimension,
                    value,
                    requirement: "must be at most 2^24",
                });
            }
        }
        // The accumulator error bound (docs/reference/numerics.md section 4) holds up to K near 10.7
        // million in any order; K stops well before it.
        const K_LIMIT: usize = 1 << 22;
        if k > K_LIMIT {
            return Err(Error::InvalidShape {
                dimension: "K",
                value: k,
                requirement:
                    "must be at most 2^22 (the model's error bound holds up to about 10.7 million)",
            });
        }
        Ok(Shape { m, n, k, l })
    }

    pub fn scale_cols(&self) -> usize {
        self.k / SCALE_BLOCK
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)?;
        if self.l != 1 {
            write!(f, "x{}", self.l)?;
        }
        Ok(())
    }
}

impl FromStr for Shape {
    type Err = Error;

    /// Parses `MxNxK` (L = 1) or `MxNxKxL`.
    fn from_str(text: &str) -> Result<Self> {
        let syntax = || Error::ShapeSyntax {
            text: text.to_string(),
        };
        let parts: Vec<usize> = text
            .split(['x', 'X'])
            .map(|part| part.trim().parse::<usize>().map_err(|_| syntax()))
            .collect::<Result<_>>()?;
        match parts[..] {
            [m, n, k] => Shape::new(m, n, k, 1),
            [m, n, k, l] => Shape::new(m, n, k, l),
            _ => Err(syntax()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let shape: Shape = "256x512x7168".parse().unwrap();
        assert_eq!(
            shape,
            Shape {
                m: 256,
                n: 512,
                k: 7168,
                l: 1
            }
        );
        assert_eq!(shape.to_string(), "256x512x7168");
        assert_eq!("1x2x32x3".parse::<Shape>().unwrap().to_string(), "1x2x32x3");
    }

    #[test]
    fn errors_name_the_dimension() {
        let message = |text: &str| text.parse::<Shape>().unwrap_err().to_string();
        assert!(message("128x128x100").contains("K = 100"));
        assert!(message("0x128x128").contains("M = 0"));
        assert!(message("1x1x16x0").contains("L = 0"));
        assert!(message("12x12").contains("expected MxNxK"));
        assert!(message("axbxc").contains("expected MxNxK"));
    }

    /// Past K = 2^22 the accumulator bound is refused up front, not asserted on later.
    #[test]
    fn k_stays_where_the_error_bound_holds() {
        let deepest = Shape::new(1, 1, 1 << 22, 1).expect("K = 2^22 is allowed");
        let dot = crate::model::exact::ExactDot {
            positive_blocks: 1,
            negative_blocks: 1,
            abs_terms: 1,
            ..Default::default()
        };
        // Would panic if the bound were not valid at this depth (the default, contiguous order;
        // `any` charges its combining adds quadratically in the number of blocks and is valid
        // to far smaller K: docs/reference/numerics.md section 4).
        crate::model::bounds::accumulator_range(
            &dot,
            deepest.scale_cols(),
            crate::model::bounds::KOrder::Contiguous,
        );
        let message = Shape::new(1, 1, (1 << 22) + 16, 1).unwrap_err().to_string();
        assert!(message.contains("at most 2^22"), "{message}");
    }
}
