//! MCP transports and the client connection.
