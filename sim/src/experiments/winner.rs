//! placeholder
use super::{Report, Scale};
use crate::error::Result;
pub fn run(_seed: u64, _scale: Scale, _p: &mut dyn FnMut(u64, u64)) -> Result<Report> {
    todo!()
}
