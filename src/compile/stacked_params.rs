//! A pack's parameters held stacked: parameter `k` of every trial in one tensor `[P, …]`,
//! each trial's own `Var` a view of its row (no copy). A packed op
//! ([`PackedForward`](crate::prims::contract::op::PackedForward)) then reads the stack as it
//! is, where otherwise every step would stack every trial's weights anew (on a GPU a copy
//! kernel per trial and parameter) and split the stack's gradient back. The optimisers update
//! each trial's view in place, so the stack always holds the trials' current values.
//!
//! The stack is a variable of its own: candle's backward gives it the gradient of the packed
//! ops' uses and of the learned initial states, and each trial's view the gradient of its own
//! uses (an op run per trial on its rows); [`crate::compile::StepWeights`] adds the stack's row
//! to the trial's.

use std::sync::Arc;

use candle_core::{Result, Tensor, Var};

use super::Cell;

/// Every parameter of a pack's trials, stacked `[P, …]`, each stack a variable.
pub struct StackedParams {
    stacks: Vec<Tensor>,
    trials: usize,
}

impl StackedParams {
    /// Parameter `k` of every trial, `[P, …]`.
    pub fn stack(&self, k: usize) -> Option<&Tensor> {
        self.stacks.get(k)
    }

    /// The parameters' count.
    pub fn params(&self) -> usize {
        self.stacks.len()
    }

    /// The trials' count.
    pub fn trials(&self) -> usize {
        self.trials
    }
}

/// A cell's place in a pack's stacked parameters: its parameters are row `row` of `params`.
#[derive(Clone)]
pub struct StackedRow {
    pub params: Arc<StackedParams>,
    pub row: usize,
}

impl Cell {
    /// Stacks the current parameters of `cells` (one copy) and makes each cell's parameters
    /// views of its row, the cells' order the rows'. Every cell has this graph's parameters.
    pub fn stack_parameters(cells: &mut [&mut Cell]) -> Result<Arc<StackedParams>> {
        let params = cells.first().map_or(0, |c| c.vars.len());
        if cells.iter().any(|c| c.vars.len() != params) {
            candle_core::bail!("internal: a pack of cells of different parameter counts");
        }
        let stacks: Vec<Tensor> = (0..params)
            .map(|k| {
                let rows: Vec<Tensor> = cells.iter().map(|c| c.vars[k].as_tensor().detach()).collect();
                // A fresh tensor with no history, made a variable of its own.
                Ok(Tensor::stack(&rows, 0)?.share_as_var())
            })
            .collect::<Result<_>>()?;
        let stacked = Arc::new(StackedParams { stacks, trials: cells.len() });
        for (row, cell) in cells.iter_mut().enumerate() {
            cell.vars =
                stacked.stacks.iter().map(|s| Var::from_tensor(&s.get(row)?.share_as_var())).collect::<Result<_>>()?;
            cell.stacked = Some(StackedRow { params: Arc::clone(&stacked), row });
        }
        Ok(stacked)
    }

    /// The stacked parameters `cells` hold, where they are exactly one pack's rows in order.
    pub fn shared_stacks(cells: &[&Cell]) -> Option<Arc<StackedParams>> {
        let first = cells.first()?.stacked.as_ref()?;
        let ours = |(row, c): (usize, &&Cell)| {
            c.stacked.as_ref().is_some_and(|s| s.row == row && Arc::ptr_eq(&s.params, &first.params))
        };
        let whole = first.params.trials == cells.len() && cells.iter().enumerate().all(ours);
        whole.then(|| Arc::clone(&first.params))
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device};

    use super::*;

    fn cell(seed: u64) -> Cell {
        let program = crate::check::checked_text(
            "model m() { step x { out linear(x, output_size) } }
             experiment e { task randomSequence(input = 2, output = 2, length = 4) model m }",
        );
        let graph = Arc::clone(&program.experiments[0].trials[0].graph);
        Cell::new(graph, seed, &Device::Cpu, DType::F32).unwrap()
    }

    #[test]
    fn stacked_cells_read_and_write_their_rows_of_the_stacks() -> Result<()> {
        let (mut a, mut b) = (cell(1), cell(2));
        let before: Vec<Vec<f32>> =
            [&a, &b].iter().map(|c| c.vars[0].flatten_all()?.to_vec1()).collect::<Result<_>>()?;
        let stacked = Cell::stack_parameters(&mut [&mut a, &mut b])?;
        let stack = stacked.stack(0).unwrap();
        assert!(stack.is_variable());
        for (row, c) in [&a, &b].iter().enumerate() {
            assert_eq!(stack.get(row)?.flatten_all()?.to_vec1::<f32>()?, before[row], "row {row}");
            assert_eq!(c.vars[0].flatten_all()?.to_vec1::<f32>()?, before[row], "cell {row}");
        }
        // An update of a cell's parameter is its row of the stack.
        b.vars[0].set(&b.vars[0].ones_like()?)?;
        assert!(stack.get(1)?.flatten_all()?.to_vec1::<f32>()?.iter().all(|&v| v == 1.0));
        assert_eq!(stack.get(0)?.flatten_all()?.to_vec1::<f32>()?, before[0]);
        Ok(())
    }

    #[test]
    fn only_a_whole_pack_in_its_order_shares_its_stacks() -> Result<()> {
        let (mut a, mut b, mut c) = (cell(1), cell(2), cell(3));
        assert!(Cell::shared_stacks(&[&a, &b]).is_none());
        Cell::stack_parameters(&mut [&mut a, &mut b])?;
        assert!(Cell::shared_stacks(&[&a, &b]).is_some());
        assert!(Cell::shared_stacks(&[&b, &a]).is_none());
        assert!(Cell::shared_stacks(&[&a]).is_none());
        assert!(Cell::shared_stacks(&[&a, &c]).is_none());
        Cell::stack_parameters(&mut [&mut a, &mut c])?;
        assert!(Cell::shared_stacks(&[&a, &c]).is_some());
        assert!(Cell::shared_stacks(&[&a, &b]).is_none());
        Ok(())
    }
}
