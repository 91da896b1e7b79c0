//! Form-mode elicitation: a form's `requestedSchema` read into bounded fields and what a person
//! types checked. The logic is pure and lives in [`mcp_protocol::elicitation`]; it is named here
//! too for the hosts that reach it through the client.

pub use mcp_protocol::elicitation::*;
