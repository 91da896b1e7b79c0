//! Scripts run end to end: the engine, its limits and the tool port.

mod confinement;
mod limits;
mod schemas;
mod scripts;
mod support;
