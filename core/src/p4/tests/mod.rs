//! Tests of `core::p4`: the loader's refusals (`load`), the executor's first instructions
//! (`exec`).

mod exec;
mod load;
mod tables;
