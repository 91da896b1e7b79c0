//! A language model that replays turns from a script: for tests, and for the offline demo.
//!
//! ```json
//! {"turns": [
//!   {"text": "Let me look.", "tool_calls": [{"name": "mcp__notes__list_notes", "input": {}}]},
//!   {"text": "Done."}
//! ]}
//! ```

use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use crate::model::{Block, LanguageModel, ModelError, ModelRequest, ModelResponse, StopReason, TextStream, Usage};

/// One scripted tool call.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// The model-visible tool name.
    pub name: String,
    /// The arguments.
    #[serde(default = "empty_object")]
    pub input: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// One scripted model turn.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTurn {
    /// Text the model says.
    #[serde(default)]
    pub text: String,
    /// Tool calls it makes.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
}

/// A whole script.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The turns, in order.
    pub turns: Vec<ScriptedTurn>,
}

/// Replays a [`Script`], one turn per call.
#[derive(Debug)]
pub struct ScriptedModel {
    turns: Vec<ScriptedTurn>,
    next: Mutex<usize>,
}

impl ScriptedModel {
    /// From a script.
    pub fn new(script: Script) -> Self {
        Self { turns: script.turns, next: Mutex::new(0) }
    }

    /// From a script's JSON text.
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        serde_json::from_str(text)
            .map(Self::new)
            .map_err(|e| ModelError::Script(format!("the script is not valid: {e}")))
    }

    /// From a script file.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ModelError::Script(format!("cannot read the script {}: {e}", path.display())))?;
        Self::from_json(&text).map_err(|e| ModelError::Script(format!("{}: {e}", path.display())))
    }
}

#[async_trait]
impl LanguageModel for ScriptedModel {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn complete(&self, _request: &ModelRequest, stream: &dyn TextStream) -> Result<ModelResponse, ModelError> {
        let index = {
            let mut next = mcp_safety::lock(&self.next);
            let index = *next;
            *next += 1;
            index
        };
        let turn = self.turns.get(index).ok_or_else(|| {
            ModelError::Script(format!(
                "the script has {} turns and the loop asked for turn {}",
                self.turns.len(),
                index + 1
            ))
        })?;
        let mut content = Vec::new();
        if !turn.text.is_empty() {
            // Streamed word by word, like a real model.
            for piece in turn.text.split_inclusive(' ') {
                stream.text_delta(piece);
            }
            content.push(Block::text(turn.text.clone()));
        }
        for (i, call) in turn.tool_calls.iter().enumerate() {
            content.push(Block::ToolUse {
                id: format!("call_{}_{}", index + 1, i + 1),
                name: call.name.clone(),
                input: call.input.clone(),
            });
        }
        let stop_reason = if turn.tool_calls.is_empty() { StopReason::EndTurn } else { StopReason::ToolUse };
        let output_tokens = turn.text.split_whitespace().count() as u64;
        Ok(ModelResponse { content, stop_reason, usage: Usage { input_tokens: 0, output_tokens } })
    }
}
