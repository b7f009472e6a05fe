//! The elements of a failing run that a nearby problem is held to when the run is too large to
//! compute it whole (a deployment-size minimal case: 10 x 8192 x 8192, 1 x 1024 x 1024 x 65):
//! every combination of a few rows, columns and batches, chosen so that the wrong elements are
//! among them (some of them, each with its row, column and batch) beside right ones spread
//! over the whole run (which a wrong index map would break). A nearby problem computed on the
//! sample costs what the sample's products cost, whatever the run's size.

use crate::problem::Shape;

/// Every combination of `rows` x `columns` x `batches` of a run, each list sorted and distinct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementSample {
    pub rows: Vec<usize>,
    pub columns: Vec<usize>,
    pub batches: Vec<usize>,
}

/// Wrong elements whose row, column and batch the sample always takes: enough to see a
/// pattern, few enough to leave room for the right elements around them.
const WRONG_ELEMENTS_TAKEN: usize = 4;
/// Rows, columns and batches spread evenly over the whole run, besides the wrong elements'.
const SPREAD_ROWS: usize = 4;
const SPREAD_COLUMNS: usize = 32;
const SPREAD_BATCHES: usize = 4;
/// Columns taken from those that hold a wrong element (a bug past some column or tile).
const WRONG_COLUMNS: usize = 24;

impl ElementSample {
    /// The whole run.
    pub fn whole(shape: Shape) -> Self {
        ElementSample {
            rows: (0..shape.m).collect(),
            columns: (0..shape.n).collect(),
            batches: (0..shape.l).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len() * self.columns.len() * self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shape of the problem made of the sample's rows (M), columns (N) and batches (L).
    pub fn shape(&self, k: usize) -> Shape {
        Shape::new(self.rows.len(), self.columns.len(), k, self.batches.len())
            .expect("a sample has at least one row, column and batch")
    }

    /// Where the sample's element `i` (`[rows, columns, batches]`, batches fastest, as a
    /// problem of [`Self::shape`] lays out its output) lies in the run's output of `shape`.
    pub fn index_in(&self, i: usize, shape: Shape) -> usize {
        let (c, b) = (self.columns.len(), self.batches.len());
        let (row, column, batch) = (
            self.rows[i / (c * b)],
            self.columns[i / b % c],
            self.batches[i % b],
        );
        (row * shape.n + column) * shape.l + batch
    }

    /// The sample of a run of `shape` whose wrong elements (`[M, N, L]`, L fastest) are
    /// `wrong`, at most `elements` large: the row, column and batch of a few wrong elements
    /// spread over them, columns that hold wrong elements, and rows, columns and batches spread
    /// over the run (its first and last among them). At least one wrong element is in it
    /// whenever the run has one.
    pub fn of_run(shape: Shape, wrong: &[bool], elements: usize) -> Self {
        let total = wrong.iter().filter(|&&w| w).count();
        // The ranks (among wrong elements) of the ones taken with their row, column and batch.
        let taken = evenly(&(0..total).collect::<Vec<_>>(), WRONG_ELEMENTS_TAKEN);
        let keep = taken_coordinates(shape, wrong, &taken);
        let mut rows: Vec<usize> = keep.iter().map(|k| k.0).collect();
        let mut columns: Vec<usize> = keep.iter().map(|k| k.1).collect();
        let mut batches: Vec<usize> = keep.iter().map(|k| k.2).collect();
        let mut wrong_column = vec![false; shape.n];
        for (index, _) in wrong.iter().enumerate().filter(|(_, &w)| w) {
            wrong_column[index / shape.l % shape.n] = true;
        }
        let spread = |len: usize, count: usize| {
            let mut picked = evenly(&(0..len).collect::<Vec<_>>(), count);
            picked.push(len - 1);
            picked
        };
        let with_wrong: Vec<usize> = (0..shape.n).filter(|&n| wrong_column[n]).collect();
        columns.extend(evenly(&with_wrong, WRONG_COLUMNS));
        rows.extend(spread(shape.m, SPREAD_ROWS));
        columns.extend(spread(shape.n, SPREAD_COLUMNS));
        batches.extend(spread(shape.l, SPREAD_BATCHES));
        for list in [&mut rows, &mut columns, &mut batches] {
            list.sort_unstable();
            list.dedup();
        }
        let mut sample = ElementSample {
            rows,
            columns,
            batches,
        };
        sample.fit(elements, &keep);
        sample
    }

    /// Drops spread columns, then rows, then batches (never a wrong element's taken ones)
    /// until the sample holds at most `elements`.
    fn fit(&mut self, elements: usize, keep: &[(usize, usize, usize)]) {
        let kept = |list: &Vec<usize>, of: fn(&(usize, usize, usize)) -> usize| {
            list.iter()
                .copied()
                .filter(|v| keep.iter().any(|k| of(k) == *v))
                .collect::<Vec<usize>>()
        };
        let keep_rows = kept(&self.rows, |k| k.0);
        let keep_columns = kept(&self.columns, |k| k.1);
        let keep_batches = kept(&self.batches, |k| k.2);
        // Each dimension in turn cut to what the budget leaves the others, keeping its
        // wrong elements' values and an even spread of the rest.
        for pass in 0..3 {
            let total = self.len();
            if total <= elements {
                return;
            }
            let (list, must) = match pass {
                0 => (&mut self.columns, &keep_columns),
                1 => (&mut self.rows, &keep_rows),
                _ => (&mut self.batches, &keep_batches),
            };
            let others = total / list.len();
            let room = (elements / others).max(must.len()).max(1);
            let rest: Vec<usize> = list.iter().copied().filter(|v| !must.contains(v)).collect();
            let mut cut = must.clone();
            cut.extend(evenly(&rest, room.saturating_sub(must.len())));
            cut.sort_unstable();
            cut.dedup();
            *list = cut;
        }
    }
}

/// (row, column, batch) of the wrong elements whose ranks are `taken`.
fn taken_coordinates(shape: Shape, wrong: &[bool], taken: &[usize]) -> Vec<(usize, usize, usize)> {
    wrong
        .iter()
        .enumerate()
        .filter(|(_, &w)| w)
        .enumerate()
        .filter(|(rank, _)| taken.binary_search(rank).is_ok())
        .map(|(_, (index, _))| {
            (
                index / (shape.n * shape.l),
                index / shape.l % shape.n,
                index % shape.l,
            )
        })
        .collect()
}

/// Up to `count` of `values`, evenly spaced, the first among them.
fn evenly(values: &[usize], count: usize) -> Vec<usize> {
    if values.len() <= count {
        return values.to_vec();
    }
    (0..count)
        .map(|i| values[i * values.len() / count])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::nearby_problems::{IndexMap, KMisread, KRange, NearbyProblem, Operands};
    use crate::model::bounds::KOrder;
    use crate::problem::generate::generate_dual_gemm;
    use crate::problem::Distribution;

    #[test]
    fn the_sample_holds_wrong_elements_and_fits_its_budget() {
        let shape = Shape::new(300, 500, 16, 7).unwrap();
        let mut wrong = vec![false; 300 * 500 * 7];
        // Wrong: batch 6, columns 400 and up, every row.
        for m in 0..300 {
            for n in 400..500 {
                wrong[(m * 500 + n) * 7 + 6] = true;
            }
        }
        let sample = ElementSample::of_run(shape, &wrong, 600);
        assert!(sample.len() <= 600, "{} elements", sample.len());
        let in_sample: Vec<usize> = (0..sample.len())
            .map(|i| sample.index_in(i, shape))
            .collect();
        assert!(
            in_sample.iter().any(|&i| wrong[i]),
            "a wrong element is in the sample"
        );
        assert!(
            in_sample.iter().any(|&i| !wrong[i]),
            "a right element is in the sample"
        );
        assert!(sample.batches.contains(&6) && sample.batches.contains(&0));
        assert!(sample.columns.iter().any(|&n| n < 400));
        // Every sampled element is a distinct element of the run.
        let mut distinct = in_sample.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), in_sample.len());
    }

    /// A nearby problem computed on a sample gives each sampled element the intervals it has
    /// in the whole problem, in every family: the sample changes the cost, not the answer.
    #[test]
    fn a_problem_on_a_sample_is_the_whole_problem_at_those_elements() {
        let shape = Shape::new(9, 40, 64, 6).unwrap();
        let inputs = generate_dual_gemm(shape, Distribution::Full, 21);
        let sample = ElementSample {
            rows: vec![0, 3, 8],
            columns: vec![1, 17, 33, 39],
            batches: vec![0, 2, 5],
        };
        let problems = [
            NearbyProblem::Batches {
                operands: Operands::B1,
                map: IndexMap::LastFromZero,
            },
            NearbyProblem::Batches {
                operands: Operands::Sfa,
                map: IndexMap::Mod(1),
            },
            NearbyProblem::Columns {
                scales_only: false,
                map: IndexMap::Mod(4),
            },
            NearbyProblem::Columns {
                scales_only: true,
                map: IndexMap::Minus1,
            },
            NearbyProblem::Rows {
                scales_only: false,
                map: IndexMap::Plus1,
            },
            NearbyProblem::KRange {
                misread: KMisread::B2WithSfb1,
                range: KRange::SecondHalf,
            },
            NearbyProblem::KRange {
                misread: KMisread::PreviousChunkScales,
                range: KRange::Tail { chunk: 32 },
            },
            NearbyProblem::Fp16Silu,
        ];
        for problem in problems {
            let whole = problem.intervals(&inputs, KOrder::Contiguous).unwrap();
            let part = problem
                .intervals_at(&inputs, KOrder::Contiguous, &sample)
                .unwrap();
            for i in 0..sample.len() {
                let at = sample.index_in(i, shape);
                assert_eq!(
                    (
                        part.lo[i].to_bits(),
                        part.hi[i].to_bits(),
                        part.unbounded[i]
                    ),
                    (
                        whole.lo[at].to_bits(),
                        whole.hi[at].to_bits(),
                        whole.unbounded[at]
                    ),
                    "{problem:?} at element {at}"
                );
            }
        }
    }
}
