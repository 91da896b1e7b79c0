//! Confinement.
