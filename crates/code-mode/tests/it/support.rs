//! A tool caller whose tools are closures, recording every call and how many ran at once.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use code_mode::{CallError, Engine, Limits, ScriptCallContext, ScriptRun, ScriptTool, ScriptTools, ToolCaller};
use serde_json::{Map, Value, json};

type Behaviour =
    Arc<dyn Fn(Map<String, Value>) -> Pin<Box<dyn Future<Output = Result<Value, CallError>> + Send>> + Send + Sync>;

/// Tools made of closures.
#[derive(Default, Clone)]
pub(crate) struct FakeTools {
    tools: Vec<ScriptTool>,
    behaviours: BTreeMap<String, Behaviour>,
    pub(crate) calls: Arc<Mutex<Vec<(String, Value, String)>>>,
    pub(crate) in_flight: Arc<AtomicUsize>,
    pub(crate) most_in_flight: Arc<AtomicUsize>,
}

impl FakeTools {
    /// Adds `server`'s `tool`, answering with `behave`.
    pub(crate) fn tool<F, Fut>(mut self, server: &str, tool: &str, behave: F) -> Self
    where
        F: Fn(Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, CallError>> + Send + 'static,
    {
        let name = format!("mcp__{server}__{tool}");
        self.tools.push(ScriptTool::new(name.clone(), server, tool, json!({"type": "object"})));
        self.behaviours.insert(name, Arc::new(move |args| Box::pin(behave(args))));
        self
    }

    /// The tools as a script sees them.
    pub(crate) fn script_tools(&self) -> ScriptTools {
        ScriptTools::new(self.tools.clone())
    }

    /// The names of the tools called, in order.
    pub(crate) fn called(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.iter().map(|(name, _, _)| name.clone()).collect()).unwrap_or_default()
    }

    /// Runs `script` on `engine` with these tools.
    pub(crate) async fn run(&self, engine: &Engine, script: &str) -> ScriptRun {
        engine.run(script, &self.script_tools(), self, "script-1").await
    }
}

#[async_trait::async_trait]
impl ToolCaller for FakeTools {
    async fn call(
        &self,
        tool: &ScriptTool,
        arguments: Map<String, Value>,
        context: &ScriptCallContext,
    ) -> Result<Value, CallError> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push((tool.name().to_owned(), Value::Object(arguments.clone()), context.call_id()));
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        let _leave = Leave(Arc::clone(&self.in_flight));
        let behave = self.behaviours.get(tool.name()).cloned();
        match behave {
            Some(behave) => behave(arguments).await,
            None => Err(CallError::new(code_mode::CallErrorKind::Refused, "no such fake tool")),
        }
    }
}

struct Leave(Arc<AtomicUsize>);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An engine with the default limits but `cpu` of CPU time.
pub(crate) fn engine_with(adjust: impl FnOnce(&mut Limits)) -> Engine {
    let mut limits = Limits::default();
    adjust(&mut limits);
    Engine::new(limits)
}

/// A run's value, or a panic with its error.
pub(crate) fn value(run: &ScriptRun) -> Value {
    match &run.result {
        Ok(value) => value.clone().unwrap_or(Value::Null),
        Err(e) => panic!("the script failed: {e}\nlogs: {:?}", run.logs),
    }
}

/// A run's error, or a panic with its value.
pub(crate) fn error(run: &ScriptRun) -> &code_mode::ScriptError {
    match &run.result {
        Ok(value) => panic!("the script succeeded with {value:?}"),
        Err(e) => e,
    }
}

/// Waits (briefly) until the engine's threads have all ended.
pub(crate) async fn threads_end(engine: &Engine) {
    for _ in 0..500 {
        if engine.threads() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{} engine threads still alive after 5 s", engine.threads());
}
