//! The agent loop and its ports (language model, approver, built-in tools).
//!
//! Not built yet: the loop arrives with the agent-loop issue. This crate holds nothing that
//! pretends to work in the meantime.
