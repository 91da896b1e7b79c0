//! The [`Observer`] **port**: what watches the agent's work (telemetry's `invoke_agent`,
//! `chat {model}` and `execute_tool {name}` spans, adapted by the host), so the loop names no
//! telemetry crate and costs nothing more without one (one `Option` checked per task, model
//! call and tool call).
//!
//! A watch is entered at every poll of the work it watches: what that work starts meanwhile (a
//! model call inside a task, a request to a server inside a tool call) is its child.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::model::{StopReason, Usage};

/// Watches the agent (set with [`Agent::with_observer`](crate::Agent::with_observer)).
pub trait Observer: Send + Sync {
    /// A task starts: one user turn, until the model is done or the step limit.
    fn task(&self) -> Box<dyn Watch>;

    /// The model is called (`provider`: the model's adapter, `model`: the model asked for).
    fn model_call(&self, provider: &str, model: &str) -> Box<dyn Watch>;

    /// A tool call the model asked for is decided and run (`name`: as the model called it,
    /// `call_id`: the model's id of the call).
    fn tool_call(&self, name: &str, call_id: &str) -> Box<dyn Watch>;
}

/// One piece of work's watch; dropped when the work ends.
pub trait Watch: Send + Sync {
    /// Makes the work's context current on this thread until the returned guard drops (held
    /// for one poll, never across an await).
    fn enter(&self) -> Box<dyn Any>;

    /// A model call answered: why it stopped and the tokens it used.
    fn answered(&mut self, stop_reason: &StopReason, usage: &Usage) {
        let _ = (stop_reason, usage);
    }

    /// The work failed (a model call's error, a tool call's error result): `kind` is short and
    /// fixed (`model_error`, `tool_error`; a tool call not run `refused`, one out of time
    /// `timeout`), `message` says more.
    fn failed(&mut self, kind: &'static str, message: Option<&str>) {
        let _ = (kind, message);
    }
}

/// `fut`, polled inside `watch` (when there is one).
pub(crate) async fn within<F: Future>(watch: Option<&dyn Watch>, fut: F) -> F::Output {
    match watch {
        None => fut.await,
        Some(watch) => Entered { watch, fut: Box::pin(fut) }.await,
    }
}

struct Entered<'w, F> {
    watch: &'w dyn Watch,
    fut: Pin<Box<F>>,
}

impl<F: Future> Future for Entered<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let _entered = this.watch.enter();
        this.fut.as_mut().poll(cx)
    }
}
