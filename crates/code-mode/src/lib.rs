//! Code mode: the model writes one JavaScript script that calls many tools, and only its
//! answer comes back. Intermediate results stay in the script (it loops, filters and joins
//! them there) instead of passing through the model's context.
//!
//! - [`Engine::run`] runs a script (the body of an async function; `return` gives the
//!   answer) in an embedded QuickJS engine on a thread of its own, under [`Limits`]: memory,
//!   CPU time (time waiting for tools not counted), calls, and the sizes of the arguments,
//!   the return value and the captured `console` output. Dropping the run stops the script
//!   and drops its calls in flight.
//! - The script's only way out is `tools.<server>.<tool>(args)`, which goes to the host's
//!   [`ToolCaller`] (the port a host implements over its call gate); a failed call throws a
//!   `ToolError` with its [`CallErrorKind`] that the script may catch. `Promise.all` runs
//!   calls at once, up to [`Limits::concurrency`].
//! - [`ScriptTools`] names the tools as JavaScript identifiers and writes their
//!   [`declarations`](ScriptTools::declarations), TypeScript-like and within a byte budget,
//!   for the description of the tool that takes scripts.
//! - A [`ScriptRun`] carries the JSON value or the [`ScriptError`] (an uncaught exception
//!   with its line and column, or the limit that stopped the script), the captured log, the
//!   number of calls and the CPU time; [`ScriptRun::render`] is what the model reads.
//!
//! **Invariant:** a script reaches nothing but `tools`, `console` and the language itself:
//! no file system, network, environment, module loader, timers, clock (the date stands still
//! at the script's start) or code made from strings. Every text from a script or a tool is
//! cleaned of terminal controls and invisible characters before it leaves the crate.
//!
//! ```
//! use code_mode::{CallError, Engine, ScriptCallContext, ScriptTool, ScriptTools, ToolCaller};
//! use serde_json::{Map, Value, json};
//!
//! struct Weather;
//!
//! #[async_trait::async_trait]
//! impl ToolCaller for Weather {
//!     async fn call(&self, tool: &ScriptTool, args: Map<String, Value>, _: &ScriptCallContext)
//!         -> Result<Value, CallError> {
//!         let city = args.get("city").and_then(Value::as_str).unwrap_or("?");
//!         Ok(json!({"city": city, "celsius": if city == "Oslo" { -3 } else { 21 }}))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let tools = ScriptTools::new([ScriptTool::new(
//!     "mcp__weather__current",
//!     "weather",
//!     "current",
//!     json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
//! )]);
//! assert!(tools.declarations(4096).text.contains("function current(args: { city: string }): Promise<unknown>;"));
//!
//! let script = r#"
//!     const cities = ["Oslo", "Lisbon", "Cairo"];
//!     const all = await Promise.all(cities.map(city => tools.weather.current({ city })));
//!     console.log("asked", all.length);
//!     return all.filter(w => w.celsius < 0).map(w => w.city);
//! "#;
//! let run = Engine::default().run(script, &tools, &Weather, "call-1").await;
//! assert_eq!(run.result, Ok(Some(json!(["Oslo"]))));
//! assert_eq!(run.logs, ["asked 3"]);
//! assert_eq!(run.calls, 3);
//! # }
//! ```

mod clock;
mod declare;
mod engine;
mod limits;
mod outcome;
mod port;
mod tools;
mod watch;
mod worker;

pub use declare::{Declarations, Detail, RUN_CODE, run_code_description, run_code_input_schema};
pub use engine::Engine;
pub use limits::Limits;
pub use outcome::{ScriptError, ScriptException, ScriptRun};
pub use port::{CallError, CallErrorKind, ScriptCallContext, ToolCaller};
pub use tools::{ScriptTool, ScriptTools, identifier};
